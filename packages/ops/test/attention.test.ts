import { describe, expect, it } from 'vitest';
import {
  type AttentionOptions,
  attention,
  type FloatDType,
  QkDisposedError,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  Tensor,
} from '../src/index.js';
import { expectMatches, expectQkError, FLOAT_DTYPES, f64, randn, sameBits } from './helpers.js';

interface Dims {
  batch: number;
  qLen: number;
  kvLen: number;
  qHeads: number;
  kvHeads: number;
  headDim: number;
}

/**
 * Naive float64 attention. Layout (row-major): q [batch, qLen, qHeads, headDim], k/v [batch, kvLen, kvHeads, headDim].
 * Query head h reads KV head floor(h / (qHeads / kvHeads)); query t sits at absolute position offset + t and, when
 * causal, sees keys 0..offset+t; scores are scale · q·k.
 */
function refAttention(
  q: Float64Array,
  k: Float64Array,
  v: Float64Array,
  d: Dims,
  opts: { offset: number; causal: boolean; scale: number },
): Float64Array {
  const { batch, qLen, kvLen, qHeads, kvHeads, headDim } = d;
  const group = qHeads / kvHeads;
  const out = new Float64Array(batch * qLen * qHeads * headDim);
  const qAt = (b: number, t: number, h: number, i: number) => q[((b * qLen + t) * qHeads + h) * headDim + i]!;
  const kAt = (b: number, j: number, h: number, i: number) =>
    k[((b * kvLen + j) * kvHeads + h) * headDim + i]!;
  const vAt = (b: number, j: number, h: number, i: number) =>
    v[((b * kvLen + j) * kvHeads + h) * headDim + i]!;
  for (let b = 0; b < batch; b++) {
    for (let t = 0; t < qLen; t++) {
      const lastKey = opts.causal ? opts.offset + t : kvLen - 1;
      for (let h = 0; h < qHeads; h++) {
        const kvh = Math.floor(h / group);
        const scores: number[] = [];
        for (let j = 0; j <= lastKey; j++) {
          let dot = 0;
          for (let i = 0; i < headDim; i++) dot += qAt(b, t, h, i) * kAt(b, j, kvh, i);
          scores.push(opts.scale * dot);
        }
        const m = Math.max(...scores);
        const weights = scores.map((s) => Math.exp(s - m));
        const total = weights.reduce((a, w) => a + w, 0);
        for (let i = 0; i < headDim; i++) {
          let acc = 0;
          for (let j = 0; j <= lastKey; j++) acc += weights[j]! * vAt(b, j, kvh, i);
          out[((b * qLen + t) * qHeads + h) * headDim + i] = acc / total;
        }
      }
    }
  }
  return out;
}

interface Case extends Dims {
  name: string;
  batched?: boolean;
  options?: AttentionOptions;
}

/** Draws q/k/v, runs the op, and compares with the naive oracle. */
function runCase(c: Case, dtype: FloatDType, seed: number): void {
  const lead = c.batched ? [c.batch] : [];
  const q = randn([...lead, c.qLen, c.qHeads, c.headDim], dtype, seed);
  const k = randn([...lead, c.kvLen, c.kvHeads, c.headDim], dtype, seed + 1);
  const v = randn([...lead, c.kvLen, c.kvHeads, c.headDim], dtype, seed + 2);
  const before = [q.data.slice(), k.data.slice(), v.data.slice()];
  const y = attention(q, k, v, c.options);
  expect(y.shape).toEqual(q.shape);
  const expected = refAttention(f64(q), f64(k), f64(v), c, {
    offset: c.options?.positionOffset ?? c.kvLen - c.qLen,
    causal: c.options?.causal ?? true,
    scale: c.options?.scale ?? 1 / Math.sqrt(c.headDim),
  });
  expectMatches(y, expected, dtype);
  expect(sameBits(q.data, before[0]!)).toBe(true);
  expect(sameBits(k.data, before[1]!)).toBe(true);
  expect(sameBits(v.data, before[2]!)).toBe(true);
}

