import { describe, expect, it } from 'vitest';
import {
  argmax,
  type FloatDType,
  QkDisposedError,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  Rng,
  type SampleOptions,
  sample,
  Tensor,
} from '../src/index.js';
import { expectQkError, f64, randn } from './helpers.js';

// ---------------------------------------------------------------------------------------------------------
// Independent float64 oracles.
// ---------------------------------------------------------------------------------------------------------

/** torch.argmax semantics on one row: first NaN wins, otherwise the first index of the maximum. */
function refArgmax(row: ArrayLike<number>): number {
  let best = 0;
  for (let i = 0; i < row.length; i++) {
    if (Number.isNaN(row[i]!)) return i;
    if (row[i]! > row[best]!) best = i;
  }
  return best;
}

/**
 * The distribution `sample` draws from, as (token, probability) pairs in candidate order: logits / T sorted by
 * descending value (ties: lower index first), first topK kept, softmax over them, then the shortest prefix whose
 * probability reaches topP, renormalised.
 */
function refDistribution(row: ArrayLike<number>, opts: SampleOptions): { ids: number[]; probs: number[] } {
  const temperature = opts.temperature ?? 1;
  const topK = opts.topK ?? 0;
  const topP = opts.topP ?? 1;
  const order = Array.from({ length: row.length }, (_, i) => i);
  order.sort((a, b) => (row[a] === row[b] ? a - b : row[b]! - row[a]!));
  const kept = order.slice(0, topK > 0 ? Math.min(topK, row.length) : row.length);
  const top = row[kept[0]!]!;
  let weights = kept.map((i) => Math.exp((row[i]! - top) / temperature));
  let total = weights.reduce((a, w) => a + w, 0);
  let probs = weights.map((w) => w / total);
  let ids = kept;
  if (topP < 1) {
    let cumulative = 0;
    let n = probs.length;
    for (let i = 0; i < probs.length; i++) {
      cumulative += probs[i]!;
      if (cumulative >= topP) {
        n = i + 1;
        break;
      }
    }
    ids = kept.slice(0, n);
    weights = weights.slice(0, n);
    total = weights.reduce((a, w) => a + w, 0);
    probs = weights.map((w) => w / total);
  }
  return { ids, probs };
}

/** Inverse-CDF draw: the first candidate whose cumulative probability exceeds u. */
function refDraw(dist: { ids: number[]; probs: number[] }, u: number): number {
  let cumulative = 0;
  for (let i = 0; i < dist.ids.length; i++) {
    cumulative += dist.probs[i]!;
    if (cumulative > u) return dist.ids[i]!;
  }
  return dist.ids[dist.ids.length - 1]!;
}

/** Upper α-quantile of χ² with `df` degrees of freedom (Wilson–Hilferty; accurate to a few % for df ≥ 3). */
function chiSquareCritical(df: number, z: number): number {
  const c = 2 / (9 * df);
  return df * (1 - c + z * Math.sqrt(c)) ** 3;
}

/** A [rows, vocab] tensor whose every row is `row`. */
function repeatRows(row: readonly number[], rows: number, dtype: FloatDType = 'f32'): Tensor<FloatDType> {
  const flat: number[] = [];
  for (let r = 0; r < rows; r++) flat.push(...row);
  return Tensor.fromArray(flat, { shape: [rows, row.length], dtype });
}

// ---------------------------------------------------------------------------------------------------------

