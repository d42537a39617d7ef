/**
 * The layered CUDA engine on weight-only quantized checkpoints (INT8 per channel, INT4 groups, INT4 with AWQ/GPTQ
 * zero points) against the cpu engine on the same quantized projections: prefill and graph-decode logits, greedy
 * tokens through the run-ahead decode, chunked prefill against one-shot prefill, prefix reuse across turns, the
 * eager modules, the megakernel's refusal, and loading (quantize at load on the GPU; a stored checkpoint uploaded as
 * it is). Odd shapes (hidden 96, FFN 160, vocab 301) and random norm weights. GPU only: skipped, visibly, where no GPU
 * is usable.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as cudaCore from '@qk/cuda-core';
import { cudaAvailable, QkValueError, useCudaBackend } from '@qk/ops';
import { describe, expect, it, onTestFinished } from 'vitest';
import { writeRandomCheckpoint } from '../src/checkpoint/index.js';
import { PRESETS } from '../src/config.js';
import { createCpuEngine } from '../src/engine/cpu.js';
import { createEngine } from '../src/engine/index.js';
import { createLayeredEngine } from '../src/engine/layered.js';
import { loadQwen3, Qwen3Model } from '../src/model.js';
import {
  loadQuantizedCheckpoint,
  quantizeCheckpoint,
  readQuantizationConfig,
} from '../src/quant/checkpoint.js';
import type { Engine } from '../src/types.js';
import { argmaxOf, closenessOf, toCuda, logitTrace as trace } from './support/engine-checks.js';
import { type QuantFormat as Format, quantized } from './support/quantized-model.js';
import { randomIds, randomWeights, smallConfig } from './support/random-model.js';
import { stubTokenizer } from './support/stub-tokenizer.js';

useCudaBackend(cudaCore);
const gpu = cudaAvailable();

/** Odd sizes every group size below divides: hidden 96, attention 4 × 16 = 64, FFN 160; vocab 301. */
const config = smallConfig({ hiddenSize: 96, intermediateSize: 160, vocabSize: 301, eosTokenIds: [] });

const FORMATS: [string, Format][] = [
  ['int8', { bits: 8 }],
  ['int4 group 32', { bits: 4, groupSize: 32 }],
  ['int4 group 32 with zero points (AWQ/GPTQ)', { bits: 4, groupSize: 32, zeroPoints: true }],
];

/** The cpu engine (the reference) and the layered engine on the same quantized model. */
function pair(
  f: Format,
  seed: number,
  dtype: 'f32' | 'bf16',
  options: { maxContext?: number; prefillChunk?: number } = {},
) {
  const maxContext = options.maxContext ?? 64;
  const cpu = createCpuEngine(config, randomWeights(config, seed), {
    maxContext,
    quantized: quantized(config, seed, f),
  });
  const layered = createLayeredEngine(config, toCuda(randomWeights(config, seed, dtype)), {
    maxContext,
    quantized: quantized(config, seed, f),
    ...(options.prefillChunk === undefined ? {} : { prefillChunk: options.prefillChunk }),
  });
  return { cpu, layered };
}

function expectClose(got: Float32Array[], want: Float32Array[], bound: number, what: string): void {
  expect(got.length).toBe(want.length);
  for (let s = 0; s < want.length; s++) {
    expect(got[s]!.every(Number.isFinite), `${what} step ${s} finite`).toBe(true);
    expect(closenessOf(got[s]!, want[s]!).relL2, `${what} step ${s}`).toBeLessThan(bound);
  }
}

const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };

/** Greedy tokens through `next()`: a prompt, then each token fed back (the layered engine runs a step ahead). */
function greedyTokens(engine: Engine, prompt: readonly number[], steps: number): number[] {
  const out = [engine.next(prompt, 0, greedy, 0)];
  for (let i = 1; i < steps; i++) out.push(engine.next([out.at(-1)!], prompt.length + i - 1, greedy, i));
  return out;
}

