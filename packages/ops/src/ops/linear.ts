import { checkDim, checkFloat, checkRank, checkSameDtype, checkShape } from '../check.js';
import type { FloatDType } from '../dtype.js';
import { fromFloats, readFloats } from '../io.js';
import { leadingSize } from '../shape.js';
import type { Tensor } from '../tensor.js';
import { type Activation, activationFn } from './activations.js';

/** Options of {@link linear}. */
export interface LinearOptions<D extends FloatDType> {
  /** `[out]`, added before the activation. Qwen3's projections have none. */
  bias?: Tensor<NoInfer<D>>;
  /** Epilogue applied to every output element. Default `'none'`. */
  activation?: Activation;
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
 * `[out]`; all one dtype. Returns `[..., out]` in that dtype. Float64 accumulation, one rounding.
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
  let bias: Float32Array | undefined;
  if (options.bias !== undefined) {
    checkFloat(op, 'bias', options.bias);
    checkSameDtype(op, 'bias', options.bias, x, 'x');
    checkShape(op, 'bias', options.bias, [outFeatures], 'one bias per output feature');
    bias = readFloats(options.bias);
  }
  const act = activationFn(options.activation ?? 'none', op);
  const rows = leadingSize(x.shape);
  const out = new Float32Array(rows * outFeatures);
  matmulRowsByWeightRows(readFloats(x), rows, readFloats(weight), outFeatures, n, out, { bias, act });
  return fromFloats(out, [...x.shape.slice(0, -1), outFeatures], x.dtype);
}
