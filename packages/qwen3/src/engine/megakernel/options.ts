/**
 * The `megakernel` engine's own options, written once: `createMegakernelEngine`, `createEngine` and `loadQwen3` all
 * take them.
 */
import type { MegakernelTraceSummary } from './trace.js';
import type { MegakernelTuning } from './tuning.js';

/**
 * How the megakernel engine launches, where it hands decoding to the layered graph, and the kernel's tuning knobs
 * (the other engines ignore them).
 */
export interface MegakernelEngineOptions {
  /**
   * Decode steps per megakernel launch, 1–64 (default 4: 2–4% faster than 1; 16 measured no better): greedy steps,
   * and sampled ones with a top-k of at most 64. Tokens still reach the caller one by one as the kernel makes them; a
   * generation that stops inside a launch leaves its remaining steps to finish before the next GPU work.
   */
  readonly megakernelSteps?: number;
  /**
   * The decode position (≥ 0) from which the megakernel hands decoding back to the captured layered graph (same
   * weights and cache, so the switch is seamless). Default: `megakernelHandoff` of the model (the end of the longest
   * context at which the megakernel was measured faster than the layered graph on an H100: 8,448 for Qwen3-0.6B).
   * The megakernel splits a head's attention over at most grid / KV heads blocks, so its cost per position of context
   * is higher than the layered split-KV attention's (on an H100, per 1,024 positions: 54 against 45 µs per token for
   * Qwen3-0.6B, 77 against 38 for 8B), and far enough into a long context the layered graph would win. A value ≥ the
   * cache's rows keeps every decode step in the megakernel.
   */
  readonly megakernelUntil?: number;
  /**
   * Megakernel steps, greedy and sampled in the kernel (top-k 1–64), screen the LM head in int8 and recompute in
   * bf16 only the rows that can hold the argmax or the top-k: the same tokens from about half the LM head's bytes,
   * for an int8 copy of it in GPU memory. Default true where the megakernel can (fixed shares, hidden size a multiple
   * of 16).
   */
  readonly megakernelScreen?: boolean;
  /**
   * The kernel's tuning knobs, for measuring variants (default `{}`: the production kernel, whose defaults are the
   * measured best). `MegakernelTuning` documents each field, its default and range; a wrong field
   * throws `QkValueError` naming it when the engine is made.
   */
  readonly megakernelTuning?: MegakernelTuning;
  /**
   * A diagnostic: the megakernel records globaltimer stamps at every stage boundary of every block, one step per
   * launch (so slower), and the engine's `dispose()` hands their per-stage summary to this function
   * (csrc/megakernel/DESIGN.md, "The overhead budget").
   */
  readonly megakernelTrace?: (summary: MegakernelTraceSummary) => void;
}

/** The {@link MegakernelEngineOptions} fields of `options` and no others, absent ones left out. */
export function megakernelEngineOptions(options: MegakernelEngineOptions): MegakernelEngineOptions {
  const picked = {
    megakernelSteps: options.megakernelSteps,
    megakernelUntil: options.megakernelUntil,
    megakernelScreen: options.megakernelScreen,
    megakernelTuning: options.megakernelTuning,
    megakernelTrace: options.megakernelTrace,
  } satisfies Record<keyof MegakernelEngineOptions, unknown>;
  return Object.fromEntries(Object.entries(picked).filter(([, v]) => v !== undefined));
}
