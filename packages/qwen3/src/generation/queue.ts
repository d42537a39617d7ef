/**
 * One generation at a time per model: the engine has a single KV cache, so generations take turns in call order
 * and never interleave their tokens.
 */

/** A place in the queue: `ready` resolves when it is this holder's turn; `release` hands the turn on. */
export interface Turn {
  readonly ready: Promise<void>;
  /** Ends this turn (or gives up the place while still waiting); calling it twice is harmless. */
  release(): void;
}

/** A first-come, first-served queue of turns on one model. */
export class TurnQueue {
  #tail: Promise<void> = Promise.resolve();
  #holders = 0;

  /** Generations running or waiting. */
  get size(): number {
    return this.#holders;
  }

  /** Joins the queue. */
  enter(): Turn {
    const previous = this.#tail;
    let open!: () => void;
    const finished = new Promise<void>((resolve) => {
      open = resolve;
    });
    // The next holder waits for both this turn and every earlier one, so giving up a place while still
    // waiting (an abort in the queue) cannot let a later generation overtake a running one.
    this.#tail = previous.then(() => finished);
    this.#holders++;
    let released = false;
    return {
      ready: previous,
      release: () => {
        if (released) return;
        released = true;
        this.#holders--;
        open();
      },
    };
  }
}
