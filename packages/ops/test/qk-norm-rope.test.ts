/**
 * qkNormRope against a float64 oracle written here: each head vector is normalised, v = x·w / sqrt(Σx²/d + eps),
 * then rotated (rotate-half) by the float32 angle HF builds, fround(p · invFreq[i]) with
 * invFreq[i] = fround(1 / fround(theta^fround(2i/d))), cos/sin and the products in float64, rounded once.
 */
import { describe, expect, it } from 'vitest';
import {
  type FloatDType,
  QkDisposedError,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  qkNormRope,
  type Shape,
  Tensor,
} from '../src/index.js';
import { expectNear, expectQkError, FLOAT_DTYPES, f64, ODD_SIZES, randn, roundAll } from './helpers.js';

// ---------------------------------------------------------------------------------------------------------
// Tolerances, derived from the formats. The op and the oracle evaluate the same float64 expressions (in another
// order: relative differences of a few 2^-53) and round once, so elementwise they differ by at most one step of
// the output grid. Relative L2: f32 keeps 24 bits (1e-6 leaves > 10× room over 2^-24), f16 11 bits (2^-11),
// bf16 8 bits (2^-8).
// ---------------------------------------------------------------------------------------------------------

/** HF's float32 rotary angle of pair i at position p for a head of `headDim`. */
function hfAngle(p: number, i: number, headDim: number, theta: number): number {
  const f = Math.fround;
  const inv = f(1 / f(theta ** f((2 * i) / headDim)));
  return f(p * inv);
}

/** float64 per-head RMSNorm then rotate-half RoPE of x [tokens, heads, headDim]. */
function qkNormRopeRef(
  x: ArrayLike<number>,
  w: ArrayLike<number>,
  shape: Shape,
  positions: ArrayLike<number>,
  theta: number,
  eps: number,
): Float64Array {
  const [tokens, heads, d] = shape as [number, number, number];
  const half = d / 2;
  const out = new Float64Array(x.length);
  const v = new Float64Array(d);
  for (let t = 0; t < tokens; t++) {
    for (let h = 0; h < heads; h++) {
      const base = (t * heads + h) * d;
      let sumSq = 0;
      for (let i = 0; i < d; i++) sumSq += x[base + i]! ** 2;
      const rms = Math.sqrt(sumSq / d + eps);
      for (let i = 0; i < d; i++) v[i] = (x[base + i]! * w[i]!) / rms;
      for (let i = 0; i < half; i++) {
        const phi = hfAngle(positions[t]!, i, d, theta);
        const c = Math.cos(phi);
        const s = Math.sin(phi);
        out[base + i] = v[i]! * c - v[half + i]! * s;
        out[base + half + i] = v[half + i]! * c + v[i]! * s;
      }
    }
  }
  return out;
}

interface Case {
  shape: [number, number, number];
  positions: number[];
  theta?: number;
  eps?: number;
  label: string;
}

const SHAPES: Case[] = [
  { shape: [4, 16, 128], positions: [0, 5, 17, 8191], label: 'Qwen3-0.6B q, 16 heads' },
  { shape: [3, 32, 128], positions: [7, 1000, 32767], label: 'Qwen3-8B q, 32 heads' },
  { shape: [5, 8, 128], positions: [4096, 3, 0, 65536, 12345], label: 'k, 8 KV heads, unsorted positions' },
  { shape: [3, 3, 64], positions: [9, 8, 7], theta: 10_000, eps: 1e-5, label: 'theta 1e4, eps 1e-5' },
  ...ODD_SIZES.map(
    (s): Case => ({ shape: [3, 2, 2 * s], positions: [0, 1, 777], label: `${s} (odd) rotation pairs` }),
  ),
];
const CASES = FLOAT_DTYPES.flatMap((dtype, d) =>
  SHAPES.map((c, s) => ({ dtype, ...c, seed: 50_000 + 100 * d + s })),
);

function disposed<D extends FloatDType>(t: Tensor<D>): Tensor<D> {
  t.dispose();
  return t;
}