describe('argmax', () => {
  it('matches a plain loop on random rows, including a full Qwen3 vocabulary', () => {
    for (const [shape, seed] of [
      [[2, 3, 37], 10],
      [[2, 151936], 11],
      [[5, 1], 12],
    ] as const) {
      const x = randn(shape, 'f32', seed);
      const n = shape[shape.length - 1]!;
      const xs = f64(x);
      const ids = argmax(x);
      expect(ids.dtype).toBe('i32');
      expect(ids.shape).toEqual(shape.slice(0, -1));
      const got = ids.toArray();
      for (let r = 0; r < got.length; r++) expect(got[r]).toBe(refArgmax(xs.subarray(r * n, (r + 1) * n)));
    }
  });

  it('breaks ties toward the lowest index', () => {
    expect(argmax(Tensor.fromArray([1, 3, 3, 2])).item()).toBe(1);
    expect(argmax(Tensor.fromArray([5, 5, 5])).item()).toBe(0);
    // 1 and 1.001 both round to 1 in bf16 (spacing 2⁻⁷): a tie created by the dtype.
    expect(argmax(Tensor.fromArray([0.5, 1, 1.001], { dtype: 'bf16' })).item()).toBe(1);
    expect(argmax(Tensor.fromArray([0.5, 1, 1.001], { dtype: 'f32' })).item()).toBe(2);
  });

  it('lets the first NaN win, like torch.argmax', () => {
    expect(argmax(Tensor.fromArray([1, Number.NaN, 5, Number.NaN])).item()).toBe(1);
    expect(argmax(Tensor.fromArray([Number.NaN, 7])).item()).toBe(0);
    expect(argmax(Tensor.fromArray([1, Infinity, Number.NaN], { dtype: 'f16' })).item()).toBe(2);
  });

  it('handles infinities', () => {
    expect(argmax(Tensor.fromArray([1, Infinity, Infinity])).item()).toBe(1);
    expect(argmax(Tensor.fromArray([-Infinity, -Infinity, -3])).item()).toBe(2);
    expect(argmax(Tensor.fromArray([-Infinity, -Infinity])).item()).toBe(0);
  });

  it('per row, with a leading shape and 16-bit dtypes', () => {
    const x = Tensor.fromArray(
      [
        [0, 2, 1],
        [9, -1, 9],
        [-4, -3, -5],
      ],
      { dtype: 'f16' },
    );
    const ids = argmax(x);
    expect(ids.shape).toEqual([3]);
    expect(ids.toArray()).toEqual([1, 0, 1]);
  });

  it('validates its input', () => {
    expectQkError(() => argmax(Tensor.zeros([2, 0])), QkValueError, 'QK_VALUE', 'argmax', '"x"');
    expectQkError(() => argmax(Tensor.fromArray(3)), QkShapeError, 'QK_SHAPE', 'argmax', '"x"');
    expectQkError(() => argmax(Tensor.zeros([3], 'i32')), QkDtypeError, 'QK_DTYPE', 'argmax', '"x"', 'i32');
    const gone = randn([3], 'f32', 13);
    gone.dispose();
    expectQkError(() => argmax(gone), QkDisposedError, 'QK_DISPOSED', 'argmax', '"x"');
  });
});

describe('sample: greedy limits', () => {
  const logits = randn([50, 1000], 'f32', 100, 3);
  const rows = 50;
  const vocab = 1000;
  const xs = f64(logits);
  const greedy = Array.from({ length: rows }, (_, r) => refArgmax(xs.subarray(r * vocab, (r + 1) * vocab)));

  it('temperature 0 returns the argmax and draws nothing', () => {
    const rng = new Rng(7);
    const ids = sample(logits, { temperature: 0, rng });
    expect(ids.dtype).toBe('i32');
    expect(ids.shape).toEqual([rows]);
    expect(ids.toArray()).toEqual(greedy);
    expect(rng.nextU32()).toBe(new Rng(7).nextU32());
  });

  it('topK = 1 returns the argmax for any seed and temperature', () => {
    for (const [seed, temperature] of [
      [1, 1],
      [2, 5],
      [3, 0.1],
    ] as const) {
      expect(sample(logits, { topK: 1, seed, temperature }).toArray()).toEqual(greedy);
    }
  });

  it('a tiny topP returns the argmax', () => {
    for (const seed of [4, 5, 6])
      expect(sample(logits, { topP: 1e-9, seed, temperature: 2 }).toArray()).toEqual(greedy);
  });

  it('ties at the top resolve to the lowest index when only one token is kept', () => {
    const tied = Tensor.fromArray([[1, 4, 2, 4, 4]]);
    expect(sample(tied, { temperature: 0 }).toArray()).toEqual([1]);
    expect(sample(tied, { topK: 1, seed: 8 }).toArray()).toEqual([1]);
    expect(sample(tied, { topP: 1e-6, seed: 9 }).toArray()).toEqual([1]);
  });

  it('a subnormal temperature behaves as greedy, not as NaN', () => {
    expect(sample(Tensor.fromArray([[1, 3, 2]]), { temperature: 1e-320, seed: 1 }).toArray()).toEqual([1]);
  });
});

