/**
 * Conversions between float32 and the 16-bit float formats. Every expected bit pattern below is derived by hand
 * from the IEEE-754 layouts (bf16: 1 sign, 8 exponent, 7 mantissa bits; f16: 1 sign, 5 exponent, 10 mantissa
 * bits), and the bulk checks compare against an independent float64 rounding oracle written in this file.
 */
import { describe, expect, it } from 'vitest';
import { decodeFloats, encodeFloats } from '../src/dtype.js';
import {
  ALL_DTYPES,
  bf16BitsToF32,
  DTYPES,
  FLOAT_DTYPES,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  isDType,
  isFloatDType,
  roundToDType,
} from '../src/index.js';

// ---------------------------------------------------------------------------------------------------------------
// Independent helpers: bit casts through a DataView, a format description, a decoder and a rounding oracle.

const view = new DataView(new ArrayBuffer(4));

/** The float32 with raw bits `bits` (read through a DataView, not the code under test). */
function f32FromBits(bits: number): number {
  view.setUint32(0, bits >>> 0);
  return view.getFloat32(0);
}

interface Format {
  name: string;
  expBits: number;
  mantBits: number;
}

const BF16: Format = { name: 'bf16', expBits: 8, mantBits: 7 };
const F16: Format = { name: 'f16', expBits: 5, mantBits: 10 };

function bias(f: Format): number {
  return 2 ** (f.expBits - 1) - 1;
}

function expMask(f: Format): number {
  return (2 ** f.expBits - 1) * 2 ** f.mantBits;
}

function isNaNPattern(bits: number, f: Format): boolean {
  const mant = bits & (2 ** f.mantBits - 1);
  return (bits & expMask(f)) === expMask(f) && mant !== 0;
}

/** The exact value of a 16-bit pattern, from the textbook formula, in float64. */
function decodeOracle(bits: number, f: Format): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> f.mantBits) & (2 ** f.expBits - 1);
  const mant = bits & (2 ** f.mantBits - 1);
  if (exp === 2 ** f.expBits - 1) return mant === 0 ? sign * Infinity : Number.NaN;
  const emin = 1 - bias(f);
  if (exp === 0) return sign * mant * 2 ** (emin - f.mantBits);
  return sign * (1 + mant / 2 ** f.mantBits) * 2 ** (exp - bias(f));
}

/**
 * Rounds a float32 value `x` to the nearest value of format `f` (ties to the even mantissa) and returns its bits.
 * Works in float64: `|x| / quantum` is exact because x has 24 significant bits and the quantum is a power of 2.
 */
function roundOracle(x: number, f: Format): number {
  if (Number.isNaN(x)) return Number.NaN;
  const signBit = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  const infBits = signBit | expMask(f);
  if (a === Infinity) return infBits;
  if (a === 0) return signBit;
  let e = Math.floor(Math.log2(a));
  while (2 ** e > a) e--;
  while (2 ** (e + 1) <= a) e++;
  const emin = 1 - bias(f);
  if (e < emin) e = emin; // subnormal range: fixed quantum
  const quantum = 2 ** (e - f.mantBits);
  const n = a / quantum;
  let r = Math.floor(n);
  const frac = n - r;
  if (frac > 0.5 || (frac === 0.5 && r % 2 === 1)) r += 1;
  if (r === 0) return signBit;
  let biased = e + bias(f);
  if (r === 2 ** (f.mantBits + 1)) {
    // rounding carried into the next binade
    r /= 2;
    biased += 1;
  }
  if (r < 2 ** f.mantBits) return signBit | r; // subnormal: exponent field 0
  if (biased >= 2 ** f.expBits - 1) return infBits; // overflow
  return signBit | (biased * 2 ** f.mantBits) | (r - 2 ** f.mantBits);
}

/** xorshift32: a tiny independent generator for test inputs. */
function xorshift32(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}

const hex = (n: number) => `0x${n.toString(16).padStart(4, '0')}`;

// ---------------------------------------------------------------------------------------------------------------

