/**
 * rmsnormLinear against a float64 oracle written here: h = x·g / sqrt(mean(x²) + eps) per row, rounded to the dtype
 * (the hand-over between the two ops), then y = h · Wᵀ in float64, rounded once.
 */
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_RMS_EPS,
  type FloatDType,
  QkDisposedError,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  rmsnormLinear,
  roundToDType,
  type Shape,
  Tensor,
} from '../src/index.js';
import { compare, expectQkError, FLOAT_DTYPES, f64, ODD_SIZES, REL_L2, randn, ulpAt } from './helpers.js';

// ---------------------------------------------------------------------------------------------------------
// Oracle and tolerances.
// ---------------------------------------------------------------------------------------------------------

/**
 * float64 oracle over rows of k: the normalised row (rounded to `dtype` when `roundHidden`), then its dot product
 * with every weight row, rounded to `dtype`.
 */
function oracle(
  x: Float64Array,
  g: Float64Array,
  w: Float64Array,
  k: number,
  n: number,
  eps: number,
  dtype: FloatDType,
  roundHidden = true,
): Float64Array {
  const rows = k === 0 ? 0 : x.length / k;
  const y = new Float64Array(rows * n);
  for (let r = 0; r < rows; r++) {
    let sq = 0;
    for (let i = 0; i < k; i++) sq += x[r * k + i]! ** 2;
    const scale = 1 / Math.sqrt(sq / k + eps);
    const h = new Float64Array(k);
    for (let i = 0; i < k; i++) {
      const v = x[r * k + i]! * scale * g[i]!;
      h[i] = roundHidden ? roundToDType(v, dtype) : v;
    }
    for (let o = 0; o < n; o++) {
      let s = 0;
      for (let i = 0; i < k; i++) s += h[i]! * w[o * k + i]!;
      y[r * n + o] = roundToDType(s, dtype);
    }
  }
  return y;
}

/**
 * Within one output step of the oracle everywhere, and relative L2 within the format's rounding. The op and the
 * oracle both sum in float64 but in different orders, which can move a hidden value across a rounding boundary
 * (rarely) and so one output by a step.
 */
function expectNear(actual: Tensor, expected: Float64Array, dtype: FloatDType): void {
  const got = f64(actual);
  const { relL2 } = compare(got, expected);
  expect(relL2).toBeLessThanOrEqual(REL_L2[dtype]);
  let worst = 0;
  let at = -1;
  for (let i = 0; i < got.length; i++) {
    const d =
      Math.abs(got[i]! - expected[i]!) / ulpAt(Math.max(Math.abs(got[i]!), Math.abs(expected[i]!)), dtype);
    if (d > worst) [worst, at] = [d, i];
  }
  expect(worst, `worst element ${at}: got ${got[at]}, expected ${expected[at]}`).toBeLessThanOrEqual(1);
}

function weights<D extends FloatDType>(n: number, k: number, dtype: D, seed: number): Tensor<D> {
  const a = Math.sqrt(3 / Math.max(k, 1));
  return Tensor.rand([n, k], { dtype, seed, low: -a, high: a });
}

function gains<D extends FloatDType>(k: number, dtype: D, seed: number): Tensor<D> {
  return Tensor.randn([k], { dtype, seed, mean: 1, std: 0.5 });
}

const CASES = FLOAT_DTYPES.flatMap((dtype, di) =>
  ODD_SIZES.flatMap((k, ki) =>
    [1, 7, 111].map((n, ni) => ({ dtype, k, n, seed: 30_000 + di * 1000 + ki * 10 + ni })),
  ),
);

