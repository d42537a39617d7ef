/**
 * Reading tensors as float32, writing float results back in an op's output dtype, and handing a CPU result to the
 * caller's `out` tensor: the CPU references' side of every op.
 */
import { checkOutput } from './check.js';
import { type DType, decodeFloats, encodeFloats, type FloatDType } from './dtype.js';
import type { Shape } from './shape.js';
import { Tensor } from './tensor.js';

/**
 * The elements of a float tensor as float32. f32 tensors return their own storage (no copy): callers must
 * treat the result as read-only.
 */
export function readFloats(t: Tensor<FloatDType>): Float32Array {
  if (t.dtype === 'f32') return t.data as Float32Array;
  return decodeFloats(t.data as Uint16Array, t.dtype);
}

/** A tensor of `dtype` holding `values` rounded to it (via float32, nearest even). */
export function fromFloats<D extends FloatDType>(
  values: Float32Array | Float64Array,
  shape: Shape,
  dtype: D,
): Tensor<D> {
  const f32 = values instanceof Float32Array ? values : Float32Array.from(values);
  const storage = dtype === 'f32' ? f32 : encodeFloats(f32, dtype);
  return Tensor.fromStorage(storage as Tensor<D>['data'], shape, dtype);
}

/** The CPU-path counterpart of an `out` option: copies `result` into `out` (checked) and returns `out`. */
export function writeCpuOutput<D extends DType>(
  op: string,
  result: Tensor<D>,
  out: Tensor | undefined,
): Tensor<D> {
  if (out === undefined) return result;
  checkOutput(op, 'out', out, result.shape, result.dtype, 'cpu');
  (out.data as Uint8Array).set(result.data as Uint8Array);
  return out as Tensor<D>;
}