describe('oracle sanity', () => {
  it('the test oracle itself reproduces the hand-derived patterns', () => {
    expect(roundOracle(1, BF16)).toBe(0x3f80);
    expect(roundOracle(f32FromBits(0x3f808000), BF16)).toBe(0x3f80);
    expect(roundOracle(f32FromBits(0x3f818000), BF16)).toBe(0x3f82);
    expect(roundOracle(65520, F16)).toBe(0x7c00);
    expect(roundOracle(3 * 2 ** -25, F16)).toBe(0x0002);
    expect(roundOracle(f32FromBits(0x00010000), BF16)).toBe(0x0001);
    expect(decodeOracle(0x7bff, F16)).toBe(65504);
  });
});

describe('bf16', () => {
  it('encodes exactly representable values to their hand-derived patterns', () => {
    expect(f32ToBf16Bits(1)).toBe(0x3f80); // f32 0x3F800000
    expect(f32ToBf16Bits(-2)).toBe(0xc000); // f32 0xC0000000
    expect(f32ToBf16Bits(0.5)).toBe(0x3f00);
    expect(f32ToBf16Bits(3)).toBe(0x4040); // 1.5·2^1: exp 128, mantissa 0b1000000
    expect(f32ToBf16Bits(0)).toBe(0x0000);
    expect(f32ToBf16Bits(-0)).toBe(0x8000);
    expect(f32ToBf16Bits(Infinity)).toBe(0x7f80);
    expect(f32ToBf16Bits(-Infinity)).toBe(0xff80);
  });

  it('decodes hand-derived patterns', () => {
    expect(bf16BitsToF32(0x3f80)).toBe(1);
    expect(bf16BitsToF32(0xc000)).toBe(-2);
    expect(bf16BitsToF32(0x7f80)).toBe(Infinity);
    expect(bf16BitsToF32(0xff80)).toBe(-Infinity);
    expect(Object.is(bf16BitsToF32(0x8000), -0)).toBe(true);
    expect(bf16BitsToF32(0x0001)).toBe(2 ** -133); // f32 bits 0x00010000 = 2^16 · 2^-149
    expect(bf16BitsToF32(0x0080)).toBe(2 ** -126); // smallest normal
    expect(bf16BitsToF32(0x7f7f)).toBe((2 - 2 ** -7) * 2 ** 127); // largest finite
  });

  it('keeps NaN a NaN, in both directions', () => {
    expect(isNaNPattern(f32ToBf16Bits(Number.NaN), BF16)).toBe(true);
    expect(Number.isNaN(bf16BitsToF32(f32ToBf16Bits(Number.NaN)))).toBe(true);
    for (const bits of [0x7f81, 0x7fc0, 0x7fff, 0xff81, 0xffc0, 0xffff]) {
      expect(Number.isNaN(bf16BitsToF32(bits)), hex(bits)).toBe(true);
    }
    // A signalling-looking f32 NaN whose payload sits only in the low 16 bits must not truncate to infinity.
    expect(isNaNPattern(f32ToBf16Bits(f32FromBits(0x7f800001)), BF16)).toBe(true);
  });

  it('rounds ties to the even mantissa', () => {
    // 0x3F808000 is exactly halfway between bf16 0x3F80 (even) and 0x3F81 (odd).
    expect(f32ToBf16Bits(f32FromBits(0x3f808000))).toBe(0x3f80);
    // 0x3F818000 is halfway between 0x3F81 (odd) and 0x3F82 (even).
    expect(f32ToBf16Bits(f32FromBits(0x3f818000))).toBe(0x3f82);
    expect(f32ToBf16Bits(f32FromBits(0xbf808000))).toBe(0xbf80);
    expect(f32ToBf16Bits(f32FromBits(0xbf818000))).toBe(0xbf82);
  });

  it('rounds just above half up and just below half down', () => {
    expect(f32ToBf16Bits(f32FromBits(0x3f808001))).toBe(0x3f81);
    expect(f32ToBf16Bits(f32FromBits(0x3f807fff))).toBe(0x3f80);
    expect(f32ToBf16Bits(f32FromBits(0x3f80ffff))).toBe(0x3f81);
    expect(f32ToBf16Bits(f32FromBits(0x3f81ffff))).toBe(0x3f82);
    // carry through the mantissa into the exponent: 0x3FFFFFFF → 2.0
    expect(f32ToBf16Bits(f32FromBits(0x3fffffff))).toBe(0x4000);
  });

  it('overflows to infinity when rounding passes the largest finite bf16', () => {
    expect(f32ToBf16Bits(f32FromBits(0x7f7fffff))).toBe(0x7f80); // largest finite f32
    expect(f32ToBf16Bits(f32FromBits(0xff7fffff))).toBe(0xff80);
    // halfway between 0x7F7F (odd) and infinity: ties to even means infinity
    expect(f32ToBf16Bits(f32FromBits(0x7f7f8000))).toBe(0x7f80);
    expect(f32ToBf16Bits(f32FromBits(0x7f7f7fff))).toBe(0x7f7f);
  });

  it('maps f32 subnormals to bf16 subnormals and keeps the sign of zero', () => {
    expect(f32ToBf16Bits(f32FromBits(0x00010000))).toBe(0x0001);
    expect(f32ToBf16Bits(f32FromBits(0x80010000))).toBe(0x8001);
    expect(f32ToBf16Bits(f32FromBits(0x00008000))).toBe(0x0000); // tie between 0 (even) and 0x0001
    expect(f32ToBf16Bits(f32FromBits(0x00018000))).toBe(0x0002); // tie between 0x0001 and 0x0002 (even)
    expect(f32ToBf16Bits(f32FromBits(0x00000001))).toBe(0x0000); // smallest f32 subnormal underflows
    expect(f32ToBf16Bits(f32FromBits(0x80000001))).toBe(0x8000); // ... to a signed zero
    expect(f32ToBf16Bits(f32FromBits(0x007fffff))).toBe(0x0080); // largest subnormal rounds to smallest normal
    expect(f32ToBf16Bits(-0)).toBe(0x8000);
  });

  it('rounds a float64 argument to float32 first, as documented', () => {
    // 1 + 2^-8 + 2^-30 rounds to f32 1 + 2^-8 (2^-30 is below half an f32 ulp), which is a bf16 tie → 1.0.
    expect(f32ToBf16Bits(1 + 2 ** -8 + 2 ** -30)).toBe(0x3f80);
  });
});

