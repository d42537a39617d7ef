/**
 * The soak of issue #51: many generations in one process on two models at once, with random prompt lengths, token
 * limits and sampling, aborts at random moments and models disposed in the middle of a generation (then replaced).
 * Every generation must end as its fate says (finished, `QkAbortError`, or the disposed model's `QkBusyError`),
 * nothing else may be thrown, and afterwards each live model must still generate exactly what a fresh model with
 * the same weights does. On the GPU engines the allocator's live bytes must also be back where they were after
 * warm-up. The cpu engine runs a CI-sized soak; the GPU soak runs `QK_SOAK_GENERATIONS` (default 1,000) on the
 * layered engine beside the megakernel (Hopper) or a second layered model.
 */
import * as cudaCore from '@qk/cuda-core';
import { cudaAvailable, cudaDeviceInfo, cudaMemoryStats, Rng, useCudaBackend } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { createEngine } from '../src/engine/index.js';
import { QkAbortError, QkBusyError } from '../src/errors.js';
import { Qwen3Model } from '../src/model.js';
import type { EngineName, Qwen3Config } from '../src/types.js';
import { toCuda } from './support/engine-checks.js';
import { randomIds, randomWeights, smallConfig } from './support/random-model.js';
import { stubTokenizer } from './support/stub-tokenizer.js';

useCudaBackend(cudaCore);
const gpu = cudaAvailable();
const hopper = gpu && cudaDeviceInfo().computeCapability.major >= 9;

/** Head size 128, so the same shape runs on the megakernel. */
const CONFIG: Qwen3Config = smallConfig({
  hiddenSize: 256,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 128,
  intermediateSize: 384,
  vocabSize: 600,
  maxPositionEmbeddings: 512,
});
const MAX_CONTEXT = 256;

interface Slot {
  readonly engine: EngineName;
  readonly seed: number;
  model: Qwen3Model;
}

function open(engine: EngineName, seed: number): Qwen3Model {
  const weights = randomWeights(CONFIG, seed, engine === 'cpu' ? 'f32' : 'bf16');
  return new Qwen3Model({
    config: CONFIG,
    tokenizer: stubTokenizer(CONFIG.vocabSize),
    engine: createEngine(engine, CONFIG, engine === 'cpu' ? weights : toCuda(weights), {
      maxContext: MAX_CONTEXT,
      ...(engine === 'megakernel' ? { megakernelUntil: MAX_CONTEXT } : {}),
    }),
  });
}

type Fate = 'finish' | 'abort' | 'dispose';

/**
 * `count` generations over the slots' models, several in flight at once (each model queues its own), with random
 * fates; returns how each kind ended. Any error a generation's fate does not explain fails the test at once.
 */
