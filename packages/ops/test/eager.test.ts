/**
 * rmsnormEager and swigluEager (the unfused baselines) on the CPU, against float64 oracles written here: on the
 * CPU they return the values of the fused references, y = x·w / sqrt(Σx²/n + eps) and y = g·σ(g)·u, computed from
 * the (already rounded) inputs and rounded once to the dtype.
 */
import { describe, expect, it } from 'vitest';
import {
  type FloatDType,
  QkDisposedError,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  rmsnormEager,
  type Shape,
  swigluEager,
  Tensor,
} from '../src/index.js';
import { expectNear, expectQkError, FLOAT_DTYPES, f64, ODD_SIZES, randn, roundAll } from './helpers.js';

// ---------------------------------------------------------------------------------------------------------
// Tolerances, derived from the formats. Op and oracle evaluate the same float64 expressions (a few 2^-53 relative
// apart) and round once, so elementwise they differ by at most one step of the output grid. Relative L2: f32
// keeps 24 bits (1e-6 leaves > 10× room over 2^-24), f16 11 bits (2^-11), bf16 8 bits (2^-8).
// ---------------------------------------------------------------------------------------------------------

/** float64 RMSNorm of each length-n row: x·w / sqrt(Σx²/n + eps). */
function rmsnormRef(x: ArrayLike<number>, w: ArrayLike<number>, n: number, eps: number): Float64Array {
  const out = new Float64Array(x.length);
  for (let base = 0; base < x.length; base += n) {
    let sumSq = 0;
    for (let i = 0; i < n; i++) sumSq += x[base + i]! ** 2;
    const rms = Math.sqrt(sumSq / n + eps);
    for (let i = 0; i < n; i++) out[base + i] = (x[base + i]! * w[i]!) / rms;
  }
  return out;
}

/** silu(g)·u in float64, σ(g) written so that neither side overflows. */
function swigluRef(g: ArrayLike<number>, u: ArrayLike<number>): Float64Array {
  return Float64Array.from({ length: g.length }, (_, i) => {
    const x = g[i]!;
    const sigma = x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
    return x * sigma * u[i]!;
  });
}

const SIZES = [...ODD_SIZES, 1024, 4096] as const;
const CASES = FLOAT_DTYPES.flatMap((dtype, d) =>
  SIZES.map((n, s) => ({ dtype, n, seed: 60_000 + 100 * d + s })),
);

function disposed<D extends FloatDType>(t: Tensor<D>): Tensor<D> {
  t.dispose();
  return t;
}

function intTensor(shape: Shape): Tensor<'f32'> {
  const n = shape.reduce((a, b) => a * b, 1);
  return Tensor.fromArray(new Array(n).fill(1), { shape, dtype: 'i32' }) as unknown as Tensor<'f32'>;
}

