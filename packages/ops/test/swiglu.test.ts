/**
 * swiglu and swigluFused against a float64 oracle written here: silu(g)·u = g·σ(g)·u with σ evaluated without
 * overflow on either side, computed from the (already rounded) inputs and rounded once to the dtype.
 */
import { describe, expect, it } from 'vitest';
import {
  type FloatDType,
  QkDisposedError,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  roundToDType,
  type Shape,
  swiglu,
  swigluFused,
  Tensor,
} from '../src/index.js';
import { expectNear, expectQkError, FLOAT_DTYPES, f64, ODD_SIZES, randn, roundAll } from './helpers.js';

// ---------------------------------------------------------------------------------------------------------
// Tolerances, derived from the formats. The op and the oracle evaluate g·σ(g)·u in float64 (a few 2^-53
// relative apart) and round once, so elementwise they differ by at most one step of the output grid.
// Relative L2: f32 keeps 24 bits (1e-6 leaves > 10× room over 2^-24), f16 11 bits (2^-11), bf16 8 bits (2^-8).
// ---------------------------------------------------------------------------------------------------------

/** silu(g)·u in float64, σ(g) as 1/(1 + e^−g) for g ≥ 0 and e^g/(1 + e^g) below. */
function swigluRef(g: number, u: number): number {
  const sigma = g >= 0 ? 1 / (1 + Math.exp(-g)) : Math.exp(g) / (1 + Math.exp(g));
  return g * sigma * u;
}

/** Oracle over a fused [rows, 2·ffn] buffer: gate is the first half of each row, up the second. */
function swigluFusedRef(gu: ArrayLike<number>, rows: number, ffn: number): Float64Array {
  const out = new Float64Array(rows * ffn);
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < ffn; i++)
      out[r * ffn + i] = swigluRef(gu[r * 2 * ffn + i]!, gu[r * 2 * ffn + ffn + i]!);
  }
  return out;
}

// Qwen3 MLP widths: 3072 (0.6B intermediate) besides the odd sizes and the hidden widths.
const SIZES = [...ODD_SIZES, 1024, 3072, 4096] as const;
const CASES = FLOAT_DTYPES.flatMap((dtype, d) =>
  SIZES.map((n, s) => ({ dtype, n, seed: 40_000 + 100 * d + s })),
);

function intTensor(shape: Shape): Tensor<'f32'> {
  const n = shape.reduce((a, b) => a * b, 1);
  return Tensor.fromArray(
    Array.from({ length: n }, (_, i) => i + 1),
    { shape, dtype: 'i32' },
  ) as unknown as Tensor<'f32'>;
}

function disposed<D extends FloatDType>(t: Tensor<D>): Tensor<D> {
  t.dispose();
  return t;
}

// ---------------------------------------------------------------------------------------------------------
describe('swiglu', () => {
  it.each(CASES)('$dtype [2, $n] matches silu(gate)·up rounded once', ({ dtype, n, seed }) => {
    const gate = randn([2, n], dtype, seed, 2);
    const up = randn([2, n], dtype, seed + 50);
    const [bg, bu] = [gate.toArray(), up.toArray()];
    const y = swiglu(gate, up);
    expect(y.shape).toEqual([2, n]);
    expect(y.dtype).toBe(dtype);
    expect(y.data).not.toBe(gate.data);
    const g = f64(gate);
    const u = f64(up);
    expectNear(
      y,
      roundAll(
        Array.from(g, (v, i) => swigluRef(v, u[i]!)),
        dtype,
      ),
      dtype,
    );
    expect(gate.toArray()).toEqual(bg);
    expect(up.toArray()).toEqual(bu);
  });

  it.each(FLOAT_DTYPES)('%s: rank 1 and rank 3, gates over a wide range (std 10)', (dtype) => {
    const seed = 40_500 + 10 * FLOAT_DTYPES.indexOf(dtype);
    for (const shape of [[989], [2, 3, 111]]) {
      const gate = randn(shape, dtype, seed + shape.length, 10);
      const up = randn(shape, dtype, seed + shape.length + 5);
      const y = swiglu(gate, up);
      expect(y.shape).toEqual(shape);
      const u = f64(up);
      expectNear(
        y,
        roundAll(
          Array.from(f64(gate), (v, i) => swigluRef(v, u[i]!)),
          dtype,
        ),
        dtype,
      );
    }
  });

  it('known values: gate 0 gives 0, gate 30 passes up through (σ(30) = 1 − 9e-14), gate 1 scales by σ(1)', () => {
    const sigma1 = Math.E / (1 + Math.E);
    const y = swiglu(Tensor.fromArray([0, 30, 1, -1]), Tensor.fromArray([5, 0.5, 1, 4])).toArray();
    expect(y).toEqual([0, 15, Math.fround(sigma1), Math.fround(-4 * (1 - sigma1))]);
  });

  it.each(FLOAT_DTYPES)('%s propagates NaN from gate and from up', (dtype) => {
    const gate = Tensor.fromArray([Number.NaN, 1.5, 0.5], { dtype });
    const up = Tensor.fromArray([2, Number.NaN, -3], { dtype });
    const y = swiglu(gate, up).toArray();
    expect(y[0]).toBeNaN();
    expect(y[1]).toBeNaN();
    expect(y[2]).toBe(roundToDType(swigluRef(0.5, -3), dtype));
  });

  it('validates gate and up', () => {
    const gate = randn([2, 6], 'f32', 40_700);
    const up = randn([2, 6], 'f32', 40_701);
    for (const shape of [[6, 2], [2, 7], [12], [1, 2, 6]]) {
      expectQkError(
        () => swiglu(gate, randn(shape, 'f32', 40_702)),
        QkShapeError,
        'QK_SHAPE',
        'swiglu:',
        '"up"',
        '[2, 6]',
      );
    }
    expectQkError(
      () => swiglu(gate, randn([2, 6], 'bf16', 40_703) as unknown as Tensor<'f32'>),
      QkDtypeError,
      'QK_DTYPE',
      'swiglu:',
      '"up"',
      'bf16',
    );
    expectQkError(() => swiglu(intTensor([2, 6]), up), QkDtypeError, 'QK_DTYPE', 'swiglu:', '"gate"', 'i32');
    expectQkError(() => swiglu(gate, intTensor([2, 6])), QkDtypeError, 'QK_DTYPE', 'swiglu:', '"up"', 'i32');
    expectQkError(
      () => swiglu(gate, undefined as unknown as Tensor<'f32'>),
      QkValueError,
      'QK_VALUE',
      'swiglu:',
      '"up"',
    );
    expectQkError(
      () => swiglu(disposed(randn([2, 6], 'f32', 40_704)), up),
      QkDisposedError,
      'QK_DISPOSED',
      'swiglu (argument "gate")',
    );
    expectQkError(
      () => swiglu(gate, disposed(randn([2, 6], 'f32', 40_705))),
      QkDisposedError,
      'QK_DISPOSED',
      'swiglu (argument "up")',
    );
  });
});

