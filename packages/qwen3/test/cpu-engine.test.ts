/**
 * The cpu engine against an independent float64 Qwen3 written here with plain loops (no @qk/ops ops): full prefill,
 * and incremental decode through the KV cache.
 */
import { QkDisposedError, QkIndexError, QkShapeError, QkValueError, sample, Tensor } from '@qk/ops';
import { closeness } from '@qk/ops/testing';
import { describe, expect, it } from 'vitest';
import { stepSeed } from '../src/engine/common.js';
import { createCpuEngine } from '../src/engine/cpu.js';
import { pickToken } from '../src/engine/sampling.js';
import { QkContextError } from '../src/errors.js';
import type { Qwen3Config, Qwen3Weights } from '../src/types.js';
import { randomIds, randomWeights, smallConfig } from './support/random-model.js';

type Matrix = { rows: number; cols: number; data: Float64Array };

function mat(t: Tensor): Matrix {
  const [rows, cols] = t.shape.length === 2 ? (t.shape as [number, number]) : [1, t.shape[0]!];
  return { rows, cols, data: Float64Array.from(t.toArray()) };
}

/** `W x` for `W` `[out, in]`. */
function matVec(w: Matrix, x: Float64Array): Float64Array {
  const y = new Float64Array(w.rows);
  for (let o = 0; o < w.rows; o++) {
    let s = 0;
    for (let k = 0; k < w.cols; k++) s += w.data[o * w.cols + k]! * x[k]!;
    y[o] = s;
  }
  return y;
}

function rmsNormalize(x: Float64Array, w: Float64Array, eps: number): Float64Array {
  let ss = 0;
  for (const v of x) ss += v * v;
  const inv = 1 / Math.sqrt(ss / x.length + eps);
  return x.map((v, i) => v * inv * w[i]!);
}

/** HF's rotate-half rotary embedding of one head at position `p`, in float64 throughout. */
function rotate(head: Float64Array, p: number, theta: number): Float64Array {
  const d = head.length;
  const half = d / 2;
  const out = new Float64Array(d);
  for (let i = 0; i < half; i++) {
    const angle = p / theta ** ((2 * i) / d);
    const [c, s] = [Math.cos(angle), Math.sin(angle)];
    out[i] = head[i]! * c - head[i + half]! * s;
    out[i + half] = head[i + half]! * c + head[i]! * s;
  }
  return out;
}

/** Logits of every position of `ids`, computed from scratch in float64 (no cache). */
function naiveLogits(config: Qwen3Config, weights: Qwen3Weights, ids: readonly number[]): Float64Array[] {
  const { hiddenSize: h, numHeads, numKvHeads, headDim: d, rmsNormEps: eps, ropeTheta: theta } = config;
  const embed = mat(weights.embed);
  let hidden = ids.map((id) => embed.data.slice(id * h, (id + 1) * h));
  for (const layer of weights.layers) {
    const w = Object.fromEntries(Object.entries(layer).map(([k, t]) => [k, mat(t)])) as Record<
      string,
      Matrix
    >;
    const normed = hidden.map((x) => rmsNormalize(x, w.inputNorm!.data, eps));
    const heads = (m: Matrix, count: number, normW: Matrix | null, x: Float64Array, p: number) =>
      Array.from({ length: count }, (_, head) => {
        const v = matVec(m, x).slice(head * d, (head + 1) * d);
        return normW === null ? v : rotate(rmsNormalize(v, normW.data, eps), p, theta);
      });
    const qs = normed.map((x, p) => heads(w.q!, numHeads, w.qNorm!, x, p));
    const ks = normed.map((x, p) => heads(w.k!, numKvHeads, w.kNorm!, x, p));
    const vs = normed.map((x, p) => heads(w.v!, numKvHeads, null, x, p));
    hidden = hidden.map((res, t) => {
      const ctx = new Float64Array(numHeads * d);
      for (let head = 0; head < numHeads; head++) {
        const kv = Math.floor(head / (numHeads / numKvHeads));
        const scores = Array.from({ length: t + 1 }, (_, j) => {
          let s = 0;
          for (let i = 0; i < d; i++) s += qs[t]![head]![i]! * ks[j]![kv]![i]!;
          return s / Math.sqrt(d);
        });
        const max = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - max));
        const total = e.reduce((a, b) => a + b, 0);
        for (let j = 0; j <= t; j++) {
          for (let i = 0; i < d; i++) ctx[head * d + i]! += (e[j]! / total) * vs[j]![kv]![i]!;
        }
      }
      const afterAttn = matVec(w.o!, ctx).map((v, i) => v + res[i]!);
      const x = rmsNormalize(afterAttn, w.postNorm!.data, eps);
      const gate = matVec(w.gate!, x);
      const up = matVec(w.up!, x);
      const act = gate.map((g, i) => (g / (1 + Math.exp(-g))) * up[i]!);
      return matVec(w.down!, act).map((v, i) => v + afterAttn[i]!);
    });
  }
  const norm = mat(weights.norm).data;
  const head = mat(weights.lmHead);
  return hidden.map((x) => matVec(head, rmsNormalize(x, norm, eps)));
}

