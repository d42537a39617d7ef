/**
 * The sampling controls on the GPU engines: each `choose()` step (penalties from the counts kept on the device, logit
 * bias, min-p, a mask, log-probabilities) against the reference `chooseToken` on the logits the same engine gives
 * for the same step, over many steps so the device-side counts must follow the generated tokens; then a history the
 * device has not seen, and a mask that allows nothing. The layered engine on any GPU; the megakernel engine (which
 * routes such steps through one-step launches that write the logits row) on compute capability ≥ 9.0. Then the
 * megakernel's masked steps (a constraint's mask and nothing else: the kernel takes the token over the mask, published
 * while the step runs), greedy and drawn in the kernel, against the same reference; and what happens when the controls'
 * maker throws, asks for log-probabilities after all, or allows nothing. Then penalties and min-p applied in the
 * kernel (counting its own tokens), with and without a mask, against the same reference, and a history the queued
 * steps do not follow. GPU only: skipped, visibly, where no GPU is usable.
 */
import * as cudaCore from '@qk/cuda-core';
import { cudaAvailable, cudaDeviceInfo, QkValueError, useCudaBackend } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { createEngine } from '../src/engine/index.js';
import { Qwen3Megakernel } from '../src/engine/megakernel/kernel.js';
import type { MegakernelEngineOptions } from '../src/engine/megakernel/options.js';
import { chooseToken } from '../src/engine/sampling.js';
import type { PiecewiseEngine } from '../src/generation/generation.js';
import type {
  Engine,
  EngineName,
  Qwen3Config,
  SamplingParams,
  StepControls,
  TokenHistory,
} from '../src/types.js';
import { toCuda } from './support/engine-checks.js';
import { randomIds, randomWeights, smallConfig } from './support/random-model.js';

useCudaBackend(cudaCore);
const gpu = cudaAvailable();
const hopper = gpu && cudaDeviceInfo().computeCapability.major >= 9;

/** Head size 128 (the megakernel's), GQA 2, an odd vocabulary. */
const CONFIG: Qwen3Config = smallConfig({
  hiddenSize: 256,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 128,
  intermediateSize: 384,
  vocabSize: 1001,
});
const VOCAB_LIMIT = 987;
const MAX_CONTEXT = 96;

function build(name: EngineName, seed: number, megakernel: MegakernelEngineOptions = {}): Engine {
  return createEngine(name, CONFIG, toCuda(randomWeights(CONFIG, seed, 'bf16')), {
    maxContext: MAX_CONTEXT,
    vocabLimit: VOCAB_LIMIT,
    ...(name === 'megakernel' ? { megakernelUntil: MAX_CONTEXT, ...megakernel } : {}),
  });
}

/** A mask that changes every step: about a third of the ids, never the same third twice in a row. */
function rotatingMask(step: number): Uint32Array {
  const mask = new Uint32Array(Math.ceil(CONFIG.vocabSize / 32));
  for (let t = 0; t < CONFIG.vocabSize; t++) if ((t * 7 + step) % 3 === 0) mask[t >>> 5]! |= 1 << (t & 31);
  return mask;
}

const CASES: [string, SamplingParams, boolean][] = [
  [
    'greedy, every penalty, a bias, a mask',
    {
      temperature: 0,
      topK: 0,
      topP: 1,
      seed: 3,
      presencePenalty: 1.5,
      frequencyPenalty: 0.7,
      repetitionPenalty: 1.4,
      logitBias: new Map([
        [5, 4],
        [600, -100],
      ]),
    },
    true,
  ],
  [
    'sampled, min-p, top-k, penalties',
    {
      temperature: 0.9,
      topK: 50,
      topP: 0.95,
      seed: 4,
      minP: 0.05,
      presencePenalty: 2,
      repetitionPenalty: 1.2,
    },
    false,
  ],
  [
    'sampled, a mask, a bias, no penalty',
    { temperature: 1.3, topK: 0, topP: 1, seed: 5, logitBias: new Map([[9, 6]]) },
    true,
  ],
];

