/**
 * A character tokenizer for generation tests: ids 0–94 are the printable ASCII characters, 95 is a newline, higher
 * ids print as `<id>`, and the last id is the stop token. Chat renders as `role: content` lines ending with `assistant:`.
 */
import type { ChatMessage, ChatTemplateOptions, Qwen3Tokenizer, TextStream } from '../../src/types.js';

export function stubTokenizer(
  vocabSize: number,
): Qwen3Tokenizer & { lastTemplateOptions?: ChatTemplateOptions } {
  const stopId = vocabSize - 1;
  const textOf = (id: number) =>
    id < 95 ? String.fromCharCode(32 + id) : id === 95 ? '\n' : id === stopId ? '<stop>' : `<${id}>`;
  const tokenizer = {
    vocabSize,
    stopIds: new Set([stopId]),
    lastTemplateOptions: undefined as ChatTemplateOptions | undefined,
    encode(text: string): number[] {
      return [...text].map((c) => {
        if (c === '\n') return 95;
        const id = c.charCodeAt(0) - 32;
        if (id < 0 || id >= 95) throw new Error(`stub tokenizer: cannot encode ${JSON.stringify(c)}`);
        return id;
      });
    },
    decode(ids: readonly number[]): string {
      return ids.map(textOf).join('');
    },
    applyChatTemplate(messages: readonly ChatMessage[], options?: ChatTemplateOptions): string {
      tokenizer.lastTemplateOptions = options;
      const think = options?.enableThinking === false ? ' [no-think]' : '';
      return `${messages.map((m) => `${m.role}: ${m.content}\n`).join('')}assistant:${think}`;
    },
    createStream(): TextStream {
      return { push: textOf, flush: () => '' };
    },
  };
  return tokenizer;
}

/** The id of one printable character under {@link stubTokenizer}. */
export const charId = (c: string): number => (c === '\n' ? 95 : c.charCodeAt(0) - 32);