const CASES: Case[] = [
  // Qwen3-0.6B: 16 query heads, 8 KV heads, headDim 128.
  {
    name: 'Qwen3-0.6B decode (qLen 1 after 300 cached)',
    batch: 1,
    qLen: 1,
    kvLen: 301,
    qHeads: 16,
    kvHeads: 8,
    headDim: 128,
  },
  {
    name: 'Qwen3-0.6B prefill (qLen = kvLen = 40)',
    batch: 1,
    qLen: 40,
    kvLen: 40,
    qHeads: 16,
    kvHeads: 8,
    headDim: 128,
  },
  // Qwen3-8B: 32 query heads, 8 KV heads, headDim 128.
  {
    name: 'Qwen3-8B decode (qLen 1 after 200 cached)',
    batch: 1,
    qLen: 1,
    kvLen: 201,
    qHeads: 32,
    kvHeads: 8,
    headDim: 128,
  },
  {
    name: 'Qwen3-8B chunked prefill (12 queries at positions 20..31 of a 64-key cache)',
    batch: 1,
    qLen: 12,
    kvLen: 64,
    qHeads: 32,
    kvHeads: 8,
    headDim: 128,
    options: { positionOffset: 20 },
  },
  {
    name: 'chunked prefill at offset 0 (later keys in the cache are masked)',
    batch: 1,
    qLen: 5,
    kvLen: 17,
    qHeads: 4,
    kvHeads: 2,
    headDim: 32,
    options: { positionOffset: 0 },
  },
  {
    name: 'non-causal, qLen 9 vs kvLen 23',
    batch: 1,
    qLen: 9,
    kvLen: 23,
    qHeads: 6,
    kvHeads: 3,
    headDim: 64,
    options: { causal: false },
  },
  {
    name: 'non-causal ignores positionOffset',
    batch: 1,
    qLen: 4,
    kvLen: 6,
    qHeads: 2,
    kvHeads: 1,
    headDim: 16,
    options: { causal: false, positionOffset: 50 },
  },
  { name: 'odd headDim 7, MHA', batch: 1, qLen: 13, kvLen: 13, qHeads: 3, kvHeads: 3, headDim: 7 },
  {
    name: 'odd headDim 111, MQA (1 KV head)',
    batch: 1,
    qLen: 3,
    kvLen: 29,
    qHeads: 5,
    kvHeads: 1,
    headDim: 111,
  },
  { name: 'headDim 1', batch: 1, qLen: 4, kvLen: 9, qHeads: 2, kvHeads: 2, headDim: 1 },
  {
    name: 'custom scale',
    batch: 1,
    qLen: 6,
    kvLen: 10,
    qHeads: 4,
    kvHeads: 2,
    headDim: 24,
    options: { scale: 0.37 },
  },
  {
    name: 'batch axis, causal prefill',
    batch: 3,
    qLen: 7,
    kvLen: 7,
    qHeads: 4,
    kvHeads: 2,
    headDim: 16,
    batched: true,
  },
  {
    name: 'batch axis, decode at a middle offset',
    batch: 2,
    qLen: 3,
    kvLen: 19,
    qHeads: 8,
    kvHeads: 2,
    headDim: 111,
    batched: true,
    options: { positionOffset: 9 },
  },
  {
    name: 'batch axis, non-causal, Qwen3-0.6B heads',
    batch: 2,
    qLen: 5,
    kvLen: 12,
    qHeads: 16,
    kvHeads: 8,
    headDim: 128,
    batched: true,
    options: { causal: false },
  },
];

describe('attention: naive float64 oracle', () => {
  CASES.forEach((c, ci) => {
    FLOAT_DTYPES.forEach((dtype, di) => {
      it(`${c.name} in ${dtype}`, () => runCase(c, dtype, 1000 + ci * 100 + di * 10));
    });
  });
});

