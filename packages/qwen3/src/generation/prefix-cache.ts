/**
 * Prefix KV reuse. An engine's KV cache outlives a generation: after one ends, its rows still hold the prompt and
 * the generated tokens that were fed back. A later prompt that starts with those same ids (a chat's next turn,
 * which re-renders the whole history) can start its prefill where they stop, since row `i` depends only on ids
 * `0…i`. This records which ids the rows hold; `runGeneration` asks it where to start and tells it what it fed.
 *
 * Rows past the recorded prefix may hold anything (a step that was aborted half-way, decode steps an engine queued
 * ahead): nothing reads them, because every forward pass rewrites rows from its `start` on before attending to them.
 */
export class PrefixCache {
  /** Whether reuse is on; off, every generation prefills its whole prompt from position 0. */
  readonly enabled: boolean;
  #ids: number[] = [];

  constructor(enabled = true) {
    this.enabled = enabled;
  }

  /** Ids whose rows the cache holds, from position 0. */
  get length(): number {
    return this.#ids.length;
  }

  /**
   * How many leading ids of `promptIds` already have their rows in the cache: the prefill starts there. At least
   * one id is always left to run, since its logits pick the first token. The record shrinks to that prefix, as the
   * rows after it are about to be overwritten.
   */
  claim(promptIds: readonly number[]): number {
    const limit = this.enabled ? Math.min(this.#ids.length, promptIds.length - 1) : 0;
    let shared = 0;
    while (shared < limit && this.#ids[shared] === promptIds[shared]) shared++;
    this.#ids.length = shared;
    return shared;
  }

  /** Records that a forward pass just wrote the rows of `ids`, right after the recorded ones. */
  extend(ids: readonly number[]): void {
    if (this.enabled) for (const id of ids) this.#ids.push(id);
  }

  /** Forgets everything (the weights or modules changed, so the rows no longer match them). */
  clear(): void {
    this.#ids.length = 0;
  }
}
