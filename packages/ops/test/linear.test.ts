import { describe, expect, it } from 'vitest';
import {
  type Activation,
  linear,
  QkDisposedError,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  type Shape,
  Tensor,
} from '../src/index.js';
import { expectMatches, expectQkError, FLOAT_DTYPES, f64, randn, sameBits } from './helpers.js';

// ---------------------------------------------------------------------------------------------------------
// Independent float64 oracle.
// ---------------------------------------------------------------------------------------------------------

// Five-point Gauss–Legendre rule on [-1, 1].
const GL_NODES = [-0.906179845938664, -0.5384693101056831, 0, 0.5384693101056831, 0.906179845938664];
const GL_WEIGHTS = [
  0.2369268850561891, 0.4786286704993665, 0.5688888888888889, 0.4786286704993665, 0.2369268850561891,
];

/** ∫_a^b (2/√π) e^(−t²) dt by Gauss–Legendre; exact to float64 rounding on the short intervals used here. */
function gaussIntegral(a: number, b: number): number {
  const mid = (a + b) / 2;
  const half = (b - a) / 2;
  let s = 0;
  for (let i = 0; i < GL_NODES.length; i++) {
    const t = mid + half * GL_NODES[i]!;
    s += GL_WEIGHTS[i]! * Math.exp(-t * t);
  }
  return (s * half * 2) / Math.sqrt(Math.PI);
}

const ERF_STEP = 1 / 32;
const ERF_TABLE: number[] = [0];
for (let k = 1; k <= 8 / ERF_STEP; k++)
  ERF_TABLE.push(ERF_TABLE[k - 1]! + gaussIntegral((k - 1) * ERF_STEP, k * ERF_STEP));

/** erf by numeric integration of its defining integral (independent of the library's series/fraction). */
function erfRef(x: number): number {
  const ax = Math.abs(x);
  if (ax >= 8) return Math.sign(x); // erfc(8) ≈ 1e-29, far below float64 resolution near 1
  const k = Math.floor(ax / ERF_STEP);
  return Math.sign(x) * (ERF_TABLE[k]! + gaussIntegral(k * ERF_STEP, ax));
}

const ACTIVATIONS: Record<Activation, (v: number) => number> = {
  none: (v) => v,
  silu: (v) => v / (1 + Math.exp(-v)),
  gelu: (v) => 0.5 * v * (1 + erfRef(v / Math.SQRT2)),
  gelu_tanh: (v) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3))),
};

/** y[r, o] = act(Σ_k x[r, k] w[o, k] + b[o]) in float64, straight loops. */
function refLinear(
  x: Float64Array,
  w: Float64Array,
  n: number,
  outFeatures: number,
  bias: Float64Array | undefined,
  act: (v: number) => number,
): Float64Array {
  const rows = x.length / n;
  const y = new Float64Array(rows * outFeatures);
  for (let r = 0; r < rows; r++) {
    for (let o = 0; o < outFeatures; o++) {
      let s = 0;
      for (let k = 0; k < n; k++) s += x[r * n + k]! * w[o * n + k]!;
      if (bias !== undefined) s += bias[o]!;
      y[r * outFeatures + o] = act(s);
    }
  }
  return y;
}

const lastDim = (s: Shape): number => s[s.length - 1]!;

// ---------------------------------------------------------------------------------------------------------

describe('erf oracle (sanity of the test itself)', () => {
  it('matches tabulated values of erf', () => {
    const known: [number, number][] = [
      [0.5, 0.5204998778130465],
      [1, 0.8427007929497149],
      [2, 0.9953222650189527],
      [3, 0.9999779095030014],
    ];
    for (const [x, v] of known) {
      expect(Math.abs(erfRef(x) - v)).toBeLessThan(1e-14);
      expect(Math.abs(erfRef(-x) + v)).toBeLessThan(1e-14);
    }
    expect(erfRef(0)).toBe(0);
  });
});

describe('linear: float64 oracle at odd sizes', () => {
  // [x shape, out features]: in/out features cover 1, 7, 111, 989 and 4097.
  const cases: [Shape, number][] = [
    [[3, 4097], 37],
    [[2, 989], 111],
    [[4, 111], 989],
    [[5, 7], 1],
    [[1, 1], 7],
    [[3, 1], 1],
    [[6, 7], 4097],
  ];
  cases.forEach(([xShape, outFeatures], ci) => {
    FLOAT_DTYPES.forEach((dtype, di) => {
      it(`x ${JSON.stringify(xShape)} × weight [${outFeatures}, ${lastDim(xShape)}] in ${dtype}`, () => {
        const n = lastDim(xShape);
        const x = randn(xShape, dtype, 1000 + ci * 10 + di);
        const w = randn([outFeatures, n], dtype, 2000 + ci * 10 + di, 1 / Math.sqrt(n));
        const xBefore = x.data.slice();
        const wBefore = w.data.slice();
        const y = linear(x, w);
        expect(y.shape).toEqual([...xShape.slice(0, -1), outFeatures]);
        expectMatches(y, refLinear(f64(x), f64(w), n, outFeatures, undefined, ACTIVATIONS.none), dtype);
        expect(sameBits(x.data, xBefore)).toBe(true);
        expect(sameBits(w.data, wBefore)).toBe(true);
      });
    });
  });
});

