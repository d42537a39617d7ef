/**
 * The ops a KV cache needs, on the CPU: scatterRows (append rows at positions) against plain index arithmetic, and
 * attention with a run-time key count (kvLength) against attention over the live rows. Their CUDA paths are
 * checked against these by the verify cases (cuda-verify.test.ts, `qk verify`).
 */
import { describe, expect, it } from 'vitest';
import {
  attention,
  QkDtypeError,
  QkIndexError,
  QkShapeError,
  QkValueError,
  scatterRows,
  Tensor,
} from '../src/index.js';

describe('scatterRows', () => {
  it('writes each source row at its index and leaves every other row untouched', () => {
    const rows = 11;
    const dst = Tensor.randn([rows, 3, 5], { dtype: 'f32', seed: 1 });
    const before = Float32Array.from(dst.data);
    const src = Tensor.randn([3, 3, 5], { dtype: 'f32', seed: 2 });
    const index = [7, 0, 10];
    scatterRows(dst, src, index);
    for (let r = 0; r < rows; r++) {
      const k = index.indexOf(r);
      for (let e = 0; e < 15; e++) {
        const want = k >= 0 ? src.data[k * 15 + e] : before[r * 15 + e];
        expect(dst.data[r * 15 + e]).toBe(want);
      }
    }
  });

  it('copies bf16 bits exactly and takes an i32 tensor of positions', () => {
    const dst = Tensor.zeros([4, 8], 'bf16');
    const src = Tensor.randn([2, 8], { dtype: 'bf16', seed: 3 });
    scatterRows(dst, src, Tensor.fromArray([3, 1], { dtype: 'i32' }));
    expect(Array.from(dst.data.subarray(24, 32))).toEqual(Array.from(src.data.subarray(0, 8)));
    expect(Array.from(dst.data.subarray(8, 16))).toEqual(Array.from(src.data.subarray(8, 16)));
    expect(Array.from(dst.data.subarray(0, 8))).toEqual(new Array(8).fill(0));
  });

  it('refuses mismatched rows, counts, dtypes and out-of-range positions', () => {
    const dst = Tensor.zeros([4, 8], 'f32');
    expect(() => scatterRows(dst, Tensor.zeros([1, 7], 'f32'), [0])).toThrow(QkValueError);
    expect(() => scatterRows(dst, Tensor.zeros([2, 8], 'f32'), [0])).toThrow(QkValueError);
    expect(() => scatterRows(dst, Tensor.zeros([1, 8], 'bf16') as never, [0])).toThrow(QkDtypeError);
    expect(() => scatterRows(dst, Tensor.zeros([1, 8], 'f32'), [4])).toThrow(QkIndexError);
    expect(() => scatterRows(dst, Tensor.zeros([1, 8], 'f32'), [-1])).toThrow(QkIndexError);
  });
});

describe('attention with a run-time key count (kvLength)', () => {
  const [heads, kvHeads, dim, capacity] = [4, 2, 16, 40];
  const q = Tensor.randn([1, heads, dim], { dtype: 'f32', seed: 5 });
  const k = Tensor.randn([capacity, kvHeads, dim], { dtype: 'f32', seed: 6 });
  const v = Tensor.randn([capacity, kvHeads, dim], { dtype: 'f32', seed: 7 });

  for (const length of [1, 17, capacity]) {
    it(`equals attention over the first ${length} rows`, () => {
      const got = attention(q, k, v, { kvLength: Tensor.fromArray([length], { dtype: 'i32' }) });
      const want = attention(q, k.slice(0, length), v.slice(0, length));
      expect(Array.from(got.data)).toEqual(Array.from(want.data));
      // and the rows past the length do not matter
      if (length < capacity) {
        const k2 = k.clone();
        k2.data.fill(1e6, length * kvHeads * dim);
        const again = attention(q, k2, v, { kvLength: Tensor.fromArray([length], { dtype: 'i32' }) });
        expect(Array.from(again.data)).toEqual(Array.from(want.data));
      }
    });
  }

  it('refuses a length outside [1, capacity], a non-i32 or multi-element tensor, and several queries', () => {
    expect(() => attention(q, k, v, { kvLength: Tensor.fromArray([0], { dtype: 'i32' }) })).toThrow(
      QkValueError,
    );
    expect(() =>
      attention(q, k, v, { kvLength: Tensor.fromArray([capacity + 1], { dtype: 'i32' }) }),
    ).toThrow(QkValueError);
    expect(() => attention(q, k, v, { kvLength: Tensor.fromArray([3]) as never })).toThrow(QkDtypeError);
    expect(() => attention(q, k, v, { kvLength: Tensor.fromArray([3, 4], { dtype: 'i32' }) })).toThrow(
      QkShapeError,
    );
    const q2 = Tensor.randn([2, heads, dim], { dtype: 'f32', seed: 8 });
    expect(() => attention(q2, k, v, { kvLength: Tensor.fromArray([3], { dtype: 'i32' }) })).toThrow(
      QkShapeError,
    );
  });
});
