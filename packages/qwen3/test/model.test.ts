/**
 * `loadQwen3` end to end on the cpu engine: the `tiny` preset with the real tokenizer, a checkpoint directory
 * written to disk, the engine table, and every load error a user can cause.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cudaAvailable, cudaDeviceInfo, QkDeviceError, QkValueError } from '@qk/ops';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createCpuEngine,
  createEngine,
  DEFAULT_MAX_CONTEXT,
  defaultEngine,
  ENGINE_PLACEMENT,
  loadQwen3,
  loadTokenizer,
  megakernelHandoff,
  PRESETS,
  QkAbortError,
  QkBusyError,
  QkCheckpointError,
  QWEN3_SAMPLING_DEFAULTS,
  type Qwen3Config,
  Qwen3Model,
  randomWeights,
  writeRandomCheckpoint,
} from '../src/index.js';
import { smallConfig, randomWeights as smallRandomWeights } from './support/random-model.js';

const seed = Math.floor(Math.random() * 1000);

describe('the tiny preset with the real tokenizer', () => {
  let model: Qwen3Model;
  beforeAll(async () => {
    model = await loadQwen3('tiny', { engine: 'cpu', seed });
  });
  afterAll(() => model.dispose());

  it('describes itself', () => {
    expect(model).toMatchObject({
      engine: 'cpu',
      source: 'tiny',
      randomWeights: true,
      maxContext: DEFAULT_MAX_CONTEXT,
    });
    expect(model.config).toBe(PRESETS.tiny);
    expect(model.samplingDefaults).toEqual(QWEN3_SAMPLING_DEFAULTS);
    for (const id of PRESETS.tiny.eosTokenIds) expect(model.stopIds.has(id)).toBe(true);
  });

  it('streams text that decodes from its ids, repeatably for a seed', async () => {
    const prompt = `The number ${Math.floor(Math.random() * 1e6)} is`;
    const generation = model.generate(prompt, { maxTokens: 12, temperature: 0.8, seed: 3 });
    let streamed = '';
    for await (const chunk of generation) streamed += chunk;
    const result = await generation.result;
    expect(streamed).toBe(result.text);
    expect(result.text).toBe(model.tokenizer.decode(result.ids));
    expect(result.ids.every((id) => id < model.tokenizer.vocabSize)).toBe(true);
    expect(result.stats.promptTokens).toBe(model.tokenizer.encode(prompt).length);
    expect(result.ids.length).toBeLessThanOrEqual(12);
    const again = await model.generate(prompt, { maxTokens: 12, temperature: 0.8, seed: 3 }).result;
    expect(again.ids).toEqual(result.ids);
  });

  it('chats through the Qwen3 template, the whole history each call', async () => {
    const messages = [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Say hi.' },
    ] as const;
    const result = await model.chat(messages, { maxTokens: 5, enableThinking: false }).result;
    const rendered = model.tokenizer.applyChatTemplate(messages, { enableThinking: false });
    expect(rendered).toContain('<|im_start|>assistant');
    expect(result.stats.promptTokens).toBe(model.tokenizer.encode(rendered).length);
  });

  it('the same seed gives the same weights; another seed other weights', async () => {
    const twin = await loadQwen3('tiny', { engine: 'cpu', seed });
    const other = await loadQwen3('tiny', { engine: 'cpu', seed: seed + 1 });
    const options = { maxTokens: 8, temperature: 0 };
    const mine = await model.generate('Once upon a time', options).result;
    expect((await twin.generate('Once upon a time', options).result).ids).toEqual(mine.ids);
    const theirs = await other.generate('Once upon a time', options).result;
    expect(theirs.ids.join()).not.toBe(mine.ids.join());
    twin.dispose();
    other.dispose();
  });
});

/** Smallest config with Qwen3's vocabulary (so the real tokenizer fits): a ~5M-parameter checkpoint. */
const diskConfig: Qwen3Config = {
  ...PRESETS.tiny,
  hiddenSize: 32,
  numLayers: 1,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 16,
  intermediateSize: 48,
  torchDtype: 'bf16',
};

