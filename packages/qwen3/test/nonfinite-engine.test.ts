/**
 * Non-finite logits on the GPU engines (issue #51: NaN/Inf weights printed token 0 and exited 0). A random model with
 * one weight set to NaN or +Inf must fail every generation with `QkNonFiniteError` naming the step and the weight, on
 * `layered` and `megakernel`, greedy and sampled (in the kernel, on the whole vocabulary, with controls), in prefill
 * and in a decode step (the captured graph, its replay, the megakernel's launch); the engine keeps working after it,
 * and a healthy model is unaffected. GPU only (the megakernel: Hopper): skipped, visibly, where no GPU is usable. The
 * error-path helpers are checked on the CPU as well.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as cudaCore from '@qk/cuda-core';
import {
  cudaAvailable,
  cudaDeviceInfo,
  cudaMemoryStats,
  findNonFinite,
  QkValueError,
  Tensor,
  useCudaBackend,
} from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { writeRandomCheckpoint } from '../src/checkpoint/files.js';
import { loadWeights } from '../src/checkpoint/load.js';
import { createEngine } from '../src/engine/index.js';
import { holdsNonFinite, isNonFiniteLogitsError, nonFiniteError } from '../src/engine/nonfinite.js';
import { QkCheckpointError, QkNonFiniteError } from '../src/errors.js';
import { Qwen3Model } from '../src/model.js';
import { disposeFloatWeights } from '../src/quant/quantize.js';
import type { Engine, Qwen3Weights, SamplingParams } from '../src/types.js';
import { editTensorBytes } from './support/checkpoint-edit.js';
import { argmaxOf, toCuda } from './support/engine-checks.js';
import { MEGAKERNEL_SMALL, randomIds, randomWeights } from './support/random-model.js';
import { stubTokenizer } from './support/stub-tokenizer.js';

useCudaBackend(cudaCore);
const gpu = cudaAvailable();
const hopper = gpu && cudaDeviceInfo().computeCapability.major >= 9;

/** Head size 128 (the megakernel's), untied: an embedding row is not an LM-head row. */
const CONFIG = MEGAKERNEL_SMALL;

const BF16_NAN = 0x7fc0;
const BF16_INF = 0x7f80;
/** The id whose embedding row the decode tests poison: never in their prompts. */
const POISONED_ID = 998;

const GREEDY: SamplingParams = { temperature: 0, topK: 0, topP: 1, seed: 0 };
/** Drawn in the megakernel (top-k ≤ 64) and by `sample` on the layered engine. */
const TOP_K: SamplingParams = { temperature: 0.8, topK: 20, topP: 0.95, seed: 5 };
/** The whole vocabulary: `sample` after the step on both engines. */
const FULL: SamplingParams = { temperature: 1, topK: 0, topP: 1, seed: 6 };
/** With a control: the device sampler (`Engine.choose`). */
const BIASED: SamplingParams = { ...TOP_K, logitBias: new Map([[3, 2]]) };
const SAMPLINGS: [string, SamplingParams][] = [
  ['greedy', GREEDY],
  ['top-k 20', TOP_K],
  ['whole vocabulary', FULL],
  ['logit bias', BIASED],
];

const ENGINES = [
  ['layered', gpu],
  ['megakernel', hopper],
] as const;

/** Random bf16 weights with element `at` of `pick(weights)` set to the bf16 bits `bits`. */
function poisoned(seed: number, pick: (w: Qwen3Weights<'bf16'>) => Tensor<'bf16'>, at: number, bits: number) {
  const w = randomWeights(CONFIG, seed, 'bf16');
  (pick(w).data as Uint16Array)[at] = bits;
  return w;
}

function engineOn(name: 'layered' | 'megakernel', weights: Qwen3Weights<'bf16'>): Engine {
  return createEngine(name, CONFIG, toCuda(weights), { maxContext: 64, megakernelUntil: 64 });
}

/** The error `fn` throws (or the rejection of the promise it returns); fails when there is none. */
async function caught(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected an error, got a result');
}

/** The error `fn` throws, or null. */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  return null;
}

function expectNonFinite(e: unknown, step: number, tensor: string, label: string): void {
  expect(e instanceof QkNonFiniteError, `${label}: ${String(e)}`).toBe(true);
  const err = e as QkNonFiniteError;
  expect(err.step, label).toBe(step);
  expect(err.tensors, label).toEqual([tensor]);
  expect(err.message, label).toMatch(
    new RegExp(`NaN/Inf at step ${step}; the weights hold non-finite values in`),
  );
}

