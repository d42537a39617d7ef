import { describe, expect, it } from 'vitest';
import {
  addTokenCounts,
  applyLogitControls,
  argmax,
  bitsetWords,
  type FloatDType,
  type LogitControls,
  QkDtypeError,
  QkShapeError,
  QkValueError,
  Rng,
  sample,
  Tensor,
  tokenLogprobs,
} from '../src/index.js';
import { expectQkError, FLOAT_DTYPES, randn } from './helpers.js';

// ---------------------------------------------------------------------------------------------------------
// Independent oracles: sets and plain float64 math, no bitsets or typed-array tricks.
// ---------------------------------------------------------------------------------------------------------

interface History {
  counts: Map<number, number>;
  prompt: Set<number>;
}

interface OracleControls {
  repetition: number;
  presence: number;
  frequency: number;
  bias: Map<number, number>;
  allowed: Set<number> | null;
  minP: number;
  temperature: number;
}

/** The controls on one row, as the op's documentation states them. */
function oracleRow(row: readonly number[], h: History, c: OracleControls): number[] {
  const out = row.map((x, t) => {
    if (Number.isNaN(x) || x === Infinity) return x;
    const n = h.counts.get(t) ?? 0;
    let v = x;
    if (c.repetition !== 1 && (n > 0 || h.prompt.has(t))) v = v > 0 ? v / c.repetition : v * c.repetition;
    v -= c.frequency * n;
    if (n > 0) v -= c.presence;
    v += Math.fround(c.bias.get(t) ?? 0);
    v = Math.fround(v);
    return c.allowed !== null && !c.allowed.has(t) ? -Infinity : v;
  });
  if (c.minP > 0 && c.temperature > 0) {
    const finite = out.filter((v) => !Number.isNaN(v) && v !== Infinity);
    const max = Math.max(...finite);
    if (max > -Infinity) {
      // Probability ratio to the most likely token, the way min-p is usually described.
      return out.map((v) => (Math.exp((v - max) / c.temperature) < c.minP * (1 - 1e-12) ? -Infinity : v));
    }
  }
  return out;
}

function bitset(vocab: number, members: Iterable<number>): Int32Array {
  const words = new Int32Array(bitsetWords(vocab));
  for (const t of members) words[t >>> 5]! |= 1 << (t & 31);
  return words;
}

/** A random history, bias and mask over `vocab` tokens, and the op's tensors for it (one row). */
function randomCase(vocab: number, seed: number, options: { mask?: boolean; bias?: boolean } = {}) {
  const rng = new Rng(seed);
  const below = (n: number) => Math.floor(rng.nextFloat() * n);
  const counts = new Map<number, number>();
  for (let i = 0; i < Math.max(1, vocab >> 3); i++) {
    const t = below(vocab);
    counts.set(t, (counts.get(t) ?? 0) + 1 + below(3));
  }
  const prompt = new Set<number>();
  for (let i = 0; i < Math.max(1, vocab >> 3); i++) prompt.add(below(vocab));
  const bias = new Map<number, number>();
  if (options.bias !== false)
    for (let i = 0; i < Math.max(1, vocab >> 4); i++) bias.set(below(vocab), rng.nextFloat() * 20 - 10);
  const allowed = options.mask === false ? null : new Set<number>();
  if (allowed !== null) {
    for (let t = 0; t < vocab; t++) if (rng.nextFloat() < 0.6) allowed.add(t);
    allowed.add(below(vocab));
  }
  const dense = new Int32Array(vocab);
  for (const [t, n] of counts) dense[t] = n;
  const biasDense = new Float32Array(vocab);
  for (const [t, b] of bias) biasDense[t] = b;
  const tensors: LogitControls = {
    counts: Tensor.fromStorage(dense, [1, vocab], 'i32'),
    promptTokens: Tensor.fromStorage(bitset(vocab, prompt), [1, bitsetWords(vocab)], 'i32'),
    ...(options.bias === false ? {} : { bias: Tensor.fromStorage(biasDense, [1, vocab], 'f32') }),
    ...(allowed === null
      ? {}
      : { mask: Tensor.fromStorage(bitset(vocab, allowed), [1, bitsetWords(vocab)], 'i32') }),
  };
  return { history: { counts, prompt }, bias, allowed, tensors };
}

