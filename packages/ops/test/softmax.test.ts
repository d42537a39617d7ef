import { describe, expect, it } from 'vitest';
import {
  QkDisposedError,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  roundToDType,
  type Shape,
  softmax,
  Tensor,
} from '../src/index.js';
import { expectMatches, expectQkError, FLOAT_DTYPES, f64, ODD_SIZES, randn } from './helpers.js';

/** Row-wise softmax of x/T in float64: exp((x − max)/T) / Σ exp((x − max)/T). */
function refSoftmax(x: Float64Array, n: number, temperature = 1): Float64Array {
  const y = new Float64Array(x.length);
  for (let base = 0; base < x.length; base += n) {
    let max = -Infinity;
    for (let i = 0; i < n; i++) if (x[base + i]! > max) max = x[base + i]!;
    let sum = 0;
    for (let i = 0; i < n; i++) {
      const e = Math.exp((x[base + i]! - max) / temperature);
      y[base + i] = e;
      sum += e;
    }
    for (let i = 0; i < n; i++) y[base + i] = y[base + i]! / sum;
  }
  return y;
}

describe('softmax: float64 oracle', () => {
  ODD_SIZES.forEach((n, ni) => {
    FLOAT_DTYPES.forEach((dtype, di) => {
      it(`[3, ${n}] in ${dtype}`, () => {
        const x = randn([3, n], dtype, 100 + ni * 10 + di, 3);
        const before = x.data.slice();
        const y = softmax(x);
        expect(y.shape).toEqual([3, n]);
        expectMatches(y, refSoftmax(f64(x), n), dtype, { cancellationFloor: 0 });
        expect(Array.from(x.data)).toEqual(Array.from(before));
      });
    });
  });

  const temps = [0.1, 0.7, 1, 2.5, 100];
  temps.forEach((temperature, ti) => {
    FLOAT_DTYPES.forEach((dtype, di) => {
      it(`temperature ${temperature} in ${dtype}, leading dims [2, 3, 37]`, () => {
        const shape: Shape = [2, 3, 37];
        const x = randn(shape, dtype, 200 + ti * 10 + di, 2);
        const y = softmax(x, { temperature });
        expect(y.shape).toEqual(shape);
        expectMatches(y, refSoftmax(f64(x), 37, temperature), dtype, { cancellationFloor: 0 });
      });
    });
  });

  it('a full Qwen3 vocabulary row (151936) in f32', () => {
    const n = 151936;
    const x = randn([1, n], 'f32', 300, 4);
    const y = softmax(x);
    const expected = refSoftmax(f64(x), n);
    expectMatches(y, expected, 'f32', { cancellationFloor: 0 });
  });

  it('rank-1 input', () => {
    const x = randn([7], 'bf16', 310);
    const y = softmax(x);
    expect(y.shape).toEqual([7]);
    expectMatches(y, refSoftmax(f64(x), 7), 'bf16', { cancellationFloor: 0 });
  });

  it('rows sum to 1 (f32, within rounding of n terms)', () => {
    const x = randn([4, 989], 'f32', 320, 5);
    const y = softmax(x, { temperature: 0.5 }).toArray();
    for (let r = 0; r < 4; r++) {
      let s = 0;
      for (let i = 0; i < 989; i++) s += y[r * 989 + i]!;
      expect(Math.abs(s - 1)).toBeLessThan(989 * 2 ** -24);
    }
  });
});

