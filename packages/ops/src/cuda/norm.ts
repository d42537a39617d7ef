/** CUDA paths of the RMSNorm family (kernels: packages/cuda-core/csrc/kernels/rmsnorm.cu). */
import type { FloatDType } from '../dtype.js';
import { leadingSize } from '../shape.js';
import type { Tensor } from '../tensor.js';
import { cudaOutput, dtypeCode, launch, ptr } from './common.js';

export function cudaRmsnorm<D extends FloatDType>(
  x: Tensor<D>,
  weight: Tensor<D>,
  eps: number,
  out?: Tensor,
): Tensor<D> {
  const op = 'rmsnorm';
  const y = cudaOutput(op, out, x.shape, x.dtype);
  const n = x.shape[x.rank - 1]!;
  launch(op, (b) => b.rmsnorm(dtypeCode(x.dtype), ptr(y), ptr(x), ptr(weight), leadingSize(x.shape), n, eps));
  return y;
}

export function cudaFusedAddRmsnorm<D extends FloatDType>(
  x: Tensor<D>,
  residual: Tensor<D>,
  weight: Tensor<D>,
  eps: number,
  out?: Tensor,
  residualOut?: Tensor,
): { out: Tensor<D>; residual: Tensor<D> } {
  const op = 'fusedAddRmsnorm';
  const y = cudaOutput(op, out, x.shape, x.dtype);
  const h = cudaOutput(op, residualOut, x.shape, x.dtype);
  const n = x.shape[x.rank - 1]!;
  launch(op, (b) =>
    b.fusedAddRmsnorm(
      dtypeCode(x.dtype),
      ptr(y),
      ptr(h),
      ptr(x),
      ptr(residual),
      ptr(weight),
      leadingSize(x.shape),
      n,
      eps,
    ),
  );
  return { out: y, residual: h };
}