/**
 * Runs `steps` steps of `engine.choose` from `prompt`, each against `chooseToken` on `engine.logits()` of the same
 * step (run first, at the same position: the step then runs again, overwriting the same cache row).
 */
function checkSteps(
  engine: Engine,
  sampling: SamplingParams,
  masked: boolean,
  prompt: number[],
  steps: number,
) {
  const history: TokenHistory & { generated: number[] } = { prompt, generated: [] };
  let same = 0;
  for (let step = 0; step < steps; step++) {
    const ids = step === 0 ? prompt : [history.generated.at(-1)!];
    const start = step === 0 ? 0 : prompt.length + step - 1;
    const controls: StepControls = { history, mask: masked ? rotatingMask(step) : null, topLogprobs: 5 };
    const logits = engine.logits(ids, start);
    const want = chooseToken(logits, sampling, step, controls, VOCAB_LIMIT);
    const got = engine.choose!(ids, start, sampling, step, controls);
    expect(got.id, `step ${step}`).toBe(want.id);
    expect(got.logprob!).toBeCloseTo(want.logprob!, 4);
    expect(got.topLogprobs!.map((t) => t.id)).toEqual(want.topLogprobs!.map((t) => t.id));
    if (masked) expect((rotatingMask(step)[got.id >>> 5]! >>> (got.id & 31)) & 1).toBe(1);
    if (history.generated.includes(got.id)) same++;
    history.generated.push(got.id);
  }
  return { history, repeats: same };
}

function engineSuite(name: EngineName) {
  for (const [label, sampling, masked] of CASES) {
    it(`choose() draws the reference's token with its log-probabilities, step after step (${label})`, () => {
      const engine = build(name, 21);
      const prompt = randomIds(11, VOCAB_LIMIT, 22);
      const { history } = checkSteps(engine, sampling, masked, prompt, 24);
      expect(Math.max(...history.generated)).toBeLessThan(VOCAB_LIMIT);
      engine.dispose();
    });
  }

  it('choose() follows a history the device counts have not seen (a new generation, a token it did not draw)', () => {
    const engine = build(name, 31);
    const sampling = CASES[0]![1];
    const prompt = randomIds(9, VOCAB_LIMIT, 32);
    checkSteps(engine, sampling, false, prompt, 6);
    // A new generation over the same cache positions with another history: the device must re-read it.
    const other = randomIds(9, VOCAB_LIMIT, 33);
    const { repeats } = checkSteps(engine, sampling, false, other, 12);
    expect(repeats).toBeLessThan(12);
    engine.dispose();
  });

  it('choose() refuses a mask that allows no token below the vocabulary limit, and runs on after it', () => {
    const engine = build(name, 41);
    const prompt = randomIds(5, VOCAB_LIMIT, 42);
    const history = { prompt, generated: [] };
    const padding = new Uint32Array(Math.ceil(CONFIG.vocabSize / 32));
    for (let t = VOCAB_LIMIT; t < CONFIG.vocabSize; t++) padding[t >>> 5]! |= 1 << (t & 31);
    const sampling = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    expect(() =>
      engine.choose!(prompt, 0, sampling, 0, { history, mask: padding, topLogprobs: null }),
    ).toThrow(QkValueError);
    expect(
      engine.choose!(prompt, 0, sampling, 0, { history, mask: null, topLogprobs: null }).id,
    ).toBeLessThan(VOCAB_LIMIT);
    engine.dispose();
  });

  it('next() refuses controls it would ignore', () => {
    const engine = build(name, 51);
    expect(() => engine.next([1, 2], 0, { temperature: 0, topK: 0, topP: 1, seed: 0, minP: 0.1 }, 0)).toThrow(
      QkValueError,
    );
    engine.dispose();
  });
}

describe.skipIf(!gpu)('sampling controls on the layered engine (CUDA)', () => engineSuite('layered'));
describe.skipIf(!hopper)('sampling controls on the megakernel engine (CUDA, compute capability ≥ 9.0)', () =>
  engineSuite('megakernel'),
);

