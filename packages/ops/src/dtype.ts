/**
 * Element types and exact conversions between float32 and the 16-bit float formats.
 *
 * f16 and bf16 values are stored as their raw 16-bit patterns in a `Uint16Array`. Conversions from wider
 * values first round to float32 (as a GPU kernel computing in float32 would), then to the 16-bit format with
 * round-to-nearest-even; NaN stays NaN (quiet, sign kept), overflow becomes ±infinity, and float32 values
 * too small for the format become subnormals or signed zero.
 */

/** Every element type a tensor can hold. `u8` also carries packed int4 (two values per byte). */
export type DType = 'f32' | 'f16' | 'bf16' | 'i32' | 'i8' | 'u8';
/** Floating-point element types. */
export type FloatDType = 'f32' | 'f16' | 'bf16';
/** Integer element types. */
export type IntDType = 'i32' | 'i8' | 'u8';

/** The typed array that stores elements of dtype `D`; f16 and bf16 store raw bit patterns. */
export type StorageOf<D extends DType> = D extends 'f32'
  ? Float32Array
  : D extends 'f16' | 'bf16'
    ? Uint16Array
    : D extends 'i32'
      ? Int32Array
      : D extends 'i8'
        ? Int8Array
        : Uint8Array;

/** Static facts about a dtype. */
export interface DTypeInfo {
  readonly name: DType;
  /** Bytes per element in storage. */
  readonly bytes: number;
  readonly isFloat: boolean;
  /** Inclusive range of representable integers (integer dtypes only). */
  readonly min: number;
  readonly max: number;
}

export const DTYPES: Readonly<Record<DType, DTypeInfo>> = Object.freeze({
  f32: { name: 'f32', bytes: 4, isFloat: true, min: -Infinity, max: Infinity },
  f16: { name: 'f16', bytes: 2, isFloat: true, min: -Infinity, max: Infinity },
  bf16: { name: 'bf16', bytes: 2, isFloat: true, min: -Infinity, max: Infinity },
  i32: { name: 'i32', bytes: 4, isFloat: false, min: -2147483648, max: 2147483647 },
  i8: { name: 'i8', bytes: 1, isFloat: false, min: -128, max: 127 },
  u8: { name: 'u8', bytes: 1, isFloat: false, min: 0, max: 255 },
});

export const FLOAT_DTYPES: readonly FloatDType[] = ['f32', 'f16', 'bf16'];
export const ALL_DTYPES: readonly DType[] = ['f32', 'f16', 'bf16', 'i32', 'i8', 'u8'];

export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && Object.hasOwn(DTYPES, value);
}

export function isFloatDType(value: unknown): value is FloatDType {
  return value === 'f32' || value === 'f16' || value === 'bf16';
}

/** Allocates zeroed storage for `n` elements of `dtype`. */
export function allocStorage<D extends DType>(dtype: D, n: number): StorageOf<D> {
  switch (dtype) {
    case 'f32':
      return new Float32Array(n) as StorageOf<D>;
    case 'f16':
    case 'bf16':
      return new Uint16Array(n) as StorageOf<D>;
    case 'i32':
      return new Int32Array(n) as StorageOf<D>;
    case 'i8':
      return new Int8Array(n) as StorageOf<D>;
    default:
      return new Uint8Array(n) as StorageOf<D>;
  }
}

// One scratch word for bit casts between float32 and uint32.
const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

/** Raw IEEE-754 bits of `x` rounded to float32. */
export function f32ToBits(x: number): number {
  scratchF32[0] = x;
  return scratchU32[0]!;
}

/** The float32 value with raw bits `bits`. */
export function bitsToF32(bits: number): number {
  scratchU32[0] = bits >>> 0;
  return scratchF32[0]!;
}

/** bf16 bits → the exact float32 value. */
export function bf16BitsToF32(bits: number): number {
  return bitsToF32((bits & 0xffff) << 16);
}