describe.skipIf(!gpu)('layered engine, quantized weights (CUDA)', () => {
  for (const [name, f] of FORMATS) {
    it(`${name}: prefill and graph decode match the cpu engine in f32; greedy tokens are the same`, () => {
      const { cpu, layered } = pair(f, 3, 'f32');
      const ids = randomIds(24, config.vocabSize, 11);
      // The f32 bound of the float engine test, relaxed 5×: the INT kernels sum in f32 where the references sum in f64.
      expectClose(trace(layered, ids, 9), trace(cpu, ids, 9), 1e-4, name);
      const prompt = randomIds(7, config.vocabSize, 12);
      expect(greedyTokens(layered, prompt, 16)).toEqual(greedyTokens(cpu, prompt, 16));
      cpu.dispose();
      layered.dispose();
    });

    it(`${name}: bf16 activations stay within bf16 error of the f32 reference and agree on argmax`, () => {
      const { cpu, layered } = pair(f, 5, 'bf16');
      const ids = randomIds(24, config.vocabSize, 13);
      const want = trace(cpu, ids, 8);
      const got = trace(layered, ids, 8);
      expectClose(got, want, 3e-2, name);
      const agree = got.filter((g, s) => argmaxOf(g) === argmaxOf(want[s]!)).length;
      expect(agree / want.length).toBeGreaterThanOrEqual(0.9);
      cpu.dispose();
      layered.dispose();
    });

    // f32 runs the INT GEMV at every row count; bf16 runs the tensor-core INT kernel from 2 rows (one-shot and
    // chunked prefill alike), whose split of the sums may differ with the rows: bf16 rounding then differs.
    for (const [dtype, same, reference] of [
      ['f32', 1e-5, 1e-4],
      ['bf16', 1e-2, 3e-2],
    ] as const) {
      it(`${name}, ${dtype}: a prompt prefilled in chunks gives one-shot prefill's logits, then decodes across a bucket edge`, () => {
        const oneShot = pair(f, 7, dtype, { maxContext: 300 });
        const chunked = createLayeredEngine(config, toCuda(randomWeights(config, 7, dtype)), {
          maxContext: 300,
          prefillChunk: 5,
          quantized: quantized(config, 7, f),
        });
        // 23 prompt tokens (chunks 5, 5, 5, 5, 3), then decode steps; a second prompt reaching past row 256 decodes
        // in the next bucket's graph.
        const ids = randomIds(30, config.vocabSize, 14);
        const want = trace(oneShot.layered, ids, 23);
        expectClose(trace(chunked, ids, 23), want, same, `${name} chunked`);
        expectClose(want, trace(oneShot.cpu, ids, 23), reference, `${name} one-shot vs cpu`);
        const long = randomIds(262, config.vocabSize, 15);
        expectClose(trace(chunked, long, 252), trace(oneShot.cpu, long, 252), reference, `${name} long`);
        for (const e of [oneShot.cpu, oneShot.layered, chunked]) e.dispose();
      });
    }
  }

  it('reuses a cached prompt prefix across turns with the tokens of the cpu engine', async () => {
    const f: Format = { bits: 4, groupSize: 32 };
    const { cpu, layered } = pair(f, 9, 'f32', { maxContext: 128 });
    const warm = new Qwen3Model({ config, tokenizer: stubTokenizer(config.vocabSize), engine: layered });
    const cold = new Qwen3Model({
      config,
      tokenizer: stubTokenizer(config.vocabSize),
      engine: cpu,
      prefixCache: false,
    });
    let prompt = randomIds(20, 95, 16);
    for (let turn = 0; turn < 3; turn++) {
      const a = await warm.generate(prompt, { temperature: 0, maxTokens: 6 }).result;
      const b = await cold.generate(prompt, { temperature: 0, maxTokens: 6 }).result;
      expect(a.ids, `turn ${turn}`).toEqual(b.ids);
      // The first prompt at least is reused from the cache (a cold start would prefill it again).
      if (turn > 0) expect(a.stats.cachedPromptTokens).toBeGreaterThanOrEqual(20);
      prompt = [...prompt, ...a.ids, ...randomIds(5, 95, 17 + turn)];
    }
    warm.dispose();
    cold.dispose();
  });

  it('gives the same logits with the eager modules (unfused RMSNorm, MLP and RoPE), and with zero points', () => {
    for (const f of [{ bits: 8 }, { bits: 4, groupSize: 32, zeroPoints: true }] as Format[]) {
      const { cpu, layered } = pair(f, 19, 'f32');
      const ids = randomIds(14, config.vocabSize, 18);
      const base = trace(layered, ids, 6);
      const undo = layered.patch!({ rmsnorm: 'eager', mlp: 'eager', rope: 'eager' });
      expectClose(trace(layered, ids, 6), base, 2e-5, `int${f.bits} eager`);
      undo();
      cpu.dispose();
      layered.dispose();
    }
  });

  it('reports the bytes it holds; the megakernel refuses this shape (head size 16), pointing to the layered engine', () => {
    const f: Format = { bits: 8 };
    const { cpu, layered } = pair(f, 21, 'bf16');
    const { hiddenSize: h, numHeads, numKvHeads, headDim, intermediateSize: ffn } = config;
    const shapes = [
      [(numHeads + 2 * numKvHeads) * headDim, h],
      [h, numHeads * headDim],
      [2 * ffn, h],
      [h, ffn],
    ];
    const perLayer = shapes.reduce((s, [out, n]) => s + out! * n! + 4 * out!, 0);
    expect(layered.weightInfo).toMatchObject({
      format: 'int8',
      projectionBytes: config.numLayers * perLayer,
    });
    expect(cpu.weightInfo?.projectionBytes).toBe(config.numLayers * perLayer);
    // (The megakernel runs quantized weights, but its attention is written for head size 128.)
    const make = () =>
      createEngine('megakernel', config, toCuda(randomWeights(config, 21, 'bf16')), {
        maxContext: 16,
        quantized: quantized(config, 21, f),
      });
    expect(make).toThrow(QkValueError);
    expect(make).toThrow(/head size 128.*use "layered"/);
    cpu.dispose();
    layered.dispose();
  });
});