/** A mask allowing exactly `ids`. */
function idsMask(ids: readonly number[]): Uint32Array {
  const mask = new Uint32Array(Math.ceil(CONFIG.vocabSize / 32));
  for (const t of ids) mask[t >>> 5]! |= 1 << (t & 31);
  return mask;
}

/** Counts the masks the megakernel engine publishes (its masked steps) while `run` runs. */
async function countingMasks<R>(run: () => Promise<R>): Promise<{ result: R; masks: number }> {
  const proto = Qwen3Megakernel.prototype;
  const original = proto.mask;
  let masks = 0;
  proto.mask = function (this: Qwen3Megakernel, index: number, words: Uint32Array) {
    masks++;
    return original.call(this, index, words);
  };
  try {
    return { result: await run(), masks };
  } finally {
    proto.mask = original;
  }
}

const maskOnly = (controls: StepControls | (() => StepControls)) =>
  Object.assign(typeof controls === 'function' ? controls : () => controls, { maskOnly: true });
const between = async () => {};

// The megakernel's LM head screened (the default), unscreened with fixed shares, and unscreened with claimed tiles
// (Qwen3-4B/8B).
const HEADS: [string, MegakernelEngineOptions][] = [
  ['screened', {}],
  ['unscreened', { megakernelScreen: false }],
  ['claimed tiles', { megakernelTuning: { claimTiles: true } }],
];

/** The ids and position of step `step` of a generation from `prompt` whose tokens so far are `generated`. */
function stepAt(prompt: readonly number[], generated: readonly number[], step: number) {
  return {
    ids: step === 0 ? [...prompt] : [generated[step - 1]!],
    start: step === 0 ? 0 : prompt.length + step - 1,
  };
}

/**
 * `steps` steps of one generation from `prompt` through `engine.chooseAsync`, as a generation runs them (each the next
 * queued kernel step, nothing else on the GPU in between), with a maskOnly maker of the step's mask (`maskOf`, or
 * none) and the history so far. Returns the history and the masks the kernel took; checks that no step reported
 * log-probabilities.
 */
async function kernelSteps(
  engine: Engine & PiecewiseEngine,
  prompt: number[],
  sampling: SamplingParams,
  steps: number,
  maskOf: ((step: number) => Uint32Array) | null,
): Promise<{ history: TokenHistory & { generated: number[] }; masks: number }> {
  const history: TokenHistory & { generated: number[] } = { prompt, generated: [] };
  const { masks } = await countingMasks(async () => {
    for (let step = 0; step < steps; step++) {
      const { ids, start } = stepAt(prompt, history.generated, step);
      const controls: StepControls = { history, mask: maskOf?.(step) ?? null, topLogprobs: null };
      const got = await engine.chooseAsync!(ids, start, sampling, step, maskOnly(controls), between);
      expect(got.logprob === undefined).toBe(true);
      history.generated.push(got.id);
    }
  });
  return { history, masks };
}