describe('attention: known values', () => {
  FLOAT_DTYPES.forEach((dtype, di) => {
    it(`one key returns v of the mapped KV head, bit-exactly (${dtype})`, () => {
      // qHeads 8, kvHeads 2: heads 0..3 read KV head 0, heads 4..7 read KV head 1.
      const q = randn([1, 8, 5], dtype, 2000 + di);
      const k = randn([1, 2, 5], dtype, 2010 + di);
      const v = randn([1, 2, 5], dtype, 2020 + di);
      const y = attention(q, k, v).data;
      const vd = v.data;
      for (let h = 0; h < 8; h++) {
        const kvh = h < 4 ? 0 : 1;
        for (let i = 0; i < 5; i++) expect(y[h * 5 + i]).toBe(vd[kvh * 5 + i]);
      }
    });

    it(`a causal query at position 0 sees only key 0 (${dtype})`, () => {
      const q = randn([3, 2, 4], dtype, 2100 + di);
      const k = randn([10, 2, 4], dtype, 2110 + di);
      const v = randn([10, 2, 4], dtype, 2120 + di);
      const y = attention(q, k, v, { positionOffset: 0 }).data;
      // Query 0, both heads: exactly row 0 of v.
      for (let i = 0; i < 8; i++) expect(y[i]).toBe(v.data[i]);
    });

    it(`identical keys give the plain average of the visible values (${dtype})`, () => {
      const qLen = 6;
      const kvLen = 6;
      const headDim = 3;
      const q = randn([qLen, 1, headDim], dtype, 2200 + di);
      const oneKey = [0.5, -1.25, 2];
      const k = Tensor.fromArray(
        Array.from({ length: kvLen }, () => oneKey),
        { dtype },
      ).reshape([kvLen, 1, headDim]);
      const v = randn([kvLen, 1, headDim], dtype, 2210 + di);
      const vs = f64(v);
      const mean = new Float64Array(qLen * headDim);
      for (let t = 0; t < qLen; t++) {
        for (let i = 0; i < headDim; i++) {
          let s = 0;
          for (let j = 0; j <= t; j++) s += vs[j * headDim + i]!;
          mean[t * headDim + i] = s / (t + 1);
        }
      }
      expectMatches(attention(q, k, v), mean, dtype);
      // Non-causal: every query averages all six values.
      const all = new Float64Array(qLen * headDim);
      for (let t = 0; t < qLen; t++) {
        for (let i = 0; i < headDim; i++) all[t * headDim + i] = mean[(qLen - 1) * headDim + i]!;
      }
      expectMatches(attention(q, k, v, { causal: false }), all, dtype);
    });
  });

  it('a dominant score selects its value (softmax saturates, no overflow)', () => {
    // headDim 1, scale 1: scores 300, 0, −300.
    const q = Tensor.fromArray([300]).reshape([1, 1, 1]);
    const k = Tensor.fromArray([1, 0, -1]).reshape([3, 1, 1]);
    const v = Tensor.fromArray([4.5, -7, 9]).reshape([3, 1, 1]);
    expect(attention(q, k, v, { scale: 1 }).toArray()).toEqual([4.5]);
    // Two equal maxima: the mean of their values.
    const k2 = Tensor.fromArray([1, 1, -1]).reshape([3, 1, 1]);
    expect(attention(q, k2, v, { scale: 1 }).toArray()).toEqual([-1.25]);
  });

  it('empty query block gives an empty output', () => {
    const q = randn([0, 2, 4], 'f32', 2300);
    const k = randn([5, 1, 4], 'f32', 2301);
    const v = randn([5, 1, 4], 'f32', 2302);
    expect(attention(q, k, v).shape).toEqual([0, 2, 4]);
  });
});