// ---------------------------------------------------------------------------------------------------------
describe('qkNormRope', () => {
  it.each(CASES)('$dtype $shape ($label) matches the float64 norm and rotation rounded once', (c) => {
    const { dtype, shape, positions, seed } = c;
    const theta = c.theta ?? 1e6;
    const eps = c.eps ?? 1e-6;
    const x = randn(shape, dtype, seed, 2);
    const w = randn([shape[2]], dtype, seed + 50);
    const before = x.toArray();
    const options = { positions, ...(c.theta ? { theta } : {}), ...(c.eps ? { eps } : {}) };
    const y = qkNormRope(x, w, options);
    expect(y.shape).toEqual(shape);
    expect(y.dtype).toBe(dtype);
    expect(y.data).not.toBe(x.data);
    expectNear(y, roundAll(qkNormRopeRef(f64(x), f64(w), shape, positions, theta, eps), dtype), dtype);
    expect(x.toArray()).toEqual(before);
  });

  it.each(FLOAT_DTYPES)('%s: positions as number[], Int32Array and an i32 tensor agree', (dtype) => {
    const shape = [3, 2, 16] as [number, number, number];
    const x = randn(shape, dtype, 50_400);
    const w = randn([16], dtype, 50_401);
    const positions = [11, 0, 2024];
    const expected = roundAll(qkNormRopeRef(f64(x), f64(w), shape, positions, 1e6, 1e-6), dtype);
    for (const p of [positions, Int32Array.from(positions), Tensor.fromArray(positions, { dtype: 'i32' })]) {
      expectNear(qkNormRope(x, w, { positions: p }), expected, dtype);
    }
  });

  it('at position 0 it is the per-head RMSNorm: a constant head c with weight 1 gives c/sqrt(c² + eps)', () => {
    const c = 3;
    const eps = 0.5;
    const x = Tensor.full([1, 2, 8], c);
    const y = qkNormRope(x, Tensor.ones([8]), { positions: [0], eps }).toArray();
    expect(y).toEqual(new Array(16).fill(Math.fround(c / Math.sqrt(c * c + eps))));
  });

  it('headDim 2 normalises the pair to length √2 (weight 1, eps → 0) and rotates it by p radians', () => {
    // x = (3, 4): rms = sqrt((9 + 16)/2), v = (3, 4)·√2/5; the angle of pair 0 is p · 1.
    const x = Tensor.fromArray([[[3, 4]], [[3, 4]]]);
    const eps = 1e-30;
    const y = qkNormRope(x, Tensor.ones([2]), { positions: [1, 2], eps }).toArray();
    const k = Math.SQRT2 / 5;
    const expected = [1, 2].flatMap((p) => [
      k * (3 * Math.cos(p) - 4 * Math.sin(p)),
      k * (4 * Math.cos(p) + 3 * Math.sin(p)),
    ]);
    expect(y).toEqual(expected.map(Math.fround));
    expect(Math.hypot(y[0]!, y[1]!)).toBeCloseTo(Math.SQRT2, 6);
  });

  it.each(FLOAT_DTYPES)(
    '%s keeps heads independent: scaling one head does not change the others',
    (dtype) => {
      const shape = [2, 4, 32] as [number, number, number];
      const xs = randn(shape, dtype, 50_500).toArray();
      const w = randn([32], dtype, 50_501);
      const y0 = qkNormRope(Tensor.fromArray(xs, { shape, dtype }), w, { positions: [3, 4000] }).toArray();
      // Head 1 of token 0 scaled by 4 (exact in every format): its own output is unchanged up to eps, others equal.
      const scaled = xs.map((v, i) => (i >= 32 && i < 64 ? v * 4 : v));
      const y1 = qkNormRope(Tensor.fromArray(scaled, { shape, dtype }), w, {
        positions: [3, 4000],
      }).toArray();
      for (let i = 0; i < y0.length; i++) if (i < 32 || i >= 64) expect(y1[i]).toBe(y0[i]);
    },
  );

  it.each(FLOAT_DTYPES)('%s propagates NaN to its own head only', (dtype) => {
    const vals = randn([1, 2, 8], dtype, 50_550 + FLOAT_DTYPES.indexOf(dtype)).toArray();
    vals[1] = Number.NaN;
    const x = Tensor.fromArray(vals, { shape: [1, 2, 8], dtype });
    const y = qkNormRope(x, Tensor.ones([8], dtype), { positions: [3] }).toArray();
    for (let i = 0; i < 8; i++) expect(y[i]).toBeNaN();
    for (let i = 8; i < 16; i++) expect(Number.isFinite(y[i]!)).toBe(true);
  });

  it('writes into out when given (same shape and dtype) and returns it', () => {
    const x = randn([2, 3, 8], 'bf16', 50_600);
    const w = randn([8], 'bf16', 50_601);
    const out = Tensor.empty([2, 3, 8], 'bf16');
    const y = qkNormRope(x, w, { positions: [1, 2], out });
    expect(y).toBe(out);
    const expected = roundAll(qkNormRopeRef(f64(x), f64(w), [2, 3, 8], [1, 2], 1e6, 1e-6), 'bf16');
    expectNear(out, expected, 'bf16');
    expectQkError(
      () => qkNormRope(x, w, { positions: [1, 2], out: Tensor.empty([2, 3, 7], 'bf16') }),
      QkShapeError,
      'QK_SHAPE',
      'qkNormRope:',
      '"out"',
    );
    expectQkError(
      () => qkNormRope(x, w, { positions: [1, 2], out: Tensor.empty([2, 3, 8], 'f32') }),
      QkDtypeError,
      'QK_DTYPE',
      'qkNormRope:',
      '"out"',
    );
  });

  it('validates x and weight', () => {
    const x = randn([2, 2, 8], 'f32', 50_700);
    const w = randn([8], 'f32', 50_701);
    const positions = [0, 1];
    for (const d of ODD_SIZES) {
      expectQkError(
        () => qkNormRope(randn([2, 2, d], 'f32', 50_710 + d), randn([d], 'f32', 50_711), { positions }),
        QkShapeError,
        'QK_SHAPE',
        'qkNormRope:',
        '"x"',
        'even',
      );
    }
    expectQkError(
      () => qkNormRope(randn([2, 8], 'f32', 50_702), w, { positions }),
      QkShapeError,
      'QK_SHAPE',
      'qkNormRope:',
      '"x"',
    );
    expectQkError(
      () => qkNormRope(x, randn([6], 'f32', 50_703), { positions }),
      QkShapeError,
      'QK_SHAPE',
      'qkNormRope:',
      '"weight"',
    );
    expectQkError(
      () => qkNormRope(x, randn([1, 8], 'f32', 50_704), { positions }),
      QkShapeError,
      'QK_SHAPE',
      'qkNormRope:',
      '"weight"',
    );
    expectQkError(
      () => qkNormRope(x, randn([8], 'bf16', 50_705) as unknown as Tensor<'f32'>, { positions }),
      QkDtypeError,
      'QK_DTYPE',
      'qkNormRope:',
      '"weight"',
      'bf16',
    );
    const ints = Tensor.fromArray(new Array(32).fill(1), { shape: [2, 2, 8], dtype: 'i32' });
    expectQkError(
      () => qkNormRope(ints as unknown as Tensor<'f32'>, w, { positions }),
      QkDtypeError,
      'QK_DTYPE',
      'qkNormRope:',
      '"x"',
      'i32',
    );
    expectQkError(
      () => qkNormRope(disposed(randn([2, 2, 8], 'f32', 50_706)), w, { positions }),
      QkDisposedError,
      'QK_DISPOSED',
      'qkNormRope (argument "x")',
    );
    expectQkError(
      () => qkNormRope(x, disposed(randn([8], 'f32', 50_707)), { positions }),
      QkDisposedError,
      'QK_DISPOSED',
      'qkNormRope (argument "weight")',
    );
  });

  it('validates positions, theta and eps', () => {
    const x = randn([3, 2, 8], 'f32', 50_800);
    const w = randn([8], 'f32', 50_801);
    for (const positions of [[0, 1], [0, 1, 2, 3], []]) {
      expectQkError(
        () => qkNormRope(x, w, { positions }),
        QkShapeError,
        'QK_SHAPE',
        'qkNormRope:',
        '"positions"',
        '3 positions',
      );
    }
    for (const bad of [1.5, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expectQkError(
        () => qkNormRope(x, w, { positions: [0, bad, 2] }),
        QkValueError,
        'QK_VALUE',
        'qkNormRope:',
        '"positions"',
      );
    }
    expectQkError(
      () => qkNormRope(x, w, {} as unknown as { positions: number[] }),
      QkValueError,
      'QK_VALUE',
      'qkNormRope:',
      '"positions"',
    );
    const floats = Tensor.fromArray([0, 1, 2], { dtype: 'f32' }) as unknown as Tensor<'i32'>;
    expectQkError(
      () => qkNormRope(x, w, { positions: floats }),
      QkDtypeError,
      'QK_DTYPE',
      'qkNormRope:',
      '"positions"',
      'f32',
    );
    for (const theta of [0, -10_000, Number.NaN, Number.POSITIVE_INFINITY]) {
      expectQkError(
        () => qkNormRope(x, w, { positions: [0, 1, 2], theta }),
        QkValueError,
        'QK_VALUE',
        'qkNormRope:',
        '"theta"',
      );
    }
    for (const eps of [0, -1e-6, Number.NaN, '1e-6']) {
      expectQkError(
        () => qkNormRope(x, w, { positions: [0, 1, 2], eps: eps as number }),
        QkValueError,
        'QK_VALUE',
        'qkNormRope:',
        '"eps"',
      );
    }
  });
});
