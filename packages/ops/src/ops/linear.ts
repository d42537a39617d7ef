import {
  checkDim,
  checkFloat,
  checkPositive,
  checkRank,
  checkSameDtype,
  checkShape,
  commonDevice,
} from '../check.js';
import { writeCpuOutput } from '../cuda/common.js';
import { cudaLinear, cudaRmsnormLinear } from '../cuda/linear.js';
import type { FloatDType } from '../dtype.js';
import { fromFloats, readFloats } from '../io.js';
import { leadingSize } from '../shape.js';
import type { Tensor } from '../tensor.js';
import { type Activation, activationFn } from './activations.js';
import { DEFAULT_RMS_EPS, rmsnorm } from './rmsnorm.js';

/** Options of {@link linear}. */
export interface LinearOptions<D extends FloatDType> {
  /** `[out]`, added before the activation. Qwen3's projections have none. */
  bias?: Tensor<NoInfer<D>>;
  /** Epilogue applied to every output element. Default `'none'`. */
  activation?: Activation;
  /** Write the result here (shape `[..., out]`, dtype and device of `x`) instead of a new tensor. */
  out?: Tensor;
}

/**
 * `rows × n` by `out × n` dot products: `y[r, o] = act(Σ_k x[r, k] · w[o, k] + bias[o])`, float64 sums.
 * Shared by the float and quantized linears; `rowScale` (per output) multiplies the sum before the bias.
 */
export function matmulRowsByWeightRows(
  x: Float32Array,
  rows: number,
  w: Float32Array | Float64Array | Int8Array,
  outFeatures: number,
  n: number,
  out: Float32Array,
  epilogue: { bias?: Float32Array | undefined; scale?: Float32Array | undefined; act: (v: number) => number },
): void {
  const { bias, scale, act } = epilogue;
  for (let r = 0; r < rows; r++) {
    const xBase = r * n;
    for (let o = 0; o < outFeatures; o++) {
      const wBase = o * n;
      // Four independent partial sums keep the loop fast without changing float64 accuracy meaningfully.
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      let k = 0;
      for (; k + 3 < n; k += 4) {
        s0 += x[xBase + k]! * w[wBase + k]!;
        s1 += x[xBase + k + 1]! * w[wBase + k + 1]!;
        s2 += x[xBase + k + 2]! * w[wBase + k + 2]!;
        s3 += x[xBase + k + 3]! * w[wBase + k + 3]!;
      }
      for (; k < n; k++) s0 += x[xBase + k]! * w[wBase + k]!;
      let v = s0 + s1 + (s2 + s3);
      if (scale !== undefined) v *= scale[o]!;
      if (bias !== undefined) v += bias[o]!;
      out[r * outFeatures + o] = act(v);
    }
  }
}

/**
 * Linear layer with HF / PyTorch weight layout: `y = act(x · Wᵀ + bias)`.
 *
 * `x` is `[..., in]`, `weight` is `[out, in]` (one row per output feature, as `nn.Linear` stores it), `bias` is
 * `[out]`; all one dtype. Returns `[..., out]` in that dtype. Float64 accumulation, one rounding. On CUDA
 * (fp32 accumulation): streaming GEMV kernels up to 8 rows, a tiled tensor-core GEMM (SIMT for f32) above.
 */
