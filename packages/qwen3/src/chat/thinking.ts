/**
 * Qwen3 thinks in a `<think>…</think>` block before it answers. OpenAI-compatible servers (vLLM, DeepSeek, LM
 * Studio) return that block apart, as `reasoning_content`, and the answer alone as `content`; this splits a
 * streamed reply that way, holding back only the few characters that may be the start of a tag.
 */

const OPEN = '<think>';
const CLOSE = '</think>';

/** What one piece of streamed text adds to each part. */
export interface SplitText {
  readonly reasoning: string;
  readonly content: string;
}

/** Length of the longest suffix of `text` that is a proper prefix of `tag`. */
function partialTagLength(text: string, tag: string): number {
  for (let k = Math.min(text.length, tag.length - 1); k > 0; k--)
    if (tag.startsWith(text.slice(-k))) return k;
  return 0;
}

/**
 * Splits a reply into reasoning and answer as it streams. `thinking: 'maybe'` (thinking enabled) looks for an
 * opening `<think>` at the start; `'open'` starts inside the block (a template whose generation prompt ends with
 * `<think>`); `'off'` passes everything through as content.
 */
export class ThinkingSplitter {
  #state: 'before' | 'reasoning-start' | 'reasoning' | 'answer-start' | 'answer';
  #held = '';

  constructor(thinking: 'maybe' | 'open' | 'off') {
    this.#state = thinking === 'maybe' ? 'before' : thinking === 'open' ? 'reasoning-start' : 'answer';
  }

  /** Takes the next piece of text; returns what is now known to be reasoning and answer. */
  push(text: string): SplitText {
    let reasoning = '';
    let content = '';
    let rest = this.#held + text;
    this.#held = '';
    for (;;) {
      switch (this.#state) {
        case 'before': {
          const trimmed = rest.trimStart();
          if (trimmed.startsWith(OPEN)) {
            this.#state = 'reasoning-start';
            rest = trimmed.slice(OPEN.length);
            continue;
          }
          if (OPEN.startsWith(trimmed)) {
            this.#held = rest;
            return { reasoning, content };
          }
          this.#state = 'answer';
          continue;
        }
        case 'reasoning-start':
        case 'answer-start': {
          rest = rest.trimStart();
          if (rest.length === 0) return { reasoning, content };
          this.#state = this.#state === 'reasoning-start' ? 'reasoning' : 'answer';
          continue;
        }
        case 'reasoning': {
          const end = rest.indexOf(CLOSE);
          if (end >= 0) {
            reasoning += rest.slice(0, end).trimEnd();
            rest = rest.slice(end + CLOSE.length);
            this.#state = 'answer-start';
            continue;
          }
          // Trailing whitespace waits too: the block's last newline belongs to neither part.
          let keep = rest.length - partialTagLength(rest, CLOSE);
          while (keep > 0 && /\s/.test(rest[keep - 1]!)) keep--;
          reasoning += rest.slice(0, keep);
          this.#held = rest.slice(keep);
          return { reasoning, content };
        }
        case 'answer':
          content += rest;
          return { reasoning, content };
      }
    }
  }

  /** Ends the reply: whatever was held back (an unfinished tag, a block the token limit cut) goes where it was. */
  end(): SplitText {
    const held = this.#held;
    this.#held = '';
    if (this.#state === 'reasoning') return { reasoning: held.trimEnd(), content: '' };
    if (this.#state === 'before') return { reasoning: '', content: held };
    return { reasoning: '', content: '' };
  }
}

/**
 * Whether a chat prompt's generation prompt already opens the thinking block (templates such as Qwen3-2507's
 * thinking models end it with `<think>`), so the reply starts inside the block: splitter mode `'open'`.
 */
export function promptOpensThinking(
  decode: (ids: number[]) => string,
  promptIds: readonly number[],
): boolean {
  // Enough ids for the tag and a newline even when each character is its own token.
  return decode(promptIds.slice(-16)).trimEnd().endsWith(OPEN);
}
