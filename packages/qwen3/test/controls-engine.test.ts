/**
 * The sampling controls on the GPU engines: each `choose()` step (penalties from the counts kept on the device, logit
 * bias, min-p, a mask, log-probabilities) against the reference `chooseToken` on the logits the same engine gives
 * for the same step, over many steps so the device-side counts must follow the generated tokens; then a history the
 * device has not seen, and a mask that allows nothing. The layered engine on any GPU; the megakernel engine (which
 * routes such steps through one-step launches that write the logits row) on compute capability ≥ 9.0. GPU only:
 * skipped, visibly, where no GPU is usable.
 */
import * as cudaCore from '@qk/cuda-core';
import { cudaAvailable, cudaDeviceInfo, QkValueError, useCudaBackend } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { createEngine } from '../src/engine/index.js';
import { chooseToken } from '../src/engine/sampling.js';
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

function build(name: EngineName, seed: number): Engine {
  return createEngine(name, CONFIG, toCuda(randomWeights(CONFIG, seed, 'bf16')), {
    maxContext: MAX_CONTEXT,
    vocabLimit: VOCAB_LIMIT,
    ...(name === 'megakernel' ? { megakernelUntil: MAX_CONTEXT } : {}),
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
