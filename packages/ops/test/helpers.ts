/**
 * Shared test helpers. The float64 oracles in the tests are written here and in each test file independently of
 * the ops under test: they read tensors through `toArray()` (exact decoding) and do plain float64 math.
 */
import { expect } from 'vitest';
import { type FloatDType, QkError, roundToDType, type Shape, Tensor } from '../src/index.js';

/** Sizes that are not powers of two, plus ones at the real Qwen3 widths. */
export const ODD_SIZES = [1, 7, 111, 989, 4097] as const;
export const FLOAT_DTYPES: readonly FloatDType[] = ['f32', 'f16', 'bf16'];

/** Elements of a tensor as float64 (exact for every dtype). */
export function f64(t: Tensor): Float64Array {
  return Float64Array.from(t.toArray());
}

/** A seeded normal tensor; every test draws fresh inputs by passing its own seed. */
export function randn<D extends FloatDType>(shape: Shape, dtype: D, seed: number, std = 1): Tensor<D> {
  return Tensor.randn(shape, { dtype, seed, std });
}

/** Rounds every value of a float64 oracle result to `dtype`, as the op's single final rounding does. */
export function roundAll(values: ArrayLike<number>, dtype: FloatDType): Float64Array {
  return Float64Array.from(values, (v) => roundToDType(v, dtype));
}

/** Asserts `fn` throws a QkError subclass with `code`, and that the message contains every fragment. */
export function expectQkError(
  fn: () => unknown,
  ctor: new (...args: never[]) => QkError,
  code: string,
  ...fragments: string[]
): QkError {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  expect(caught, 'expected the call to throw').toBeInstanceOf(ctor);
  const err = caught as QkError;
  expect(err).toBeInstanceOf(QkError);
  expect(err.code).toBe(code);
  for (const f of fragments) expect(err.message).toContain(f);
  return err;
}

/** Relative L2 error and max-abs of `actual` against a float64 oracle, both finite-checked. */
export function compare(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
): { relL2: number; maxAbs: number } {
  expect(actual.length).toBe(expected.length);
  let d2 = 0;
  let r2 = 0;
  let maxAbs = 0;
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    if (!Number.isFinite(a) || !Number.isFinite(e))
      throw new Error(`non-finite value at ${i}: actual ${a}, expected ${e}`);
    const d = Math.abs(a - e);
    d2 += d * d;
    r2 += e * e;
    maxAbs = Math.max(maxAbs, d);
  }
  return { relL2: r2 > 0 ? Math.sqrt(d2 / r2) : Math.sqrt(d2), maxAbs };
}

/**
 * Tolerances derived from the formats: an op and its oracle that evaluate the same float64 expressions and round
 * once differ elementwise by at most one step of the output grid; relative L2 within the format's precision.
 */
export const MANTISSA_BITS: Record<FloatDType, number> = { f32: 23, f16: 10, bf16: 7 };
const MIN_NORMAL_EXP: Record<FloatDType, number> = { f32: -126, f16: -14, bf16: -126 };
export const REL_L2: Record<FloatDType, number> = { f32: 1e-6, f16: 2 ** -11, bf16: 2 ** -8 };

/** Spacing of the `dtype` grid at magnitude |x| (the subnormal spacing below the smallest normal). */
export function ulpAt(x: number, dtype: FloatDType): number {
  const a = Math.abs(x);
  const e = a === 0 ? MIN_NORMAL_EXP[dtype] : Math.max(Math.floor(Math.log2(a)), MIN_NORMAL_EXP[dtype]);
  return 2 ** (e - MANTISSA_BITS[dtype]);
}

/** Every element within `maxUlps` output steps of the oracle, and the relative L2 error within the format's. */
export function expectNear(
  actual: Tensor,
  expected: ArrayLike<number>,
  dtype: FloatDType,
  maxUlps = 1,
): void {
  const got = f64(actual);
  const { relL2 } = compare(got, expected); // throws on any NaN/inf
  expect(relL2).toBeLessThanOrEqual(REL_L2[dtype]);
  let worst = 0;
  let at = -1;
  for (let i = 0; i < got.length; i++) {
    const a = got[i]!;
    const e = expected[i]!;
    const d = Math.abs(a - e) / ulpAt(Math.max(Math.abs(a), Math.abs(e)), dtype);
    if (d > worst) [worst, at] = [d, i];
  }
  expect(
    worst,
    `worst element at flat index ${at}: got ${got[at]}, expected ${expected[at]}`,
  ).toBeLessThanOrEqual(maxUlps);
}

/**
 * Asserts `t` matches the float64 oracle rounded once to its dtype: every element within 2 output ulps plus
 * `cancellationFloor · max|expected|` (room for dot products and weighted averages that cancel to ~0; 0 makes it
 * a pure 2-ulp bound), and relative L2 ≤ `relTol` for f32. NaN fails.
 */
export function expectMatches(
  t: Tensor,
  oracle: ArrayLike<number>,
  dtype: FloatDType,
  { relTol = 1e-6, cancellationFloor = 1e-9 }: { relTol?: number; cancellationFloor?: number } = {},
): void {
  expect(t.dtype).toBe(dtype);
  const expected = roundAll(oracle, dtype);
  const actual = t.toArray();
  const { relL2 } = compare(actual, expected);
  if (dtype === 'f32') expect(relL2).toBeLessThanOrEqual(relTol);
  let peak = 0;
  for (const e of expected) peak = Math.max(peak, Math.abs(e));
  let worst = 0;
  let worstAt = -1;
  for (let i = 0; i < expected.length; i++) {
    const e = expected[i]!;
    const ratio = Math.abs(actual[i]! - e) / (2 * ulpAt(e, dtype) + cancellationFloor * peak);
    if (!(ratio <= worst)) {
      worst = ratio;
      worstAt = i;
    }
  }
  expect(
    worst,
    `element ${worstAt}: got ${actual[worstAt]}, expected ${expected[worstAt]}`,
  ).toBeLessThanOrEqual(1);
}

/** True when both arrays hold the same values bit for bit (NaN equals NaN, -0 differs from 0). */
export function sameBits(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}
