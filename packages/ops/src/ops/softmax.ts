import { checkFloat, checkPositive, checkRank } from '../check.js';
import type { FloatDType } from '../dtype.js';
import { fromFloats, readFloats } from '../io.js';
import { leadingSize } from '../shape.js';
import type { Tensor } from '../tensor.js';

/**
 * Softmax of each row `src[r·n : (r+1)·n]` divided by `temperature`, written to `out` (float64 math). Rows whose
 * maximum is −∞ (everything masked) become NaN, as in PyTorch; a row containing NaN becomes NaN.
 */
export function softmaxRows(
  src: ArrayLike<number>,
  rows: number,
  n: number,
  temperature: number,
  out: Float32Array | Float64Array,
): void {
  for (let r = 0; r < rows; r++) {
    const base = r * n;
    let max = -Infinity;
    for (let i = 0; i < n; i++) max = Math.max(max, src[base + i]!);
    let sum = 0;
    for (let i = 0; i < n; i++) {
      // Subtract before dividing: x/T alone overflows to ±∞ for a tiny T and would turn the row into NaN.
      const e = Math.exp((src[base + i]! - max) / temperature);
      out[base + i] = e;
      sum += e;
    }
    for (let i = 0; i < n; i++) out[base + i] = out[base + i]! / sum;
  }
}

/**
 * Softmax over the last axis: `y[i] = exp(x[i]/T − max) / Σ_j exp(x[j]/T − max)`, with temperature T (default 1).
 * Float64 math, one rounding to `x`'s dtype.
 */
export function softmax<D extends FloatDType>(
  x: Tensor<D>,
  options: { temperature?: number } = {},
): Tensor<D> {
  const op = 'softmax';
  checkFloat(op, 'x', x);
  checkRank(op, 'x', x, { min: 1 });
  const temperature = checkPositive(op, 'temperature', options.temperature ?? 1);
  const n = x.shape[x.rank - 1]!;
  const out = new Float64Array(x.size);
  softmaxRows(readFloats(x), leadingSize(x.shape), n, temperature, out);
  return fromFloats(out, x.shape, x.dtype);
}