// ---------------------------------------------------------------------------------------------------------
describe('rmsnormEager', () => {
  it.each(CASES)('$dtype [3, $n] matches x·w/sqrt(mean(x²) + eps) rounded once', ({ dtype, n, seed }) => {
    const x = randn([3, n], dtype, seed, 3);
    const w = randn([n], dtype, seed + 50);
    const y = rmsnormEager(x, w);
    expect(y.shape).toEqual([3, n]);
    expect(y.dtype).toBe(dtype);
    expectNear(y, roundAll(rmsnormRef(f64(x), f64(w), n, 1e-6), dtype), dtype);
  });

  it.each(FLOAT_DTYPES)('%s: rank 1 and rank 3 inputs, a custom eps, and out', (dtype) => {
    const w = randn([40], dtype, 60_500);
    const x1 = randn([40], dtype, 60_501);
    expectNear(
      rmsnormEager(x1, w, { eps: 0.25 }),
      roundAll(rmsnormRef(f64(x1), f64(w), 40, 0.25), dtype),
      dtype,
    );
    const x3 = randn([2, 3, 40], dtype, 60_502);
    const out = Tensor.empty([2, 3, 40], dtype);
    expect(rmsnormEager(x3, w, { out })).toBe(out);
    expectNear(out, roundAll(rmsnormRef(f64(x3), f64(w), 40, 1e-6), dtype), dtype);
  });

  it('alternating ±1 with eps = 3 gives ±1/2, scaled per column by the weight', () => {
    const x = Tensor.fromArray([[1, -1, 1, -1]]);
    const w = Tensor.fromArray([1, 2, 4, 8]);
    expect(rmsnormEager(x, w, { eps: 3 }).toArray()).toEqual([0.5, -1, 2, -4]);
  });

  it('a NaN poisons its own row only', () => {
    const x = Tensor.fromArray([
      [1, Number.NaN, 2],
      [3, 4, 5],
    ]);
    const y = rmsnormEager(x, Tensor.ones([3])).toArray();
    for (let i = 0; i < 3; i++) expect(y[i]).toBeNaN();
    expect(y.slice(3)).toEqual(Array.from(roundAll(rmsnormRef([3, 4, 5], [1, 1, 1], 3, 1e-6), 'f32')));
  });

  it('validates its arguments', () => {
    const x = randn([3, 8], 'f32', 60_700);
    const w = randn([8], 'f32', 60_701);
    expectQkError(
      () => rmsnormEager(x, randn([7], 'f32', 60_702)),
      QkShapeError,
      'QK_SHAPE',
      'rmsnormEager:',
      '"weight"',
      '[7]',
    );
    expectQkError(
      () => rmsnormEager(x, randn([8], 'bf16', 60_703) as unknown as Tensor<'f32'>),
      QkDtypeError,
      'QK_DTYPE',
      'rmsnormEager:',
      '"weight"',
      'bf16',
    );
    expectQkError(() => rmsnormEager(intTensor([3, 8]), w), QkDtypeError, 'QK_DTYPE', 'rmsnormEager:', '"x"');
    expectQkError(
      () => rmsnormEager(Tensor.fromArray(2), w),
      QkShapeError,
      'QK_SHAPE',
      'rmsnormEager:',
      '"x"',
    );
    for (const eps of [0, -1e-6, Number.NaN, Number.POSITIVE_INFINITY, '1e-6']) {
      expectQkError(
        () => rmsnormEager(x, w, { eps: eps as number }),
        QkValueError,
        'QK_VALUE',
        'rmsnormEager:',
        '"eps"',
      );
    }
    expectQkError(
      () => rmsnormEager(x, w, { out: Tensor.empty([3, 7]) }),
      QkShapeError,
      'QK_SHAPE',
      'rmsnormEager:',
      '"out"',
    );
    expectQkError(
      () => rmsnormEager(disposed(randn([3, 8], 'f32', 60_704)), w),
      QkDisposedError,
      'QK_DISPOSED',
      'rmsnormEager (argument "x")',
    );
    expectQkError(
      () => rmsnormEager(x, disposed(randn([8], 'f32', 60_705))),
      QkDisposedError,
      'QK_DISPOSED',
      'rmsnormEager (argument "weight")',
    );
  });
});

// ---------------------------------------------------------------------------------------------------------
describe('swigluEager', () => {
  it.each(CASES)('$dtype [2, $n] matches silu(gate)·up rounded once', ({ dtype, n, seed }) => {
    const g = randn([2, n], dtype, seed, 4);
    const u = randn([2, n], dtype, seed + 50);
    const y = swigluEager(g, u);
    expect(y.shape).toEqual([2, n]);
    expect(y.dtype).toBe(dtype);
    expectNear(y, roundAll(swigluRef(f64(g), f64(u)), dtype), dtype);
  });

  it.each(FLOAT_DTYPES)('%s: rank 3 inputs and out', (dtype) => {
    const g = randn([2, 3, 17], dtype, 60_800, 10);
    const u = randn([2, 3, 17], dtype, 60_801);
    const out = Tensor.empty([2, 3, 17], dtype);
    expect(swigluEager(g, u, { out })).toBe(out);
    expectNear(out, roundAll(swigluRef(f64(g), f64(u)), dtype), dtype);
  });

  it('known values: gate 0 gives 0, silu(30) = 30 in f32 (σ(30) = 1 − 9e-14), gate 1 scales up by σ(1)', () => {
    const y = swigluEager(Tensor.fromArray([0, 30, 1]), Tensor.fromArray([5, 3, 2])).toArray();
    expect(y).toEqual([0, 90, Math.fround(2 / (1 + Math.exp(-1)))]);
  });

  it('validates gate and up', () => {
    const g = randn([2, 8], 'f32', 60_900);
    expectQkError(
      () => swigluEager(g, randn([2, 7], 'f32', 60_901)),
      QkShapeError,
      'QK_SHAPE',
      'swigluEager:',
      '"up"',
    );
    expectQkError(
      () => swigluEager(g, randn([2, 8], 'f16', 60_902) as unknown as Tensor<'f32'>),
      QkDtypeError,
      'QK_DTYPE',
      'swigluEager:',
      '"up"',
      'f16',
    );
    expectQkError(
      () => swigluEager(intTensor([2, 8]), g),
      QkDtypeError,
      'QK_DTYPE',
      'swigluEager:',
      '"gate"',
    );
    expectQkError(
      () => swigluEager(g, g, { out: Tensor.empty([2, 8], 'bf16') }),
      QkDtypeError,
      'QK_DTYPE',
      'swigluEager:',
      '"out"',
    );
    expectQkError(
      () => swigluEager(disposed(randn([2, 8], 'f32', 60_903)), g),
      QkDisposedError,
      'QK_DISPOSED',
      'swigluEager (argument "gate")',
    );
  });
});
