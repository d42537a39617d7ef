/**
 * silu, gelu (erf and tanh forms), erf, add and mul against float64 oracles written here: erf by composite
 * Simpson integration of 2/√π·e^(−t²), the activations from their textbook formulas in a different algebraic
 * form than the ops use (so a shared slip cannot cancel), rounded once to the output dtype.
 */
import { describe, expect, it } from 'vitest';
import {
  add,
  erf,
  type FloatDType,
  gelu,
  mul,
  QkDisposedError,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  roundToDType,
  silu,
  Tensor,
} from '../src/index.js';
import {
  expectNear,
  expectQkError,
  FLOAT_DTYPES,
  f64,
  ODD_SIZES,
  randn,
  roundAll,
  ulpAt,
} from './helpers.js';

// ---------------------------------------------------------------------------------------------------------
// Tolerances, derived from the formats. Both the op and the oracle round a float64 value once to the dtype, so
// elementwise they may differ by at most one step of the output grid (when the two float64 values straddle a
// rounding boundary). Relative L2: f32 keeps 24 bits (1e-6 leaves > 10× room over 2^-24), f16 11 bits (2^-11),
// bf16 8 bits (2^-8).
// ---------------------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------------------
// float64 oracles
// ---------------------------------------------------------------------------------------------------------
const TWO_OVER_SQRT_PI = 2 / Math.sqrt(Math.PI);

/**
 * ∫₀ᵇ e^(−s² − 2cs) ds by the composite Simpson rule with `n` (even) intervals, plus one Richardson step against
 * n/2 (error O(h^6)). c = 0 gives the Gaussian itself; c = a gives the erfc tail shifted to start at a.
 */
function gaussIntegral(b: number, c: number, n: number): number {
  const rule = (m: number): number => {
    const h = b / m;
    let s = 1 + Math.exp(-b * (b + 2 * c));
    for (let i = 1; i < m; i++) {
      const t = i * h;
      s += (i % 2 === 1 ? 4 : 2) * Math.exp(-t * (t + 2 * c));
    }
    return (s * h) / 3;
  };
  const fine = rule(n);
  return fine + (fine - rule(n / 2)) / 15;
}

/**
 * erfc(a) for a ≥ 0. Below 1 as 1 − 2/√π·∫₀ᵃ e^(−t²) dt; from 1 on as the tail ∫ₐ^∞ with t = a + s, i.e.
 * 2/√π·e^(−a²)·∫₀^S e^(−2as − s²) ds, which keeps full relative accuracy however small erfc gets (S solves
 * s² + 2as = 40, so the neglected part is below e^(−40) of the integral). Relative error about 1e-11 at n = 800
 * and 4e-13 at n = 1600 (checked against plain Simpson with n = 64000).
 */
function erfcRef(a: number, n: number): number {
  if (a < 1) return 1 - TWO_OVER_SQRT_PI * gaussIntegral(a, 0, n);
  return TWO_OVER_SQRT_PI * Math.exp(-a * a) * gaussIntegral(Math.sqrt(a * a + 40) - a, a, n);
}

/** erf by integration; absolute error about 2e-14 at the default n. */
function erfRef(x: number, n = 1600): number {
  const a = Math.abs(x);
  const v = a < 1 ? TWO_OVER_SQRT_PI * gaussIntegral(a, 0, n) : 1 - erfcRef(a, n);
  return x < 0 ? -v : v;
}

/** SiLU as x·σ(x), σ written without overflow on either side. */
function siluRef(x: number): number {
  return x >= 0 ? x / (1 + Math.exp(-x)) : (x * Math.exp(x)) / (1 + Math.exp(x));
}

/** x·Φ(x) with Φ(x) = erfc(−x/√2)/2, so negative x keep full relative accuracy. */
const geluMemo = new Map<number, number>();
function geluErfRef(x: number): number {
  let y = geluMemo.get(x);
  if (y === undefined) {
    const c = erfcRef(Math.abs(x) / Math.SQRT2, 800);
    y = x >= 0 ? 0.5 * x * (2 - c) : 0.5 * x * c;
    geluMemo.set(x, y);
  }
  return y;
}

/** x/2·(1 + tanh u) written as x / (1 + e^(−2u)), u = √(2/π)·(x + 0.044715x³). */
function geluTanhRef(x: number): number {
  const u = Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x);
  return x / (1 + Math.exp(-2 * u));
}

const SIZES = [...ODD_SIZES, 1024, 4096] as const;
const CASES = FLOAT_DTYPES.flatMap((dtype, d) =>
  SIZES.map((n, s) => ({ dtype, n, seed: 10_000 + 100 * d + s })),
);

