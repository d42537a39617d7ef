/**
 * The megakernel's stage trace on the host: the stage names of its `%globaltimer` stamps, and their aggregation over
 * the steps traced into mean and slowest-block microseconds per stage (`trace` of the megakernel's spec).
 */
import type { MEGAKERNEL_LIMITS } from './addon.js';

/**
 * A trace's raw stamps (`%globaltimer` nanoseconds, about 1.8e18; 0: no stamp) as nanoseconds after the earliest
 * stamp, NaN where there is none. The differences are taken as BigInts: as doubles, the stamps themselves would keep
 * only multiples of 256 ns.
 */
export function traceStampsNs(stamps: BigUint64Array): Float64Array {
  let base = 0n;
  for (const at of stamps) if (at !== 0n && (base === 0n || at < base)) base = at;
  const out = new Float64Array(stamps.length);
  for (let i = 0; i < stamps.length; i++) {
    const at = stamps[i]!;
    out[i] = at === 0n ? Number.NaN : Number(at - base);
  }
  return out;
}

/** Stage names of the trace stamps of a layer (each stamp closes the stage named here). */
export const MEGAKERNEL_TRACE_STAGES = [
  'layer start (after the previous layer)',
  'QKV input (wait for the residual, RMSNorm)',
  'QKV first tile (wait for the weights)',
  'QKV GEMV',
  'attention: issue weight and cache loads',
  'attention: wait for q/k/v',
  'attention: QK-norm + RoPE, KV append',
  'attention: attend (and merge)',
  'O input (wait for attention)',
  'O first tile',
  'O GEMV + residual',
  'gate/up input (wait for the residual, RMSNorm)',
  'gate/up first tile',
  'gate/up GEMV + SwiGLU',
  'down input (wait for SwiGLU)',
  'down first tile',
  'down GEMV + residual',
] as const;

/** Trace stamps per layer: one per stage name (the addon's count is checked against this one: addon.ts). */
const TRACE_PER_LAYER: typeof MEGAKERNEL_LIMITS.traceEventsPerLayer = MEGAKERNEL_TRACE_STAGES.length;

/** Mean microseconds per step spent in each stage, summed over layers: mean over blocks and the slowest block. */
export interface MegakernelTraceSummary {
  readonly steps: number;
  readonly stages: readonly { readonly stage: string; readonly meanUs: number; readonly maxUs: number }[];
  /** First stamp of any block to the argmax, mean per step. */
  readonly stepUs: number;
  /**
   * One step's raw stamps (the 17th traced, or the last if fewer), µs after that step's first stamp: [block][event],
   * −1 where a block has no stamp. For critical-path analysis: when the last block reached each event.
   */
  readonly sampleStep?: readonly (readonly number[])[];
}

/** Stamps per block of one traced step of `layers` layers: each layer's, then LM input, LM head and argmax. */
export function traceEvents(layers: number): number {
  return layers * TRACE_PER_LAYER + 3;
}

/** The stamps of the steps traced so far, aggregated per stage (see {@link MegakernelTraceSummary}). */
export class MegakernelTraceStats {
  readonly #layers: number;
  readonly #grid: number;
  /**
   * Per stage (TRACE_PER_LAYER per layer + LM input, LM head, argmax): sums over steps of the mean and max over
   * blocks (ns).
   */
  #sums: { mean: Float64Array; max: Float64Array; step: number; steps: number } | null = null;
  #sample: number[][] | null = null;

  constructor(layers: number, grid: number) {
    this.#layers = layers;
    this.#grid = grid;
  }

  /** Adds one step's stamps (`[block][event]`, as the kernel wrote them). */
  add(stamps: BigUint64Array): void {
    const events = traceEvents(this.#layers);
    const grid = this.#grid;
    const rel = traceStampsNs(stamps);
    const sums = (this.#sums ??= {
      mean: new Float64Array(events),
      max: new Float64Array(events),
      step: 0,
      steps: 0,
    });
    let first = Number.POSITIVE_INFINITY;
    let last = 0;
    for (let e = 0; e < events; e++) {
      let total = 0;
      let most = 0;
      let counted = 0;
      for (let blk = 0; blk < grid; blk++) {
        const at = stamps[blk * events + e]!;
        if (at === 0n) continue; // the argmax stamp: the last block only
        const t = rel[blk * events + e]!;
        // The argmax stamp of a block that was last in an earlier step but not in this one is stale: older than
        // the block's previous stamp of this step.
        const prev = e === 0 ? t : rel[blk * events + e - 1]!;
        if (t < prev || Number.isNaN(prev)) continue; // (NaN: no stamp before this one)
        first = Math.min(first, t);
        last = Math.max(last, t);
        if (e === 0) continue;
        total += t - prev;
        most = Math.max(most, t - prev);
        counted++;
      }
      if (counted > 0) {
        sums.mean[e]! += total / counted;
        sums.max[e]! += most;
      }
    }
    sums.step += last - first;
    sums.steps++;
    if (sums.steps <= 17) {
      this.#sample = [];
      for (let blk = 0; blk < grid; blk++) {
        const row: number[] = [];
        for (let e = 0; e < events; e++) {
          const at = stamps[blk * events + e]!;
          const t = rel[blk * events + e]!;
          row.push(at === 0n || t < first ? -1 : Math.round((t - first) / 10) / 100);
        }
        this.#sample.push(row);
      }
    }
  }

  /** The aggregated stage timings of the steps so far, or null before the first. */
  summary(): MegakernelTraceSummary | null {
    const s = this.#sums;
    if (s === null) return null;
    const names = [
      ...MEGAKERNEL_TRACE_STAGES,
      'LM-head input (final RMSNorm)',
      'LM head GEMV',
      'argmax (last block)',
    ];
    const mean = new Float64Array(names.length);
    const max = new Float64Array(names.length);
    for (let e = 1; e < s.mean.length; e++) {
      const k =
        e >= this.#layers * TRACE_PER_LAYER
          ? TRACE_PER_LAYER + (e - this.#layers * TRACE_PER_LAYER)
          : e % TRACE_PER_LAYER;
      mean[k]! += s.mean[e]!;
      max[k]! += s.max[e]!;
    }
    return {
      steps: s.steps,
      stages: names.map((stage, k) => ({
        stage,
        meanUs: mean[k]! / s.steps / 1000,
        maxUs: max[k]! / s.steps / 1000,
      })),
      stepUs: s.step / s.steps / 1000,
      ...(this.#sample === null ? {} : { sampleStep: this.#sample }),
    };
  }
}