describe('linear: Qwen3 widths', () => {
  // hidden 1024 (0.6B) and 4096 (8B); MLP widths 3072 (0.6B) and 12288 (8B) as in-features of down_proj.
  const cases: [Shape, number][] = [
    [[2, 1024], 16],
    [[1, 3072], 8],
    [[1, 4096], 8],
    [[1, 12288], 3],
  ];
  cases.forEach(([xShape, outFeatures], ci) => {
    FLOAT_DTYPES.forEach((dtype, di) => {
      it(`x ${JSON.stringify(xShape)} × [${outFeatures}, ${lastDim(xShape)}] in ${dtype}`, () => {
        const n = lastDim(xShape);
        const x = randn(xShape, dtype, 3000 + ci * 10 + di);
        const w = randn([outFeatures, n], dtype, 3500 + ci * 10 + di, 0.02);
        const y = linear(x, w);
        expect(y.shape).toEqual([...xShape.slice(0, -1), outFeatures]);
        expectMatches(y, refLinear(f64(x), f64(w), n, outFeatures, undefined, ACTIVATIONS.none), dtype);
      });
    });
  });
});

describe('linear: bias and activation epilogues', () => {
  const acts: Activation[] = ['none', 'silu', 'gelu', 'gelu_tanh'];
  acts.forEach((activation, ai) => {
    FLOAT_DTYPES.forEach((dtype, di) => {
      it(`bias + ${activation} in ${dtype}`, () => {
        const n = 111;
        const outFeatures = 37;
        const x = randn([2, 3, n], dtype, 4000 + ai * 10 + di);
        // std 3/√n puts outputs around ±3, where every activation bends.
        const w = randn([outFeatures, n], dtype, 4100 + ai * 10 + di, 3 / Math.sqrt(n));
        const bias = randn([outFeatures], dtype, 4200 + ai * 10 + di);
        const biasBefore = bias.data.slice();
        const y = linear(x, w, { bias, activation });
        expect(y.shape).toEqual([2, 3, outFeatures]);
        expectMatches(
          y,
          refLinear(f64(x), f64(w), n, outFeatures, f64(bias), ACTIVATIONS[activation]),
          dtype,
        );
        expect(sameBits(bias.data, biasBefore)).toBe(true);
      });
    });
  });

  acts.forEach((activation, ai) => {
    it(`${activation} without bias, odd sizes (989 in, 7 out), f32`, () => {
      const x = randn([4, 989], 'f32', 4300 + ai);
      const w = randn([7, 989], 'f32', 4400 + ai, 2 / Math.sqrt(989));
      const y = linear(x, w, { activation });
      expectMatches(y, refLinear(f64(x), f64(w), 989, 7, undefined, ACTIVATIONS[activation]), 'f32');
    });
  });

  it('applies the activation after the bias (hand-computed)', () => {
    // x · wᵀ = [0, 0]; bias [1, −1] → silu(1) = 1/(1+e⁻¹), silu(−1) = −1/(1+e).
    const x = Tensor.fromArray([[1, 2]]);
    const w = Tensor.fromArray([
      [2, -1],
      [-2, 1],
    ]);
    const bias = Tensor.fromArray([1, -1]);
    const y = linear(x, w, { bias, activation: 'silu' }).toArray();
    expect(y[0]).toBe(Math.fround(1 / (1 + Math.exp(-1))));
    expect(y[1]).toBe(Math.fround(-1 / (1 + Math.E)));
  });
});