function intTensor(): Tensor<'f32'> {
  return Tensor.fromArray([1, 2, 3], { dtype: 'i32' }) as unknown as Tensor<'f32'>;
}

function disposed<D extends FloatDType>(t: Tensor<D>): Tensor<D> {
  t.dispose();
  return t;
}

// ---------------------------------------------------------------------------------------------------------
describe('erf', () => {
  it.each([
    [0.5, 0.5204998778130465],
    [1, 0.8427007929497149],
    [2, 0.9953222650189527],
    [3, 0.9999779095030014],
  ])('erf(%d) matches the published value %d, and erf is odd', (x, v) => {
    expect(Math.abs(erf(x) - v)).toBeLessThanOrEqual(1e-15);
    expect(erf(-x)).toBe(-erf(x));
  });

  it('erf(0) is exactly 0 and erf(NaN) is NaN', () => {
    expect(erf(0)).toBe(0);
    expect(erf(Number.NaN)).toBeNaN();
  });

  it('agrees with Simpson integration within 1e-13 on [-9, 9], both sides of the 2.5 and 6 switches', () => {
    const xs: number[] = [];
    for (let x = -9; x <= 9 + 1e-9; x += 0.0125) xs.push(Math.round(x * 1e4) / 1e4);
    for (const c of [2.5, 6]) xs.push(c, c - 1e-12, c + 1e-12, -c, -c + 1e-12, -c - 1e-12);
    xs.push(1e-8, -3e-5, 0.1, 2.4999, 2.5001, 5.9999, 6.0001, 6.75);
    let worst = 0;
    for (const x of xs) {
      const got = erf(x);
      expect(Math.abs(got)).toBeLessThanOrEqual(1);
      worst = Math.max(worst, Math.abs(got - erfRef(x)));
    }
    expect(worst).toBeLessThanOrEqual(1e-13);
  });

  it('is relatively accurate for small |x| (erf x ≈ 2x/√π)', () => {
    for (const x of [1e-300, 1e-20, 1e-8, -1e-8, 1e-3, -0.25]) {
      const ref = erfRef(x);
      expect(Math.abs(erf(x) - ref) / Math.abs(ref)).toBeLessThanOrEqual(1e-12);
    }
  });

  it('keeps the tail on 2.5 ≤ x ≤ 5: 1 − erf(x) equals the integrated erfc to the spacing of doubles below 1', () => {
    for (let x = 2.5; x <= 5; x += 0.05) {
      const tail = erfcRef(x, 1600);
      // erf(x) is a double just below 1 (spacing 2^-53), so 1 − erf(x) is exact and off by at most half of that.
      expect(Math.abs(1 - erf(x) - tail)).toBeLessThanOrEqual(2 ** -54 + 1e-10 * tail);
    }
  });

  it('is exactly ±1 from |x| = 6 on (erfc(6) ≈ 2.2e-17 is below half a double step under 1)', () => {
    expect(erfcRef(6, 1600)).toBeLessThan(2 ** -54);
    for (const x of [6, 6.5, 8, 10, 27, 1e3, 1e300, Number.POSITIVE_INFINITY]) {
      expect(erf(x)).toBe(1);
      expect(erf(-x)).toBe(-1);
    }
  });
});

// ---------------------------------------------------------------------------------------------------------
describe('silu', () => {
  it.each(CASES)('$dtype [3, $n] matches x·σ(x) rounded once', ({ dtype, n, seed }) => {
    const x = randn([3, n], dtype, seed);
    const before = x.toArray();
    const y = silu(x);
    expect(y.shape).toEqual([3, n]);
    expect(y.dtype).toBe(dtype);
    expectNear(y, roundAll(Array.from(f64(x), siluRef), dtype), dtype);
    expect(x.toArray()).toEqual(before);
  });

  it.each(FLOAT_DTYPES)(
    '%s over a wide range (std 12, both tails, subnormal results) and rank 3',
    (dtype) => {
      const x = randn([2, 3, 333], dtype, 10_500 + FLOAT_DTYPES.indexOf(dtype), 12);
      const y = silu(x);
      expect(y.shape).toEqual([2, 3, 333]);
      expectNear(y, roundAll(Array.from(f64(x), siluRef), dtype), dtype);
    },
  );

  it('known values: silu(0) = 0, silu(±1) = ±σ(±1), silu(20) rounds to 20 in f32', () => {
    const sigma1 = Math.E / (1 + Math.E); // 0.7310585786300049
    const y = silu(Tensor.fromArray([0, 1, -1, 20])).toArray();
    expect(y).toEqual([0, Math.fround(sigma1), Math.fround(-(1 - sigma1)), 20]);
  });

  it.each(FLOAT_DTYPES)('%s propagates NaN', (dtype) => {
    const y = silu(Tensor.fromArray([Number.NaN, 1.5], { dtype })).toArray();
    expect(y[0]).toBeNaN();
    expect(y[1]).toBe(roundToDType(siluRef(1.5), dtype));
  });

  it('validates x', () => {
    expectQkError(() => silu(intTensor()), QkDtypeError, 'QK_DTYPE', 'silu:', '"x"', 'i32');
    expectQkError(
      () => silu(disposed(randn([4], 'f32', 10_600))),
      QkDisposedError,
      'QK_DISPOSED',
      'silu',
      '"x"',
    );
    expectQkError(() => silu(null as unknown as Tensor<'f32'>), QkValueError, 'QK_VALUE', 'silu:', '"x"');
  });
});