describe.skipIf(!gpu)('loading quantized models onto the layered engine (CUDA)', () => {
  it('quantizes a bf16 model at load on the GPU (the default engine for int8/int4 there) and generates', async () => {
    for (const weights of ['int8', 'int4'] as const) {
      const model = await loadQwen3('tiny', { weights, maxContext: 64 });
      expect(model.engine).toBe('layered');
      expect(model.weightInfo?.format).toBe(weights);
      const result = await model.generate([1, 2, 3, 4], { temperature: 0, maxTokens: 8 }).result;
      expect(result.ids).toHaveLength(8);
      model.dispose();
    }
    // The megakernel runs quantized weights, but not the tiny shape: its sentence names the layered engine.
    await expect(loadQwen3('tiny', { weights: 'int8', engine: 'megakernel' })).rejects.toThrow(
      /use "layered"/,
    );
  });

  it('uploads a stored int4 checkpoint as it is, and runs the cpu engine’s logits', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'qk-layered-quant-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const src = join(dir, 'bf16');
    const out = join(dir, 'int4');
    await writeRandomCheckpoint(src, PRESETS.tiny, { seed: 5 });
    await quantizeCheckpoint(src, out, { bits: 4, groupSize: 64 });
    const qc = (await readQuantizationConfig(out))!;
    const tiny = PRESETS.tiny;
    const onGpu = await loadQuantizedCheckpoint(out, tiny, qc, { dtype: 'f32', device: 'cuda' });
    expect(onGpu.quantized[0]!.q.weight.qweight.device).toBe('cuda');
    expect(onGpu.weights.embed.device).toBe('cuda');
    const layered = createEngine('layered', tiny, onGpu.weights, {
      maxContext: 32,
      quantized: onGpu.quantized,
    });
    const onCpu = await loadQuantizedCheckpoint(out, tiny, qc, { dtype: 'f32' });
    const cpu = createEngine('cpu', tiny, onCpu.weights, { maxContext: 32, quantized: onCpu.quantized });
    const ids = [11, 2_000, 151_000, 7, 42, 99_999, 3];
    expectClose(trace(layered, ids, 5), trace(cpu, ids, 5), 1e-4, 'stored int4');
    layered.dispose();
    cpu.dispose();
  });
});
