/** CUDA paths of the linear family (kernels: packages/cuda-core/csrc/kernels/gemv.cu, gemm.cu, quant.cu). */
import type { ActivationCode } from '@qk/cuda-core';
import type { Activation } from '../core/activation.js';
import type { Int4Weight, Int8Weight } from '../core/quant-weight.js';
import type { FloatDType } from '../dtype.js';
import { leadingSize } from '../shape.js';
import { Tensor } from '../tensor.js';
import { bindingCodes, cudaOutput, dtypeCode, launch, ptr } from './common.js';

/** The name of each activation in the binding's `ActivationCode` table (whose codes come from the loaded module). */
const ACTIVATION_NAMES = {
  none: 'none',
  silu: 'silu',
  gelu: 'gelu',
  gelu_tanh: 'geluTanh',
} as const satisfies Record<Activation, keyof typeof ActivationCode>;

function outShape(x: Tensor, outFeatures: number): number[] {
  return [...x.shape.slice(0, -1), outFeatures];
}

export function cudaLinear<D extends FloatDType>(
  x: Tensor<D>,
  weight: Tensor<D>,
  bias: Tensor<D> | undefined,
  activation: Activation,
  out?: Tensor,
): Tensor<D> {
  const op = 'linear';
  const [n, k] = weight.shape as [number, number];
  const y = cudaOutput(op, out, outShape(x, n), x.dtype);
  launch(op, (b) =>
    b.linear(
      dtypeCode(x.dtype),
      ptr(y),
      ptr(x),
      ptr(weight),
      bias === undefined ? 0n : ptr(bias),
      leadingSize(x.shape),
      k,
      n,
      bindingCodes(op).ActivationCode[ACTIVATION_NAMES[activation]],
    ),
  );
  return y;
}

/**
 * The SwiGLU projection in one tensor-core GEMM (gate and up paired in its epilogue, one rounding), where that kernel
 * applies (Hopper, more rows than the small-M kernels take, aligned operands). Returns the output tensor (`out`, or
 * a new one) and whether the kernel ran; when it did not, nothing was written and the caller fills `y` itself
 * (`linear` + `swigluFused`), disposing it if that fails and it is not `out`. `gateUp` is `[2·ffn, in]`, validated
 * by the op.
 */
export function cudaLinearSwiglu<D extends FloatDType>(
  x: Tensor<D>,
  gateUp: Tensor<D>,
  out?: Tensor,
): { y: Tensor<D>; ran: boolean } {
  const op = 'linearSwiglu';
  const [rows, k] = gateUp.shape as [number, number];
  const n = rows / 2;
  const y = cudaOutput(op, out, outShape(x, n), x.dtype);
  try {
    const ran = launch(op, (b) =>
      b.linearSwiglu(dtypeCode(x.dtype), ptr(y), ptr(x), ptr(gateUp), leadingSize(x.shape), k, n),
    );
    return { y, ran };
  } catch (e) {
    if (y !== out) y.dispose();
    throw e;
  }
}

/** What {@link cudaRmsnormLinear} fuses besides the projection (validated by the op). */
export interface FusedNormLinear<D extends FloatDType> {
  /** Added to `x` before the norm; its sum goes to `residualOut` when given. */
  residual?: Tensor<D> | undefined;
  /** Receives `x + residual`; not written when absent. */
  residualOut?: Tensor | undefined;
  /** SwiGLU epilogue: the weight holds `2·n` rows, gate then up. */
  glu: boolean;
  /** The caller's output tensor, or a new one when absent. */
  out?: Tensor | undefined;
}

/**
 * The fused norm + projection kernel: `normWeight` null skips the norm (then it is a GEMV with the SwiGLU
 * epilogue). `op` names the op in errors.
 */