async function soak(slots: Slot[], count: number, rng: Rng, label: string): Promise<Record<string, number>> {
  const ended: Record<string, number> = { finished: 0, aborted: 0, disposed: 0 };
  const inFlight = new Set<Promise<void>>();
  for (let i = 0; i < count; i++) {
    const slot = slots[rng.nextInt(slots.length)]!;
    const roll = rng.nextFloat();
    const fate: Fate = roll < 0.15 ? 'abort' : roll < 0.18 ? 'dispose' : 'finish';
    const prompt = randomIds(1 + rng.nextInt(60), CONFIG.vocabSize - 1, rng.nextInt(1e9));
    const kind = rng.nextInt(3);
    const options = {
      maxTokens: 1 + rng.nextInt(24),
      ...(kind === 0 ? { temperature: 0 } : { temperature: 0.8, topK: 20, seed: rng.nextInt(1000) }),
      ...(kind === 2 ? { presencePenalty: 0.7 } : {}),
    };
    const controller = new AbortController();
    const model = slot.model;
    const where = `${label} #${i} (${slot.engine}, ${fate}, prompt ${prompt.length}, ${JSON.stringify(options)})`;
    const run = (async () => {
      const generation = model.generate(prompt, { ...options, signal: controller.signal });
      if (fate !== 'finish') {
        // Let a few steps (of this generation or the ones queued before it) run first.
        const delay = rng.nextInt(4);
        setTimeout(() => {
          if (fate === 'abort') controller.abort(new Error('soak abort'));
          else if (slot.model === model) {
            model.dispose();
            slot.model = open(slot.engine, slot.seed);
          }
        }, delay);
      }
      try {
        const result = await generation.result;
        expect(['stop', 'length', 'context'], where).toContain(result.stats.finishReason);
        ended.finished!++;
      } catch (e) {
        if (fate === 'abort' && e instanceof QkAbortError) ended.aborted!++;
        else if (e instanceof QkBusyError && model.disposed) ended.disposed!++;
        else throw new Error(`${where}: ${String((e as Error)?.stack ?? e)}`);
      }
    })();
    inFlight.add(run);
    void run.finally(() => inFlight.delete(run));
    if (inFlight.size >= 6) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  return ended;
}

/** One greedy, one sampled and one penalised generation per model: everything made on first use is made. */
async function exercise(slots: Slot[]): Promise<void> {
  for (const slot of slots) {
    const prompt = randomIds(30, CONFIG.vocabSize - 1, 7);
    for (const options of [
      { temperature: 0 },
      { temperature: 0.8, topK: 20, seed: 1 },
      { temperature: 0.8, topK: 20, seed: 2, presencePenalty: 0.7 },
    ]) {
      await slot.model.generate(prompt, { ...options, maxTokens: 8 }).result;
    }
  }
}

/** Each live model generates what a fresh model with its weights does (its cache and prefix record consistent). */
async function expectConsistent(slots: Slot[], rng: Rng): Promise<void> {
  for (const slot of slots) {
    const prompt = randomIds(20, CONFIG.vocabSize - 1, rng.nextInt(1e9));
    const greedy = { temperature: 0, maxTokens: 6 };
    const got = await slot.model.generate(prompt, greedy).result;
    const fresh = open(slot.engine, slot.seed);
    const want = await fresh.generate(prompt, greedy).result;
    fresh.dispose();
    expect(got.ids, `${slot.engine} after the soak`).toEqual(want.ids);
  }
}

describe('soak: two models, random lengths, aborts and disposal mid-generation', () => {
  it('cpu engine: 120 generations end as their fates say, and both models stay consistent', async () => {
    const seed = Math.floor(Math.random() * 1e9);
    const rng = new Rng(seed);
    const slots: Slot[] = [
      { engine: 'cpu', seed: 1, model: open('cpu', 1) },
      { engine: 'cpu', seed: 2, model: open('cpu', 2) },
    ];
    try {
      const ended = await soak(slots, 120, rng, `seed ${seed}`);
      expect(ended.finished! + ended.aborted! + ended.disposed!).toBe(120);
      console.log(`cpu soak, seed ${seed}: ${JSON.stringify(ended)}`);
      expect(ended.finished, `seed ${seed}`).toBeGreaterThan(0);
      // 15% of the generations are aborted 0–3 ms in, most while running or queued behind others.
      expect(ended.aborted, `seed ${seed}`).toBeGreaterThan(0);
      await expectConsistent(slots, rng);
    } finally {
      for (const s of slots) s.model.dispose();
    }
  }, 300_000);

  it.skipIf(!gpu)(
    'GPU engines: QK_SOAK_GENERATIONS (default 1,000) generations, live bytes back where they were',
    async () => {
      const count = Number(process.env.QK_SOAK_GENERATIONS ?? 1000);
      const seed = Math.floor(Math.random() * 1e9);
      const rng = new Rng(seed);
      const second: EngineName = hopper ? 'megakernel' : 'layered';
      const slots: Slot[] = [
        { engine: 'layered', seed: 3, model: open('layered', 3) },
        { engine: second, seed: 4, model: open(second, 4) },
      ];
      try {
        // Warm-up: graphs captured, samplers and workspaces made, the allocator's blocks cached.
        await soak(slots, 40, rng, `warm-up, seed ${seed}`);
        for (const s of slots) s.model.dispose();
        for (const s of slots) s.model = open(s.engine, s.seed);
        await exercise(slots);
        const before = cudaMemoryStats().allocatedBytes;
        const ended = await soak(slots, count, rng, `seed ${seed}`);
        console.log(`GPU soak (${slots.map((s) => s.engine).join(' + ')}): ${JSON.stringify(ended)}`);
        // Models replaced mid-soak were disposed: the same two kinds of model are live as at `before`.
        for (const s of slots) s.model.dispose();
        for (const s of slots) s.model = open(s.engine, s.seed);
        await exercise(slots);
        const after = cudaMemoryStats().allocatedBytes;
        expect(after - before, `live bytes ${before} → ${after}, seed ${seed}`).toBe(0);
        await expectConsistent(slots, rng);
      } finally {
        for (const s of slots) s.model.dispose();
      }
    },
    1_800_000,
  );
});