/** `Engine.next`, or `Engine.choose` for sampling with controls, as a generation calls them. */
function step(
  engine: Engine,
  ids: readonly number[],
  start: number,
  s: SamplingParams,
  index: number,
): number {
  if (s.logitBias === undefined) return engine.next(ids, start, s, index);
  const history = { prompt: ids, generated: [] };
  return engine.choose!(ids, start, s, index, { history, mask: null, topLogprobs: null }).id;
}

describe('non-finite helpers (CPU)', () => {
  it('holdsNonFinite finds NaN and ±Inf in every float dtype and nothing in finite weights', () => {
    for (const dtype of ['f32', 'bf16', 'f16'] as const) {
      const t = Tensor.randn([37, 29], { dtype, seed: 3 });
      expect(holdsNonFinite(t), dtype).toBe(false);
      for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
        const values = t.toFloat32Array();
        values[1 + Math.floor(Math.random() * (values.length - 1))] = bad;
        expect(holdsNonFinite(Tensor.fromArray(values, { shape: [37, 29], dtype })), `${dtype} ${bad}`).toBe(
          true,
        );
      }
    }
    expect(holdsNonFinite(Tensor.fromArray([1, 2], { shape: [2], dtype: 'i32' }))).toBe(false);
  });

  it('nonFiniteError names the poisoned weights in order, a shared tensor once', () => {
    const ok = Tensor.randn([4, 4], { seed: 1 });
    const bad = Tensor.fromArray([1, Number.NaN, 3, 4], { shape: [2, 2] });
    const e = nonFiniteError(3, [
      ['embed', bad],
      ['layers[0].q', ok],
      ['lmHead', bad],
    ]);
    expect(e.step).toBe(3);
    expect(e.tensors).toEqual(['embed']);
    expect(e.message).toMatch(/NaN\/Inf at step 3; the weights hold non-finite values in embed:/);
    expect(nonFiniteError(0, [['norm', ok]]).message).toMatch(/the weights are all finite/);
    expect(isNonFiniteLogitsError(new QkValueError('sample', 'logits', 'holds NaN.'))).toBe(true);
    expect(isNonFiniteLogitsError(new QkValueError('sample', 'topK', 'is bad.'))).toBe(false);
  });
});

