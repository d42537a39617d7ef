import { describe, expect, it } from 'vitest';
import { decodeNonFiniteStats } from '../src/cuda/elementwise.js';
import { cudaAvailable, findNonFinite, nonFiniteStats, QkDtypeError, Tensor } from '../src/index.js';

describe('findNonFinite', () => {
  it('counts NaN and ±Inf and finds the first, at every float dtype', () => {
    for (const dtype of ['f32', 'f16', 'bf16'] as const) {
      const values = Array.from({ length: 37 }, (_, i) => (i % 5) - 2.5);
      values[4] = Number.NaN;
      values[20] = Number.POSITIVE_INFINITY;
      values[36] = Number.NEGATIVE_INFINITY;
      const t = Tensor.fromArray(values, { dtype: dtype });
      expect(findNonFinite(t)).toEqual({ count: 3, first: 4 });
      expect(findNonFinite(Tensor.fromArray([1, -2, 65504, 0], { dtype: dtype }))).toEqual({
        count: 0,
        first: -1,
      });
    }
  });

  it('treats an f16 value past 65504 as the Inf it rounds to, and bf16 max as finite', () => {
    // 70000 rounds to +Inf in f16; bf16 reaches ~3.4e38.
    expect(findNonFinite(Tensor.fromArray([1, 70000], { dtype: 'f16' }))).toEqual({ count: 1, first: 1 });
    expect(findNonFinite(Tensor.fromArray([3e38], { dtype: 'bf16' }))).toEqual({ count: 0, first: -1 });
  });

  it('reads raw bit patterns: every NaN payload counts, subnormals do not', () => {
    const bits = new Uint16Array([0x0001, 0x7f81, 0xffff, 0x8001, 0x7f7f]);
    expect(nonFiniteStats(bits, 'bf16')).toEqual({ count: 2, first: 1 });
    expect(nonFiniteStats(new Uint16Array([0x03ff, 0x7c01, 0x7bff]), 'f16')).toEqual({ count: 1, first: 1 });
  });

  it('refuses integer tensors with a typed error', () => {
    expect(() => findNonFinite(Tensor.fromArray([1, 2], { dtype: 'i32' }))).toThrow(QkDtypeError);
  });

  it('decodes the kernel layout: counts and indices past 2^32, and all ones as "none"', () => {
    expect(decodeNonFiniteStats([5, 0, -1, -1])).toEqual({ count: 5, first: -1 });
    expect(decodeNonFiniteStats([1, 1, 7, 2])).toEqual({ count: 2 ** 32 + 1, first: 2 * 2 ** 32 + 7 });
    expect(decodeNonFiniteStats([-1, 0, 0, 0])).toEqual({ count: 2 ** 32 - 1, first: 0 });
  });

  it.runIf(cudaAvailable())('agrees with the reference on the GPU, on views and odd sizes', () => {
    for (const dtype of ['f32', 'f16', 'bf16'] as const) {
      const values = Array.from({ length: 1031 }, (_, i) => Math.sin(i));
      for (const at of [0, 9, 512, 1030]) values[at] = at % 2 ? Number.NaN : Number.NEGATIVE_INFINITY;
      const host = Tensor.fromArray(values, { dtype: dtype });
      const gpu = host.to('cuda');
      try {
        expect(findNonFinite(gpu)).toEqual(findNonFinite(host));
        for (const [a, b] of [
          [1, 1031],
          [3, 700],
          [10, 512],
        ] as const) {
          const v = gpu.slice(a, b);
          const h = host.slice(a, b);
          expect(findNonFinite(v)).toEqual(findNonFinite(h));
          v.dispose();
          h.dispose();
        }
      } finally {
        gpu.dispose();
      }
    }
  });
});
