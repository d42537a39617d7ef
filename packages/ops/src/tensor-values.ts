/**
 * Turning user-supplied numbers into tensor storage: dtype checks, shape inference for nested arrays, and
 * encoding with the rounding and range rules `Tensor`'s constructors document.
 */
import {
  ALL_DTYPES,
  allocStorage,
  bf16BitsToF32,
  bitsToF32,
  DTYPES,
  type DType,
  encodeFloats,
  type FloatDType,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToBits,
  f32ToF16Bits,
  isDType,
  isFloatDType,
  type StorageOf,
} from './dtype.js';
import { QkDtypeError, QkShapeError, QkValueError } from './errors.js';
import { formatShape, type Shape } from './shape.js';

/** Nested arrays of numbers, as accepted by `Tensor.fromArray`. */
export type NestedArray = number | readonly NestedArray[];

export function checkDType(dtype: unknown, op: string): DType {
  if (!isDType(dtype)) {
    throw new QkDtypeError({
      op,
      arg: 'dtype',
      expected: `one of ${ALL_DTYPES.join(', ')}`,
      got: String(dtype),
    });
  }
  return dtype;
}

export function inferShape(values: NestedArray, op: string): number[] {
  const shape: number[] = [];
  let level: NestedArray = values;
  while (Array.isArray(level)) {
    shape.push(level.length);
    if (level.length === 0) break;
    level = level[0] as NestedArray;
  }
  if (shape.length === 0 && typeof values !== 'number') {
    throw new QkValueError(
      op,
      'values',
      'must be a number, an array of numbers, nested arrays or a typed array.',
    );
  }
  return shape;
}

export function flatten(values: NestedArray, shape: Shape, op: string): number[] {
  const out: number[] = [];
  const walk = (v: NestedArray, depth: number): void => {
    if (depth === shape.length) {
      if (typeof v !== 'number') {
        throw new QkShapeError({
          op,
          arg: 'values',
          expected: `a regular nested array of shape ${formatShape(shape)}`,
          got: 'a ragged array',
        });
      }
      out.push(v);
      return;
    }
    if (!Array.isArray(v) || v.length !== shape[depth]) {
      throw new QkShapeError({
        op,
        arg: 'values',
        expected: `a regular nested array of shape ${formatShape(shape)}`,
        got: 'a ragged array',
      });
    }
    for (const item of v) walk(item, depth + 1);
  };
  walk(values, 0);
  return out;
}

/** Writes numbers into integer storage, refusing non-integers and out-of-range values. */
export function encodeInts(
  values: ArrayLike<number>,
  dtype: Exclude<DType, FloatDType>,
  op: string,
  truncate: boolean,
  arg: string,
) {
  const { min, max } = DTYPES[dtype];
  const out = allocStorage(dtype, values.length);
  for (let i = 0; i < values.length; i++) {
    let v = values[i]!;
    if (truncate) v = Math.trunc(v);
    if (!Number.isInteger(v) || v < min || v > max) {
      throw new QkValueError(
        op,
        arg,
        `holds ${values[i]} at flat index ${i}, which is not an integer in [${min}, ${max}] as ${dtype} requires.`,
      );
    }
    out[i] = v;
  }
  return out;
}

/** The largest value of float `dtype` below `x`, which must itself be a value of `dtype` (finite or +inf). */
export function nextBelow(x: number, dtype: FloatDType): number {
  if (dtype === 'f32') {
    const bits = x === 0 ? 0x80000000 : f32ToBits(x);
    return bitsToF32(x > 0 ? bits - 1 : bits + 1);
  }
  const bits = x === 0 ? 0x8000 : dtype === 'bf16' ? f32ToBf16Bits(x) : f32ToF16Bits(x);
  const below = x > 0 ? bits - 1 : bits + 1;
  return dtype === 'bf16' ? bf16BitsToF32(below) : f16BitsToF32(below);
}

export function encode<D extends DType>(
  values: ArrayLike<number>,
  dtype: D,
  op: string,
  truncate = false,
  arg = 'values',
): StorageOf<D> {
  if (isFloatDType(dtype)) return encodeFloats(values, dtype) as StorageOf<D>;
  return encodeInts(values, dtype as Exclude<DType, FloatDType>, op, truncate, arg) as StorageOf<D>;
}
