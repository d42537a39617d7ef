/** The serve extras that need no model: tool calls split out of a stream however it is cut, logprob shapes. */
import { loadTokenizer, parseToolCalls, type ToolDefinition } from '@qk/qwen3';
import { describe, expect, it } from 'vitest';
import { completionLogprobsOf, ToolCallStream, tokenTexts } from '../src/serve/extras.js';

const tools: ToolDefinition[] = [
  {
    type: 'function',
    function: {
      name: 'lookup',
      parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
    },
  },
];

const word = () => Math.random().toString(36).slice(2, 7);

/** A reply mixing text, valid calls, an invalid call, and text that looks like the start of a tag. */
function randomReply(): { text: string; calls: number } {
  const parts: string[] = [];
  let calls = 0;
  for (let i = 0; i < 6; i++) {
    const r = Math.random();
    if (r < 0.4) {
      parts.push(`<tool_call>\n{"name": "lookup", "arguments": {"q": "${word()}"}}\n</tool_call>`);
      calls++;
    } else if (r < 0.5) parts.push('<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>');
    else if (r < 0.6) parts.push(`a <tool ${word()} <`);
    else parts.push(`${word()} `);
  }
  return { text: parts.join('\n'), calls };
}

describe('ToolCallStream', () => {
  it('gives the same calls and text as parsing the whole reply, however the stream is cut', () => {
    for (let trial = 0; trial < 50; trial++) {
      const { text, calls } = randomReply();
      const stream = new ToolCallStream(tools);
      let content = '';
      const got: string[] = [];
      for (let at = 0; at < text.length; ) {
        const next = Math.min(text.length, at + 1 + Math.floor(Math.random() * 12));
        const out = stream.push(text.slice(at, next));
        content += out.content;
        got.push(...out.calls.map((c) => JSON.stringify(c.arguments)));
        at = next;
      }
      content += stream.end();
      const whole = parseToolCalls(text, tools);
      expect(got).toEqual(whole.toolCalls.map((c) => JSON.stringify(c.arguments)));
      expect(got).toHaveLength(calls);
      expect(stream.count).toBe(calls);
      // The text around the calls comes through, invalid blocks included as text.
      const invalid = whole.invalidToolCalls.length;
      expect(content.split('<tool_call>').length - 1).toBe(invalid);
      expect(content.replace(/\s+/g, '')).toBe(
        text.replace(/<tool_call>\n\{"name": "lookup"[^<]*<\/tool_call>/g, '').replace(/\s+/g, ''),
      );
    }
  });

  it('an unfinished call at the end comes out as text', () => {
    const stream = new ToolCallStream(tools);
    const head = `${word()} `;
    const cut = '<tool_call>\n{"name": "lookup", "argu';
    expect(stream.push(head + cut).content).toBe(head);
    expect(stream.end()).toBe(cut);
  });
});

describe('completion logprobs', () => {
  it('offsets follow the decoded tokens', () => {
    const texts = [word(), ' ', word()];
    const tokens = texts.map((_, id) => ({
      id,
      logprob: -Math.random(),
      topLogprobs: [{ id, logprob: -0.1 }],
    }));
    // A tokenizer whose ids are whole pieces: its stream gives each id's text at once.
    const tokenizer = {
      decode: (ids: number[]) => ids.map((i) => texts[i]!).join(''),
      createStream: () => ({ push: (id: number) => texts[id]!, flush: () => '' }),
    };
    const shaped = completionLogprobsOf(tokens, tokenizer);
    expect(shaped.top_logprobs).toEqual(tokens.map((t, i) => ({ [texts[i]!]: t.topLogprobs[0]!.logprob })));
    expect(shaped.tokens).toEqual(texts);
    expect(shaped.text_offset).toEqual([0, texts[0]!.length, texts[0]!.length + 1]);
    expect(shaped.token_logprobs).toEqual(tokens.map((t) => t.logprob));
  });

  it('a character split across tokens belongs to the token that completes it: the tokens join to the text', async () => {
    const tokenizer = await loadTokenizer();
    // Rare CJK characters and emoji are several byte-level tokens each.
    const text = `${word()} 舫𬬩🐫 ${word()} 螭魍`;
    const ids = tokenizer.encode(text);
    const pieces = tokenTexts(ids, tokenizer.createStream());
    expect(pieces).toHaveLength(ids.length);
    expect(pieces.join('')).toBe(text);
    expect(pieces.some((p) => p === '')).toBe(true);
    expect(pieces.some((p) => p.includes('\ufffd'))).toBe(false);
    const shaped = completionLogprobsOf(
      ids.map((id) => ({ id, logprob: -1 })),
      tokenizer,
    );
    expect(shaped.tokens.join('')).toBe(text);
  });
});