// ---------------------------------------------------------------------------------------------------------
describe('gelu', () => {
  it.each(CASES)('$dtype [2, $n], exact (erf) form, default and explicit', ({ dtype, n, seed }) => {
    const x = randn([2, n], dtype, seed + 1000);
    const before = x.toArray();
    const expected = roundAll(Array.from(f64(x), geluErfRef), dtype);
    const y = gelu(x);
    expect(y.shape).toEqual([2, n]);
    expect(y.dtype).toBe(dtype);
    expectNear(y, expected, dtype);
    expectNear(gelu(x, { approximate: 'none' }), expected, dtype);
    expect(x.toArray()).toEqual(before);
  });

  it.each(CASES)('$dtype [2, $n], tanh approximation', ({ dtype, n, seed }) => {
    const x = randn([2, n], dtype, seed + 2000);
    const before = x.toArray();
    const y = gelu(x, { approximate: 'tanh' });
    expect(y.shape).toEqual([2, n]);
    expect(y.dtype).toBe(dtype);
    expectNear(y, roundAll(Array.from(f64(x), geluTanhRef), dtype), dtype);
    expect(x.toArray()).toEqual(before);
  });

  it('known values from the normal CDF: gelu(x) = x·Φ(x)', () => {
    // Φ(1) = 0.8413447460685429, Φ(2) = 0.9772498680518208 (standard normal table).
    const y = gelu(Tensor.fromArray([0, 1, -1, 2, -2])).toArray();
    const expected = [0, 0.8413447460685429, -(1 - 0.8413447460685429), 2 * 0.9772498680518208];
    expected.push(-2 * (1 - 0.9772498680518208));
    expect(y).toEqual(expected.map(Math.fround));
    expect(gelu(Tensor.fromArray([0, 30]), { approximate: 'tanh' }).toArray()).toEqual([0, 30]);
  });

  it('stays within float64 cancellation of 1 + erf on the far negative tail (x in [-12, -5])', () => {
    // The op evaluates x/2·(1 + erf(x/√2)); with erf(x/√2) a double near −1, the sum carries an absolute error
    // up to 2^-53 (plus erf's own 1e-13 bound), so |error| ≤ |x|/2·(2^-53 + 1e-13) + one f32 step.
    const xs = Array.from({ length: 57 }, (_, i) => -5 - i / 8);
    const y = gelu(Tensor.fromArray(xs)).toArray();
    for (let i = 0; i < xs.length; i++) {
      const x = xs[i]!;
      const ref = geluErfRef(x);
      expect(y[i]!).toBeLessThanOrEqual(0);
      expect(Math.abs(y[i]! - ref)).toBeLessThanOrEqual(
        (Math.abs(x) / 2) * (2 ** -53 + 1e-13) + ulpAt(ref, 'f32'),
      );
    }
  });

  it.each(FLOAT_DTYPES)('%s propagates NaN in both forms', (dtype) => {
    const x = Tensor.fromArray([1, Number.NaN], { dtype });
    for (const approximate of ['none', 'tanh'] as const) {
      const y = gelu(x, { approximate }).toArray();
      expect(y[1]).toBeNaN();
      expect(Number.isFinite(y[0]!)).toBe(true);
    }
  });

  it('validates x and approximate', () => {
    const x = randn([4], 'f32', 10_700);
    for (const bad of ['fast', 'erf', '', 'TANH']) {
      expectQkError(
        () => gelu(x, { approximate: bad as 'tanh' }),
        QkValueError,
        'QK_VALUE',
        'gelu:',
        '"approximate"',
        bad,
      );
    }
    expectQkError(() => gelu(intTensor()), QkDtypeError, 'QK_DTYPE', 'gelu:', '"x"');
    expectQkError(
      () => gelu(disposed(randn([4], 'bf16', 10_701))),
      QkDisposedError,
      'QK_DISPOSED',
      'gelu',
      '"x"',
    );
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each([
  { name: 'add', op: add, ref: (p: number, q: number) => p + q },
  { name: 'mul', op: mul, ref: (p: number, q: number) => p * q },
])('$name', ({ name, op, ref }) => {
  const offset = name === 'add' ? 3000 : 4000;

  // a ∘ b of two dtype values is computed exactly or rounded once in float64 by both the op and the oracle,
  // then rounded once to the dtype: the results must be bit-identical.
  it.each(CASES)('$dtype [2, $n] equals the float64 result rounded once, exactly', ({ dtype, n, seed }) => {
    const a = randn([2, n], dtype, seed + offset);
    const b = randn([2, n], dtype, seed + offset + 50, 3);
    const [beforeA, beforeB] = [a.toArray(), b.toArray()];
    const pa = f64(a);
    const pb = f64(b);
    const y = op(a, b);
    expect(y.shape).toEqual([2, n]);
    expect(y.dtype).toBe(dtype);
    expect(y.toArray()).toEqual(
      Array.from(
        roundAll(
          Array.from(pa, (v, i) => ref(v, pb[i]!)),
          dtype,
        ),
      ),
    );
    expect(a.toArray()).toEqual(beforeA);
    expect(b.toArray()).toEqual(beforeB);
  });

  it.each(FLOAT_DTYPES)('%s propagates NaN (and inf · 0 is NaN for mul)', (dtype) => {
    const a = Tensor.fromArray([Number.NaN, 2, Number.POSITIVE_INFINITY], { dtype });
    const b = Tensor.fromArray([1, Number.NaN, 0], { dtype });
    const y = op(a, b).toArray();
    expect(y[0]).toBeNaN();
    expect(y[1]).toBeNaN();
    if (name === 'mul') expect(y[2]).toBeNaN();
    else expect(y[2]).toBe(Number.POSITIVE_INFINITY);
  });

  it('validates a and b', () => {
    const a = randn([2, 3], 'f32', 10_800 + offset);
    const b = randn([2, 3], 'f32', 10_801 + offset);
    expectQkError(
      () => op(a, randn([3, 2], 'f32', 10_802 + offset)),
      QkShapeError,
      'QK_SHAPE',
      `${name}:`,
      '"b"',
    );
    expectQkError(
      () => op(a, randn([2, 4], 'f32', 10_803 + offset)),
      QkShapeError,
      'QK_SHAPE',
      `${name}:`,
      '"b"',
    );
    expectQkError(
      () => op(a, randn([2, 3], 'bf16', 10_804 + offset) as unknown as Tensor<'f32'>),
      QkDtypeError,
      'QK_DTYPE',
      `${name}:`,
      '"b"',
      'bf16',
    );
    expectQkError(() => op(intTensor(), b), QkDtypeError, 'QK_DTYPE', `${name}:`, '"a"');
    expectQkError(() => op(a, intTensor()), QkDtypeError, 'QK_DTYPE', `${name}:`, '"b"');
    expectQkError(
      () => op(disposed(randn([2, 3], 'f32', 10_805 + offset)), b),
      QkDisposedError,
      'QK_DISPOSED',
      name,
      '"a"',
    );
    expectQkError(
      () => op(a, disposed(randn([2, 3], 'f32', 10_806 + offset))),
      QkDisposedError,
      'QK_DISPOSED',
      name,
      '"b"',
    );
  });
});

describe('add and mul known values', () => {
  it('add rounds once, ties to even, in bf16', () => {
    // bf16 steps are 2^-7 in [1, 2): 1 + 2^-8 ties to 1 (even), 1 + 3·2^-8 ties to 1 + 2^-6 (even).
    const a = Tensor.fromArray([1, 1, 1.5], { dtype: 'bf16' });
    const b = Tensor.fromArray([2 ** -8, 3 * 2 ** -8, 2.25], { dtype: 'bf16' });
    expect(add(a, b).toArray()).toEqual([1, 1 + 2 ** -6, 3.75]);
  });

  it('mul of exact values', () => {
    const a = Tensor.fromArray([1.5, -0.75, 3], { dtype: 'f16' });
    const b = Tensor.fromArray([-2, 0.5, 1 / 3], { dtype: 'f16' });
    // 1/3 in f16 is 0x3555 = 1365/4096, so 3 · (1/3) = 4095/4096 = 1 − 2^-12: exactly halfway between the f16
    // neighbours 1 − 2^-11 (odd mantissa) and 1 (even), so it rounds to 1.
    expect(mul(a, b).toArray()).toEqual([-3, -0.375, 1]);
  });
});
