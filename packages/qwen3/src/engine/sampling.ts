/**
 * Picking a token from a row of host logits, as the `sample` op defines it, fast enough to run every decode step
 * of the cpu engine (and the fallback that masks token ids the tokenizer cannot print).
 */
import { argmax, QkValueError, sample, Tensor } from '@qk/ops';
import type { SamplingParams } from '../types.js';
import { stepSeed } from './common.js';

/**
 * Index of the `k` largest logits ordered by (value descending, index ascending) as `sample` orders its
 * candidates, returned in ascending index order. Refuses NaN and +∞ as `sample` does.
 */
function topKIndices(logits: Float32Array, k: number): Int32Array {
  const values = new Float64Array(k).fill(-Infinity);
  const indices = new Int32Array(k).fill(-1);
  let count = 0;
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i]!;
    if (Number.isNaN(v) || v === Infinity) {
      throw new QkValueError(
        'sample',
        'logits',
        `holds ${v} at flat index ${i}; logits must be finite or -Infinity (masked).`,
      );
    }
    // Strictly greater: among equal values the earlier (lower) index already holds its place.
    if (count === k && !(v > values[k - 1]!)) continue;
    let j = count === k ? k - 1 : count++;
    while (j > 0 && values[j - 1]! < v) {
      values[j] = values[j - 1]!;
      indices[j] = indices[j - 1]!;
      j--;
    }
    values[j] = v;
    indices[j] = i;
  }
  return indices.subarray(0, count).sort();
}

/** Below this fraction of the vocabulary a top-k filter runs before `sample`, which otherwise sorts every logit. */
const TOP_K_PREFILTER_FRACTION = 1 / 8;

/**
 * Picks the next token from one row of logits: argmax for temperature 0, else `sample` seeded by {@link stepSeed}.
 * With a small `topK` only the k candidates reach `sample`; its choice is the same as on the whole row (same
 * candidate order, probabilities and uniform draw), without sorting the vocabulary every step.
 */
export function pickToken(logits: Float32Array, sampling: SamplingParams, step: number): number {
  const row = Tensor.fromStorage(logits, [logits.length], 'f32');
  if (sampling.temperature === 0) return argmax(row).item();
  const options = {
    temperature: sampling.temperature,
    topP: sampling.topP,
    seed: stepSeed(sampling.seed, step),
  };
  const { topK } = sampling;
  if (topK > 0 && topK < logits.length * TOP_K_PREFILTER_FRACTION) {
    const candidates = topKIndices(logits, topK);
    const sub = Float32Array.from(candidates, (i) => logits[i]!);
    const chosen = sample(Tensor.fromStorage(sub, [sub.length], 'f32'), options).item();
    return candidates[chosen]!;
  }
  return sample(row, { ...options, topK }).item();
}