describe('sample: determinism and the random stream', () => {
  const logits = randn([500, 16], 'f32', 200);

  it('the same seed gives the same ids; number and bigint seeds agree', () => {
    const a = sample(logits, { seed: 42 }).toArray();
    expect(sample(logits, { seed: 42 }).toArray()).toEqual(a);
    expect(sample(logits, { seed: 42n }).toArray()).toEqual(a);
  });

  it('different seeds give different ids over many draws', () => {
    const a = sample(logits, { seed: 1 }).toArray();
    const b = sample(logits, { seed: 2 }).toArray();
    let differ = 0;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) differ++;
    // Two independent draws agree with probability Σ p² per row (< 0.5 here): expect ~half or more to differ.
    expect(differ).toBeGreaterThan(150);
  });

  it('draws one uniform per row from the stream: each id is the inverse CDF of that draw', () => {
    const cases: [SampleOptions, number][] = [
      [{}, 300],
      [{ temperature: 0.6 }, 301],
      [{ temperature: 1.7, topK: 5 }, 302],
      [{ topP: 0.7 }, 303],
      [{ temperature: 0.9, topK: 8, topP: 0.85 }, 304],
    ];
    for (const [opts, seed] of cases) {
      const x = randn([400, 37], 'f32', seed, 2);
      const xs = f64(x);
      const ids = sample(x, { ...opts, seed }).toArray();
      const u = new Rng(seed);
      for (let r = 0; r < 400; r++) {
        const dist = refDistribution(xs.subarray(r * 37, (r + 1) * 37), opts);
        expect(ids[r]).toBe(refDraw(dist, u.nextFloat()));
      }
    }
  });

  it('continues a caller-provided Rng (and ignores seed), advancing it one draw per row', () => {
    const x = randn([3, 2, 11], 'f32', 210);
    const rng = new Rng(77);
    const ids = sample(x, { rng, seed: 5 });
    expect(ids.shape).toEqual([3, 2]);
    const replay = new Rng(77);
    const xs = f64(x);
    const got = ids.toArray();
    for (let r = 0; r < 6; r++)
      expect(got[r]).toBe(
        refDraw(refDistribution(xs.subarray(r * 11, (r + 1) * 11), {}), replay.nextFloat()),
      );
    expect(rng.nextU32()).toBe(replay.nextU32());
  });

  it('rank-1 logits give a scalar id; 16-bit logits are read exactly', () => {
    const x = randn([29], 'bf16', 220, 2);
    const id = sample(x, { seed: 3 });
    expect(id.shape).toEqual([]);
    expect(id.item()).toBe(refDraw(refDistribution(x.toArray(), {}), new Rng(3).nextFloat()));
  });
});

describe('sample: empirical frequencies match the (renormalised) softmax', () => {
  // Distinct logits so the top-k and top-p boundaries are unambiguous; −∞ is a masked token.
  const row = [2.0, -0.5, 1.5, 0.3, 1.0, -1.0, 0.7, -2.0, 0.0, -Infinity];
  const draws = 4000;
  const cases: [string, SampleOptions, FloatDType][] = [
    ['temperature 1', {}, 'f32'],
    ['temperature 0.7', { temperature: 0.7 }, 'f32'],
    ['temperature 1.5, topK 4', { temperature: 1.5, topK: 4 }, 'f32'],
    ['topP 0.8', { topP: 0.8 }, 'f32'],
    ['temperature 0.8, topK 6, topP 0.9', { temperature: 0.8, topK: 6, topP: 0.9 }, 'f32'],
    ['temperature 1.2, topK 7 in bf16', { temperature: 1.2, topK: 7 }, 'bf16'],
  ];
  cases.forEach(([name, opts, dtype], ci) => {
    it(name, () => {
      const logits = repeatRows(row, draws, dtype);
      const dist = refDistribution(logits.toArray().slice(0, row.length), opts);
      // The test's own sanity: the nucleus boundary is not a near-tie (the sampler's ≥ vs > cannot matter).
      if (opts.topP !== undefined) {
        const full = refDistribution(row, { ...opts, topP: 1 });
        let c = 0;
        for (const p of full.probs) {
          c += p;
          expect(Math.abs(c - opts.topP)).toBeGreaterThan(1e-3);
        }
      }
      const p = new Float64Array(row.length);
      dist.ids.forEach((id, i) => {
        p[id] = dist.probs[i]!;
      });
      const counts = new Float64Array(row.length);
      for (const id of sample(logits, { ...opts, seed: 1000 + ci }).toArray()) counts[id]! += 1;
      let chi2 = 0;
      let df = -1;
      for (let i = 0; i < row.length; i++) {
        if (p[i] === 0) {
          // Outside top-k / top-p, or masked: never drawn.
          expect(counts[i], `token ${i} lies outside the kept set`).toBe(0);
          continue;
        }
        const expected = draws * p[i]!;
        chi2 += (counts[i]! - expected) ** 2 / expected;
        df++;
        // Per token: binomial deviation within 5σ (false alarm ≈ 6e-7 for a correct sampler).
        const sigma = Math.sqrt(draws * p[i]! * (1 - p[i]!));
        expect(Math.abs(counts[i]! - expected)).toBeLessThanOrEqual(5 * sigma);
      }
      expect(df).toBeGreaterThanOrEqual(1);
      // Pearson χ² against the upper 1e-6 quantile (z = 4.753) for df = kept − 1.
      expect(chi2).toBeLessThan(chiSquareCritical(df, 4.753));
    });
  });

  it('tokens outside top-k / top-p are never drawn from varied random rows', () => {
    const vocab = 64;
    const x = randn([2000, vocab], 'f32', 400, 2);
    const xs = f64(x);
    for (const opts of [{ topK: 5 }, { topP: 0.5 }, { topK: 10, topP: 0.6, temperature: 0.5 }]) {
      const ids = sample(x, { ...opts, seed: 401 }).toArray();
      let outside = 0;
      for (let r = 0; r < ids.length; r++) {
        const allowed = refDistribution(xs.subarray(r * vocab, (r + 1) * vocab), opts).ids;
        if (!allowed.includes(ids[r]!)) outside++;
      }
      expect(outside).toBe(0);
    }
  });
});

