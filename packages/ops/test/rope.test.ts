/**
 * rope and ropeInvFreq against oracles written here. The rotation itself (cos/sin and the products) is float64
 * math rounded once; the angle follows the published HF Qwen3 recipe, which builds it in float32:
 * `inv_freq = 1.0 / (base ** (arange(0, dim, 2).float() / dim))` and `freqs = inv_freq · position` (float32).
 */
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_ROPE_THETA,
  type FloatDType,
  QkDisposedError,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  rope,
  ropeInvFreq,
  roundToDType,
  Tensor,
} from '../src/index.js';
import {
  compare,
  expectNear,
  expectQkError,
  FLOAT_DTYPES,
  f64,
  MANTISSA_BITS,
  ODD_SIZES,
  randn,
  roundAll,
  ulpAt,
} from './helpers.js';

// ---------------------------------------------------------------------------------------------------------
// Tolerances, derived from the formats. The op and the oracle evaluate the same float64 expression from the
// same float32 angle and round once, so elementwise they differ by at most one step of the output grid.
// Relative L2: f32 keeps 24 bits (1e-6 leaves > 10× room over 2^-24), f16 11 bits (2^-11), bf16 8 bits (2^-8).
// ---------------------------------------------------------------------------------------------------------

/** HF's float32 inverse frequencies: fround every step of 1 / base^(fround(2i / dim)). */
function hfInvFreq(headDim: number, theta: number): number[] {
  const f = Math.fround;
  return Array.from({ length: headDim / 2 }, (_, i) => f(1 / f(theta ** f((2 * i) / headDim))));
}

/**
 * float64 rotate-half RoPE of x [tokens, heads, headDim]. `angle(p, i)` gives the rotation angle of pair i at
 * position p; by default HF's float32 angle fround(p · invFreq[i]).
 */
function ropeRef(
  x: ArrayLike<number>,
  shape: readonly number[],
  positions: ArrayLike<number>,
  theta: number,
  angle?: (p: number, i: number) => number,
): Float64Array {
  const [tokens, heads, headDim] = shape as [number, number, number];
  const half = headDim / 2;
  const inv = hfInvFreq(headDim, theta);
  const angleOf = angle ?? ((p: number, i: number) => Math.fround(p * inv[i]!));
  const out = new Float64Array(x.length);
  for (let t = 0; t < tokens; t++) {
    for (let i = 0; i < half; i++) {
      const phi = angleOf(positions[t]!, i);
      const c = Math.cos(phi);
      const s = Math.sin(phi);
      for (let h = 0; h < heads; h++) {
        const lo = (t * heads + h) * headDim + i;
        const hi = lo + half;
        out[lo] = x[lo]! * c - x[hi]! * s;
        out[hi] = x[hi]! * c + x[lo]! * s;
      }
    }
  }
  return out;
}

interface RopeCase {
  shape: [number, number, number];
  positions: number[];
  theta?: number;
  label: string;
}

const SHAPES: RopeCase[] = [
  { shape: [4, 16, 128], positions: [0, 5, 17, 4095], label: 'Qwen3 q, 16 heads' },
  { shape: [3, 32, 128], positions: [7, 1000, 32767], label: 'Qwen3 q, 32 heads' },
  { shape: [5, 8, 128], positions: [131071, 3, 0, 65536, 12345], label: 'Qwen3 k, 8 KV heads, unsorted' },
  { shape: [7, 3, 64], positions: [9, 8, 7, 6, 5, 4, 3], theta: 10_000, label: 'theta 1e4' },
  { shape: [2, 5, 10], positions: [1, 40], theta: 2.5, label: 'theta 2.5' },
  ...ODD_SIZES.map(
    (s): RopeCase => ({ shape: [3, 2, 2 * s], positions: [0, 1, 777], label: `${s} (odd) rotation pairs` }),
  ),
];
const CASES = FLOAT_DTYPES.flatMap((dtype, d) =>
  SHAPES.map((c, s) => ({ dtype, ...c, seed: 30_000 + 100 * d + s })),
);

function disposed<D extends FloatDType>(t: Tensor<D>): Tensor<D> {
  t.dispose();
  return t;
}

