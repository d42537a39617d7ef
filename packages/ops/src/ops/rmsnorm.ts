import {
  checkDim,
  checkFloat,
  checkPositive,
  checkRank,
  checkSameDtype,
  checkShape,
  commonDevice,
} from '../check.js';
import { cudaFusedAddRmsnorm, cudaRmsnorm } from '../cuda/norm.js';
import { type FloatDType, roundToDType } from '../dtype.js';
import { fromFloats, readFloats, writeCpuOutput } from '../io.js';
import { leadingSize } from '../shape.js';
import type { Tensor } from '../tensor.js';

/** Options of the RMSNorm family. */
export interface RmsnormOptions {
  /** Added to the mean square before the square root. Default `1e-6` (Qwen3's `rms_norm_eps`). */
  eps?: number;
  /** Write the result here (same shape, dtype and device as `x`) instead of a new tensor. */
  out?: Tensor;
}

/** Qwen3's default `rms_norm_eps`. */
export const DEFAULT_RMS_EPS = 1e-6;

/**
 * Normalises each row of `src` (rows × n, float32) into `out`: `out[i] = src[i] / sqrt(mean(src²) + eps) * w[i]`.
 * Sums run in float64.
 */
export function rmsnormRows(
  src: Float32Array,
  weight: Float32Array,
  rows: number,
  n: number,
  eps: number,
  out: Float32Array,
): void {
  for (let r = 0; r < rows; r++) {
    const base = r * n;
    let sumSq = 0;
    for (let i = 0; i < n; i++) {
      const v = src[base + i]!;
      sumSq += v * v;
    }
    const inv = 1 / Math.sqrt(sumSq / n + eps);
    for (let i = 0; i < n; i++) out[base + i] = src[base + i]! * inv * weight[i]!;
  }
}

/**
 * RMSNorm over the last axis, as in HF Qwen3 (`Qwen3RMSNorm`):
 *
 * `y = x / sqrt(mean(x², last axis) + eps) * weight`
 *
 * `x` is `[..., n]`, `weight` is `[n]` of the same dtype; the result has `x`'s shape and dtype. The reference
 * computes in float64 and rounds once to the output dtype; HF additionally rounds the normalised value to the
 * model dtype before multiplying by `weight`, a difference well inside the bf16 tolerance.
 */
export function rmsnorm<D extends FloatDType>(
  x: Tensor<D>,
  weight: Tensor<NoInfer<D>>,
  options: RmsnormOptions = {},
): Tensor<D> {
  return rmsnormWith('rmsnorm', cudaRmsnorm, x, weight, options);
}

/**
 * RMSNorm's argument checks and CPU reference, with `cuda` as the GPU path: shared by {@link rmsnorm} (fused
 * kernel) and `rmsnormEager` (the unfused launch sequence).
 */
export function rmsnormWith<D extends FloatDType>(
  op: string,
  cuda: (x: Tensor<D>, weight: Tensor<D>, eps: number, out?: Tensor) => Tensor<D>,
  x: Tensor<D>,
  weight: Tensor<D>,
  options: RmsnormOptions,
): Tensor<D> {
  checkFloat(op, 'x', x);
  checkRank(op, 'x', x, { min: 1 });
  checkFloat(op, 'weight', weight);
  checkSameDtype(op, 'weight', weight, x, 'x');
  const n = x.shape[x.rank - 1]!;
  checkShape(op, 'weight', weight, [n], 'one weight per element of the last axis of x');
  const eps = checkPositive(op, 'eps', options.eps ?? DEFAULT_RMS_EPS);
  if (commonDevice(op, { x, weight }) === 'cuda') return cuda(x, weight, eps, options.out);
  const out = new Float32Array(x.size);
  rmsnormRows(readFloats(x), readFloats(weight), leadingSize(x.shape), n, eps, out);
  return writeCpuOutput(op, fromFloats(out, x.shape, x.dtype), options.out);
}