describe('f16', () => {
  it('encodes hand-derived patterns', () => {
    expect(f32ToF16Bits(1)).toBe(0x3c00);
    expect(f32ToF16Bits(-2)).toBe(0xc000);
    expect(f32ToF16Bits(65504)).toBe(0x7bff); // (2 - 2^-10) · 2^15, the largest finite f16
    expect(f32ToF16Bits(65519)).toBe(0x7bff); // below the midpoint 65520
    expect(f32ToF16Bits(65520)).toBe(0x7c00); // midpoint: 0x7BFF is odd, so ties-to-even overflows
    expect(f32ToF16Bits(-65520)).toBe(0xfc00);
    expect(f32ToF16Bits(1 / 3)).toBe(0x3555);
    expect(f32ToF16Bits(0)).toBe(0x0000);
    expect(f32ToF16Bits(-0)).toBe(0x8000);
    expect(f32ToF16Bits(Infinity)).toBe(0x7c00);
    expect(f32ToF16Bits(-Infinity)).toBe(0xfc00);
    expect(f32ToF16Bits(f32FromBits(0x7f7fffff))).toBe(0x7c00);
  });

  it('handles subnormals and their ties', () => {
    expect(f32ToF16Bits(2 ** -24)).toBe(0x0001); // smallest subnormal
    expect(f32ToF16Bits(2 ** -25)).toBe(0x0000); // tie between 0 (even) and 0x0001
    expect(f32ToF16Bits(-(2 ** -25))).toBe(0x8000);
    expect(f32ToF16Bits(2 ** -25 + 2 ** -40)).toBe(0x0001); // just above the tie
    expect(f32ToF16Bits(3 * 2 ** -25)).toBe(0x0002); // 1.5 quanta: tie → 2 (even)
    expect(f32ToF16Bits(5 * 2 ** -25)).toBe(0x0002); // 2.5 quanta: tie → 2 (even)
    expect(f32ToF16Bits(2 ** -26)).toBe(0x0000);
    expect(f32ToF16Bits(1023 * 2 ** -24)).toBe(0x03ff); // largest subnormal
    expect(f32ToF16Bits(1023.5 * 2 ** -24)).toBe(0x0400); // tie between 0x03FF and 0x0400 (even) → normal
    expect(f32ToF16Bits(2 ** -14)).toBe(0x0400); // smallest normal
    expect(f32ToF16Bits(f32FromBits(0x00000001))).toBe(0x0000); // f32 subnormal underflows
  });

  it('rounds normal ties to the even mantissa', () => {
    expect(f32ToF16Bits(1 + 2 ** -11)).toBe(0x3c00);
    expect(f32ToF16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02);
    expect(f32ToF16Bits(1 + 2 ** -11 + 2 ** -20)).toBe(0x3c01);
    expect(f32ToF16Bits(2 - 2 ** -12)).toBe(0x4000); // carry into the exponent
  });

  it('decodes hand-derived patterns', () => {
    expect(f16BitsToF32(0x3c00)).toBe(1);
    expect(f16BitsToF32(0x7bff)).toBe(65504);
    expect(f16BitsToF32(0x0001)).toBe(2 ** -24);
    expect(f16BitsToF32(0x03ff)).toBe(1023 * 2 ** -24);
    expect(f16BitsToF32(0x0400)).toBe(2 ** -14);
    expect(f16BitsToF32(0x3555)).toBe(1365 / 4096);
    expect(f16BitsToF32(0x7c00)).toBe(Infinity);
    expect(f16BitsToF32(0xfc00)).toBe(-Infinity);
    expect(Object.is(f16BitsToF32(0x8000), -0)).toBe(true);
    for (const bits of [0x7c01, 0x7e00, 0x7fff, 0xfc01, 0xffff]) {
      expect(Number.isNaN(f16BitsToF32(bits)), hex(bits)).toBe(true);
    }
  });

  it('encodes NaN with an all-ones exponent and a non-zero mantissa', () => {
    const bits = f32ToF16Bits(Number.NaN);
    expect(bits & 0x7c00).toBe(0x7c00);
    expect(bits & 0x03ff).not.toBe(0);
    // payload only in low f32 bits must not become infinity
    expect(isNaNPattern(f32ToF16Bits(f32FromBits(0x7f800001)), F16)).toBe(true);
    expect(isNaNPattern(f32ToF16Bits(f32FromBits(0xff800001)), F16)).toBe(true);
  });
});

