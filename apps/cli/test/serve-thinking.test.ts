/** Qwen3's `<think>` block split from the answer however the stream cuts the text. */

import { ThinkingSplitter } from '@qk/qwen3';
import { describe, expect, it } from 'vitest';

/** Feeds `text` in pieces cut at `cuts`, returns both parts joined. */
function split(mode: 'maybe' | 'open' | 'off', text: string, cuts: number[]) {
  const splitter = new ThinkingSplitter(mode);
  let reasoning = '';
  let content = '';
  let from = 0;
  for (const at of [...cuts, text.length]) {
    const piece = splitter.push(text.slice(from, at));
    reasoning += piece.reasoning;
    content += piece.content;
    from = at;
  }
  const end = splitter.end();
  return { reasoning: reasoning + end.reasoning, content: content + end.content };
}

/** Every way of cutting `text` into three pieces, plus one character at a time. */
function cuttings(text: string): number[][] {
  const all: number[][] = [[...text].map((_, i) => i).slice(1)];
  for (let a = 0; a <= text.length; a++) for (let b = a; b <= text.length; b += 3) all.push([a, b]);
  return all;
}

describe('ThinkingSplitter', () => {
  const cases: [mode: 'maybe' | 'open' | 'off', text: string, reasoning: string, content: string][] = [
    ['maybe', '<think>\nLet me see: 2+2.\n</think>\n\nIt is 4.', 'Let me see: 2+2.', 'It is 4.'],
    ['maybe', '<think>\n\n</think>\n\nHi!', '', 'Hi!'],
    ['maybe', 'No thinking here <think> at all', '', 'No thinking here <think> at all'],
    ['maybe', '<thin', '', '<thin'],
    ['maybe', '<think>\ncut off by max_tokens <', 'cut off by max_tokens <', ''],
    ['maybe', '<think>a < b </thin but </think>done', 'a < b </thin but', 'done'],
    ['open', 'reasoning first\n</think>\n\nanswer', 'reasoning first', 'answer'],
    ['off', '<think>x</think>y', '', '<think>x</think>y'],
  ];
  for (const [mode, text, reasoning, content] of cases) {
    it(`splits ${JSON.stringify(text)} (${mode}) the same way however it is cut`, () => {
      for (const cuts of cuttings(text))
        expect(split(mode, text, cuts), `cuts ${cuts}`).toEqual({ reasoning, content });
    });
  }
});
