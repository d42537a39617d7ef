/**
 * Drives a {@link TokenConstraint} by hand: at each step the chooser picks one of the ids the mask allows, the
 * constraint accepts it, until the constraint is complete or a stop id is chosen. Tests use it with a uniform
 * random chooser (any path through the grammar) and with an engine's masked logits (the tiny model's noise).
 */
import type { TokenConstraint } from '../../src/generation/constraint.js';

/** The ids a mask allows, ascending (xgrammar hands masks out as Int32Array; the bit operations are the same). */
export function allowedIds(mask: Uint32Array | Int32Array, vocabSize: number): number[] {
  const ids: number[] = [];
  for (let w = 0; w < mask.length; w++) {
    let word = mask[w]!;
    while (word !== 0) {
      const bit = 31 - Math.clz32(word & -word);
      const id = w * 32 + bit;
      if (id < vocabSize) ids.push(id);
      word &= word - 1;
    }
  }
  return ids;
}

export interface WalkResult {
  /** The ids chosen, without a final stop id. */
  readonly ids: number[];
  /** How it ended: the constraint complete, a stop id chosen, or `maxSteps` reached. */
  readonly end: 'complete' | 'stop' | 'steps';
  /** Milliseconds spent in `nextMask` per step. */
  readonly maskMs: number[];
  /** With `awaitReady`: milliseconds from accepting a token to the next mask being at hand (its computation). */
  readonly readyMs: number[];
  /** The largest id any mask allowed. */
  readonly largestAllowed: number;
}

/** Runs `constraint` to its end with `choose(allowed, step)` picking each token. */
export async function walk(
  constraint: TokenConstraint,
  options: {
    readonly vocabSize: number;
    readonly stopIds: ReadonlySet<number>;
    readonly maxSteps: number;
    readonly choose: (allowed: readonly number[], step: number, ids: readonly number[]) => number;
    /** Wait for the constraint's `ready()` after each token (measures the mask computation). */
    readonly awaitReady?: boolean;
  },
): Promise<WalkResult> {
  const ids: number[] = [];
  const maskMs: number[] = [];
  const readyMs: number[] = [];
  let largestAllowed = -1;
  const ready = (constraint as { ready?: () => Promise<void> }).ready?.bind(constraint);
  for (let step = 0; step < options.maxSteps; step++) {
    if (constraint.isComplete()) return { ids, end: 'complete', maskMs, readyMs, largestAllowed };
    // As a generation does between steps: the event loop runs, so a prefetched mask can arrive.
    await new Promise<void>((resolve) => setImmediate(resolve));
    const t0 = performance.now();
    const mask = constraint.nextMask();
    maskMs.push(performance.now() - t0);
    const allowed = mask === null ? [] : allowedIds(mask, options.vocabSize);
    if (allowed.length > 0) largestAllowed = Math.max(largestAllowed, allowed[allowed.length - 1]!);
    const token = options.choose(allowed, step, ids);
    constraint.accept(token);
    if (options.stopIds.has(token)) return { ids, end: 'stop', maskMs, readyMs, largestAllowed };
    if (options.awaitReady && ready !== undefined) {
      const t1 = performance.now();
      await ready();
      readyMs.push(performance.now() - t1);
    }
    ids.push(token);
  }
  return { ids, end: 'steps', maskMs, readyMs, largestAllowed };
}
