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