describe('linear: known values', () => {
  FLOAT_DTYPES.forEach((dtype, di) => {
    it(`identity weight returns x bit-exactly (${dtype})`, () => {
      const n = 7;
      const x = randn([3, n], dtype, 5000 + di);
      const eye = Tensor.fromArray(
        Array.from({ length: n * n }, (_, i) => (Math.floor(i / n) === i % n ? 1 : 0)),
        { shape: [n, n], dtype },
      );
      const y = linear(x, eye);
      expect(sameBits(y.data, x.data)).toBe(true);
    });
  });

  it('hand-computed product with bias', () => {
    const x = Tensor.fromArray([1, 2, 3], { dtype: 'bf16' });
    const w = Tensor.fromArray(
      [
        [1, 0, -1],
        [0.5, 0.5, 0.5],
      ],
      { dtype: 'bf16' },
    );
    const bias = Tensor.fromArray([0.25, -1], { dtype: 'bf16' });
    const y = linear(x, w, { bias });
    expect(y.shape).toEqual([2]);
    expect(y.dtype).toBe('bf16');
    expect(y.toArray()).toEqual([-1.75, 2]);
  });

  it('supports leading batch dims and a rank-1 x', () => {
    const x = randn([2, 3, 5, 7], 'f32', 5100);
    const w = randn([11, 7], 'f32', 5101);
    const y = linear(x, w);
    expect(y.shape).toEqual([2, 3, 5, 11]);
    expectMatches(y, refLinear(f64(x), f64(w), 7, 11, undefined, ACTIVATIONS.none), 'f32');
    const v = randn([7], 'f16', 5102);
    const w16 = randn([11, 7], 'f16', 5103);
    const yv = linear(v, w16);
    expect(yv.shape).toEqual([11]);
    expectMatches(yv, refLinear(f64(v), f64(w16), 7, 11, undefined, ACTIVATIONS.none), 'f16');
  });

  it('zero rows of x give an empty output', () => {
    const x = Tensor.zeros([0, 7]);
    const w = randn([3, 7], 'f32', 5200);
    const y = linear(x, w);
    expect(y.shape).toEqual([0, 3]);
  });
});

describe('linear: validation', () => {
  const x = randn([2, 7], 'f32', 6000);
  const w = randn([5, 7], 'f32', 6001);

  it('rejects weight whose in-features differ from x', () => {
    const bad = randn([5, 8], 'f32', 6002);
    expectQkError(() => linear(x, bad), QkShapeError, 'QK_SHAPE', 'linear', '"weight"', '[5, 8]');
  });

  it('rejects a weight that is not rank 2', () => {
    expectQkError(() => linear(x, randn([7], 'f32', 6003)), QkShapeError, 'QK_SHAPE', 'linear', '"weight"');
    expectQkError(
      () => linear(x, randn([1, 5, 7], 'f32', 6004)),
      QkShapeError,
      'QK_SHAPE',
      'linear',
      '"weight"',
    );
  });

  it('rejects a scalar x', () => {
    expectQkError(() => linear(Tensor.fromArray(1), w), QkShapeError, 'QK_SHAPE', 'linear', '"x"');
  });

  it('rejects a dtype mismatch between x and weight, or bias', () => {
    const w16 = randn([5, 7], 'bf16', 6005);
    expectQkError(
      () => linear(x, w16 as never),
      QkDtypeError,
      'QK_DTYPE',
      'linear',
      '"weight"',
      'bf16',
      'f32',
    );
    const b16 = randn([5], 'f16', 6006);
    expectQkError(
      () => linear(x, w, { bias: b16 as never }),
      QkDtypeError,
      'QK_DTYPE',
      'linear',
      '"bias"',
      'f16',
    );
  });

  it('rejects integer tensors', () => {
    const xi = Tensor.fromArray([[1, 2, 3, 4, 5, 6, 7]], { dtype: 'i32' });
    expectQkError(() => linear(xi as never, w), QkDtypeError, 'QK_DTYPE', 'linear', '"x"', 'i32');
    const wi = Tensor.zeros([5, 7], 'i8');
    expectQkError(() => linear(x, wi as never), QkDtypeError, 'QK_DTYPE', 'linear', '"weight"', 'i8');
  });

  it('rejects a bias of the wrong shape', () => {
    expectQkError(
      () => linear(x, w, { bias: randn([4], 'f32', 6007) }),
      QkShapeError,
      'QK_SHAPE',
      'linear',
      '"bias"',
    );
    expectQkError(
      () => linear(x, w, { bias: randn([1, 5], 'f32', 6008) }),
      QkShapeError,
      'QK_SHAPE',
      'linear',
      '"bias"',
    );
  });

  it('rejects an unknown activation', () => {
    expectQkError(
      () => linear(x, w, { activation: 'relu' as Activation }),
      QkValueError,
      'QK_VALUE',
      'linear',
      '"activation"',
      'relu',
    );
  });

  it('rejects non-tensors and disposed tensors', () => {
    expectQkError(() => linear([1, 2] as never, w), QkValueError, 'QK_VALUE', 'linear', '"x"');
    const gone = randn([5, 7], 'f32', 6009);
    gone.dispose();
    expectQkError(() => linear(x, gone), QkDisposedError, 'QK_DISPOSED', 'linear', '"weight"');
    const goneX = randn([2, 7], 'f32', 6010);
    goneX.dispose();
    expectQkError(() => linear(goneX, w), QkDisposedError, 'QK_DISPOSED', 'linear', '"x"');
  });
});