describe('exhaustive 16-bit round trips', () => {
  const formats = [
    { f: BF16, decode: bf16BitsToF32, encode: f32ToBf16Bits },
    { f: F16, decode: f16BitsToF32, encode: f32ToF16Bits },
  ];
  for (const { f, decode, encode } of formats) {
    it(`${f.name}: every one of the 65536 patterns decodes to the formula value and re-encodes to itself`, () => {
      const bad: string[] = [];
      for (let bits = 0; bits < 0x10000; bits++) {
        const value = decode(bits);
        if (isNaNPattern(bits, f)) {
          if (!Number.isNaN(value) || !isNaNPattern(encode(value), f)) bad.push(`${hex(bits)}: NaN lost`);
          continue;
        }
        const back = encode(value);
        if (!Object.is(value, decodeOracle(bits, f)) || back !== bits)
          bad.push(`${hex(bits)} → ${value} → ${hex(back)}`);
      }
      expect(bad.slice(0, 10)).toEqual([]);
    });
  }
});

describe('against the independent rounding oracle', () => {
  const formats = [
    { f: BF16, encode: f32ToBf16Bits },
    { f: F16, encode: f32ToF16Bits },
  ];
  for (const { f, encode } of formats) {
    it(`${f.name}: random float32 bit patterns (all exponents) and values near the format's range`, () => {
      const next = xorshift32(f === BF16 ? 0x9e3779b9 : 0x85ebca6b);
      const inputs: number[] = [];
      // 1) uniformly random bit patterns: every binade, subnormals included
      for (let i = 0; i < 40_000; i++) inputs.push(f32FromBits(next()));
      // 2) exponents around the target's normal/subnormal/overflow range (f32 biased exponent 95..150)
      for (let i = 0; i < 40_000; i++) {
        const exp = 95 + (next() % 56);
        inputs.push(f32FromBits((next() & 0x807fffff) | (exp << 23)));
      }
      // 3) exact ties and near-ties for the target's mantissa width
      const drop = 23 - f.mantBits; // f32 mantissa bits below the target's last bit
      for (let i = 0; i < 20_000; i++) {
        const inRange = (next() & 0x807fffff) | ((95 + (next() % 56)) << 23);
        const base = (i % 2 === 0 ? next() : inRange) & ~((1 << drop) - 1);
        const tweak = [0, 1, -1][i % 3]!;
        inputs.push(f32FromBits((base | (1 << (drop - 1))) + tweak));
      }
      // 4) ties and near-ties in the target's subnormal range: (k + 1/2) quanta of the smallest subnormal
      const quantum = 2 ** (1 - bias(f) - f.mantBits);
      for (let i = 0; i < 4_000; i++) {
        const k = next() % 2 ** (f.mantBits + 1);
        const sign = i % 2 === 0 ? 1 : -1;
        inputs.push(sign * (k + 0.5) * quantum, sign * (k + 0.5 + 2 ** -10) * quantum, sign * k * quantum);
      }
      let checked = 0;
      const bad: string[] = [];
      for (const x of inputs) {
        if (Number.isNaN(x)) {
          if (!isNaNPattern(encode(x), f)) bad.push('NaN lost');
          continue;
        }
        checked++;
        const got = encode(x);
        const want = roundOracle(x, f);
        if (got !== want) bad.push(`${x}: got ${hex(got)}, want ${hex(want)}`);
      }
      expect(bad.slice(0, 10)).toEqual([]);
      expect(checked).toBeGreaterThan(90_000);
    });
  }
});