// ---------------------------------------------------------------------------------------------------------
describe('rmsnormLinear', () => {
  it.each(CASES)('$dtype K=$k N=$n, 3 rows: matches the float64 oracle', ({ dtype, k, n, seed }) => {
    const x = randn([3, k], dtype, seed);
    const g = gains(k, dtype, seed + 1);
    const w = weights(n, k, dtype, seed + 2);
    const y = rmsnormLinear(x, g, w);
    expect(y.shape).toEqual([3, n]);
    expect(y.dtype).toBe(dtype);
    expectNear(y, oracle(f64(x), f64(g), f64(w), k, n, DEFAULT_RMS_EPS, dtype), dtype);
  });

  it.each(FLOAT_DTYPES)('%s: keeps leading axes and honours eps', (dtype) => {
    const seed = 31_000 + FLOAT_DTYPES.indexOf(dtype) * 10;
    // Small activations make eps matter: mean(x²) ≈ 1e-4 against eps = 1e-3.
    const x = randn([2, 3, 33], dtype, seed, 1e-2);
    const g = gains(33, dtype, seed + 1);
    const w = weights(5, 33, dtype, seed + 2);
    const y = rmsnormLinear(x, g, w, { eps: 1e-3 });
    expect(y.shape).toEqual([2, 3, 5]);
    expectNear(y, oracle(f64(x), f64(g), f64(w), 33, 5, 1e-3, dtype), dtype);
  });

  it('rounds the normalised activations to the dtype before the product', () => {
    // bf16: x = [1, 1 + 2^-7] normalises to about [0.99611, 1.00392], which bf16 rounds to [255/256, 1]. With
    // W = [[1, -1]] the difference of the rounded values is -2^-8, that of the exact ones about -0.00778.
    const dtype = 'bf16';
    const x = Tensor.fromArray([[1, 1 + 2 ** -7]], { dtype });
    const g = Tensor.fromArray([1, 1], { dtype });
    const w = Tensor.fromArray([[1, -1]], { dtype });
    const rounded = oracle(f64(x), f64(g), f64(w), 2, 1, DEFAULT_RMS_EPS, dtype);
    const unrounded = oracle(f64(x), f64(g), f64(w), 2, 1, DEFAULT_RMS_EPS, dtype, false);
    expect(rounded[0]).toBe(-(2 ** -8));
    expect(unrounded[0]).not.toBe(rounded[0]);
    expect(rmsnormLinear(x, g, w).toArray()).toEqual([rounded[0]]);
  });

  it('writes into `out` and returns it', () => {
    const x = randn([2, 16], 'f16', 31_500);
    const g = gains(16, 'f16', 31_501);
    const w = weights(3, 16, 'f16', 31_502);
    const out = Tensor.empty([2, 3], 'f16');
    expect(rmsnormLinear(x, g, w, { out })).toBe(out);
    expectNear(out, oracle(f64(x), f64(g), f64(w), 16, 3, DEFAULT_RMS_EPS, 'f16'), 'f16');
    expectQkError(
      () => rmsnormLinear(x, g, w, { out: Tensor.empty([2, 4], 'f16') }),
      QkShapeError,
      'QK_SHAPE',
      '"out"',
    );
    expectQkError(
      () => rmsnormLinear(x, g, w, { out: Tensor.empty([2, 3], 'f32') }),
      QkDtypeError,
      'QK_DTYPE',
      '"out"',
    );
  });

  it('validates its arguments', () => {
    const x = randn([3, 8], 'f32', 31_700);
    const g = gains(8, 'f32', 31_701);
    const w = weights(4, 8, 'f32', 31_702);
    const ints = (shape: Shape) =>
      Tensor.fromArray(
        Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => i + 1),
        { shape, dtype: 'i32' },
      ) as unknown as Tensor<'f32'>;
    expectQkError(() => rmsnormLinear(ints([3, 8]), g, w), QkDtypeError, 'QK_DTYPE', 'rmsnormLinear:', '"x"');
    expectQkError(
      () => rmsnormLinear(x, ints([8]), w),
      QkDtypeError,
      'QK_DTYPE',
      'rmsnormLinear:',
      '"normWeight"',
    );
    expectQkError(
      () => rmsnormLinear(x, g, ints([4, 8])),
      QkDtypeError,
      'QK_DTYPE',
      'rmsnormLinear:',
      '"weight"',
    );
    expectQkError(
      () => rmsnormLinear(x, gains(8, 'bf16', 31_703) as unknown as Tensor<'f32'>, w),
      QkDtypeError,
      'QK_DTYPE',
      '"normWeight"',
      'bf16',
    );
    expectQkError(
      () => rmsnormLinear(x, g, weights(4, 8, 'f16', 31_704) as unknown as Tensor<'f32'>),
      QkDtypeError,
      'QK_DTYPE',
      '"weight"',
      'f16',
    );
    expectQkError(
      () => rmsnormLinear(x, gains(7, 'f32', 31_705), w),
      QkShapeError,
      'QK_SHAPE',
      '"normWeight"',
    );
    expectQkError(
      () => rmsnormLinear(x, g, weights(4, 9, 'f32', 31_706)),
      QkShapeError,
      'QK_SHAPE',
      '"weight"',
    );
    expectQkError(
      () => rmsnormLinear(x, g, randn([32], 'f32', 31_707)),
      QkShapeError,
      'QK_SHAPE',
      '"weight"',
    );
    expectQkError(() => rmsnormLinear(Tensor.fromArray(2), g, w), QkShapeError, 'QK_SHAPE', '"x"');
    for (const eps of [0, -1e-6, Number.NaN, Number.POSITIVE_INFINITY, '1e-6']) {
      expectQkError(
        () => rmsnormLinear(x, g, w, { eps: eps as number }),
        QkValueError,
        'QK_VALUE',
        'rmsnormLinear:',
        '"eps"',
      );
    }
    const gone = randn([3, 8], 'f32', 31_708);
    gone.dispose();
    expectQkError(() => rmsnormLinear(gone, g, w), QkDisposedError, 'QK_DISPOSED', 'rmsnormLinear');
  });
});
