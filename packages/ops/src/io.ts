/** Reading tensors as float32 and writing float results back in an op's output dtype. */
import { decodeFloats, encodeFloats, type FloatDType } from './dtype.js';
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