describe.skipIf(!hopper)('masked steps in the megakernel (CUDA, compute capability ≥ 9.0)', () => {
  const MASKS: [string, (step: number) => Uint32Array][] = [
    ['a third of the ids, rotating', rotatingMask],
    // Fewer allowed ids than the top-k, one of them past the vocabulary limit (never taken).
    ['three ids, one past the limit', (step) => idsMask([(step * 37) % VOCAB_LIMIT, 500 + step, 995])],
    ['one id, the last below the limit', () => idsMask([VOCAB_LIMIT - 1])],
  ];
  const DRAWS: [string, SamplingParams][] = [
    ['greedy', { temperature: 0, topK: 0, topP: 1, seed: 1 }],
    ['top-k 20, top-p 0.9', { temperature: 0.8, topK: 20, topP: 0.9, seed: 7 }],
  ];
  type Case = [
    string,
    MegakernelEngineOptions,
    string,
    SamplingParams,
    string,
    (step: number) => Uint32Array,
  ];
  const CASES: Case[] = HEADS.flatMap(([head, options]) =>
    DRAWS.flatMap(([draw, sampling]) =>
      MASKS.filter((_, i) => head === 'screened' || i < 2).map(
        ([mask, maskOf]): Case => [head, options, draw, sampling, mask, maskOf],
      ),
    ),
  );
  for (const [head, options, drawLabel, sampling, maskLabel, maskOf] of CASES) {
    it(`takes the reference's token over the mask, step after step (${head}; ${drawLabel}; ${maskLabel})`, async () => {
      // The steps run as one generation runs them (each the next queued masked step, nothing else on the GPU in
      // between); then a second engine with the same weights replays them, one logits row per step.
      const engine = build('megakernel', 61, options) as Engine & PiecewiseEngine;
      const prompt = randomIds(7, VOCAB_LIMIT, 62);
      const steps = 20;
      const { history, masks } = await kernelSteps(engine, prompt, sampling, steps, maskOf);
      const at = (step: number) => stepAt(prompt, history.generated, step);
      const controlsAt = (step: number): StepControls => ({ history, mask: maskOf(step), topLogprobs: null });
      // Every decode step (all but the prompt's) ran masked in the kernel.
      expect(masks).toBe(steps - 1);
      // The generation ends with steps still queued: they are dropped.
      engine.dropQueued!();
      const twin = build('megakernel', 61);
      for (let step = 0; step < steps; step++) {
        const { ids, start } = at(step);
        const want = chooseToken(twin.logits(ids, start), sampling, step, controlsAt(step), VOCAB_LIMIT);
        const got = history.generated[step]!;
        expect(got, `step ${step}`).toBe(want.id);
        expect((maskOf(step)[got >>> 5]! >>> (got & 31)) & 1).toBe(1);
      }
      // The engine goes on after the dropped steps: the next step's logits, as the reference gives them.
      const next = at(steps);
      expect(Array.from(engine.logits(next.ids, next.start))).toEqual(
        Array.from(twin.logits(next.ids, next.start)),
      );
      engine.dispose();
      twin.dispose();
    });
  }

  /**
   * A megakernel engine with the weights of `seed`, past the step of a prompt of `length` ids (seed `seed + 1`): the
   * history so far and that step's choice.
   */
  async function pastPrompt(seed: number, length: number, sampling: SamplingParams) {
    const engine = build('megakernel', seed) as Engine & PiecewiseEngine;
    const prompt = randomIds(length, VOCAB_LIMIT, seed + 1);
    const history = { prompt, generated: [] as number[] };
    const controls = maskOnly({ history, mask: null, topLogprobs: null });
    const first = await engine.chooseAsync!(prompt, 0, sampling, 0, controls, between);
    history.generated.push(first.id);
    return { engine, prompt, history, first };
  }

  it('drops queued masked steps for other GPU work, any other call, and a step that is not the next queued one', async () => {
    const engine = build('megakernel', 65) as Engine & PiecewiseEngine;
    const twin = build('megakernel', 65);
    const prompt = randomIds(6, VOCAB_LIMIT, 66);
    const sampling = DRAWS[0]![1];
    const history = { prompt, generated: [] as number[] };
    const run = async (ids: number[], start: number, step: number) => {
      const controls: StepControls = { history, mask: rotatingMask(step), topLogprobs: null };
      const got = await engine.chooseAsync!(ids, start, sampling, step, maskOnly(controls), between);
      expect(got.id, `step ${step}`).toBe(
        chooseToken(twin.logits(ids, start), sampling, step, controls, VOCAB_LIMIT).id,
      );
      return got.id;
    };
    const t0 = await run(prompt, 0, 0);
    const t1 = await run([t0], prompt.length, 1);
    // A plain greedy step at the next position (next(): the queued masked steps are dropped first).
    const plain = engine.next([t1], prompt.length + 1, sampling, 2);
    expect(plain).toBe(twin.next([t1], prompt.length + 1, sampling, 2));
    // Masked again from there, then a step fed another token than the one queued: it starts a new launch.
    const t3 = await run([plain], prompt.length + 2, 3);
    const other = (t3 + 1) % VOCAB_LIMIT;
    await run([other], prompt.length + 3, 4);
    engine.dispose();
    twin.dispose();
  });

  it('drops the queued steps when the maker throws, rejects with its error, and runs on', async () => {
    const sampling = DRAWS[0]![1];
    const { engine, prompt, history, first } = await pastPrompt(71, 6, sampling);
    const boom = new Error('the grammar failed');
    const { masks } = await countingMasks(async () => {
      await expect(
        engine.chooseAsync!(
          [first.id],
          prompt.length,
          sampling,
          1,
          maskOnly(() => {
            throw boom;
          }),
          between,
        ),
      ).rejects.toBe(boom);
    });
    expect(masks).toBe(0); // (the queued steps are dropped before they get a mask)
    const controls: StepControls = { history, mask: rotatingMask(1), topLogprobs: null };
    const want = chooseToken(engine.logits([first.id], prompt.length), sampling, 1, controls, VOCAB_LIMIT);
    const again = await engine.chooseAsync!(
      [first.id],
      prompt.length,
      sampling,
      1,
      maskOnly(controls),
      between,
    );
    expect(again.id).toBe(want.id);
    engine.dispose();
  });

  it('runs the step again with the controls when the maker asks for log-probabilities after all', async () => {
    const sampling = DRAWS[1]![1];
    const { engine, prompt, history, first } = await pastPrompt(81, 6, sampling);
    const controls: StepControls = { history, mask: rotatingMask(4), topLogprobs: 3 };
    const want = chooseToken(engine.logits([first.id], prompt.length), sampling, 1, controls, VOCAB_LIMIT);
    let made = 0;
    const got = await engine.chooseAsync!(
      [first.id],
      prompt.length,
      sampling,
      1,
      maskOnly(() => {
        made++;
        return controls;
      }),
      between,
    );
    expect(made).toBe(1);
    expect(got.id).toBe(want.id);
    expect(got.logprob!).toBeCloseTo(want.logprob!, 4);
    expect(got.topLogprobs!.map((t) => t.id)).toEqual(want.topLogprobs!.map((t) => t.id));
    engine.dispose();
  });

  it('refuses a mask that allows no token below the vocabulary limit, and runs on after it', async () => {
    const sampling = DRAWS[0]![1];
    const { engine, prompt, history, first } = await pastPrompt(91, 5, sampling);
    const padding = idsMask([VOCAB_LIMIT, CONFIG.vocabSize - 1]);
    await expect(
      engine.chooseAsync!(
        [first.id],
        prompt.length,
        sampling,
        1,
        maskOnly({ history, mask: padding, topLogprobs: null }),
        between,
      ),
    ).rejects.toBeInstanceOf(QkValueError);
    const controls: StepControls = { history, mask: null, topLogprobs: null };
    const want = chooseToken(engine.logits([first.id], prompt.length), sampling, 1, controls, VOCAB_LIMIT);
    const got = await engine.chooseAsync!(
      [first.id],
      prompt.length,
      sampling,
      1,
      maskOnly(controls),
      between,
    );
    expect(got.id).toBe(want.id);
    engine.dispose();
  });
});