describe('sample: validation', () => {
  const logits = randn([2, 5], 'f32', 500);

  it('rejects a negative or non-finite temperature', () => {
    for (const temperature of [-1, -1e-9, Number.NaN, Infinity]) {
      expectQkError(
        () => sample(logits, { temperature }),
        QkValueError,
        'QK_VALUE',
        'sample',
        '"temperature"',
      );
    }
  });

  it('rejects topP outside (0, 1]', () => {
    for (const topP of [0, -0.1, 1.0001, 2, Number.NaN]) {
      expectQkError(() => sample(logits, { topP }), QkValueError, 'QK_VALUE', 'sample', '"topP"');
    }
  });

  it('rejects a negative or non-integer topK', () => {
    for (const topK of [-1, 1.5, Number.NaN, Infinity]) {
      expectQkError(() => sample(logits, { topK }), QkValueError, 'QK_VALUE', 'sample', '"topK"');
    }
  });

  it('rejects NaN and +Infinity logits (also at temperature 0)', () => {
    for (const bad of [Number.NaN, Infinity]) {
      const x = Tensor.fromArray([
        [0, 1, 2],
        [3, bad, 4],
      ]);
      expectQkError(
        () => sample(x, { seed: 1 }),
        QkValueError,
        'QK_VALUE',
        'sample',
        '"logits"',
        'flat index 4',
      );
      expectQkError(() => sample(x, { temperature: 0 }), QkValueError, 'QK_VALUE', 'sample', '"logits"');
    }
  });

  it('rejects a row masked entirely with −Infinity (also at temperature 0)', () => {
    const x = Tensor.fromArray([
      [0, 1, 2],
      [-Infinity, -Infinity, -Infinity],
    ]);
    expectQkError(() => sample(x, { seed: 1 }), QkValueError, 'QK_VALUE', 'sample', '"logits"', 'row 1');
    expectQkError(
      () => sample(x, { temperature: 0 }),
      QkValueError,
      'QK_VALUE',
      'sample',
      '"logits"',
      'row 1',
    );
  });

  it('accepts partially masked rows and never draws the masked tokens', () => {
    const x = repeatRows([-Infinity, 0, -Infinity, 0.5, -Infinity], 300);
    const ids = sample(x, { seed: 12 }).toArray();
    expect(ids.every((id) => id === 1 || id === 3)).toBe(true);
  });

  it('rejects bad tensors', () => {
    expectQkError(() => sample(Tensor.zeros([2, 0])), QkValueError, 'QK_VALUE', 'sample', '"logits"');
    expectQkError(() => sample(Tensor.fromArray(1)), QkShapeError, 'QK_SHAPE', 'sample', '"logits"');
    expectQkError(
      () => sample(Tensor.zeros([3], 'i32')),
      QkDtypeError,
      'QK_DTYPE',
      'sample',
      '"logits"',
      'i32',
    );
    const gone = randn([3], 'f32', 501);
    gone.dispose();
    expectQkError(() => sample(gone), QkDisposedError, 'QK_DISPOSED', 'sample', '"logits"');
  });
});