const VOCABS = [7, 111, 989, 4097];

describe('applyLogitControls', () => {
  it('matches the oracle on random logits, odd vocabularies and every dtype', () => {
    let seed = 11;
    for (const dtype of FLOAT_DTYPES) {
      for (const vocab of VOCABS) {
        seed++;
        const logits = randn([1, vocab], dtype, seed, 3);
        const k = randomCase(vocab, seed + 1000);
        const scalars = { repetitionPenalty: 1.3, presencePenalty: 0.7, frequencyPenalty: 0.25 };
        const got = applyLogitControls(logits, { ...k.tensors, ...scalars }).toArray();
        const want = oracleRow(logits.toArray(), k.history, {
          repetition: 1.3,
          presence: 0.7,
          frequency: 0.25,
          bias: k.bias,
          allowed: k.allowed,
          minP: 0,
          temperature: 1,
        });
        expect(got, `${dtype} vocab ${vocab}`).toEqual(want);
        // The controls must have acted: a random case changes and masks some tokens.
        expect(got.some((v, i) => v !== logits.toArray()[i])).toBe(true);
      }
    }
  });

  it('applies min-p at the given temperature after the mask', () => {
    for (const [vocab, minP, temperature] of [
      [989, 0.05, 0.7],
      [4097, 0.2, 1.5],
      [111, 1, 1],
    ] as const) {
      const logits = randn([1, vocab], 'f32', vocab, 2);
      const k = randomCase(vocab, vocab + 7, { bias: false });
      const got = applyLogitControls(logits, { mask: k.tensors.mask, minP, temperature }).toArray();
      const want = oracleRow(
        logits.toArray(),
        { counts: new Map(), prompt: new Set() },
        {
          repetition: 1,
          presence: 0,
          frequency: 0,
          bias: new Map(),
          allowed: k.allowed,
          minP,
          temperature,
        },
      );
      expect(got).toEqual(want);
      const kept = got.filter((v) => v > -Infinity).length;
      expect(kept).toBeGreaterThan(0);
      expect(kept).toBeLessThan(k.allowed!.size);
    }
  });

  it('is the identity (in f32) with penalty 1 / 0, no bias, no mask, min-p 0 or temperature 0', () => {
    for (const dtype of FLOAT_DTYPES) {
      const logits = randn([3, 111], dtype, 5, 4);
      const counts = Tensor.fromStorage(
        Int32Array.from({ length: 333 }, (_, i) => i % 4),
        [3, 111],
        'i32',
      );
      const f32 = logits.toArray();
      for (const controls of [
        {},
        { counts, repetitionPenalty: 1, presencePenalty: 0, frequencyPenalty: 0 },
        { minP: 0, temperature: 1 },
        { minP: 0.5, temperature: 0 },
      ] as LogitControls[]) {
        expect(applyLogitControls(logits, controls).toArray()).toEqual(f32);
      }
    }
  });

  it('with an empty history leaves the penalties without effect, and prompt tokens only feel the repetition penalty', () => {
    const vocab = 989;
    const logits = randn([1, vocab], 'f32', 21, 3);
    const x = logits.toArray();
    const none = applyLogitControls(logits, {
      repetitionPenalty: 1.7,
      presencePenalty: 2,
      frequencyPenalty: 2,
    });
    expect(none.toArray()).toEqual(x);
    const prompt = [3, 500, 988];
    const got = applyLogitControls(logits, {
      promptTokens: Tensor.fromStorage(bitset(vocab, prompt), [1, bitsetWords(vocab)], 'i32'),
      repetitionPenalty: 2,
      presencePenalty: 5,
      frequencyPenalty: 5,
    }).toArray();
    for (let t = 0; t < vocab; t++) {
      const expected = prompt.includes(t) ? (x[t]! > 0 ? x[t]! / 2 : x[t]! * 2) : x[t]!;
      expect(got[t]).toBe(Math.fround(expected));
    }
  });

  it('keeps NaN and +Infinity (masked or not) so sampling still refuses the row', () => {
    const vocab = 111;
    const data = Tensor.randn([1, vocab], { seed: 3 }).toFloat32Array();
    data[10] = Number.NaN;
    data[20] = Number.POSITIVE_INFINITY;
    const logits = Tensor.fromStorage(data, [1, vocab], 'f32');
    const mask = Tensor.fromStorage(bitset(vocab, [0, 1, 2]), [1, bitsetWords(vocab)], 'i32');
    const out = applyLogitControls(logits, { mask, minP: 0.1, temperature: 1, presencePenalty: 1 });
    expect(Number.isNaN(out.toArray()[10])).toBe(true);
    expect(out.toArray()[20]).toBe(Infinity);
    expectQkError(() => sample(out, { temperature: 0.8, seed: 1 }), QkValueError, 'QK_VALUE', 'logits');
    expectQkError(() => sample(out, { temperature: 0 }), QkValueError, 'QK_VALUE', 'logits');
  });

  it('turns a row with every token masked into a typed error when sampled, greedy or not', () => {
    const vocab = 989;
    const logits = randn([2, vocab], 'bf16', 9);
    const words = bitsetWords(vocab);
    const mask = new Int32Array(2 * words);
    mask[0] = 1; // row 0 allows token 0, row 1 nothing
    const out = applyLogitControls(logits, { mask: Tensor.fromStorage(mask, [2, words], 'i32') });
    expect(
      out
        .toArray()
        .slice(vocab)
        .every((v) => v === -Infinity),
    ).toBe(true);
    for (const temperature of [0, 0.7]) {
      expectQkError(
        () => sample(out, { temperature, seed: 4 }),
        QkValueError,
        'QK_VALUE',
        'every token is masked',
      );
    }
  });

  it('greedy with a mask is the argmax over the allowed tokens', () => {
    for (const vocab of VOCABS) {
      const logits = randn([1, vocab], 'f32', vocab + 1, 3);
      const k = randomCase(vocab, vocab + 2, { bias: false });
      // The unconstrained argmax is disallowed, so the mask must matter.
      const unconstrained = argmax(logits).item();
      k.allowed!.delete(unconstrained);
      const mask = Tensor.fromStorage(bitset(vocab, k.allowed!), [1, bitsetWords(vocab)], 'i32');
      const id = sample(applyLogitControls(logits, { mask }), { temperature: 0 }).item();
      const x = logits.toArray();
      const best = [...k.allowed!].reduce((a, b) => (x[b]! > x[a]! || (x[b] === x[a] && b < a) ? b : a));
      expect(id).toBe(best);
      expect(id).not.toBe(unconstrained);
    }
  });

  it('draws only allowed tokens, and a large presence penalty stops repeats', () => {
    const vocab = 4097;
    const logits = randn([1, vocab], 'f32', 77, 1);
    const k = randomCase(vocab, 78, { bias: false });
    const rng = new Rng(5);
    const counts = Tensor.zeros([1, vocab], 'i32');
    const drawn: number[] = [];
    for (let step = 0; step < 200; step++) {
      const controlled = applyLogitControls(logits, { mask: k.tensors.mask, counts, presencePenalty: 1e6 });
      const id = sample(controlled, { temperature: 1, rng });
      expect(k.allowed!.has(id.item())).toBe(true);
      drawn.push(id.item());
      addTokenCounts(counts, id.reshape([1]));
    }
    expect(new Set(drawn).size).toBe(drawn.length);
  });

  it('refuses controls out of range and control tensors of the wrong shape or dtype', () => {
    const logits = randn([2, 111], 'f32', 1);
    for (const [controls, arg] of [
      [{ repetitionPenalty: 0 }, 'repetitionPenalty'],
      [{ repetitionPenalty: -1 }, 'repetitionPenalty'],
      [{ repetitionPenalty: Number.NaN }, 'repetitionPenalty'],
      [{ presencePenalty: Infinity }, 'presencePenalty'],
      [{ frequencyPenalty: Number.NaN }, 'frequencyPenalty'],
      [{ minP: 1.5 }, 'minP'],
      [{ minP: -0.1 }, 'minP'],
      [{ temperature: -1 }, 'temperature'],
    ] as [LogitControls, string][]) {
      expectQkError(() => applyLogitControls(logits, controls), QkValueError, 'QK_VALUE', `"${arg}"`);
    }
    expectQkError(
      () => applyLogitControls(logits, { counts: Tensor.zeros([1, 111], 'i32') }),
      QkShapeError,
      'QK_SHAPE',
      'counts',
    );
    expectQkError(
      () => applyLogitControls(logits, { mask: Tensor.zeros([2, 111], 'i32') }),
      QkShapeError,
      'QK_SHAPE',
      'mask',
    );
    expectQkError(
      () => applyLogitControls(logits, { bias: Tensor.zeros([2, 111], 'bf16') }),
      QkDtypeError,
      'QK_DTYPE',
      'bias',
    );
  });
});

