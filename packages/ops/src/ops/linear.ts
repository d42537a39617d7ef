import {
  checkDim,
  checkFloat,
  checkNoOverlap,
  checkOutput,
  checkPositive,
  checkRank,
  checkSameDtype,
  checkShape,
  commonDevice,
} from '../check.js';
import type { Activation } from '../core/activation.js';
import { matmulRowsByWeightRows } from '../core/matmul.js';
import { cudaLinear, cudaLinearSwiglu, cudaRmsnormLinear } from '../cuda/linear.js';
import type { FloatDType } from '../dtype.js';
import { QkValueError } from '../errors.js';
import { fromFloats, readFloats, writeCpuOutput } from '../io.js';
import { leadingSize } from '../shape.js';
import { Tensor } from '../tensor.js';
import { activationFn } from './activations.js';
import { DEFAULT_RMS_EPS, fusedAddRmsnorm, rmsnorm } from './rmsnorm.js';
import { swigluFused } from './swiglu.js';

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
 * Linear layer with HF / PyTorch weight layout: `y = act(x · Wᵀ + bias)`.
 *
 * `x` is `[..., in]`, `weight` is `[out, in]` (one row per output feature, as `nn.Linear` stores it), `bias` is
 * `[out]`; all one dtype. Returns `[..., out]` in that dtype. Float64 accumulation, one rounding. On CUDA
 * (fp32 accumulation): a streaming GEMV for 1 row, the small-M tensor-core kernel for 2–32 rows (2–16 on Hopper;
 * bf16/f16, `in` a multiple of 32), a tiled tensor-core GEMM (SIMT for f32) above, which on Hopper splits K when its
 * tiles would leave SMs idle; the row limits are measured (cuda-core's csrc/kernels/GEMM_SKINNY.md, GEMM_SM90.md).
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
export interface RmsnormLinearOptions<D extends FloatDType = FloatDType> {
  /** Added to the mean square before the square root. Default `1e-6` (Qwen3's `rms_norm_eps`). */
  eps?: number;
  /** Write the result here (shape `[..., out]`, dtype and device of `x`) instead of a new tensor. */
  out?: Tensor;
  /**
   * The residual stream (shape, dtype and device of `x`): the op then normalises `h = x + residual`, rounded to the
   * dtype as {@link fusedAddRmsnorm} adds. Needs a `normWeight`.
   */
  residual?: Tensor<NoInfer<D>>;
  /**
   * Receives `h = x + residual` (shape, dtype and device of `x`), the next residual stream; only with `residual`.
   * It must not share memory with `x`, `residual` or `out` (refused on every device, since the fused CUDA kernel
   * reads all rows of `x` and `residual` from every block while it writes).
   */
  residualOut?: Tensor;
  /**
   * `'swiglu'`: gated projection. `weight` is `[2·ffn, in]`, the gate rows then the up rows (`gate_proj` and
   * `up_proj` stacked), and the result is `[..., ffn]` with `y = silu(h · gateᵀ) · (h · upᵀ)`.
   */
  glu?: 'swiglu';
}

/** Options of {@link linearSwiglu}. */
export interface LinearSwigluOptions {
  /** Write the result here (shape `[..., ffn]`, dtype and device of `x`) instead of a new tensor. */
  out?: Tensor;
}

/**
 * Largest row count the fused CUDA kernel (a GEMV that streams W once per 8 rows on CUDA cores) serves; more rows
 * run the separate ops, whose linear streams W once per 32 rows on tensor cores. Measured on an H200 over the
 * Qwen3-0.6B and -8B projections: at 2 rows the two are even, at 8 the GEMV takes 3× longer (GEMM_SKINNY.md).
 */
const RMSNORM_LINEAR_FUSED_MAX_ROWS = 2;
/** Without a norm the fused kernel is a GEMV with a SwiGLU epilogue: the same limit. */
const LINEAR_SWIGLU_FUSED_MAX_ROWS = 2;

/**
 * RMSNorm followed by a bias-free linear layer, the pattern in front of Qwen3's QKV and gate/up projections:
 *
 * `h = rmsnorm(x, normWeight, eps)` (`h[r, k] = x[r, k] / sqrt(mean(x[r, :]²) + eps) · normWeight[k]`, rounded to
 * the dtype), then `y[r, o] = Σ_k h[r, k] · weight[o, k]`.
 *
 * Defined as `linear(rmsnorm(x, normWeight, { eps }), weight)` in sequence: the normalised activations are
 * rounded to the dtype in between, exactly as two separate ops would hand them over. `x` is `[..., in]`,
 * `normWeight` `[in]`, `weight` `[out, in]`, all one dtype; returns `[..., out]`.
 *
 * - `residual`: normalises `x + residual` (rounded to the dtype) instead, as {@link fusedAddRmsnorm} does, and
 *   writes that sum to `residualOut` when given.
 * - `glu: 'swiglu'`: `weight` is `[2·ffn, in]` (gate rows, then up rows) and the result `[..., ffn]` is
 *   `silu(g) · u` with `g = Σ_k h[r, k] · weight[j, k]` and `u = Σ_k h[r, k] · weight[ffn + j, k]`, both kept in
 *   float32 (not rounded to the dtype), one rounding at the end.
 * - `normWeight` `null`: no norm, `h = x` (then `residual` is refused); with `glu` this is {@link linearSwiglu}.
 *
 * On CUDA, up to 2 rows run one fused kernel (each block normalises its rows in shared
 * memory); more rows run the separate ops (`fusedAddRmsnorm` or `rmsnorm`, then the projection). With `glu` the
 * projection is one tensor-core GEMM with SwiGLU in its epilogue on Hopper above 16 rows (one rounding, as the
 * definition), else `linear` then `swigluFused`, which rounds gate and up to the dtype in between: a difference
 * inside the dtype's tolerance.
 */
export function rmsnormLinear<D extends FloatDType>(
  x: Tensor<D>,
  normWeight: Tensor<NoInfer<D>> | null,
  weight: Tensor<NoInfer<D>>,
  options: RmsnormLinearOptions<D> = {},
): Tensor<D> {
  return normLinear('rmsnormLinear', 'weight', x, normWeight, weight, options);
}

/**
 * A gate/up projection with its SwiGLU, Qwen3's MLP up to the down projection, in one op:
 * `y[r, j] = silu(g) · u` with `g = Σ_k x[r, k] · gateUp[j, k]` and `u = Σ_k x[r, k] · gateUp[ffn + j, k]`.
 *
 * `x` is `[..., in]`, `gateUp` `[2·ffn, in]` (the rows of `gate_proj` then those of `up_proj`), one dtype; returns
 * `[..., ffn]`. The same as `rmsnormLinear(x, null, gateUp, { glu: 'swiglu' })`: `g` and `u` are kept in float32,
 * one rounding at the end. On CUDA, up to 2 rows run one fused GEMV kernel; on Hopper, more than 16 rows run one
 * tensor-core GEMM with the SwiGLU in its epilogue (the `[..., 2·ffn]` projection is never written); other row
 * counts and GPUs run `linear` (which rounds the `[..., 2·ffn]` projection to the dtype) then `swigluFused`.
 */
export function linearSwiglu<D extends FloatDType>(
  x: Tensor<D>,
  gateUp: Tensor<NoInfer<D>>,
  options: LinearSwigluOptions = {},
): Tensor<D> {
  return normLinear('linearSwiglu', 'gateUp', x, null, gateUp, { glu: 'swiglu', out: options.out });
}

/** {@link rmsnormLinear}'s checks and dispatch; `op` and `weightArg` name the op and its weight in errors. */
function normLinear<D extends FloatDType>(
  op: string,
  weightArg: string,
  x: Tensor<D>,
  normWeight: Tensor<D> | null,
  weight: Tensor<D>,
  options: RmsnormLinearOptions<D>,
): Tensor<D> {
  checkFloat(op, 'x', x);
  checkRank(op, 'x', x, { min: 1 });
  const n = x.shape[x.rank - 1]!;
  if (normWeight !== null) {
    checkFloat(op, 'normWeight', normWeight);
    checkSameDtype(op, 'normWeight', normWeight, x, 'x');
    checkShape(op, 'normWeight', normWeight, [n], 'one weight per element of the last axis of x');
  }
  const glu = checkGlu(op, options.glu);
  checkFloat(op, weightArg, weight);
  checkSameDtype(op, weightArg, weight, x, 'x');
  checkRank(op, weightArg, weight, 2, `${weightArg} is [${glu ? '2·ffn' : 'out'}, in]`);
  checkDim(op, weightArg, weight, 1, n, `the in-features of ${weightArg} must equal the last axis of x`);
  const weightRows = weight.shape[0]!;
  if (glu && weightRows % 2 !== 0) {
    throw new QkValueError(
      op,
      weightArg,
      `has ${weightRows} rows, but a SwiGLU projection stacks the gate rows on the up rows ([2·ffn, in]), so the count must be even.`,
    );
  }
  const { residual, residualOut, out } = options;
  if (residual !== undefined) {
    if (normWeight === null) {
      throw new QkValueError(
        op,
        'residual',
        'is only added in front of the norm, and normWeight is null: add it with add() first, or pass a normWeight.',
      );
    }
    checkFloat(op, 'residual', residual);
    checkSameDtype(op, 'residual', residual, x, 'x');
    checkShape(op, 'residual', residual, x.shape, 'the residual stream has the shape of x');
  } else if (residualOut !== undefined) {
    throw new QkValueError(
      op,
      'residualOut',
      'receives x + residual, but no residual was given: pass residual too, or drop residualOut.',
    );
  }
  const eps = checkPositive(op, 'eps', options.eps ?? DEFAULT_RMS_EPS);
  const device = commonDevice(op, { x, normWeight: normWeight ?? undefined, [weightArg]: weight, residual });
  const outFeatures = glu ? weightRows / 2 : weightRows;
  if (out !== undefined) checkOutput(op, 'out', out, [...x.shape.slice(0, -1), outFeatures], x.dtype, device);
  if (residualOut !== undefined) {
    checkOutput(op, 'residualOut', residualOut, x.shape, x.dtype, device);
    checkNoOverlap(
      op,
      'residualOut',
      residualOut,
      { x, residual, out },
      'the fused kernel reads every row of x and residual while it writes, so give residualOut its own tensor.',
    );
  }

  if (normWeight === null && !glu) return linear(x, weight, { out });
  const maxFused = normWeight === null ? LINEAR_SWIGLU_FUSED_MAX_ROWS : RMSNORM_LINEAR_FUSED_MAX_ROWS;
  if (device === 'cuda' && leadingSize(x.shape) <= maxFused) {
    return cudaRmsnormLinear(op, x, normWeight, weight, eps, { residual, residualOut, glu, out });
  }
  // The reference, and the CUDA path past the fused kernel's rows: the separate ops in sequence.
  const temps: Tensor[] = [];
  try {
    let h = x;
    if (normWeight !== null && residual !== undefined) {
      const sum = fusedAddRmsnorm(x, residual, normWeight, { eps, residualOut });
      if (residualOut === undefined) temps.push(sum.residual);
      h = sum.out;
      temps.push(h);
    } else if (normWeight !== null) {
      h = rmsnorm(x, normWeight, { eps });
      temps.push(h);
    }
    if (!glu) return linear(h, weight, { out });
    if (device === 'cuda') {
      const { y, ran } = cudaLinearSwiglu(h, weight, out);
      if (ran) return y;
      try {
        const gateUp = linear(h, weight);
        temps.push(gateUp);
        return swigluFused(gateUp, { out: y });
      } catch (e) {
        if (y !== out) y.dispose();
        throw e;
      }
    }
    return writeCpuOutput(op, swigluOfF32Projection(h, weight), out);
  } finally {
    for (const t of temps) t.dispose();
  }
}

/** Checks the `glu` option: whether the SwiGLU epilogue is on. */
function checkGlu(op: string, glu: unknown): boolean {
  if (glu === undefined) return false;
  if (glu === 'swiglu') return true;
  throw new QkValueError(op, 'glu', `must be 'swiglu' or left out, got ${JSON.stringify(glu)}.`);
}

/**
 * The CPU reference of the SwiGLU projection: `h · weightᵀ` (`weight` `[2·ffn, in]`) kept in float32, then
 * `swigluFused` over that gate|up row, rounded once to `h`'s dtype.
 */
function swigluOfF32Projection<D extends FloatDType>(h: Tensor<D>, weight: Tensor<D>): Tensor<D> {
  const [width, n] = weight.shape as [number, number];
  const rows = leadingSize(h.shape);
  const gateUp = new Float32Array(rows * width);
  matmulRowsByWeightRows(readFloats(h), rows, readFloats(weight), width, n, gateUp, { act: (v) => v });
  const y = swigluFused(Tensor.fromStorage(gateUp, [...h.shape.slice(0, -1), width], 'f32'));
  return fromFloats(y.data, y.shape, h.dtype);
}