// ---------------------------------------------------------------------------------------------------------
describe('rope', () => {
  it.each(CASES)('$dtype $shape ($label) matches the float64 rotation rounded once', (c) => {
    const { dtype, shape, positions, theta, seed } = c;
    const x = randn(shape, dtype, seed);
    const before = x.toArray();
    const y = theta === undefined ? rope(x, { positions }) : rope(x, { positions, theta });
    expect(y.shape).toEqual(shape);
    expect(y.dtype).toBe(dtype);
    expect(y.data).not.toBe(x.data);
    expectNear(y, roundAll(ropeRef(f64(x), shape, positions, theta ?? 1e6), dtype), dtype);
    expect(x.toArray()).toEqual(before);
  });

  it.each(FLOAT_DTYPES)('%s: position 0 is the identity, bit for bit', (dtype) => {
    const x = randn([3, 4, 128], dtype, 30_500 + FLOAT_DTYPES.indexOf(dtype));
    expect(rope(x, { positions: [0, 0, 0] }).toArray()).toEqual(x.toArray());
  });

  it('defaults theta to Qwen3 rope_theta = 1e6', () => {
    expect(DEFAULT_ROPE_THETA).toBe(1_000_000);
    const x = randn([2, 2, 16], 'f32', 30_510);
    const expected = roundAll(ropeRef(f64(x), [2, 2, 16], [3, 300], 1e6), 'f32');
    expect(rope(x, { positions: [3, 300] }).toArray()).toEqual(Array.from(expected));
    // A different theta gives a different (and correct) rotation at the same positions.
    const y = rope(x, { positions: [3, 300], theta: 10_000 });
    expectNear(y, roundAll(ropeRef(f64(x), [2, 2, 16], [3, 300], 10_000), 'f32'), 'f32');
  });

  it('headDim 2 rotates the pair by p radians (inverse frequency 1): [3, 4] at p = 1 and 2', () => {
    const x = Tensor.fromArray([[[3, 4]], [[3, 4]]]);
    const y = rope(x, { positions: [1, 2] }).toArray();
    const expected = [1, 2].flatMap((p) => [
      3 * Math.cos(p) - 4 * Math.sin(p),
      4 * Math.cos(p) + 3 * Math.sin(p),
    ]);
    expect(y).toEqual(expected.map(Math.fround));
    // A rotation keeps the pair's length 5.
    expect(Math.hypot(y[0]!, y[1]!)).toBeCloseTo(5, 6);
  });

  it('is close to the exact float64 rotation by p·theta^(−2i/d) for small positions (f32)', () => {
    // For p ≤ 8 the float32 angle differs from p·theta^(−2i/d) by at most p·2^-23 (inverse frequency) plus
    // 2^-21 (rounding the angle), so the outputs differ by about 1e-6 of the input magnitude.
    const shape = [9, 4, 128] as const;
    const positions = [0, 1, 2, 3, 4, 5, 6, 7, 8];
    const x = randn(shape, 'f32', 30_520);
    const exact = ropeRef(f64(x), shape, positions, 1e6, (p, i) => p * 1e6 ** (-(2 * i) / 128));
    expect(compare(rope(x, { positions }).toArray(), exact).relL2).toBeLessThanOrEqual(2e-6);
  });

  it.each(FLOAT_DTYPES)('%s keeps the length of every rotated pair (a rotation is orthogonal)', (dtype) => {
    const shape = [4, 8, 128] as const;
    const x = randn(shape, dtype, 30_530 + FLOAT_DTYPES.indexOf(dtype));
    const xs = f64(x);
    const ys = f64(rope(x, { positions: [1, 99, 4096, 100_000] }));
    let worst = 0;
    for (let v = 0; v < 4 * 8; v++) {
      for (let i = 0; i < 64; i++) {
        const lo = v * 128 + i;
        const r0 = Math.hypot(xs[lo]!, xs[lo + 64]!);
        worst = Math.max(worst, Math.abs(Math.hypot(ys[lo]!, ys[lo + 64]!) - r0) / r0);
      }
    }
    // Each output carries half a step of rounding relative to the pair's length: 2^-(p+1) at most.
    expect(worst).toBeLessThanOrEqual(2 ** -MANTISSA_BITS[dtype]);
  });

  it('accepts positions as number[], Int32Array and an i32 tensor', () => {
    const x = randn([3, 2, 8], 'bf16', 30_540);
    const positions = [11, 0, 2024];
    const expected = roundAll(ropeRef(f64(x), [3, 2, 8], positions, 1e6), 'bf16');
    for (const p of [positions, Int32Array.from(positions), Tensor.fromArray(positions, { dtype: 'i32' })]) {
      expectNear(rope(x, { positions: p }), expected, 'bf16');
    }
  });

  it.each(FLOAT_DTYPES)('%s propagates NaN to the rotated pair only', (dtype) => {
    const vals = randn([1, 1, 8], dtype, 30_550 + FLOAT_DTYPES.indexOf(dtype)).toArray();
    vals[1] = Number.NaN;
    const y = rope(Tensor.fromArray(vals, { shape: [1, 1, 8], dtype }), { positions: [3] }).toArray();
    expect(y[1]).toBeNaN();
    expect(y[5]).toBeNaN();
    for (const i of [0, 2, 3, 4, 6, 7]) expect(Number.isFinite(y[i]!)).toBe(true);
  });

  it('validates x', () => {
    for (const d of ODD_SIZES) {
      expectQkError(
        () => rope(randn([2, 2, d], 'f32', 30_600 + d), { positions: [0, 1] }),
        QkShapeError,
        'QK_SHAPE',
        'rope:',
        '"x"',
        'even',
      );
    }
    expectQkError(
      () => rope(randn([2, 8], 'f32', 30_601), { positions: [0, 1] }),
      QkShapeError,
      'QK_SHAPE',
      'rope:',
      '"x"',
    );
    expectQkError(
      () => rope(randn([1, 2, 2, 8], 'f32', 30_602), { positions: [0] }),
      QkShapeError,
      'QK_SHAPE',
      'rope:',
      '"x"',
    );
    const ints = Tensor.fromArray([1, 2, 3, 4], {
      shape: [1, 1, 4],
      dtype: 'i32',
    }) as unknown as Tensor<'f32'>;
    expectQkError(() => rope(ints, { positions: [0] }), QkDtypeError, 'QK_DTYPE', 'rope:', '"x"', 'i32');
    expectQkError(
      () => rope(disposed(randn([1, 1, 4], 'f32', 30_603)), { positions: [0] }),
      QkDisposedError,
      'QK_DISPOSED',
      'rope (argument "x")',
    );
  });

  it('validates positions', () => {
    const x = randn([3, 2, 8], 'f32', 30_610);
    for (const positions of [[0, 1], [0, 1, 2, 3], []]) {
      expectQkError(
        () => rope(x, { positions }),
        QkShapeError,
        'QK_SHAPE',
        'rope:',
        '"positions"',
        '3 positions',
      );
    }
    for (const bad of [1.5, -1, Number.NaN, Number.POSITIVE_INFINITY, -0.5]) {
      expectQkError(
        () => rope(x, { positions: [0, bad, 2] }),
        QkValueError,
        'QK_VALUE',
        'rope:',
        '"positions"',
      );
    }
    expectQkError(
      () => rope(x, {} as unknown as { positions: number[] }),
      QkValueError,
      'QK_VALUE',
      'rope:',
      '"positions"',
    );
    const spent = Tensor.fromArray([0, 1, 2], { dtype: 'i32' });
    spent.dispose();
    expectQkError(
      () => rope(x, { positions: spent }),
      QkDisposedError,
      'QK_DISPOSED',
      'rope (argument "positions")',
    );
    // Float positions would silently round (bf16 holds integers exactly only up to 256): refused.
    const floats = Tensor.fromArray([0, 1, 257], { dtype: 'bf16' }) as unknown as Tensor<'i32'>;
    expectQkError(
      () => rope(x, { positions: floats }),
      QkDtypeError,
      'QK_DTYPE',
      'rope:',
      '"positions"',
      'bf16',
    );
  });

  it('validates theta', () => {
    const x = randn([1, 2, 8], 'f32', 30_620);
    for (const theta of [0, -10_000, Number.NaN, Number.POSITIVE_INFINITY]) {
      expectQkError(() => rope(x, { positions: [1], theta }), QkValueError, 'QK_VALUE', 'rope:', '"theta"');
    }
  });
});