function expectClose(actual: Float32Array, expected: Float64Array, what: string): void {
  const c = closeness(actual, expected);
  expect(c.nonFiniteMismatches, what).toEqual([]);
  expect(c.relL2, what).toBeLessThan(1e-5);
  const scale = Math.max(...expected.map(Math.abs));
  expect(c.maxAbs, what).toBeLessThan(1e-5 * scale + 1e-6);
}

const seedBase = Math.floor(Math.random() * 1e6);

describe('cpu engine', () => {
  it.each([
    ['untied', smallConfig()],
    [
      'tied, odd sizes',
      smallConfig({ tieWordEmbeddings: true, hiddenSize: 37, intermediateSize: 53, vocabSize: 211 }),
    ],
  ])('prefill logits match a float64 Qwen3 (%s)', (_, config) => {
    const weights = randomWeights(config, seedBase + 1);
    const expected = naiveLogits(config, weights, randomIds(9, config.vocabSize, seedBase + 2));
    const ids = randomIds(9, config.vocabSize, seedBase + 2);
    const engine = createCpuEngine(config, weights, { maxContext: 32 });
    expectClose(engine.logits(ids, 0), expected[8]!, 'prefill');
    // A one-token prompt is its own case: no earlier keys to attend to.
    expectClose(engine.logits(ids.slice(0, 1), 0), expected[0]!, 'one token');
    engine.dispose();
  });

  it('decodes through the KV cache to the same logits as prefill of the whole sequence', () => {
    const config = smallConfig();
    const weights = randomWeights(config, seedBase + 3);
    const ids = randomIds(12, config.vocabSize, seedBase + 4);
    const expected = naiveLogits(config, weights, ids);
    const engine = createCpuEngine(config, weights, { maxContext: 12 });
    expectClose(engine.logits(ids.slice(0, 5), 0), expected[4]!, 'prefill of 5');
    for (let p = 5; p < ids.length; p++)
      expectClose(engine.logits([ids[p]!], p), expected[p]!, `decode at ${p}`);
    // Rewinding overwrites the cache from that row: a new continuation after position 3.
    const other = randomIds(4, config.vocabSize, seedBase + 5);
    const rewound = naiveLogits(config, weights, [...ids.slice(0, 3), ...other]);
    expectClose(engine.logits(other, 3), rewound[6]!, 'rewound');
    engine.dispose();
  });

  it('converts bf16 weights to float32 copies and disposes the originals', () => {
    const config = smallConfig();
    const weights = randomWeights(config, seedBase + 6, 'bf16');
    const asF32: Qwen3Weights = {
      embed: weights.embed.to('f32'),
      layers: weights.layers.map(
        (l) => Object.fromEntries(Object.entries(l).map(([k, t]) => [k, t.to('f32')])) as never,
      ),
      norm: weights.norm.to('f32'),
      lmHead: weights.lmHead.to('f32'),
    };
    const ids = randomIds(6, config.vocabSize, seedBase + 7);
    const expected = naiveLogits(config, asF32, ids);
    const engine = createCpuEngine(config, weights, { maxContext: 16 });
    expect(weights.embed.disposed).toBe(true);
    expectClose(engine.logits(ids, 0), expected[5]!, 'bf16 weights');
    expect(engine.dtype).toBe('f32');
    engine.dispose();
  });

  it('validates ids, positions and the context, and refuses calls after dispose', () => {
    const config = smallConfig();
    const engine = createCpuEngine(config, randomWeights(config, seedBase + 8), { maxContext: 8 });
    expect(() => engine.logits([], 0)).toThrow(QkValueError);
    expect(() => engine.logits([config.vocabSize], 0)).toThrow(QkIndexError);
    expect(() => engine.logits([1.5], 0)).toThrow(QkIndexError);
    expect(() => engine.logits([-1], 0)).toThrow(QkIndexError);
    expect(() => engine.logits([1], -1)).toThrow(QkValueError);
    expect(() => engine.logits([1, 2], 1)).toThrow(/gap/);
    expect(() => engine.logits(randomIds(9, config.vocabSize, 1), 0)).toThrow(QkContextError);
    engine.logits(randomIds(8, config.vocabSize, 2), 0);
    expect(() => engine.logits([3], 8)).toThrow(QkContextError);
    const sampling = { temperature: 1, topK: 0, topP: 1, seed: 0 };
    expect(() => engine.next([3], 7, { ...sampling, temperature: -1 }, 0)).toThrow(/temperature/);
    expect(() => engine.next([3], 7, { ...sampling, topP: 0 }, 0)).toThrow(/topP/);
    engine.dispose();
    expect(() => engine.logits([3], 0)).toThrow(QkDisposedError);
    engine.dispose();
  });

  it('refuses weights that do not match the config, naming the tensor', () => {
    const config = smallConfig();
    const weights = randomWeights(config, seedBase + 9);
    const wrong = {
      ...weights,
      layers: [weights.layers[0]!, { ...weights.layers[1]!, up: weights.layers[1]!.down }],
    };
    expect(() => createCpuEngine(config, wrong, { maxContext: 8 })).toThrow(QkShapeError);
    expect(() => createCpuEngine(config, wrong, { maxContext: 8 })).toThrow(/layers\[1\]\.up/);
    expect(() => createCpuEngine(config, weights, { maxContext: 0 })).toThrow(QkValueError);
  });

  it('next() is argmax at temperature 0 and a seeded, repeatable draw otherwise', () => {
    const config = smallConfig();
    const weights = randomWeights(config, seedBase + 10);
    const ids = randomIds(5, config.vocabSize, seedBase + 11);
    const expected = naiveLogits(config, weights, ids)[4]!;
    const engine = createCpuEngine(config, weights, { maxContext: 8 });
    const greedy = engine.next(ids, 0, { temperature: 0, topK: 0, topP: 1, seed: 0 }, 0);
    expect(greedy).toBe(expected.indexOf(Math.max(...expected)));
    const sampling = { temperature: 1.5, topK: 0, topP: 1, seed: seedBase };
    const draws = Array.from({ length: 20 }, (_, step) => engine.next(ids, 0, sampling, step));
    expect(Array.from({ length: 20 }, (_, step) => engine.next(ids, 0, sampling, step))).toEqual(draws);
    // At temperature 1.5 over 300 tokens, 20 steps drawing one token each would be a broken seed mix.
    expect(new Set(draws).size).toBeGreaterThan(1);
    engine.dispose();
  });

  it('next() never picks ids at or above vocabLimit; logits() stays unmasked', () => {
    const config = smallConfig();
    const weights = randomWeights(config, seedBase + 12);
    const ids = randomIds(5, config.vocabSize, seedBase + 13);
    const expected = naiveLogits(config, weights, ids)[4]!;
    const best = expected.indexOf(Math.max(...expected));
    // Cut the vocabulary just at the overall winner so the mask has to matter.
    const limit = Math.max(1, best);
    const engine = createCpuEngine(config, weights, { maxContext: 8, vocabLimit: limit });
    const head = [...expected.slice(0, limit)];
    expect(engine.next(ids, 0, { temperature: 0, topK: 0, topP: 1, seed: 0 }, 0)).toBe(
      head.indexOf(Math.max(...head)),
    );
    for (let step = 0; step < 20; step++) {
      expect(engine.next(ids, 0, { temperature: 5, topK: 0, topP: 1, seed: seedBase }, step)).toBeLessThan(
        limit,
      );
    }
    expectClose(engine.logits(ids, 0), expected, 'unmasked logits');
    engine.dispose();
    expect(() => createCpuEngine(config, randomWeights(config, 1), { maxContext: 8, vocabLimit: 0 })).toThrow(
      /vocabLimit/,
    );
  });

  it('the top-k shortcut draws exactly what sample() draws on the whole row', () => {
    for (let trial = 0; trial < 40; trial++) {
      const vocab = 500 + trial * 37;
      const logits = Tensor.randn([vocab], { seed: seedBase + 100 + trial, std: 3 }).toFloat32Array();
      // Ties at the top-k boundary must resolve to the lower index, as sample() orders them.
      if (trial % 4 === 0) logits.fill(logits[7]!, 100, 140);
      if (trial % 5 === 0) logits[3] = -Infinity;
      const sampling = {
        temperature: 0.3 + (trial % 7) * 0.2,
        topK: 1 + (trial % 30),
        topP: trial % 3 === 0 ? 1 : 0.8,
        seed: trial,
      };
      for (const step of [0, 1, 5]) {
        const full = sample(Tensor.fromStorage(logits, [vocab], 'f32'), {
          temperature: sampling.temperature,
          topK: sampling.topK,
          topP: sampling.topP,
          seed: stepSeed(sampling.seed, step),
        }).item();
        expect(pickToken(logits, sampling, step), `trial ${trial} step ${step}`).toBe(full);
      }
    }
  });

  it('the step seed separates steps and seeds', () => {
    const seen = new Set<bigint>();
    for (let seed = 0; seed < 20; seed++)
      for (let step = 0; step < 20; step++) seen.add(stepSeed(seed, step));
    expect(seen.size).toBe(400);
    expect(stepSeed(7, 3)).toBe(stepSeed(7, 3));
  });
});