describe('a checkpoint directory', () => {
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'qk-model-'));
    await writeRandomCheckpoint(dir, diskConfig, { seed, dtype: 'bf16' });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('loads config, weights, tokenizer and generation defaults, and runs like the same weights in memory', async () => {
    const progress: number[] = [];
    const model = await loadQwen3(dir, {
      engine: 'cpu',
      dtype: 'bf16',
      onLoadProgress: (p) => progress.push(p.loadedBytes / p.totalBytes),
    });
    expect(model).toMatchObject({ source: dir, randomWeights: false, engine: 'cpu' });
    expect(model.config).toEqual(diskConfig);
    expect(model.samplingDefaults).toEqual({ temperature: 0.6, topK: 20, topP: 0.95 });
    expect(progress.at(-1)).toBe(1);
    expect(progress.every((p, i) => i === 0 || p >= progress[i - 1]!)).toBe(true);
    const reference = new Qwen3Model({
      config: diskConfig,
      tokenizer: await loadTokenizer({ eosTokenIds: diskConfig.eosTokenIds }),
      engine: createCpuEngine(diskConfig, await randomWeights(diskConfig, { seed, dtype: 'bf16' }), {
        maxContext: 64,
      }),
    });
    const options = { maxTokens: 10, temperature: 0 };
    const prompt = `word ${Math.random()}`;
    expect((await model.generate(prompt, options).result).ids).toEqual(
      (await reference.generate(prompt, options).result).ids,
    );
    model.dispose();
    reference.dispose();
  });

  it('takes its sampling defaults and stop ids from generation_config.json', async () => {
    const copy = mkdtempSync(join(tmpdir(), 'qk-model-gc-'));
    try {
      await writeRandomCheckpoint(copy, diskConfig, { seed, dtype: 'bf16', tokenizerDir: false });
      writeFileSync(
        join(copy, 'generation_config.json'),
        JSON.stringify({ do_sample: false, top_k: 7, eos_token_id: 1234 }),
      );
      const model = await loadQwen3(copy, { engine: 'cpu', maxContext: 32 });
      expect(model.samplingDefaults).toEqual({ temperature: 0, topK: 7, topP: 0.95 });
      expect(model.stopIds.has(1234)).toBe(true);
      expect(model.maxContext).toBe(32);
      model.dispose();
      writeFileSync(join(copy, 'generation_config.json'), '{ "temperature": ');
      await expect(loadQwen3(copy, { engine: 'cpu' })).rejects.toThrow(
        /generation_config\.json.*not valid JSON/,
      );
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('reports what is wrong with the path, the engine and the options', async () => {
    const missing = join(dir, 'nope');
    await expect(loadQwen3(missing)).rejects.toBeInstanceOf(QkCheckpointError);
    await expect(loadQwen3(missing)).rejects.toThrow(/neither a preset \(tiny, 0\.6b/);
    const empty = mkdtempSync(join(tmpdir(), 'qk-empty-'));
    await expect(loadQwen3(empty, { engine: 'cpu' })).rejects.toThrow(/config\.json: is missing/);
    rmSync(empty, { recursive: true });
    // Without a GPU: the GPU engine's refusal; with one: tiny's head size 32 is not the megakernel's 128.
    await expect(loadQwen3('tiny', { engine: 'megakernel' })).rejects.toThrow(
      cudaAvailable() ? /head size 128.*use "layered"/ : /needs a GPU.*use engine "cpu"/,
    );
    await expect(loadQwen3('tiny', { engine: 'turbo' as never })).rejects.toBeInstanceOf(QkValueError);
    await expect(loadQwen3('tiny', { engine: 'cpu', maxContext: 0 })).rejects.toThrow(/maxContext/);
    for (const prefillChunk of [0, -3, 1.5, Number.NaN]) {
      await expect(loadQwen3('tiny', { engine: 'cpu', prefillChunk })).rejects.toThrow(
        /"prefillChunk" must be a positive integer/,
      );
    }
    await expect(loadQwen3('tiny', { engine: 'cpu', maxContext: 5000 })).rejects.toThrow(/\[1, 4096\]/);
    await expect(loadQwen3('tiny', { engine: 'cpu', seed: -1 })).rejects.toThrow(/seed/);
    await expect(loadQwen3('tiny', { engine: 'cpu', dtype: 'i8' as never })).rejects.toThrow(/dtype/);
    await expect(loadQwen3(dir, { engine: 'cpu', signal: AbortSignal.abort() })).rejects.toBeInstanceOf(
      QkAbortError,
    );
    await expect(loadQwen3('tiny', { engine: 'cpu', signal: AbortSignal.abort() })).rejects.toBeInstanceOf(
      QkAbortError,
    );
  });

  it.runIf(!cudaAvailable())('refuses a GPU engine without a GPU, before loading anything', async () => {
    await expect(loadQwen3(dir, { engine: 'layered' })).rejects.toBeInstanceOf(QkDeviceError);
    await expect(loadQwen3(dir, { engine: 'layered' })).rejects.toThrow(/use engine "cpu"/);
  });
});

describe('the engine table', () => {
  it('defaults to the megakernel where it serves the model, layered on other GPUs, cpu without a GPU', () => {
    expect(defaultEngine()).toBe(cudaAvailable() ? 'layered' : 'cpu');
    // Head size 16: not a shape the megakernel serves.
    expect(defaultEngine(smallConfig())).toBe(cudaAvailable() ? 'layered' : 'cpu');
    const qwen06 = PRESETS['0.6b'];
    const hopper = cudaAvailable() && cudaDeviceInfo().computeCapability.major >= 9;
    expect(defaultEngine(qwen06)).toBe(hopper ? 'megakernel' : cudaAvailable() ? 'layered' : 'cpu');
    expect(ENGINE_PLACEMENT.cpu).toEqual({ device: 'cpu', dtype: 'f32' });
    expect(ENGINE_PLACEMENT.layered).toEqual({ device: 'cuda', dtype: 'bf16' });
  });

  it('hands megakernel decoding to the layered graph where the megakernel was last measured faster', () => {
    // The megakernel alone against the layered engine on an H100: faster at every position measured up to the first
    // value; the runs from there decoded 256 tokens, so nothing was measured past the second.
    const measured = {
      '0.6b': [8192, 8448],
      '1.7b': [8192, 8448],
      '4b': [8192, 8448],
      '8b': [8192, 8448],
    } as const;
    for (const [name, [faster, end]] of Object.entries(measured)) {
      const at = megakernelHandoff(PRESETS[name as keyof typeof measured]);
      expect(at, name).toBeGreaterThanOrEqual(faster);
      expect(at, name).toBeLessThanOrEqual(end);
    }
    // The tokenizer and LM head do not change the key; another shape gets the lowest measured hand-off.
    expect(megakernelHandoff({ ...PRESETS['0.6b'], vocabSize: 1000, tieWordEmbeddings: false })).toBe(
      megakernelHandoff(PRESETS['0.6b']),
    );
    const lowest = Math.min(
      ...(['0.6b', '1.7b', '4b', '8b'] as const).map((n) => megakernelHandoff(PRESETS[n])),
    );
    expect(megakernelHandoff({ ...PRESETS['0.6b'], numLayers: 20 })).toBe(lowest);
  });

  it('creates the cpu engine and refuses a megakernel that cannot run, saying what to use', () => {
    const config = smallConfig();
    const engine = createEngine('cpu', config, smallRandomWeights(config, seed), { maxContext: 8 });
    expect(engine.name).toBe('cpu');
    engine.dispose();
    expect(() =>
      createEngine('megakernel', config, smallRandomWeights(config, seed), { maxContext: 8 }),
    ).toThrow(cudaAvailable() ? /head size 128.*use "layered"/ : /needs a GPU.*use engine "cpu"/);
  });

  it('a disposed model refuses work', async () => {
    const model = await loadQwen3('tiny', { engine: 'cpu', maxContext: 16 });
    model.dispose();
    expect(() => model.generate('hi')).toThrow(QkBusyError);
    expect(() => model.variants()).toThrow(QkBusyError);
    expect(model.disposed).toBe(true);
  });
});
