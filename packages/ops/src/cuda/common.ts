/**
 * Shared glue of the CUDA op paths: binding access and its code tables, device addresses, output tensors, error
 * mapping.
 */
import type { Binding } from '@qk/cuda-core';
import { bindingCodes, cudaBinding, dtypeCode, nativeCall } from '../backend/cuda.js';
import { checkOutput } from '../check.js';
import type { DType } from '../dtype.js';
import type { Shape } from '../shape.js';
import { deviceAddress, Tensor } from '../tensor.js';

export { bindingCodes, dtypeCode };

/** Device address of a CUDA tensor. */
export const ptr = deviceAddress;

/**
 * The output tensor of a CUDA op: `out` when the caller supplied one (checked for shape, dtype and device), else a
 * fresh uninitialised CUDA tensor.
 */
export function cudaOutput<D extends DType>(
  op: string,
  out: Tensor | undefined,
  shape: Shape,
  dtype: D,
): Tensor<D> {
  if (out === undefined) return Tensor.empty(shape, dtype, 'cuda');
  checkOutput(op, 'out', out, shape, dtype, 'cuda');
  return out as Tensor<D>;
}

/** Runs `fn` with the binding, mapping native errors to typed qk errors that name `op`. */
export function launch<T>(op: string, fn: (b: Binding) => T): T {
  const b = cudaBinding(op);
  return nativeCall(op, () => fn(b));
}