describe('softmax: known values', () => {
  FLOAT_DTYPES.forEach((dtype) => {
    it(`equal logits give 1/n (${dtype})`, () => {
      for (const n of [1, 3, 7, 128]) {
        const x = Tensor.full([2, n], 1.5, dtype);
        const y = softmax(x, { temperature: 0.3 }).toArray();
        for (const v of y) expect(v).toBe(roundToDType(1 / n, dtype));
      }
    });
  });

  it('two logits: softmax([a, b]) = [σ(a−b), σ(b−a)], and temperature divides the gap', () => {
    const expected = [Math.E / (1 + Math.E), 1 / (1 + Math.E)].map(Math.fround);
    expect(softmax(Tensor.fromArray([1, 0])).toArray()).toEqual(expected);
    expect(softmax(Tensor.fromArray([2, 0]), { temperature: 2 }).toArray()).toEqual(expected);
    expect(softmax(Tensor.fromArray([0.25, 0]), { temperature: 0.25 }).toArray()).toEqual(expected);
  });

  it('is shift invariant and does not overflow on huge logits', () => {
    const y = softmax(Tensor.fromArray([1000, 999, 998])).toArray();
    const e = [1, Math.exp(-1), Math.exp(-2)];
    const s = e[0]! + e[1]! + e[2]!;
    expect(y).toEqual(e.map((v) => Math.fround(v / s)));
    expect(softmax(Tensor.fromArray([-3e38, 3e38, 3e38])).toArray()).toEqual([0, 0.5, 0.5]);
  });

  it('masked (−Infinity) logits get probability 0', () => {
    const y = softmax(Tensor.fromArray([0, -Infinity, 0, -Infinity], { dtype: 'bf16' })).toArray();
    expect(y).toEqual([0.5, 0, 0.5, 0]);
  });

  it('a row that is entirely −Infinity becomes NaN, like PyTorch; other rows are unaffected', () => {
    const y = softmax(
      Tensor.fromArray([
        [-Infinity, -Infinity],
        [0, 0],
      ]),
    ).toArray();
    expect(Number.isNaN(y[0])).toBe(true);
    expect(Number.isNaN(y[1])).toBe(true);
    expect(y.slice(2)).toEqual([0.5, 0.5]);
  });

  it('a row containing NaN becomes NaN', () => {
    const y = softmax(
      Tensor.fromArray([
        [1, Number.NaN, 2],
        [1, 1, 1],
      ]),
    ).toArray();
    expect(y.slice(0, 3).every(Number.isNaN)).toBe(true);
    expect(y.slice(3)).toEqual([1, 1, 1].map(() => Math.fround(1 / 3)));
  });

  it('a tiny temperature approaches one-hot at the maximum', () => {
    const y = softmax(Tensor.fromArray([1, 3, 2, 3 - 1e-3]), { temperature: 1e-6 }).toArray();
    expect(y).toEqual([0, 1, 0, 0]);
    // A subnormal temperature must not overflow x/T into ∞ − ∞ = NaN.
    const z = softmax(
      Tensor.fromArray([
        [1, 3, 2],
        [-5, -5, -7],
      ]),
      { temperature: 1e-320 },
    ).toArray();
    expect(z).toEqual([0, 1, 0, 0.5, 0.5, 0]);
  });
});

describe('softmax: validation', () => {
  const x = randn([2, 5], 'f32', 400);

  it('rejects non-positive or non-finite temperatures', () => {
    for (const temperature of [0, -1, Number.NaN, Infinity, -Infinity]) {
      expectQkError(() => softmax(x, { temperature }), QkValueError, 'QK_VALUE', 'softmax', '"temperature"');
    }
  });

  it('rejects integer dtypes', () => {
    const xi = Tensor.fromArray([1, 2, 3], { dtype: 'i32' });
    expectQkError(() => softmax(xi as never), QkDtypeError, 'QK_DTYPE', 'softmax', '"x"', 'i32');
  });

  it('rejects a scalar', () => {
    expectQkError(() => softmax(Tensor.fromArray(3)), QkShapeError, 'QK_SHAPE', 'softmax', '"x"');
  });

  it('rejects disposed tensors and non-tensors', () => {
    const gone = randn([3], 'f32', 401);
    gone.dispose();
    expectQkError(() => softmax(gone), QkDisposedError, 'QK_DISPOSED', 'softmax', '"x"');
    expectQkError(() => softmax([1, 2] as never), QkValueError, 'QK_VALUE', 'softmax', '"x"');
  });
});