export function linear<D extends FloatDType>(
  x: Tensor<D>,
  weight: Tensor<NoInfer<D>>,
  options: LinearOptions<D> = {},
): Tensor<D> {
  const op = 'linear';
  checkFloat(op, 'x', x);
  checkRank(op, 'x', x, { min: 1 });
  checkFloat(op, 'weight', weight);
  checkSameDtype(op, 'weight', weight, x, 'x');
  checkRank(op, 'weight', weight, 2, 'weight is [out, in]');
  const n = x.shape[x.rank - 1]!;
  checkDim(op, 'weight', weight, 1, n, 'the in-features of weight must equal the last axis of x');
  const outFeatures = weight.shape[0]!;
  if (options.bias !== undefined) {
    checkFloat(op, 'bias', options.bias);
    checkSameDtype(op, 'bias', options.bias, x, 'x');
    checkShape(op, 'bias', options.bias, [outFeatures], 'one bias per output feature');
  }
  const activation = options.activation ?? 'none';
  const act = activationFn(activation, op);
  if (commonDevice(op, { x, weight, bias: options.bias }) === 'cuda') {
    return cudaLinear(x, weight, options.bias, activation, options.out);
  }
  const bias = options.bias === undefined ? undefined : readFloats(options.bias);
  const rows = leadingSize(x.shape);
  const out = new Float32Array(rows * outFeatures);
  matmulRowsByWeightRows(readFloats(x), rows, readFloats(weight), outFeatures, n, out, { bias, act });
  return writeCpuOutput(op, fromFloats(out, [...x.shape.slice(0, -1), outFeatures], x.dtype), options.out);
}

/** Options of {@link rmsnormLinear}. */
export interface RmsnormLinearOptions {
  /** Added to the mean square before the square root. Default `1e-6` (Qwen3's `rms_norm_eps`). */
  eps?: number;
  /** Write the result here (shape `[..., out]`, dtype and device of `x`) instead of a new tensor. */
  out?: Tensor;
}

/** Largest row count the fused CUDA kernel serves; more rows run `rmsnorm` then `linear`. */
const RMSNORM_LINEAR_FUSED_MAX_ROWS = 64;

/**
 * RMSNorm followed by a bias-free linear layer, the pattern in front of Qwen3's QKV and gate/up projections:
 *
 * `h = rmsnorm(x, normWeight, eps)` (`h[r, k] = x[r, k] / sqrt(mean(x[r, :]²) + eps) · normWeight[k]`, rounded to
 * the dtype), then `y[r, o] = Σ_k h[r, k] · weight[o, k]`.
 *
 * Defined as `linear(rmsnorm(x, normWeight, { eps }), weight)` in sequence: the normalised activations are
 * rounded to the dtype in between, exactly as two separate ops would hand them over. `x` is `[..., in]`,
 * `normWeight` `[in]`, `weight` `[out, in]`, all one dtype; returns `[..., out]`. On CUDA, up to 64 rows run one
 * fused kernel (each block normalises its rows in shared memory); more rows run the two ops.
 */
export function rmsnormLinear<D extends FloatDType>(
  x: Tensor<D>,
  normWeight: Tensor<NoInfer<D>>,
  weight: Tensor<NoInfer<D>>,
  options: RmsnormLinearOptions = {},
): Tensor<D> {
  const op = 'rmsnormLinear';
  checkFloat(op, 'x', x);
  checkRank(op, 'x', x, { min: 1 });
  const n = x.shape[x.rank - 1]!;
  checkFloat(op, 'normWeight', normWeight);
  checkSameDtype(op, 'normWeight', normWeight, x, 'x');
  checkShape(op, 'normWeight', normWeight, [n], 'one weight per element of the last axis of x');
  checkFloat(op, 'weight', weight);
  checkSameDtype(op, 'weight', weight, x, 'x');
  checkRank(op, 'weight', weight, 2, 'weight is [out, in]');
  checkDim(op, 'weight', weight, 1, n, 'the in-features of weight must equal the last axis of x');
  const eps = checkPositive(op, 'eps', options.eps ?? DEFAULT_RMS_EPS);
  const device = commonDevice(op, { x, normWeight, weight });
  if (device === 'cuda' && leadingSize(x.shape) <= RMSNORM_LINEAR_FUSED_MAX_ROWS) {
    return cudaRmsnormLinear(x, normWeight, weight, eps, options.out);
  }
  const h = rmsnorm(x, normWeight, { eps });
  try {
    return linear(h, weight, { out: options.out });
  } finally {
    if (device === 'cuda') h.dispose();
  }
}