describe('roundToDType', () => {
  it('rounds to the nearest value of each float dtype', () => {
    expect(roundToDType(1 / 3, 'f32')).toBe(Math.fround(1 / 3));
    // bf16 1/3: f32 0x3EAAAAAB → 0x3EAB = (1 + 43/128) / 4
    expect(roundToDType(1 / 3, 'bf16')).toBe(171 / 512);
    // f16 1/3: 0x3555 = (1 + 341/1024) / 4
    expect(roundToDType(1 / 3, 'f16')).toBe(1365 / 4096);
    expect(roundToDType(65520, 'f16')).toBe(Infinity);
    expect(roundToDType(65519, 'f16')).toBe(65504);
    expect(roundToDType(2 ** -25, 'f16')).toBe(0);
    expect(Object.is(roundToDType(-(2 ** -25), 'f16'), -0)).toBe(true);
    expect(roundToDType(1 + 2 ** -8, 'bf16')).toBe(1);
    expect(roundToDType(1 + 3 * 2 ** -8, 'bf16')).toBe(1 + 2 ** -6);
    expect(Number.isNaN(roundToDType(Number.NaN, 'bf16'))).toBe(true);
    expect(Number.isNaN(roundToDType(Number.NaN, 'f16'))).toBe(true);
  });

  it('agrees with the oracle for random values of every float dtype', () => {
    const next = xorshift32(12345);
    for (let i = 0; i < 5000; i++) {
      const x = (next() / 2 ** 32 - 0.5) * 2 ** ((next() % 40) - 20);
      const x32 = Math.fround(x);
      expect(roundToDType(x, 'f32')).toBe(x32);
      expect(roundToDType(x, 'bf16')).toBe(decodeOracle(roundOracle(x32, BF16), BF16));
      expect(roundToDType(x, 'f16')).toBe(decodeOracle(roundOracle(x32, F16), F16));
    }
  });
});