/** Result of {@link fusedAddRmsnorm}. */
export interface FusedAddRmsnormResult<D extends FloatDType> {
  /** `rmsnorm(x + residual)`. */
  out: Tensor<D>;
  /** The new residual stream `x + residual`, rounded to the dtype (what the next block adds to). */
  residual: Tensor<D>;
}

/**
 * Residual add followed by RMSNorm, the pattern between every pair of Qwen3 sub-blocks:
 *
 * `h = x + residual` (rounded to the dtype, as HF's bf16 add does); `out = rmsnorm(h, weight, eps)`.
 *
 * Returns both, so the caller keeps `h` as the next residual. `x` and `residual` share shape and dtype.
 */
export function fusedAddRmsnorm<D extends FloatDType>(
  x: Tensor<D>,
  residual: Tensor<NoInfer<D>>,
  weight: Tensor<NoInfer<D>>,
  options: RmsnormOptions & { residualOut?: Tensor } = {},
): FusedAddRmsnormResult<D> {
  const op = 'fusedAddRmsnorm';
  checkFloat(op, 'x', x);
  checkRank(op, 'x', x, { min: 1 });
  checkFloat(op, 'residual', residual);
  checkSameDtype(op, 'residual', residual, x, 'x');
  checkShape(op, 'residual', residual, x.shape, 'the residual stream has the shape of x');
  checkFloat(op, 'weight', weight);
  checkSameDtype(op, 'weight', weight, x, 'x');
  const n = x.shape[x.rank - 1]!;
  checkDim(op, 'weight', weight, 0, n, 'one weight per element of the last axis of x');
  checkRank(op, 'weight', weight, 1);
  const eps = checkPositive(op, 'eps', options.eps ?? DEFAULT_RMS_EPS);
  if (commonDevice(op, { x, residual, weight }) === 'cuda') {
    return cudaFusedAddRmsnorm(x, residual, weight, eps, options.out, options.residualOut);
  }
  const a = readFloats(x);
  const b = readFloats(residual);
  const sum = new Float32Array(x.size);
  for (let i = 0; i < sum.length; i++) sum[i] = roundToDType(a[i]! + b[i]!, x.dtype);
  const out = new Float32Array(x.size);
  rmsnormRows(sum, readFloats(weight), leadingSize(x.shape), n, eps, out);
  return {
    out: writeCpuOutput(op, fromFloats(out, x.shape, x.dtype), options.out),
    residual: writeCpuOutput(op, fromFloats(sum, x.shape, x.dtype), options.residualOut),
  };
}

/**
 * Qwen3's per-head QK-norm: RMSNorm of each head vector of `q` or `k` before RoPE.
 *
 * `x` is `[..., heads, headDim]` (e.g. `[tokens, heads, headDim]`), `weight` is `[headDim]`, shared by all
 * heads. Same math and rounding as {@link rmsnorm} applied to the last axis.
 */
export function qkNorm<D extends FloatDType>(
  x: Tensor<D>,
  weight: Tensor<NoInfer<D>>,
  options: RmsnormOptions = {},
): Tensor<D> {
  const op = 'qkNorm';
  checkFloat(op, 'x', x);
  checkRank(op, 'x', x, { min: 2 }, 'x is [..., heads, headDim]');
  checkFloat(op, 'weight', weight);
  checkSameDtype(op, 'weight', weight, x, 'x');
  const headDim = x.shape[x.rank - 1]!;
  checkShape(op, 'weight', weight, [headDim], 'one weight per element of a head (headDim)');
  const eps = checkPositive(op, 'eps', options.eps ?? DEFAULT_RMS_EPS);
  // Per-head RMSNorm is RMSNorm over rows of headDim: the same kernel serves it.
  if (commonDevice(op, { x, weight }) === 'cuda') return cudaRmsnorm(x, weight, eps, options.out);
  const out = new Float32Array(x.size);
  rmsnormRows(readFloats(x), readFloats(weight), leadingSize(x.shape), headDim, eps, out);
  return writeCpuOutput(op, fromFloats(out, x.shape, x.dtype), options.out);
}