// ---------------------------------------------------------------------------------------------------------
describe('swigluFused', () => {
  it.each(CASES)('$dtype [3, 2·$n] → [3, $n]: gate is the first half of each row, up the second', (c) => {
    const { dtype, n, seed } = c;
    const gateUp = randn([3, 2 * n], dtype, seed + 1000, 2);
    const before = gateUp.toArray();
    const y = swigluFused(gateUp);
    expect(y.shape).toEqual([3, n]);
    expect(y.dtype).toBe(dtype);
    expectNear(y, roundAll(swigluFusedRef(f64(gateUp), 3, n), dtype), dtype);
    expect(gateUp.toArray()).toEqual(before);
  });

  it.each(FLOAT_DTYPES)('%s: rank 1 and rank 3 inputs keep their leading axes', (dtype) => {
    const seed = 41_500 + 10 * FLOAT_DTYPES.indexOf(dtype);
    const flat = randn([14], dtype, seed, 3);
    const y1 = swigluFused(flat);
    expect(y1.shape).toEqual([7]);
    expectNear(y1, roundAll(swigluFusedRef(f64(flat), 1, 7), dtype), dtype);
    const cube = randn([2, 3, 222], dtype, seed + 1, 3);
    const y3 = swigluFused(cube);
    expect(y3.shape).toEqual([2, 3, 111]);
    expectNear(y3, roundAll(swigluFusedRef(f64(cube), 6, 111), dtype), dtype);
  });

  it('takes gate from the first half: [1, 2] gives silu(1)·2 = 2σ(1), not silu(2)·1', () => {
    const sigma1 = Math.E / (1 + Math.E);
    expect(swigluFused(Tensor.fromArray([[1, 2]])).toArray()).toEqual([Math.fround(2 * sigma1)]);
    expect(swigluFused(Tensor.fromArray([[0, 30, 7, 0.5]])).toArray()).toEqual([0, 15]);
  });

  it.each(FLOAT_DTYPES)('%s propagates NaN from either half', (dtype) => {
    // gate = [NaN, 1, 2], up = [3, NaN, 4].
    const y = swigluFused(Tensor.fromArray([[Number.NaN, 1, 2, 3, Number.NaN, 4]], { dtype })).toArray();
    expect(y[0]).toBeNaN();
    expect(y[1]).toBeNaN();
    expect(y[2]).toBe(roundToDType(swigluRef(2, 4), dtype));
  });

  it('validates gateUp', () => {
    for (const width of ODD_SIZES) {
      expectQkError(
        () => swigluFused(randn([2, width], 'f32', 41_700 + width)),
        QkShapeError,
        'QK_SHAPE',
        'swigluFused:',
        '"gateUp"',
        'even',
        `[2, ${width}]`,
      );
    }
    expectQkError(
      () => swigluFused(Tensor.fromArray(1.5)),
      QkShapeError,
      'QK_SHAPE',
      'swigluFused:',
      '"gateUp"',
    );
    expectQkError(
      () => swigluFused(intTensor([2, 6])),
      QkDtypeError,
      'QK_DTYPE',
      'swigluFused:',
      '"gateUp"',
      'i32',
    );
    expectQkError(
      () => swigluFused(disposed(randn([2, 6], 'bf16', 41_701))),
      QkDisposedError,
      'QK_DISPOSED',
      'swigluFused (argument "gateUp")',
    );
  });
});
