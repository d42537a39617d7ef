import { describe, expect, it } from 'vitest';
import { rotationsFor, summarize } from '../src/index.js';

describe('summarize', () => {
  it('gives nearest-rank median, p10, p90 and min of unsorted samples', () => {
    // 1..100 shuffled deterministically: nearest-rank p10 = 10, median = 50, p90 = 90.
    const values = Array.from({ length: 100 }, (_, i) => ((i * 37) % 100) + 1);
    const s = summarize(values);
    expect(s).toEqual({ median: 50, p10: 10, p90: 90, min: 1, samples: 100 });
  });

  it('handles a single sample and refuses none', () => {
    expect(summarize([3.5])).toEqual({ median: 3.5, p10: 3.5, p90: 3.5, min: 3.5, samples: 1 });
    expect(() => summarize([])).toThrow(/no samples/);
  });
});

describe('rotationsFor', () => {
  it('covers twice the L2 cache with input sets, between 2 and 64 sets', () => {
    const l2 = 50 * 2 ** 20;
    expect(rotationsFor(1 * 2 ** 20, l2)).toBe(64); // 100 sets needed, capped
    expect(rotationsFor(10 * 2 ** 20, l2)).toBe(10);
    expect(rotationsFor(33 * 2 ** 20, l2)).toBe(4); // ceil(100 / 33)
    expect(rotationsFor(500 * 2 ** 20, l2)).toBe(2);
    for (const bytes of [1e6, 7e6, 3e7, 2e8]) {
      const r = rotationsFor(bytes, l2);
      expect(r * bytes >= 2 * l2 || r === 64).toBe(true);
    }
  });
});
