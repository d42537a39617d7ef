/**
 * Cuts streamed text at the first user stop string. Text that could still turn into a stop string (a suffix that
 * is a prefix of one) is held back until the next chunk decides it, so a stop string split across tokens is never
 * half-emitted.
 */

/** What {@link StopStringFilter.push} releases. */
export interface FilteredText {
  /** Text safe to emit now. */
  readonly text: string;
  /** True when a stop string was found: `text` ends right before it and nothing more may be emitted. */
  readonly stopped: boolean;
}

/** Filters one generation's text stream; create one per generation. */
export class StopStringFilter {
  readonly #stops: readonly string[];
  #held = '';
  #stopped = false;

  /** `stops`: the stop strings; empty strings are ignored (they would match before any text). */
  constructor(stops: readonly string[]) {
    this.#stops = stops.filter((s) => s.length > 0);
  }

  /** Adds `chunk` and returns the text that can no longer be part of a stop string. */
  push(chunk: string): FilteredText {
    if (this.#stopped) return { text: '', stopped: true };
    const pending = this.#held + chunk;
    let cut = -1;
    for (const stop of this.#stops) {
      const at = pending.indexOf(stop);
      if (at >= 0 && (cut < 0 || at < cut)) cut = at;
    }
    if (cut >= 0) {
      this.#stopped = true;
      this.#held = '';
      return { text: pending.slice(0, cut), stopped: true };
    }
    const keep = this.#longestPartialMatch(pending);
    this.#held = pending.slice(pending.length - keep);
    return { text: pending.slice(0, pending.length - keep), stopped: false };
  }

  /** Adds the last `chunk` (if any) and releases everything still held: the stream has ended. */
  end(chunk = ''): FilteredText {
    const last = this.push(chunk);
    if (last.stopped) return last;
    const text = last.text + this.#held;
    this.#held = '';
    return { text, stopped: false };
  }

  /** Length of the longest suffix of `text` that is a proper prefix of some stop string. */
  #longestPartialMatch(text: string): number {
    let best = 0;
    for (const stop of this.#stops) {
      for (let n = Math.min(stop.length - 1, text.length); n > best; n--) {
        if (text.endsWith(stop.slice(0, n))) {
          best = n;
          break;
        }
      }
    }
    return best;
  }
}
