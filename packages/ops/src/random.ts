/**
 * Seeded random numbers that are bit-identical on every machine and JavaScript engine.
 *
 * The generator is PCG32 (XSH-RR output, 64-bit LCG state), computed with 32-bit integer arithmetic only.
 * Normal deviates use Marsaglia's polar method with a natural log built from IEEE add/mul/div (JavaScript
 * never fuses or reorders them), so no engine-specific `Math.log`/`Math.cos` enters the stream.
 */
import { QkValueError } from './errors.js';

const MULT_HI = 0x5851f42d; // 6364136223846793005 = 0x5851F42D_4C957F2D
const MULT_LO = 0x4c957f2d;
const TWO_POW_32 = 4294967296;

/** Low and high 32-bit words of the 64-bit product a*b (a, b unsigned 32-bit). */
function mul32x32(a: number, b: number, out: [number, number]): void {
  const a0 = a & 0xffff;
  const a1 = a >>> 16;
  const b0 = b & 0xffff;
  const b1 = b >>> 16;
  const p00 = a0 * b0;
  const p01 = a0 * b1;
  const p10 = a1 * b0;
  const mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  out[0] = (((mid & 0xffff) << 16) | (p00 & 0xffff)) >>> 0;
  out[1] = (a1 * b1 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16)) >>> 0;
}

function splitU64(value: number | bigint, op: string, arg: string): [number, number] {
  if (typeof value === 'bigint') {
    if (value < 0n || value >= 1n << 64n)
      throw new QkValueError(op, arg, `must fit in 64 unsigned bits, got ${value}.`);
    return [Number(value & 0xffffffffn), Number(value >> 32n)];
  }
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new QkValueError(op, arg, `must be a non-negative safe integer (or a bigint), got ${value}.`);
  }
  return [value >>> 0, Math.floor(value / TWO_POW_32) >>> 0];
}

// Little-endian check so the float64 exponent can be read portably.
const f64 = new Float64Array(1);
const f64Words = new Uint32Array(f64.buffer);
const HI_WORD = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 1 : 0;
const LN2 = Math.LN2;
const SQRT2 = Math.SQRT2;

/**
 * Natural log of a positive, finite, normal (not subnormal) float64, correct to ~1 ulp, from basic arithmetic
 * alone so it is the same bits everywhere. Only used for normal deviates, where `x` lies in (0, 1) and is never subnormal.
 */
export function portableLog(x: number): number {
  f64[0] = x;
  const hi = f64Words[HI_WORD]!;
  let k = ((hi >>> 20) & 0x7ff) - 1023;
  // Force the exponent field to 0 (bias 1023) to get the mantissa in [1, 2).
  f64Words[HI_WORD] = (hi & 0x800fffff) | 0x3ff00000;
  let m = f64[0]!;
  if (m > SQRT2) {
    m /= 2;
    k += 1;
  }
  const s = (m - 1) / (m + 1);
  const s2 = s * s;
  // atanh series: ln m = 2 (s + s^3/3 + s^5/5 + ...), |s| <= 0.172 so 12 terms reach double precision.
  let sum = 1 / 23;
  for (let d = 21; d >= 1; d -= 2) sum = sum * s2 + 1 / d;
  return k * LN2 + 2 * s * sum;
}

/** A seeded PCG32 stream. Two `Rng`s with the same `seed` and `stream` yield the same numbers everywhere. */
export class Rng {
  #lo = 0;
  #hi = 0;
  readonly #incLo: number;
  readonly #incHi: number;
  #spareNormal: number | undefined;
  readonly #prod: [number, number] = [0, 0];

  /**
   * @param seed initial state, a non-negative safe integer or a bigint below 2^64 (default 0).
   * @param stream selects one of 2^63 independent sequences (default 0).
   */
  constructor(seed: number | bigint = 0, stream: number | bigint = 0) {
    const [seedLo, seedHi] = splitU64(seed, 'Rng', 'seed');
    const [streamLo, streamHi] = splitU64(stream, 'Rng', 'stream');
    // inc = (stream << 1) | 1, modulo 2^64.
    this.#incLo = ((streamLo << 1) | 1) >>> 0;
    this.#incHi = ((streamHi << 1) | (streamLo >>> 31)) >>> 0;
    this.#step();
    this.#add(seedLo, seedHi);
    this.#step();
  }

  #add(lo: number, hi: number): void {
    const sum = this.#lo + lo;
    this.#lo = sum >>> 0;
    this.#hi = (this.#hi + hi + (sum >= TWO_POW_32 ? 1 : 0)) >>> 0;
  }

  #step(): void {
    const lo = this.#lo;
    const hi = this.#hi;
    mul32x32(lo, MULT_LO, this.#prod);
    this.#lo = this.#prod[0];
    this.#hi = (this.#prod[1] + Math.imul(hi, MULT_LO) + Math.imul(lo, MULT_HI)) >>> 0;
    this.#add(this.#incLo, this.#incHi);
  }

  /** The next uniformly distributed unsigned 32-bit integer. */
  nextU32(): number {
    const lo = this.#lo;
    const hi = this.#hi;
    this.#step();
    // xorshifted = ((old >> 18) ^ old) >> 27, truncated to 32 bits; rot = old >> 59.
    const xHi = hi ^ (hi >>> 18);
    const xLo = lo ^ ((lo >>> 18) | (hi << 14));
    const xorshifted = ((xLo >>> 27) | (xHi << 5)) >>> 0;
    const rot = hi >>> 27;
    return ((xorshifted >>> rot) | (xorshifted << ((32 - rot) & 31))) >>> 0;
  }

  /** A uniform float64 in [0, 1) with 32 random bits. */
  nextFloat(): number {
    return this.nextU32() / TWO_POW_32;
  }

  /** A uniform integer in [0, n) without modulo bias. */
  nextInt(n: number): number {
    if (!Number.isInteger(n) || n <= 0 || n > TWO_POW_32) {
      throw new QkValueError('Rng.nextInt', 'n', `must be an integer in [1, 2^32], got ${n}.`);
    }
    const threshold = (TWO_POW_32 - n) % n; // values below this would bias the modulo
    for (;;) {
      const r = this.nextU32();
      if (r >= threshold) return r % n;
    }
  }

  /** A standard normal deviate (mean 0, variance 1). */
  nextNormal(): number {
    const spare = this.#spareNormal;
    if (spare !== undefined) {
      this.#spareNormal = undefined;
      return spare;
    }
    for (;;) {
      const u = 2 * this.nextFloat() - 1;
      const v = 2 * this.nextFloat() - 1;
      const s = u * u + v * v;
      if (s > 0 && s < 1) {
        const factor = Math.sqrt((-2 * portableLog(s)) / s); // sqrt is correctly rounded by IEEE-754
        this.#spareNormal = v * factor;
        return u * factor;
      }
    }
  }
}