describe.skipIf(!gpu)('non-finite logits on the GPU engines', () => {
  for (const [name, usable] of ENGINES) {
    it.skipIf(!usable)(
      `${name}: a generation over NaN or +Inf weights rejects at step 0, never tokens`,
      async () => {
        const cases = [
          ['NaN', 'layers[1].gate', poisoned(7, (w) => w.layers[1]!.gate, 5000, BF16_NAN)],
          ['+Inf', 'layers[0].up', poisoned(8, (w) => w.layers[0]!.up, 777, BF16_INF)],
        ] as const;
        for (const [what, tensor, weights] of cases) {
          const model = new Qwen3Model({
            config: CONFIG,
            tokenizer: stubTokenizer(CONFIG.vocabSize),
            engine: engineOn(name, weights),
          });
          for (const [label, s] of SAMPLINGS) {
            const { seed, logitBias, ...rest } = s;
            const options = { ...rest, seed, maxTokens: 6, ...(logitBias ? { logitBias } : {}) };
            const e = await caught(() => model.generate(randomIds(9, 200, 7), options).result);
            expectNonFinite(e, 0, tensor, `${name}, ${what}, ${label}`);
          }
          model.dispose();
        }
      },
    );

    it.skipIf(!usable)(
      `${name}: a decode step fed a poisoned embedding row fails at its step; the engine runs on`,
      () => {
        for (const bits of [BF16_NAN, BF16_INF]) {
          const weights = poisoned(9, (w) => w.embed, POISONED_ID * CONFIG.hiddenSize + 17, bits);
          const engine = engineOn(name, weights);
          const prompt = randomIds(8, 200, 3);
          for (const [label, s] of SAMPLINGS) {
            const first = step(engine, prompt, 0, s, 0);
            expect(first >= 0 && first < CONFIG.vocabSize, label).toBe(true);
            // Twice: the layered graph's first step runs eagerly and is captured, the second replays the graph.
            for (let k = 0; k < 2; k++) {
              const e = thrown(() => step(engine, [POISONED_ID], prompt.length, s, 1));
              expectNonFinite(
                e,
                1,
                'embed',
                `${name}, ${bits === BF16_NAN ? 'NaN' : '+Inf'}, ${label}, try ${k}`,
              );
            }
            // The prompt again, then a healthy id: the engine is not left broken by the refusal.
            expect(step(engine, prompt, 0, s, 0), label).toBe(first);
            const next = step(engine, [first], prompt.length, s, 1);
            expect(next >= 0 && next < CONFIG.vocabSize, label).toBe(true);
          }
          engine.dispose();
        }
      },
    );

    it.skipIf(!usable)(
      `${name}: one NaN logit among finite ones (an LM-head row) is refused, greedy too`,
      () => {
        // One LM-head row of NaN: that id's logit is NaN at every step, every other logit finite. The argmax of the
        // finite ones would be a plausible, silently wrong token; `sample`'s rule refuses the row.
        const weights = poisoned(11, (w) => w.lmHead, 0, BF16_NAN);
        (weights.lmHead.data as Uint16Array).fill(BF16_NAN, 123 * CONFIG.hiddenSize, 124 * CONFIG.hiddenSize);
        const engine = engineOn(name, weights);
        const prompt = randomIds(6, 200, 2);
        for (const [label, s] of SAMPLINGS) {
          // `logits` hands the row over as it is (the caller sees the NaN); a token is never drawn from it.
          const logits = engine.logits(prompt, 0);
          expect(logits.filter(Number.isNaN).length, label).toBe(2);
          expectNonFinite(
            thrown(() => step(engine, prompt, 0, s, 0)),
            0,
            'lmHead',
            `${name} prefill, ${label}`,
          );
          const healthy = logits.findIndex((x, i) => i > 0 && i !== 123 && Number.isFinite(x));
          for (let k = 0; k < 2; k++) {
            const e = thrown(() => step(engine, [healthy], prompt.length, s, 1));
            expectNonFinite(e, 1, 'lmHead', `${name} decode, ${label}, try ${k}`);
          }
        }
        engine.dispose();
      },
    );

    it.skipIf(!usable)(`${name}: a healthy model generates as before, greedy as its own argmax`, async () => {
      const weights = randomWeights(CONFIG, 10, 'bf16');
      const engine = engineOn(name, weights);
      const prompt = randomIds(9, 200, 4);
      const logits = engine.logits(prompt, 0);
      expect(logits.every(Number.isFinite)).toBe(true);
      expect(engine.next(prompt, 0, GREEDY, 0)).toBe(argmaxOf(logits.subarray(0, CONFIG.vocabSize)));
      const model = new Qwen3Model({ config: CONFIG, tokenizer: stubTokenizer(CONFIG.vocabSize), engine });
      for (const [label, s] of SAMPLINGS) {
        const { seed, logitBias, ...rest } = s;
        const options = { ...rest, seed, maxTokens: 12, ...(logitBias ? { logitBias } : {}) };
        const r = await model.generate(prompt, options).result;
        expect(r.stats.generatedTokens > 0 && r.ids.length <= 12, label).toBe(true);
        expect(
          r.ids.every((id) => id >= 0 && id < CONFIG.vocabSize),
          label,
        ).toBe(true);
      }
      model.dispose();
    });
  }
});

describe.skipIf(!gpu)('non-finite weights refused at load on the GPU (the device pass)', () => {
  it('loadWeights onto cuda names the tensor, the count and the first element, and frees what it uploaded', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'qk-nonfinite-gpu-'));
    try {
      await writeRandomCheckpoint(dir, CONFIG, { tokenizerDir: false, dtype: 'bf16', seed: 4 });
      const name = 'model.layers.1.self_attn.o_proj.weight';
      // Three poisoned elements: +Inf at an odd index drawn per run (the kernel's unaligned paths see it as the
      // first), NaN later, -Inf at the very last element.
      const first = 2 * ((Date.now() % 1000) + 100) + 1;
      await editTensorBytes(join(dir, 'model.safetensors'), name, (view, at, byteLength) => {
        view.setUint16(at + 2 * first, BF16_INF, true);
        view.setUint16(at + 2 * (first + 4000), BF16_NAN, true);
        view.setUint16(at + byteLength - 2, 0xff80, true);
      });
      const before = cudaMemoryStats().allocatedBytes;
      const e = await loadWeights(dir, CONFIG, { dtype: 'bf16', device: 'cuda', checkFinite: true }).catch(
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(QkCheckpointError);
      expect((e as Error).message).toContain(name);
      expect((e as Error).message).toContain('3 non-finite values');
      expect((e as Error).message).toContain(`the first at element ${first}`);
      expect(cudaMemoryStats().allocatedBytes).toBe(before);
      // Skipped check: it loads, and the tensor on the GPU holds exactly what the file does.
      const w = await loadWeights(dir, CONFIG, { dtype: 'bf16', device: 'cuda', checkFinite: false });
      try {
        expect(findNonFinite(w.layers[1]!.o)).toEqual({ count: 3, first });
        expect(findNonFinite(w.layers[0]!.o)).toEqual({ count: 0, first: -1 });
      } finally {
        disposeFloatWeights(w);
      }
      expect(cudaMemoryStats().allocatedBytes).toBe(before);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