/** float32 bits → bf16 bits, round to nearest even. */
function f32BitsToBf16Bits(bits: number): number {
  if ((bits & 0x7fffffff) > 0x7f800000) {
    // NaN: keep the sign and the top payload bits, force quiet so it cannot round to infinity.
    return ((bits >>> 16) | 0x0040) & 0xffff;
  }
  const roundingBias = 0x7fff + ((bits >>> 16) & 1);
  return ((bits + roundingBias) >>> 16) & 0xffff;
}

/** A number → bf16 bits (via float32), round to nearest even. */
export function f32ToBf16Bits(x: number): number {
  return f32BitsToBf16Bits(f32ToBits(x));
}

/** f16 bits → the exact float32 value (normals, subnormals, ±0, ±inf, NaN). */
export function f16BitsToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Infinity : Number.NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** A number → f16 bits (via float32), round to nearest even; overflow gives ±inf. */
export function f32ToF16Bits(x: number): number {
  const bits = f32ToBits(x);
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  const mant = bits & 0x7fffff;
  if (exp === 0xff) {
    // Inf stays inf; NaN becomes a quiet NaN with the top payload bits kept.
    return mant === 0 ? sign | 0x7c00 : sign | 0x7e00 | (mant >>> 13);
  }
  const e = exp - 127 + 15; // rebias
  if (e >= 0x1f) return sign | 0x7c00; // overflow
  if (e <= 0) {
    // Subnormal f16 (or underflow to zero). The implicit leading 1 joins the mantissa.
    if (e < -10) return sign;
    const full = mant | 0x800000;
    const shift = 14 - e; // 13 to drop f32→f16 mantissa bits, plus 1 - e for the denormal shift
    const half = 1 << (shift - 1);
    const rest = full & ((1 << shift) - 1);
    let m = full >>> shift;
    if (rest > half || (rest === half && (m & 1) === 1)) m += 1;
    return sign | m; // m may carry into the smallest normal: still the right bits
  }
  let h = sign | (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (h & 1) === 1)) h += 1; // carry may round up to inf: correct
  return h;
}

/** Rounds `x` to the nearest value representable in `dtype` (floats) and returns it as a number. */
export function roundToDType(x: number, dtype: FloatDType): number {
  switch (dtype) {
    case 'f32':
      return Math.fround(x);
    case 'bf16':
      return bf16BitsToF32(f32ToBf16Bits(x));
    default:
      return f16BitsToF32(f32ToF16Bits(x));
  }
}

/** Decodes `n` elements of float storage into a new Float32Array (exact for every float dtype). */
export function decodeFloats(storage: Float32Array | Uint16Array, dtype: FloatDType): Float32Array {
  if (dtype === 'f32') return Float32Array.from(storage as Float32Array);
  const bits = storage as Uint16Array;
  const out = new Float32Array(bits.length);
  if (dtype === 'bf16') {
    const outBits = new Uint32Array(out.buffer);
    for (let i = 0; i < bits.length; i++) outBits[i] = bits[i]! << 16;
  } else {
    for (let i = 0; i < bits.length; i++) out[i] = f16BitsToF32(bits[i]!);
  }
  return out;
}

/** Encodes numbers into float storage of `dtype` (rounding via float32, nearest even). */
export function encodeFloats(
  values: ArrayLike<number>,
  dtype: FloatDType,
  out: Float32Array | Uint16Array = dtype === 'f32'
    ? new Float32Array(values.length)
    : new Uint16Array(values.length),
): Float32Array | Uint16Array {
  if (dtype === 'f32') {
    (out as Float32Array).set(values);
    return out;
  }
  const bits = out as Uint16Array;
  if (dtype === 'bf16') {
    // Round the whole array to float32 once, then convert bit patterns without per-element casts.
    const f32 = values instanceof Float32Array ? values : Float32Array.from(values);
    const u32 = new Uint32Array(f32.buffer, f32.byteOffset, f32.length);
    for (let i = 0; i < u32.length; i++) bits[i] = f32BitsToBf16Bits(u32[i]!);
  } else {
    for (let i = 0; i < values.length; i++) bits[i] = f32ToF16Bits(values[i]!);
  }
  return bits;
}
