/**
 * Faults while running (issue #51): the cpu engine's prefill stops between layers when aborted, non-finite logits
 * are reported instead of printed as token 0, corrupted weights are refused at load, and a model that cannot fit
 * in memory is refused before anything is allocated.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { freemem, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tensor } from '@qk/ops';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomCheckpoint } from '../src/checkpoint/files.js';
import { firstNonFinite, loadWeights } from '../src/checkpoint/load.js';
import { PRESETS } from '../src/config.js';
import { checkMemoryFits, engineBytes } from '../src/engine/common.js';
import { chunkRowsFor, createCpuEngine, PREFILL_CHUNK } from '../src/engine/cpu.js';
import { pickToken } from '../src/engine/sampling.js';
import { QkAbortError, QkCheckpointError, QkMemoryError, QkNonFiniteError } from '../src/errors.js';
import { loadQwen3, Qwen3Model } from '../src/model.js';
import type { SamplingParams } from '../src/types.js';
import { editTensorBytes } from './support/checkpoint-edit.js';
import { MICRO_CONFIG, microTokenizerConfig, microTokenizerJson } from './support/hostile.js';
import { randomIds, randomWeights, smallConfig } from './support/random-model.js';
import { stubTokenizer } from './support/stub-tokenizer.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'qk-hardening-engine-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

type Piecewise = {
  nextAsync(
    ids: readonly number[],
    start: number,
    s: SamplingParams,
    step: number,
    between: () => Promise<void>,
  ): Promise<number>;
};

describe('cpu engine: prefill in pieces', () => {
  it('nextAsync picks the same tokens as next, over prompts longer than one chunk', async () => {
    const config = smallConfig();
    for (const [seed, length] of [
      [1, PREFILL_CHUNK * 3 + 7],
      [2, PREFILL_CHUNK],
      [3, 5],
    ] as const) {
      const a = createCpuEngine(config, randomWeights(config, seed), { maxContext: 256 });
      // Chunks of PREFILL_CHUNK rows whatever a layer costs on this machine, so the pauses can be counted.
      const b = createCpuEngine(config, randomWeights(config, seed), {
        maxContext: 256,
        stepBudgetMs: Infinity,
      });
      const prompt = randomIds(length, config.vocabSize, seed + 10);
      const sampling = { temperature: seed === 1 ? 0 : 0.8, topK: 0, topP: 1, seed };
      let pauses = 0;
      const between = async () => {
        pauses++;
      };
      let ta = a.next(prompt, 0, sampling, 0);
      let tb = await (b as unknown as Piecewise).nextAsync(prompt, 0, sampling, 0, between);
      expect(tb).toBe(ta);
      const chunks = Math.ceil(length / PREFILL_CHUNK);
      expect(pauses).toBe(chunks * (config.numLayers - 1));
      for (let step = 1; step < 4; step++) {
        ta = a.next([ta], length + step - 1, sampling, step);
        tb = await (b as unknown as Piecewise).nextAsync([tb], length + step - 1, sampling, step, between);
        expect(tb).toBe(ta);
      }
      a.dispose();
      b.dispose();
    }
  });

  it('chunk rows follow the measured layer time: 1 … PREFILL_CHUNK rows, about stepBudgetMs per layer', () => {
    expect(chunkRowsFor(200, 10)).toBe(20);
    expect(chunkRowsFor(200, 1)).toBe(PREFILL_CHUNK);
    expect(chunkRowsFor(200, 5000)).toBe(1);
    expect(chunkRowsFor(Infinity, 5000)).toBe(PREFILL_CHUNK);
    expect(chunkRowsFor(200, 0)).toBe(PREFILL_CHUNK);
    const config = smallConfig();
    for (const bad of [0, -1, Number.NaN]) {
      expect(() =>
        createCpuEngine(config, randomWeights(config, 1), { maxContext: 16, stepBudgetMs: bad }),
      ).toThrow(/stepBudgetMs/);
    }
  });

  it('a budget below one row prefills row by row and pauses between LM-head pieces, picking the same token', async () => {
    // A vocabulary past one LM-head piece (32 Mi multiply-adds: 131,072 rows at hidden 256).
    const config = smallConfig({
      hiddenSize: 256,
      intermediateSize: 512,
      vocabSize: 140_000,
      numLayers: 3,
      tieWordEmbeddings: true,
    });
    const seed = 21;
    const engine = createCpuEngine(config, randomWeights(config, seed), {
      maxContext: 64,
      stepBudgetMs: 1e-9,
    });
    const prompt = randomIds(9, config.vocabSize, seed);
    const sampling = { temperature: 0.9, topK: 0, topP: 1, seed };
    let pauses = 0;
    const between = async () => {
      pauses++;
    };
    const token = await (engine as unknown as Piecewise).nextAsync(prompt, 0, sampling, 0, between);
    // One row per chunk: (layers − 1) pauses per row, and one between the LM head's two pieces.
    expect(pauses).toBe(prompt.length * (config.numLayers - 1) + 1);
    // The whole prompt at once (rows rewritten with the same values) gives the logits that token was drawn from.
    expect(token).toBe(pickToken(engine.logits(prompt, 0), sampling, 0));
    engine.dispose();
  });

  it('an abort during a long prefill stops it between layers, well before the prefill would end', async () => {
    const config = smallConfig({
      hiddenSize: 256,
      intermediateSize: 768,
      numLayers: 6,
      maxPositionEmbeddings: 4096,
    });
    const engine = createCpuEngine(config, randomWeights(config, 4), { maxContext: 4096 });
    const model = new Qwen3Model({ config, tokenizer: stubTokenizer(config.vocabSize), engine });
    const prompt = randomIds(3000, config.vocabSize - 1, 5);
    const controller = new AbortController();
    let layers = 0;
    const original = (engine as unknown as Piecewise).nextAsync.bind(engine);
    (engine as unknown as Piecewise).nextAsync = (ids, start, s, step, between) =>
      original(ids, start, s, step, async () => {
        if (++layers === 3) controller.abort(new Error('test abort'));
        await between();
      });
    const generation = model.generate(prompt, { maxTokens: 2, signal: controller.signal });
    await expect(generation.result).rejects.toBeInstanceOf(QkAbortError);
    // The prompt is 94 chunks of 5 pauses each: the abort was seen at the next pause, not after the prefill.
    expect(layers).toBe(3);
    model.dispose();
  });

  it('after an abort mid-prefill the same model generates what a fresh model does (cache and prefix consistent)', async () => {
    const config = smallConfig({ numLayers: 3, maxPositionEmbeddings: 1024 });
    const engine = createCpuEngine(config, randomWeights(config, 11), {
      maxContext: 1024,
      stepBudgetMs: Infinity,
    });
    const tokenizer = stubTokenizer(config.vocabSize);
    const greedy = { temperature: 0, maxTokens: 5 } as const;
    const model = new Qwen3Model({ config, tokenizer, engine });
    const shared = randomIds(PREFILL_CHUNK + 5, config.vocabSize - 1, 12);
    // A finished turn leaves `shared` in the prefix cache; the aborted prompt extends it by many chunks.
    await model.generate(shared, greedy).result;
    const long = [...shared, ...randomIds(PREFILL_CHUNK * 6, config.vocabSize - 1, 13)];
    const controller = new AbortController();
    const piecewise = engine as unknown as Piecewise;
    const original = piecewise.nextAsync.bind(engine);
    let pauses = 0;
    piecewise.nextAsync = (ids, start, s, step, between) =>
      original(ids, start, s, step, async () => {
        // Abort inside the third chunk of the new rows: earlier chunks already overwrote cached rows past `shared`.
        if (++pauses === 2 * (config.numLayers - 1) + 1) controller.abort(new Error('test abort'));
        await between();
      });
    const aborted = model.generate(long, { ...greedy, signal: controller.signal });
    await expect(aborted.result).rejects.toBeInstanceOf(QkAbortError);
    expect(pauses).toBe(2 * (config.numLayers - 1) + 1);
    piecewise.nextAsync = original;
    // Shares `long`'s first chunks, so a cache that believed the aborted prefill would skip rows it never finished.
    const next = [...long.slice(0, PREFILL_CHUNK * 3), ...randomIds(9, config.vocabSize - 1, 14)];
    const after = await model.generate(next, greedy).result;
    const reference = new Qwen3Model({
      config,
      tokenizer,
      engine: createCpuEngine(config, randomWeights(config, 11), { maxContext: 1024 }),
    });
    const expected = await reference.generate(next, greedy).result;
    expect(after.ids).toEqual(expected.ids);
    expect(after.stats.cachedPromptTokens).toBeLessThanOrEqual(shared.length);
    model.dispose();
    reference.dispose();
  });
});

describe('non-finite values', () => {
  it('NaN weights give QkNonFiniteError naming the step and the tensor, never token 0', async () => {
    const config = smallConfig();
    const weights = randomWeights(config, 6);
    const poisoned = weights.layers[1]!.gate;
    const data = poisoned.data as Float32Array;
    data[Math.floor(data.length / 3)] = Number.NaN;
    const engine = createCpuEngine(config, weights, { maxContext: 64 });
    const model = new Qwen3Model({ config, tokenizer: stubTokenizer(config.vocabSize), engine });
    const generation = model.generate(randomIds(9, 200, 7), { temperature: 0, maxTokens: 4 });
    const e = await generation.result.catch((err: unknown) => err);
    expect(e).toBeInstanceOf(QkNonFiniteError);
    expect((e as QkNonFiniteError).step).toBe(0);
    expect((e as Error).message).toMatch(
      /NaN\/Inf at step 0; the weights hold non-finite values in layers\[1\]\.gate/,
    );
    model.dispose();
  });

  it('firstNonFinite finds NaN and Inf in every dtype and nothing in finite data', () => {
    for (const dtype of ['f32', 'bf16', 'f16'] as const) {
      const t = Tensor.randn([1000], { dtype, seed: 8 });
      expect(firstNonFinite(t.data as ArrayLike<number>, dtype)).toBe(-1);
      const at = 1 + Math.floor(Math.random() * 998);
      const bad = { data: (t.data as Float32Array | Uint16Array).slice() };
      const inf = at % 2 === 0;
      if (dtype === 'f32') bad.data[at] = inf ? Number.NEGATIVE_INFINITY : Number.NaN;
      else if (dtype === 'bf16') bad.data[at] = inf ? 0xff80 : 0x7fc1;
      else bad.data[at] = inf ? 0x7c00 : 0xfe01;
      expect(firstNonFinite(bad.data as ArrayLike<number>, dtype)).toBe(at);
    }
  });

  it('a checkpoint holding NaN is refused at load naming the tensor; checkWeights: false loads it', async () => {
    const dir = join(root, 'nan');
    // Room for the micro tokenizer's ids, so that loadQwen3 can load this checkpoint too.
    const config = { ...MICRO_CONFIG, vocabSize: 128 };
    await writeRandomCheckpoint(dir, config, { tokenizerDir: false, dtype: 'f32' });
    const name = 'model.layers.1.mlp.up_proj.weight';
    await editTensorBytes(join(dir, 'model.safetensors'), name, (view, at) =>
      view.setFloat32(at + 4 * 5, Number.NaN, true),
    );
    const e = await loadWeights(dir, config, { dtype: 'f32', checkFinite: true }).catch(
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(QkCheckpointError);
    expect((e as Error).message).toContain(name);
    expect((e as Error).message).toContain('element 5');
    const loaded = await loadWeights(dir, config, { dtype: 'f32', checkFinite: false });
    expect(Number.isNaN(loaded.layers[1]!.up.data[5])).toBe(true);
    // Through loadQwen3 (what qk's --skip-checks turns off): refused by default; with checkWeights: false it loads,
    // and its generation stops at step 0 with QkNonFiniteError instead of printing tokens.
    await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(microTokenizerJson()));
    await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(microTokenizerConfig()));
    const refused = await loadQwen3(dir, { engine: 'cpu' }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(QkCheckpointError);
    expect((refused as Error).message).toContain(name);
    const model = await loadQwen3(dir, { engine: 'cpu', checkWeights: false });
    try {
      const failed = await model
        .generate([1, 2, 3], { maxTokens: 2, temperature: 0 })
        .result.catch((err: unknown) => err);
      expect(failed).toBeInstanceOf(QkNonFiniteError);
      expect((failed as Error).message).toMatch(/step 0/);
    } finally {
      model.dispose();
    }
  });
});

describe('memory is checked before it is committed', () => {
  it('checkMemoryFits passes what fits and refuses what does not, with the sizes', () => {
    const gib = 1024 ** 3;
    expect(() =>
      checkMemoryFits('op', 3 * gib, { totalBytes: 8 * gib, freeBytes: 4 * gib }, 'RAM', 'x'),
    ).not.toThrow();
    expect(() =>
      checkMemoryFits('op', 6 * gib, { totalBytes: 8 * gib, freeBytes: 4 * gib }, 'RAM', 'x'),
    ).toThrow(/6\.0 GiB of RAM but only 4\.0 GiB of 8\.0 GiB is free/);
    expect(() =>
      checkMemoryFits('op', 30 * gib, { totalBytes: 24 * gib, freeBytes: 20 * gib }, 'RAM', 'x'),
    ).toThrow(/30 GiB of RAM but the machine has 24 GiB in all/);
  });

  it('engineBytes counts float32 weights and the KV cache', () => {
    const c = MICRO_CONFIG;
    const params =
      c.vocabSize * c.hiddenSize +
      c.numLayers *
        (c.hiddenSize * c.headDim * (c.numHeads + c.numKvHeads) * 2 +
          2 * c.headDim +
          3 * c.hiddenSize * c.intermediateSize +
          2 * c.hiddenSize) +
      c.hiddenSize;
    expect(engineBytes(c, 100, 4)).toBe(
      params * 4 + c.numLayers * 2 * 100 * c.numKvHeads * c.headDim * 4 + c.vocabSize * 4,
    );
  });

  it('a preset too large for this machine is refused with a sentence before any weight is made', async () => {
    const config = PRESETS['32b'];
    const needed = engineBytes(config, 4096, 4);
    if (needed <= freemem()) return; // A machine with this much free RAM would load it.
    const started = Date.now();
    const e = await loadQwen3('32b', { engine: 'cpu' }).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(QkMemoryError);
    expect((e as Error).message).toMatch(/needs about \d+ GiB of host memory/);
    // Refused up front: making 32B random weights would take hours, not this.
    expect(Date.now() - started).toBeLessThan(60_000);
  });
});