export function cudaRmsnormLinear<D extends FloatDType>(
  op: string,
  x: Tensor<D>,
  normWeight: Tensor<D> | null,
  weight: Tensor<D>,
  eps: number,
  fused: FusedNormLinear<D>,
): Tensor<D> {
  const [rows, k] = weight.shape as [number, number];
  const n = fused.glu ? rows / 2 : rows;
  const y = cudaOutput(op, fused.out, outShape(x, n), x.dtype);
  const optional = (t: Tensor | null | undefined): bigint => (t === null || t === undefined ? 0n : ptr(t));
  launch(op, (b) =>
    b.rmsnormLinear(
      dtypeCode(x.dtype),
      ptr(y),
      ptr(x),
      optional(normWeight),
      ptr(weight),
      leadingSize(x.shape),
      k,
      n,
      eps,
      optional(fused.residual),
      optional(fused.residualOut),
      bindingCodes(op).GluCode[fused.glu ? 'swiglu' : 'none'],
    ),
  );
  return y;
}

/** Allocates the outputs of a quantize kernel and runs it; the outputs are released if the launch fails. */
function quantizeInto<W>(outputs: Tensor[], run: () => void, result: () => W): W {
  try {
    run();
  } catch (e) {
    for (const t of outputs) t.dispose();
    throw e;
  }
  return result();
}

export function cudaQuantizeInt8(weight: Tensor<FloatDType>): Int8Weight {
  const op = 'quantizeInt8';
  const [n, k] = weight.shape as [number, number];
  const qweight = Tensor.empty([n, k], 'i8', 'cuda');
  const scales = Tensor.empty([n], 'f32', 'cuda');
  return quantizeInto(
    [qweight, scales],
    () =>
      launch(op, (b) =>
        b.quantizeInt8(dtypeCode(weight.dtype), ptr(qweight), ptr(scales), ptr(weight), n, k),
      ),
    () => ({ qweight, scales }),
  );
}

export function cudaQuantizeInt4(weight: Tensor<FloatDType>, groupSize: number): Int4Weight {
  const op = 'quantizeInt4';
  const [n, k] = weight.shape as [number, number];
  const qweight = Tensor.empty([n, k / 2], 'u8', 'cuda');
  const scales = Tensor.empty([n, k / groupSize], 'f32', 'cuda');
  return quantizeInto(
    [qweight, scales],
    () =>
      launch(op, (b) =>
        b.quantizeInt4(dtypeCode(weight.dtype), ptr(qweight), ptr(scales), ptr(weight), n, k, groupSize),
      ),
    () => ({ qweight, scales, groupSize }),
  );
}

export function cudaLinearInt8<D extends FloatDType>(
  x: Tensor<D>,
  weight: Int8Weight,
  bias: Tensor<D> | undefined,
  out?: Tensor,
): Tensor<D> {
  const op = 'linearInt8';
  const [n, k] = weight.qweight.shape as [number, number];
  const y = cudaOutput(op, out, outShape(x, n), x.dtype);
  launch(op, (b) =>
    b.linearInt8(
      dtypeCode(x.dtype),
      ptr(y),
      ptr(x),
      ptr(weight.qweight),
      ptr(weight.scales),
      bias === undefined ? 0n : ptr(bias),
      leadingSize(x.shape),
      k,
      n,
    ),
  );
  return y;
}

export function cudaLinearInt4<D extends FloatDType>(
  x: Tensor<D>,
  weight: Int4Weight,
  bias: Tensor<D> | undefined,
  out?: Tensor,
): Tensor<D> {
  const op = 'linearInt4';
  const n = weight.qweight.shape[0]!;
  const k = weight.qweight.shape[1]! * 2;
  const y = cudaOutput(op, out, outShape(x, n), x.dtype);
  launch(op, (b) =>
    b.linearInt4(
      dtypeCode(x.dtype),
      ptr(y),
      ptr(x),
      ptr(weight.qweight),
      ptr(weight.scales),
      bias === undefined ? 0n : ptr(bias),
      leadingSize(x.shape),
      k,
      n,
      weight.groupSize,
    ),
  );
  return y;
}