describe('decodeFloats / encodeFloats', () => {
  it('encodes arrays to the same patterns as the scalar converters', () => {
    const values = [1, -2, 1 / 3, 65520, 2 ** -25, 3 * 2 ** -25, -0, Infinity, f32FromBits(0x3f808000)];
    const bf = encodeFloats(values, 'bf16');
    expect(bf).toBeInstanceOf(Uint16Array);
    expect(Array.from(bf)).toEqual(values.map((v) => roundOracle(Math.fround(v), BF16)));
    const h = encodeFloats(values, 'f16');
    expect(h).toBeInstanceOf(Uint16Array);
    expect(Array.from(h)).toEqual(values.map((v) => roundOracle(Math.fround(v), F16)));
    const f = encodeFloats(values, 'f32');
    expect(f).toBeInstanceOf(Float32Array);
    expect(Array.from(f)).toEqual(values.map((v) => Math.fround(v)));
  });

  it('encodes Float32Array inputs, including subarrays with a byte offset, and writes into `out`', () => {
    const backing = Float32Array.from([9, 1, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 9]);
    const sub = backing.subarray(1, 4);
    expect(Array.from(encodeFloats(sub, 'bf16'))).toEqual([0x3f80, 0x3f80, 0x3f82]);
    const out = new Uint16Array(3);
    expect(encodeFloats(sub, 'bf16', out)).toBe(out);
    expect(Array.from(out)).toEqual([0x3f80, 0x3f80, 0x3f82]);
    const outF = new Float32Array(3);
    expect(encodeFloats(sub, 'f32', outF)).toBe(outF);
    expect(Array.from(outF)).toEqual(Array.from(sub));
  });

  it('decodes exactly and returns new storage', () => {
    const bits = Uint16Array.from([0x3f80, 0xc000, 0x0001, 0x7f80, 0x8000]);
    const bfOut = decodeFloats(bits, 'bf16');
    expect(Array.from(bfOut)).toEqual([1, -2, 2 ** -133, Infinity, -0]);
    expect(Object.is(bfOut[4], -0)).toBe(true);
    const hbits = Uint16Array.from([0x3c00, 0x7bff, 0x0001, 0xfc00, 0x3555]);
    expect(Array.from(decodeFloats(hbits, 'f16'))).toEqual([1, 65504, 2 ** -24, -Infinity, 1365 / 4096]);
    const f = Float32Array.from([1, 2, 3]);
    const copy = decodeFloats(f, 'f32');
    expect(copy).not.toBe(f);
    copy[0] = 7;
    expect(f[0]).toBe(1);
  });

  it('decodes every pattern like the scalar decoders', () => {
    const all = new Uint16Array(0x10000);
    for (let i = 0; i < all.length; i++) all[i] = i;
    const bf = decodeFloats(all, 'bf16');
    const h = decodeFloats(all, 'f16');
    let failures = 0;
    for (let i = 0; i < all.length; i++) {
      if (!Object.is(bf[i]!, Math.fround(decodeOracle(i, BF16)))) failures++;
      if (!Object.is(h[i]!, Math.fround(decodeOracle(i, F16)))) failures++;
    }
    expect(failures).toBe(0);
  });
});

describe('DTYPES table', () => {
  it('lists storage bytes and integer ranges', () => {
    const bytes = Object.fromEntries(ALL_DTYPES.map((d) => [d, DTYPES[d].bytes]));
    expect(bytes).toEqual({ f32: 4, f16: 2, bf16: 2, i32: 4, i8: 1, u8: 1 });
    expect([DTYPES.i32.min, DTYPES.i32.max]).toEqual([-(2 ** 31), 2 ** 31 - 1]);
    expect([DTYPES.i8.min, DTYPES.i8.max]).toEqual([-128, 127]);
    expect([DTYPES.u8.min, DTYPES.u8.max]).toEqual([0, 255]);
    for (const d of ALL_DTYPES) {
      expect(DTYPES[d].name).toBe(d);
      expect(DTYPES[d].isFloat).toBe(FLOAT_DTYPES.includes(d as never));
    }
    expect(Object.isFrozen(DTYPES)).toBe(true);
  });

  it('recognises dtype names', () => {
    expect([...FLOAT_DTYPES].sort()).toEqual(['bf16', 'f16', 'f32']);
    expect([...ALL_DTYPES].sort()).toEqual(['bf16', 'f16', 'f32', 'i32', 'i8', 'u8']);
    for (const d of ALL_DTYPES) expect(isDType(d)).toBe(true);
    for (const d of ['f64', 'float32', '', 'toString', 'constructor', 1, null, undefined]) {
      expect(isDType(d)).toBe(false);
      expect(isFloatDType(d)).toBe(false);
    }
    expect(isFloatDType('bf16')).toBe(true);
    expect(isFloatDType('i8')).toBe(false);
  });
});
