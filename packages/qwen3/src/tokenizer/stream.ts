/**
 * Streaming detokenisation: turning ids into text one id at a time without ever showing half a character.
 */
import type { TextStream } from '../types.js';

/** A decoder of whole id sequences, such as {@link Qwen3Tokenizer.decode}; must accept any non-empty sequence. */
export type DecodeFn = (ids: readonly number[]) => string;

const REPLACEMENT = 0xfffd;

/**
 * Turns ids into text chunks as they arrive, for any tokenizer whose `decode` is byte-level (or otherwise
 * concatenates the text of its tokens).
 *
 * A byte-level BPE token can end in the middle of a multi-byte UTF-8 character; decoding such a sequence ends
 * in U+FFFD. Text before that trailing U+FFFD can never change (UTF-8 resynchronises after a complete
 * character), so it is emitted at once and only the incomplete character waits.
 *
 * Only a window of ids is decoded: the ids of the previous chunk (kept as context, because some decoders
 * treat the first token of a sequence differently, e.g. by dropping a leading space) plus the ids not yet
 * complete. Each `push` therefore costs O(window), not O(ids so far). The window only grows while the
 * decoded text keeps ending in U+FFFD, i.e. inside one character, or in a run of genuine U+FFFD characters,
 * which a well-behaved model rarely produces.
 *
 * The concatenation of every chunk (including {@link IncrementalDecoder.flush}) equals `decode(allIds)`.
 */
export class IncrementalDecoder implements TextStream {
  readonly #decode: DecodeFn;
  /** Context ids (already emitted, index `< #contextEnd`) followed by the ids pushed since. */
  #window: number[] = [];
  #contextEnd = 0;
  /** UTF-16 units of `decode(#window)` already returned to the caller. */
  #emitted = 0;

  /** @param decode Decodes a whole non-empty id sequence; it may throw for invalid ids. */
  constructor(decode: DecodeFn) {
    this.#decode = decode;
  }

  /** Adds one id; returns the text that is now complete (often `''`). An invalid id throws and is not kept. */
  push(id: number): string {
    this.#window.push(id);
    let text: string;
    try {
      text = this.#decode(this.#window);
    } catch (error) {
      // Keeping a bad id would make every later push throw too.
      this.#window.pop();
      throw error;
    }
    const incomplete = text.length > 0 && text.charCodeAt(text.length - 1) === REPLACEMENT;
    const safeEnd = incomplete ? text.length - 1 : text.length;
    let chunk = '';
    if (safeEnd > this.#emitted) {
      chunk = text.slice(this.#emitted, safeEnd);
      this.#emitted = safeEnd;
    }
    if (!incomplete) this.#slide();
    return chunk;
  }

  /**
   * Returns whatever is still held back; an incomplete character at the very end becomes U+FFFD. The stream
   * then starts afresh, so it can be reused for the next, unrelated sequence.
   */
  flush(): string {
    const pending = this.#window.length > this.#contextEnd;
    const rest = pending ? this.#decode(this.#window).slice(this.#emitted) : '';
    this.#window = [];
    this.#contextEnd = 0;
    this.#emitted = 0;
    return rest;
  }

  /**
   * The window's text ends on a complete character, so its end is a safe place to restart decoding: the ids
   * emitted just now become the context of the next window and older ids are dropped.
   */
  #slide(): void {
    this.#window = this.#window.slice(this.#contextEnd);
    this.#contextEnd = this.#window.length;
    // The context is decoded on its own, as it will be at the start of every later window.
    this.#emitted = this.#window.length > 0 ? this.#decode(this.#window).length : 0;
  }
}