// ---------------------------------------------------------------------------------------------------------
describe('ropeInvFreq', () => {
  it.each([
    [128, 1e6],
    [128, 1e4],
    [64, 5e5],
    [2, 1e6],
    [10, 2.5],
  ])(
    'headDim %d, theta %d: float32 values within two float32 steps of theta^(−2i/headDim)',
    (headDim, theta) => {
      // HF's recipe rounds to float32 twice (the power, then its reciprocal): at most half a step each, and the
      // relative step may differ by 2× across a power of two, so allow two steps at the exact value.
      const inv = ropeInvFreq(headDim, theta);
      expect(inv).toBeInstanceOf(Float32Array);
      expect(inv.length).toBe(headDim / 2);
      expect(inv[0]).toBe(1);
      for (let i = 0; i < inv.length; i++) {
        const exact = theta ** (-(2 * i) / headDim);
        expect(inv[i]).toBe(Math.fround(inv[i]!));
        expect(Math.abs(inv[i]! - exact)).toBeLessThanOrEqual(2 * ulpAt(exact, 'f32'));
        if (i > 0) expect(inv[i]!).toBeLessThan(inv[i - 1]!);
      }
    },
  );

  it('known values: theta 1e4, headDim 4 gives [1, 1/100]; theta 1e6, headDim 128 has 1/1000 at i = 32', () => {
    expect(Array.from(ropeInvFreq(4, 1e4))).toEqual([1, Math.fround(0.01)]);
    expect(ropeInvFreq(128, 1e6)[32]).toBe(Math.fround(0.001));
    expect(roundToDType(ropeInvFreq(128, 1e6)[64 - 1]!, 'f32')).toBeGreaterThan(1e-6);
  });

  it('validates headDim and theta', () => {
    for (const headDim of [7, 1, -2, 2.5, Number.NaN]) {
      expectQkError(() => ropeInvFreq(headDim, 1e6), QkValueError, 'QK_VALUE', 'ropeInvFreq:', '"headDim"');
    }
    for (const theta of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expectQkError(() => ropeInvFreq(128, theta), QkValueError, 'QK_VALUE', 'ropeInvFreq:', '"theta"');
    }
  });
});
