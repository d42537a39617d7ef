/**
 * Converting a tensor's little-endian bytes between bf16, f16 and f32 storage. Conversions that start from a
 * 16-bit format go through 65536-entry tables, so every element costs one lookup whatever the pair; rounding is
 * to nearest even, via float32, as `@qk/ops` rounds.
 */
import {
  bf16BitsToF32,
  type FloatDType,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  type StorageOf,
} from '@qk/ops';

let f16ToF32Table: Float32Array | undefined;
let bf16ToF16Table: Uint16Array | undefined;
let f16ToBf16Table: Uint16Array | undefined;

function table<T extends Float32Array | Uint16Array>(make: (bits: number) => number, out: T): T {
  for (let bits = 0; bits < 65536; bits++) out[bits] = make(bits);
  return out;
}

/** View `bytes` as elements of `size` bytes, copying only when the view would be misaligned. */
function view<T>(
  bytes: Uint8Array,
  size: number,
  ctor: new (b: ArrayBufferLike, o: number, n: number) => T,
): T {
  const aligned = bytes.byteOffset % size === 0 ? bytes : bytes.slice();
  return new ctor(aligned.buffer, aligned.byteOffset, aligned.byteLength / size);
}

/** float32 bit patterns → bf16 bit patterns, nearest even; NaN stays a (quiet) NaN instead of rounding to inf. */
function f32BitsToBf16(src: Uint32Array, out: Uint16Array): void {
  for (let i = 0; i < src.length; i++) {
    const bits = src[i]!;
    out[i] =
      (bits & 0x7fffffff) > 0x7f800000
        ? (bits >>> 16) | 0x0040
        : (bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16;
  }
}

/**
 * Storage of dtype `to` for the elements in `bytes` (of dtype `from`). When the dtypes agree the result views the
 * same memory (no copy), so pass bytes that nothing else will modify.
 */
export function convertBytes<D extends FloatDType>(bytes: Uint8Array, from: FloatDType, to: D): StorageOf<D> {
  if (from === 'f32') {
    const src = view(bytes, 4, Float32Array);
    if (to === 'f32') return src as StorageOf<D>;
    const out = new Uint16Array(src.length);
    if (to === 'bf16') f32BitsToBf16(new Uint32Array(src.buffer, src.byteOffset, src.length), out);
    else for (let i = 0; i < src.length; i++) out[i] = f32ToF16Bits(src[i]!);
    return out as StorageOf<D>;
  }
  const src = view(bytes, 2, Uint16Array);
  if (from === to) return src as StorageOf<D>;
  if (to === 'f32') {
    const out = new Float32Array(src.length);
    if (from === 'bf16') {
      // bf16 is the top half of a float32: shifting the bits is exact.
      const outBits = new Uint32Array(out.buffer);
      for (let i = 0; i < src.length; i++) outBits[i] = src[i]! << 16;
    } else {
      f16ToF32Table ??= table(f16BitsToF32, new Float32Array(65536));
      for (let i = 0; i < src.length; i++) out[i] = f16ToF32Table[src[i]!]!;
    }
    return out as StorageOf<D>;
  }
  const lut =
    from === 'bf16'
      ? (bf16ToF16Table ??= table((b) => f32ToF16Bits(bf16BitsToF32(b)), new Uint16Array(65536)))
      : (f16ToBf16Table ??= table((b) => f32ToBf16Bits(f16BitsToF32(b)), new Uint16Array(65536)));
  const out = new Uint16Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = lut[src[i]!]!;
  return out as StorageOf<D>;
}