describe('attention: validation', () => {
  const q = randn([2, 4, 8], 'f32', 3000);
  const k = randn([5, 2, 8], 'f32', 3001);
  const v = randn([5, 2, 8], 'f32', 3002);

  it('rejects q of the wrong rank', () => {
    expectQkError(
      () => attention(randn([4, 8], 'f32', 3003), k, v),
      QkShapeError,
      'QK_SHAPE',
      'attention',
      '"q"',
    );
    expectQkError(
      () => attention(randn([1, 1, 2, 4, 8], 'f32', 3004), k, v),
      QkShapeError,
      'QK_SHAPE',
      'attention',
      '"q"',
    );
  });

  it('rejects k/v whose rank, head dim or batch differ from q', () => {
    expectQkError(
      () => attention(q, randn([1, 5, 2, 8], 'f32', 3005), v),
      QkShapeError,
      'QK_SHAPE',
      'attention',
      '"k"',
    );
    expectQkError(
      () => attention(q, randn([5, 2, 7], 'f32', 3006), v),
      QkShapeError,
      'QK_SHAPE',
      'attention',
      '"k"',
    );
    expectQkError(
      () => attention(q, k, randn([5, 2, 9], 'f32', 3007)),
      QkShapeError,
      'QK_SHAPE',
      'attention',
      '"v"',
    );
    const qb = randn([2, 2, 4, 8], 'f32', 3008);
    const kb = randn([3, 5, 2, 8], 'f32', 3009);
    const vb = randn([2, 5, 2, 8], 'f32', 3010);
    expectQkError(() => attention(qb, kb, vb), QkShapeError, 'QK_SHAPE', 'attention', '"k"');
  });

  it('rejects an empty cache instead of returning 0/0 = NaN (non-causal included)', () => {
    const q1 = randn([1, 2, 8], 'f32', 3020);
    const empty = Tensor.zeros([0, 2, 8]);
    expectQkError(
      () => attention(q1, empty, empty, { causal: false }),
      QkShapeError,
      'QK_SHAPE',
      'attention',
      'at least one cached key',
    );
  });

  it('rejects v whose length or head count differ from k', () => {
    expectQkError(
      () => attention(q, k, randn([6, 2, 8], 'f32', 3011)),
      QkShapeError,
      'QK_SHAPE',
      'attention',
      '"v"',
    );
    expectQkError(
      () => attention(q, k, randn([5, 1, 8], 'f32', 3012)),
      QkShapeError,
      'QK_SHAPE',
      'attention',
      '"v"',
    );
  });

  it('rejects GQA head counts that do not divide', () => {
    const q6 = randn([2, 6, 8], 'f32', 3013);
    const k4 = randn([5, 4, 8], 'f32', 3014);
    const v4 = randn([5, 4, 8], 'f32', 3015);
    expectQkError(() => attention(q6, k4, v4), QkShapeError, 'QK_SHAPE', 'attention', '"k"', 'dividing', '6');
    const k0 = Tensor.zeros([5, 0, 8]);
    expectQkError(
      () => attention(q6, k0, Tensor.zeros([5, 0, 8])),
      QkShapeError,
      'QK_SHAPE',
      'attention',
      '"k"',
    );
  });

  it('rejects a causal offset beyond the cache', () => {
    expectQkError(
      () => attention(q, k, v, { positionOffset: 4 }),
      QkValueError,
      'QK_VALUE',
      'attention',
      '"positionOffset"',
      '5 cached keys',
    );
    // More queries than keys: the default offset kvLen − qLen would be negative.
    const qLong = randn([6, 4, 8], 'f32', 3016);
    expectQkError(() => attention(qLong, k, v), QkValueError, 'QK_VALUE', 'attention', '"positionOffset"');
  });

  it('rejects negative, fractional or non-numeric offsets', () => {
    for (const positionOffset of [-1, 1.5, Number.NaN]) {
      expectQkError(
        () => attention(q, k, v, { positionOffset }),
        QkValueError,
        'QK_VALUE',
        'attention',
        '"positionOffset"',
      );
    }
  });

  it('rejects a non-positive or non-finite scale', () => {
    for (const scale of [0, -0.5, Number.NaN, Infinity]) {
      expectQkError(() => attention(q, k, v, { scale }), QkValueError, 'QK_VALUE', 'attention', '"scale"');
    }
  });

  it('rejects dtype mismatches and integer tensors', () => {
    const k16 = randn([5, 2, 8], 'bf16', 3017);
    expectQkError(
      () => attention(q, k16 as never, v),
      QkDtypeError,
      'QK_DTYPE',
      'attention',
      '"k"',
      'bf16',
      'f32',
    );
    const v16 = randn([5, 2, 8], 'f16', 3018);
    expectQkError(() => attention(q, k, v16 as never), QkDtypeError, 'QK_DTYPE', 'attention', '"v"', 'f16');
    const qi = Tensor.zeros([2, 4, 8], 'i32');
    expectQkError(() => attention(qi as never, k, v), QkDtypeError, 'QK_DTYPE', 'attention', '"q"', 'i32');
  });

  it('rejects disposed tensors', () => {
    const gone = randn([5, 2, 8], 'f32', 3019);
    gone.dispose();
    expectQkError(() => attention(q, k, gone), QkDisposedError, 'QK_DISPOSED', 'attention', '"v"');
  });
});