describe('addTokenCounts', () => {
  it('adds one per row at the id and skips ids outside the vocabulary', () => {
    const rows = 5;
    const vocab = 111;
    const rng = new Rng(8);
    const start = Int32Array.from({ length: rows * vocab }, () => Math.floor(rng.nextFloat() * 4));
    const ids = Int32Array.of(0, 110, -1, 57, 111);
    const counts = Tensor.fromStorage(start.slice(), [rows, vocab], 'i32');
    addTokenCounts(counts, Tensor.fromStorage(ids, [rows], 'i32'));
    const got = counts.toArray();
    for (let r = 0; r < rows; r++) {
      for (let t = 0; t < vocab; t++) {
        const i = r * vocab + t;
        expect(got[i]).toBe(start[i]! + (ids[r] === t ? 1 : 0));
      }
    }
  });
});

describe('tokenLogprobs', () => {
  /** log softmax by the textbook formula (no max shift; the test logits are small enough). */
  function oracle(row: readonly number[], id: number, n: number) {
    const z = row.reduce((s, x) => s + Math.exp(x), 0);
    const order = row.map((_, i) => i).sort((a, b) => (row[a] === row[b] ? a - b : row[b]! - row[a]!));
    return {
      logprob: Math.log(Math.exp(row[id]!) / z),
      top: order.slice(0, n),
      topLogprobs: order.slice(0, n).map((i) => Math.log(Math.exp(row[i]!) / z)),
    };
  }

  it('matches log softmax and the top-n by (logit descending, index ascending), ties planted', () => {
    let seed = 40;
    for (const dtype of FLOAT_DTYPES as FloatDType[]) {
      for (const vocab of VOCABS) {
        const rows = 3;
        const data = Tensor.randn([rows, vocab], { seed: seed++, std: 2 }).toFloat32Array();
        data[Math.floor(vocab / 2)] = 9; // a tie for first place in row 0
        data[vocab - 1] = 9;
        const logits = Tensor.fromArray(data, { shape: [rows, vocab], dtype });
        const ids = Int32Array.from({ length: rows }, (_, r) => (r * 37 + 5) % vocab);
        const n = Math.min(20, vocab);
        const got = tokenLogprobs(logits, Tensor.fromStorage(ids, [rows], 'i32'), { topN: n });
        const x = logits.toArray();
        for (let r = 0; r < rows; r++) {
          const want = oracle(x.slice(r * vocab, (r + 1) * vocab), ids[r]!, n);
          expect(got.logprobs.toArray()[r]).toBeCloseTo(want.logprob, 5);
          expect(got.topIds.toArray().slice(r * n, (r + 1) * n)).toEqual(want.top);
          got.topLogprobs
            .toArray()
            .slice(r * n, (r + 1) * n)
            .forEach((v, j) => {
              expect(v).toBeCloseTo(want.topLogprobs[j]!, 5);
            });
        }
      }
    }
  });

  it('gives -Infinity to masked tokens and refuses NaN rows, all -Infinity rows and ids outside the vocabulary', () => {
    const vocab = 111;
    const data = Tensor.randn([1, vocab], { seed: 2 }).toFloat32Array();
    data[4] = -Infinity;
    const got = tokenLogprobs(
      Tensor.fromStorage(data, [1, vocab], 'f32'),
      Tensor.fromArray([4], { dtype: 'i32' }),
    );
    expect(got.logprobs.item()).toBe(-Infinity);
    const nan = data.slice();
    nan[7] = Number.NaN;
    const id = Tensor.fromArray([0], { dtype: 'i32' });
    expectQkError(
      () => tokenLogprobs(Tensor.fromStorage(nan, [1, vocab], 'f32'), id),
      QkValueError,
      'QK_VALUE',
      'NaN',
    );
    const masked = new Float32Array(vocab).fill(-Infinity);
    expectQkError(
      () => tokenLogprobs(Tensor.fromStorage(masked, [1, vocab], 'f32'), id),
      QkValueError,
      'QK_VALUE',
      'entirely -Infinity',
    );
    expectQkError(
      () =>
        tokenLogprobs(
          Tensor.fromStorage(data, [1, vocab], 'f32'),
          Tensor.fromArray([vocab], { dtype: 'i32' }),
        ),
      QkValueError,
      'QK_VALUE',
      'outside the vocabulary',
    );
    for (const topN of [-1, 21, 1.5]) {
      expectQkError(
        () => tokenLogprobs(Tensor.fromStorage(data, [1, vocab], 'f32'), id, { topN }),
        QkValueError,
        'QK_VALUE',
        'topN',
      );
    }
    expectQkError(
      () => tokenLogprobs(Tensor.fromStorage(data.subarray(0, 7), [1, 7], 'f32'), id, { topN: 8 }),
      QkValueError,
      'QK_VALUE',
      'topN',
    );
  });
});