describe.skipIf(!hopper)('penalties and min-p in the megakernel (CUDA, compute capability ≥ 9.0)', () => {
  // Greedy with every penalty (a negative presence penalty: the random model's greedy text seldom repeats an id, so
  // penalties that only lower the ids seen would rarely change its argmax); drawn with penalties and min-p, under a
  // constraint's mask; and a wide top-k with a negative frequency penalty and a repetition penalty below 1 (both raise
  // the logits of the ids seen).
  const DRAWS: [string, SamplingParams, boolean][] = [
    [
      'greedy, every penalty',
      {
        temperature: 0,
        topK: 0,
        topP: 1,
        seed: 1,
        presencePenalty: -2,
        frequencyPenalty: 0.7,
        repetitionPenalty: 1.4,
      },
      false,
    ],
    [
      'top-k 20, top-p 0.9, presence and repetition penalties, min-p 0.05, a mask',
      {
        temperature: 0.8,
        topK: 20,
        topP: 0.9,
        seed: 7,
        presencePenalty: 2,
        repetitionPenalty: 1.2,
        minP: 0.05,
      },
      true,
    ],
    [
      'top-k 64, frequency −0.5, repetition 0.8, min-p 0.2',
      {
        temperature: 1.1,
        topK: 64,
        topP: 1,
        seed: 9,
        frequencyPenalty: -0.5,
        repetitionPenalty: 0.8,
        minP: 0.2,
      },
      false,
    ],
  ];
  const plain = (s: SamplingParams): SamplingParams => ({
    temperature: s.temperature,
    topK: s.topK,
    topP: s.topP,
    seed: s.seed,
  });
  for (const [head, options] of HEADS) {
    for (const [label, sampling, masked] of DRAWS) {
      it(`takes the reference's token through the controls, step after step (${head}; ${label})`, async () => {
        const engine = build('megakernel', 101, options) as Engine & PiecewiseEngine;
        const prompt = randomIds(9, VOCAB_LIMIT, 102);
        const steps = 40;
        const maskOf = masked ? rotatingMask : null;
        const { history, masks } = await kernelSteps(engine, prompt, sampling, steps, maskOf);
        expect(masks).toBe(steps - 1); // every decode step ran in the kernel
        engine.dropQueued!();
        // Replayed on a twin, one logits row per step, through the reference; the controls changed some step's
        // token (else this case would not test them).
        const twin = build('megakernel', 101);
        let changed = 0;
        for (let step = 0; step < steps; step++) {
          const { ids, start } = stepAt(prompt, history.generated, step);
          const logits = twin.logits(ids, start);
          const seenSoFar: TokenHistory = { prompt, generated: history.generated.slice(0, step) };
          const controls: StepControls = {
            history: seenSoFar,
            mask: maskOf?.(step) ?? null,
            topLogprobs: null,
          };
          const want = chooseToken(logits, sampling, step, controls, VOCAB_LIMIT);
          expect(history.generated[step], `step ${step}`).toBe(want.id);
          if (chooseToken(logits, plain(sampling), step, controls, VOCAB_LIMIT).id !== want.id) changed++;
        }
        expect(changed).toBeGreaterThan(0);
        engine.dispose();
        twin.dispose();
      });
    }
  }

  it('counts from the history it is given when that is not the one its queued steps follow', async () => {
    const sampling = DRAWS[0]![1];
    const engine = build('megakernel', 111) as Engine & PiecewiseEngine;
    const twin = build('megakernel', 111);
    const prompt = randomIds(8, VOCAB_LIMIT, 112);
    const history = { prompt, generated: [] as number[] };
    const step = async (h: TokenHistory, ids: number[], start: number, index: number) => {
      const controls: StepControls = { history: h, mask: null, topLogprobs: null };
      const want = chooseToken(twin.logits(ids, start), sampling, index, controls, VOCAB_LIMIT);
      const got = await engine.chooseAsync!(ids, start, sampling, index, maskOnly(controls), between);
      expect(got.id, `step ${index}`).toBe(want.id);
      return got.id;
    };
    let id = await step(history, prompt, 0, 0);
    for (let i = 1; i < 6; i++) {
      history.generated.push(id);
      id = await step(history, [id], prompt.length + i - 1, i);
    }
    history.generated.push(id);
    // Another generation's history at the next queued step (same position, token and sampling, as long): its first
    // ids are the last one repeated, so its counts differ from the ones the kernel keeps.
    const other = { prompt, generated: history.generated.map((t, i) => (i < 3 ? id : t)) };
    await step(other, [id], prompt.length + 5, 6);
    engine.dispose();
    twin.dispose();
  });
});
