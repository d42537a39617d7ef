/**
 * Unfused "PyTorch eager" baselines of two fused ops, for benchmarks: on `'cuda'` they run one kernel per
 * PyTorch op, with every intermediate in global memory, the way HF transformers' eager modules do; the fused
 * kernels ({@link rmsnorm}, {@link swiglu}) are measured against them. They exist to be a speed baseline, not to
 * be used in a model.
 *
 * On the CPU they return exactly the values of the fused references. On the GPU their results differ from the
 * fused kernels only by rounding: the eager sequence rounds its intermediates (to float32, and to the model dtype
 * where PyTorch casts), the fused kernels round once.
 */
import { commonDevice } from '../check.js';
import { cudaRmsnormEager, cudaSwigluEager } from '../cuda/elementwise.js';
import type { FloatDType } from '../dtype.js';
import { writeCpuOutput } from '../io.js';
import type { Tensor } from '../tensor.js';
import type { ElementwiseOptions } from './activations.js';
import { type RmsnormOptions, rmsnormWith } from './rmsnorm.js';
import { checkSwigluArgs, swigluCpu } from './swiglu.js';

/**
 * RMSNorm as HF's eager `Qwen3RMSNorm.forward` computes it, op by op:
 *
 * `h = x.to(float32)`; `variance = h.pow(2).mean(-1)`; `h = h * rsqrt(variance + eps)`; `y = weight * h.to(dtype)`
 *
 * On `'cuda'` that is seven launches (cast, square, row mean, rsqrt(· + eps), per-row multiply, cast back,
 * per-column multiply by `weight`; the casts are skipped for f32 input). Arguments and result as {@link rmsnorm}.
 * The CPU path returns the values of {@link rmsnorm}: `x · weight / sqrt(mean(x²) + eps)` in float64, rounded
 * once.
 */
export function rmsnormEager<D extends FloatDType>(
  x: Tensor<D>,
  weight: Tensor<NoInfer<D>>,
  options: RmsnormOptions = {},
): Tensor<D> {
  return rmsnormWith('rmsnormEager', cudaRmsnormEager, x, weight, options);
}

/**
 * SwiGLU as HF's eager `Qwen3MLP` computes it: `act = silu(gate)` (a tensor of the model dtype), then
 * `y = act · up`: two launches on `'cuda'`. Arguments and result as {@link swiglu}. The CPU path returns the
 * values of {@link swiglu}: `silu(gate) · up` in float64, rounded once.
 */
export function swigluEager<D extends FloatDType>(
  gate: Tensor<D>,
  up: Tensor<NoInfer<D>>,
  options: ElementwiseOptions = {},
): Tensor<D> {
  const op = 'swigluEager';
  checkSwigluArgs(op, gate, up);
  if (commonDevice(op, { gate, up }) === 'cuda') return cudaSwigluEager(gate, up, options.out);
  return writeCpuOutput(op, swigluCpu(gate, up), options.out);
}