describe('verify cases of the sampling controls (the CPU reference standing in for the kernel)', () => {
  it('pass on the reference and fail on one corrupted element or id', async () => {
    const { LOGIT_CONTROLS_CASES } = await import('../src/verify/cases/logit-controls.js');
    const small = LOGIT_CONTROLS_CASES.filter(
      (c) => c.tag === 'odd' && (c.op === 'applyLogitControls' || c.op === 'controlledSample'),
    );
    expect(small.length).toBeGreaterThan(10);
    for (const c of small) {
      const instance = c.make(123);
      const outs = instance.expected.map((e) => Tensor.full(e.shape, -1, e.dtype));
      instance.run(
        instance.inputs.map((t) => t.clone()),
        outs,
      );
      const label = `${c.op} ${c.dtype} ${c.shape}`;
      expect(instance.compare!(outs, instance.expected).pass, label).toBe(true);
      const data = outs[0]!.data as Float32Array | Int32Array;
      const i = data.findIndex((v) => Number.isFinite(v) && v >= 0);
      if (i < 0) continue;
      data[i] =
        c.op === 'controlledSample' ? (data[i]! + 1) % Number(c.shape.match(/×(\d+)/)![1]) : data[i]! + 1;
      expect(instance.compare!(outs, instance.expected).pass, `${label} corrupted`).toBe(false);
    }
  });

  it('of log-probabilities and counts pass the default judge on the reference and fail on a changed id', async () => {
    const { LOGIT_CONTROLS_CASES } = await import('../src/verify/cases/logit-controls.js');
    const { judgeOutputs } = await import('../src/verify/run.js');
    const cases = LOGIT_CONTROLS_CASES.filter(
      (c) => c.tag !== 'qwen3-0.6b' && (c.op === 'tokenLogprobs' || c.op === 'addTokenCounts'),
    );
    expect(cases.length).toBeGreaterThan(5);
    for (const c of cases) {
      const instance = c.make(321);
      const outs = instance.expected.map((e) => Tensor.full(e.shape, -1, e.dtype));
      instance.run(
        instance.inputs.map((t) => t.clone()),
        outs,
      );
      const label = `${c.op} ${c.dtype} ${c.shape}`;
      expect(judgeOutputs(outs, instance.expected, c.tolerance).pass, label).toBe(true);
      const ids = outs.find((t) => t.dtype === 'i32' && t.size > 0);
      if (ids === undefined) continue;
      (ids.data as Int32Array)[0]! += 1;
      expect(judgeOutputs(outs, instance.expected, c.tolerance).pass, `${label} corrupted`).toBe(false);
    }
  });
});
