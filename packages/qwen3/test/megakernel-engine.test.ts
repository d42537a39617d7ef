/**
 * The megakernel engine (one persistent kernel per launch of decode steps) against the layered engine and the cpu engine on
 * the same random bf16 weights, at head size 128 (the megakernel's) with GQA groups of 1, 2 and 4, tied and untied
 * LM heads, contexts long enough to split attention into many chunks; repeatability bit for bit; greedy decode
 * equal to the argmax of its own logits; sampling in the kernel equal to `sample` on the same logits; refusals. GPU only: skipped, visibly, where no GPU is usable.
 */
import * as cudaCore from '@qk/cuda-core';
import {
  cudaAvailable,
  cudaDeviceInfo,
  QkDisposedError,
  QkValueError,
  sample,
  Tensor,
  useCudaBackend,
} from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { createCpuEngine } from '../src/engine/cpu.js';
import { createEngine, stepSeed } from '../src/engine/index.js';
import { megakernelPlan } from '../src/engine/megakernel/kernel.js';
import { MEGAKERNEL_TRACE_STAGES, type MegakernelTraceSummary } from '../src/engine/megakernel/trace.js';
import { MEGAKERNEL_TUNING_FIELDS, type MegakernelTuning } from '../src/engine/megakernel/tuning.js';
import { pickToken } from '../src/engine/sampling.js';
import { QkContextError, QkNonFiniteError } from '../src/errors.js';
import type { Engine, Qwen3Config, SamplingParams } from '../src/types.js';
import { argmaxOf as argmax, closenessOf, toCuda, logitTrace as trace } from './support/engine-checks.js';
import { MEGAKERNEL_SMALL, randomIds, randomWeights, smallConfig } from './support/random-model.js';

useCudaBackend(cudaCore);
const hopper = cudaAvailable() && cudaDeviceInfo().computeCapability.major >= 9;

/** Head size 128 configs: groups of 2 (untied), 4 (tied, odd vocab), 1 (MHA, odd hidden multiple of 8). */
const CONFIGS: [string, Qwen3Config][] = [
  ['GQA 2, untied', MEGAKERNEL_SMALL],
  [
    'GQA 4, tied, odd vocab',
    smallConfig({
      hiddenSize: 512,
      numLayers: 3,
      numHeads: 8,
      numKvHeads: 2,
      headDim: 128,
      intermediateSize: 712,
      vocabSize: 1001,
      tieWordEmbeddings: true,
    }),
  ],
  [
    'MHA, hidden 200',
    smallConfig({
      hiddenSize: 200,
      numHeads: 2,
      numKvHeads: 2,
      headDim: 128,
      intermediateSize: 328,
      vocabSize: 517,
    }),
  ],
];

const MAX_CONTEXT = 640;

/**
 * Head size 128, 8 KV heads in groups of 2 (as Qwen3-0.6B and 1.7B): 16 attention chunks per head on 132 blocks, so
 * positions past 16 · 56 keys give chunks of two passes. With TO_1400, traces reach 1,345 keys in the megakernel.
 */
const EIGHT_KV_HEADS = smallConfig({
  hiddenSize: 256,
  numHeads: 16,
  numKvHeads: 8,
  headDim: 128,
  intermediateSize: 384,
  vocabSize: 1000,
});
const TO_1400 = { maxContext: 1400, megakernelUntil: 1400 };

/**
 * An engine over seeded random weights. The megakernel keeps every decode step (`megakernelUntil` past the cache:
 * these small shapes would otherwise hand decoding to the layered graph within a few hundred positions);
 * `megakernelTuning` sets its knobs (read when the instance is made).
 */
function build(
  name: 'layered' | 'megakernel',
  config: Qwen3Config,
  seed: number,
  options: {
    megakernelUntil?: number;
    megakernelSteps?: number;
    megakernelTuning?: MegakernelTuning;
    maxContext?: number;
    vocabLimit?: number;
  } = {},
): Engine {
  return createEngine(name, config, toCuda(randomWeights(config, seed, 'bf16')), {
    maxContext: options.maxContext ?? MAX_CONTEXT,
    vocabLimit: options.vocabLimit,
    ...(name === 'megakernel'
      ? {
          megakernelUntil: options.megakernelUntil ?? MAX_CONTEXT,
          megakernelSteps: options.megakernelSteps,
          megakernelTuning: options.megakernelTuning,
        }
      : {}),
  });
}

/**
 * Checks two logit traces against each other from step `from` on: every value of `got` finite, each step within
 * `relL2`, and the same argmax at `agreement` of the steps or more.
 */
function expectClose(
  got: Float32Array[],
  want: Float32Array[],
  { from, relL2, agreement }: { from: number; relL2: number; agreement: number },
) {
  expect(got.length).toBe(want.length);
  let agree = 0;
  for (let s = from; s < want.length; s++) {
    expect(got[s]!.every(Number.isFinite), `step ${s} finite`).toBe(true);
    expect(closenessOf(got[s]!, want[s]!).relL2, `step ${s}`).toBeLessThan(relL2);
    if (argmax(got[s]!) === argmax(want[s]!)) agree++;
  }
  expect(agree / (want.length - from)).toBeGreaterThanOrEqual(agreement);
}

/**
 * Checks the megakernel's logits (`got`) against the layered engine's (`want`) over a trace's decode steps: every
 * value finite, each step within 2e-2 relative L2, and the same argmax at 90% of steps or more.
 */
function expectMatchesLayered(got: Float32Array[], want: Float32Array[]) {
  expectClose(got, want, { from: 1, relL2: 2e-2, agreement: 0.9 });
}

/** Whether two logit rows are the same bits. */
const sameBits = (a: Float32Array, b: Float32Array) =>
  Buffer.compare(Buffer.from(a.buffer), Buffer.from(b.buffer)) === 0;

/** Checks two logit traces step by step: as many steps, every value of `got` finite, the same bits. */
function expectSameBits(got: Float32Array[], want: Float32Array[]) {
  expect(got.length).toBe(want.length);
  for (let s = 0; s < want.length; s++) {
    expect(got[s]!.every(Number.isFinite), `step ${s} finite`).toBe(true);
    expect(sameBits(got[s]!, want[s]!), `step ${s}`).toBe(true);
  }
}

/** The attention by chunks at every position (the staged attention off). */
const CHUNKS: MegakernelTuning = { stagedUntil: 0 };

/**
 * The megakernel with the knobs `tuning` (over `base`) against one with `base` alone and against the layered engine, on EIGHT_KV_HEADS over `length` random ids (weights seeded `seed`, ids `idsSeed`), one
 * step per launch: the same bits below 56 keys (one chunk per head), then within 1e-2 relative L2 and 95% argmax
 * agreement of the baseline's logits, and within the layered engine's tolerances. Returns both logit traces.
 */
function knobAgainstDefault(
  tuning: MegakernelTuning,
  seed: number,
  length: number,
  idsSeed: number,
  base: MegakernelTuning = {},
) {
  const knob = build('megakernel', EIGHT_KV_HEADS, seed, { megakernelTuning: { ...base, ...tuning } });
  const plain = build('megakernel', EIGHT_KV_HEADS, seed, { megakernelTuning: base });
  const layered = build('layered', EIGHT_KV_HEADS, seed);
  try {
    const ids = randomIds(length, EIGHT_KV_HEADS.vocabSize, idsSeed);
    const got = trace(knob, ids, 1);
    const old = trace(plain, ids, 1);
    expectSameBits(got.slice(0, 56), old.slice(0, 56));
    expectClose(got, old, { from: 56, relL2: 1e-2, agreement: 0.95 });
    expectMatchesLayered(got, trace(layered, ids, 1));
    return { got, old };
  } finally {
    knob.dispose();
    plain.dispose();
    layered.dispose();
  }
}

/**
 * Greedy tokens from `prompt` up to position `until` with the knobs `tuning` (weights seeded `seed`): `next()` in
 * launches of 4 steps gives the argmax of one-step launches' logits at every step.
 */
function expectLaunchesOfFour(tuning: MegakernelTuning, seed: number, prompt: number[], until: number) {
  const four = build('megakernel', EIGHT_KV_HEADS, seed, { megakernelSteps: 4, megakernelTuning: tuning });
  const one = build('megakernel', EIGHT_KV_HEADS, seed, { megakernelTuning: tuning });
  try {
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    const tokens = [four.next(prompt, 0, greedy, 0)];
    for (let p = prompt.length; p < until; p++)
      tokens.push(four.next([tokens.at(-1)!], p, greedy, tokens.length));
    const want = [argmax(one.logits(prompt, 0))];
    for (let p = prompt.length; p < until; p++) want.push(argmax(one.logits([want.at(-1)!], p)));
    expect(tokens).toEqual(want);
  } finally {
    four.dispose();
    one.dispose();
  }
}

/** The tokens of `next()` from a 5-token prompt, then one step per position up to `until`, each fed the last token. */
function nextSteps(e: Engine, ids: readonly number[], sampling: SamplingParams, until: number): number[] {
  const out = [e.next(ids.slice(0, 5), 0, sampling, 0)];
  for (let p = 5; p < until; p++) out.push(e.next([out.at(-1)!], p, sampling, out.length));
  return out;
}

describe.skipIf(!hopper)('megakernel engine (CUDA, compute capability ≥ 9.0)', () => {
  for (const [name, config] of CONFIGS) {
    it(`matches the layered engine step by step over 500+ positions (${name})`, () => {
      const layered = build('layered', config, 5);
      const mk = build('megakernel', config, 5);
      expect(mk.name).toBe('megakernel');
      // A prefill of 480 then decode steps to 520: the attention of each step splits into up to 16 chunks.
      const ids = randomIds(520, config.vocabSize, 17);
      const want = trace(layered, ids, 480);
      expectMatchesLayered(trace(mk, ids, 480), want);
      layered.dispose();
      mk.dispose();
    });
  }

  it('matches the layered engine where a head splits into more than 16 chunks (the merge after an arrival counter)', () => {
    // Two KV heads: positions past 16 · 56 keys split each head into 17+ chunks, more than the flagged merge serves.
    const config = CONFIGS[0]![1];
    const long = { maxContext: 1100, megakernelUntil: 1100 };
    const layered = build('layered', config, 9, long);
    const mk = build('megakernel', config, 9, long);
    const ids = randomIds(1040, config.vocabSize, 23);
    const want = trace(layered, ids, 1000);
    expectMatchesLayered(trace(mk, ids, 1000), want);
    layered.dispose();
    mk.dispose();
  });

  it('matches the layered engine at hidden sizes whose RMSNorm takes two and three groups of 8 per thread', () => {
    // 224 consumer threads; thread t normalises the 8-value groups t, t + 224, t + 448 and gathers the 4-value units
    // t, t + 224, … in batches of 4. Hidden 2056: 257 groups (threads 0-32 take two), 514 units (one batch). Hidden
    // 3784: 473 groups (threads 0-24 take three, the third with its norm weights loaded late), 946 units (two batches).
    for (const hiddenSize of [2056, 3784]) {
      const config = smallConfig({
        hiddenSize,
        numHeads: 4,
        numKvHeads: 2,
        headDim: 128,
        intermediateSize: 264,
        vocabSize: 300,
      });
      const layered = build('layered', config, 13, { maxContext: 96 });
      const mk = build('megakernel', config, 13, { maxContext: 96, megakernelUntil: 96 });
      const ids = randomIds(90, config.vocabSize, 29);
      const want = trace(layered, ids, 30);
      expectMatchesLayered(trace(mk, ids, 30), want);
      layered.dispose();
      mk.dispose();
    }
  });

  it('matches the cpu engine (f32 over the same bf16 weights) on short contexts, one chunk per head', () => {
    const config = CONFIGS[0]![1];
    const cpu = createCpuEngine(config, randomWeights(config, 9, 'bf16'), { maxContext: 64 });
    const mk = build('megakernel', config, 9);
    const ids = randomIds(40, config.vocabSize, 3);
    const want = trace(cpu, ids, 1); // position 0 onwards: every step is a megakernel step
    const got = trace(mk, ids, 1);
    for (let s = 1; s < want.length; s++)
      expect(closenessOf(got[s]!, want[s]!).relL2, `step ${s}`).toBeLessThan(3e-2);
    cpu.dispose();
    mk.dispose();
  });

  it('repeats bit for bit, and greedy decode returns the argmax of its own logits', () => {
    const config = CONFIGS[1]![1];
    const mk = build('megakernel', config, 2);
    const ids = randomIds(300, config.vocabSize, 8);
    const first = trace(mk, ids, 200);
    const second = trace(mk, ids, 200);
    for (let s = 0; s < first.length; s++) expect(sameBits(first[s]!, second[s]!), `step ${s}`).toBe(true);
    // Greedy: the state the kernel leaves ([next, position + 1]) feeds the next step without an upload.
    const sampling = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    let token = mk.next(ids.slice(0, 50), 0, sampling, 0);
    for (let p = 50; p < 80; p++) {
      const logits = mk.logits([token], p); // the same step again, for its logits: rewinding is allowed
      const next = mk.next([token], p, sampling, p);
      expect(next).toBe(argmax(logits));
      token = next;
    }
    // Sampling reads the step's logits on the device, queued behind it: top-k 1 leaves only their argmax.
    const topOne = { temperature: 0.7, topK: 1, topP: 1, seed: 3 };
    for (let p = 80; p < 100; p++) {
      const logits = mk.logits([token], p);
      const sampled = mk.next([token], p, topOne, p);
      const top = logits[argmax(logits)]!;
      const tied = [...logits.keys()].filter((i) => logits[i] === top); // bf16 ties: any of them is the top 1
      expect(tied, `position ${p}`).toContain(sampled);
      token = (sampled + 7) % config.vocabSize; // a token the kernel did not make: the state is uploaded
    }
    mk.dispose();
  });

  it('samples in the kernel: each step draws the token `sample` draws from its logits with its step seed', () => {
    // Several steps per launch, each drawn on the device and fed to the next, against one step at a time through
    // logits() and the sampling references: the CPU rule (pickToken) and the sampling kernels on the same row.
    const cases: [number, { vocabLimit?: number }, SamplingParams][] = [
      [0, {}, { temperature: 0.6, topK: 20, topP: 0.95, seed: 1 }],
      [0, {}, { temperature: 1.3, topK: 64, topP: 1, seed: 2 }], // more than 32: two candidates per lane
      [1, {}, { temperature: 1.3, topK: 48, topP: 0.99, seed: 7 }], // tied head, GQA 4, odd vocabulary
      [2, {}, { temperature: 0.25, topK: 5, topP: 0.5, seed: 3 }],
      [0, { vocabLimit: 900 }, { temperature: 2, topK: 33, topP: 0.9, seed: 4 }],
      [2, { vocabLimit: 40 }, { temperature: 1, topK: 64, topP: 0.8, seed: 5 }], // top-k above the ids allowed
      [1, {}, { temperature: 0.8, topK: 1, topP: 1, seed: 6 }], // top-k 1: the argmax, ties to the lower id
    ];
    const maxContext = 72;
    for (const [which, extra, sampling] of cases) {
      const config = CONFIGS[which]![1];
      const limit = extra.vocabLimit ?? config.vocabSize;
      const label = `${CONFIGS[which]![0]}, ${JSON.stringify({ ...sampling, ...extra })}`;
      const mk = build('megakernel', config, 11 + which, { maxContext, megakernelSteps: 5, ...extra });
      const plain = build('megakernel', config, 11 + which, { maxContext, ...extra });
      const prompt = randomIds(9, config.vocabSize, 13 + which);
      const got = [mk.next(prompt, 0, sampling, 0)];
      for (let p = prompt.length; p < maxContext; p++)
        got.push(mk.next([got.at(-1)!], p, sampling, got.length));
      const want: number[] = [];
      let logits = plain.logits(prompt, 0);
      for (let step = 0; ; step++) {
        const row = logits.slice(0, limit);
        const drawn = pickToken(row, sampling, step);
        const onDevice = sample(Tensor.fromStorage(row, [limit], 'f32').to('cuda'), {
          temperature: sampling.temperature,
          topK: sampling.topK,
          topP: sampling.topP,
          seed: stepSeed(sampling.seed, step),
        }).item();
        expect(onDevice, `${label}: step ${step}, the sampling kernels against the CPU rule`).toBe(drawn);
        want.push(drawn);
        const position = prompt.length + step;
        if (position >= maxContext) break;
        logits = plain.logits([drawn], position);
      }
      expect(got, label).toEqual(want);
      expect(Math.max(...got), label).toBeLessThan(limit);
      // Not a degenerate draw: with an untied head the logits are spread out and the tokens vary. (With the tied one,
      // a token's own embedding row dominates the next logits, and a token often repeats itself.)
      if (sampling.topK > 1 && !config.tieWordEmbeddings)
        expect(new Set(got).size, `${label}: distinct tokens`).toBeGreaterThan(5);
      mk.dispose();
      plain.dispose();
    }
  });

  it('a step refuses NaN logits (as `sample` does, greedy too) with an error, and the engine runs on after it', () => {
    const config = CONFIGS[0]![1];
    const weights = randomWeights(config, 19, 'bf16');
    // One LM-head row of NaN (bf16 0x7fc0): that id's logit is NaN at every step.
    const bits = weights.lmHead.data as Uint16Array;
    bits.fill(0x7fc0, 123 * config.hiddenSize, 124 * config.hiddenSize);
    const mk = createEngine('megakernel', config, toCuda(weights), {
      maxContext: 32,
      megakernelUntil: 32,
    });
    const sampling = { temperature: 0.7, topK: 20, topP: 0.95, seed: 1 };
    const prompt = randomIds(6, config.vocabSize, 2);
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    // The prefill's row holds the NaN too: `logits` hands it over, a token is not drawn from it.
    expect(() => mk.next(prompt, 0, greedy, 0)).toThrow(QkNonFiniteError);
    const first = argmax(mk.logits(prompt, 0).map((x) => (Number.isNaN(x) ? -Infinity : x)));
    for (const s of [sampling, greedy]) {
      expect(() => mk.next([first], 6, s, 1)).toThrow(QkNonFiniteError);
      expect(() => mk.next([first], 6, s, 1)).toThrow(
        /NaN\/Inf at step 1; the weights hold non-finite values in lmHead/,
      );
    }
    const logits = mk.logits([first], 6);
    expect(Number.isNaN(logits[123]!)).toBe(true);
    expect(logits.filter(Number.isNaN).length).toBe(1);
    mk.dispose();
  });

  it('a second attention pass staged in shared memory gives the same bits as one read from the cache', () => {
    // 8 KV heads: 16 chunks per head on 132 blocks, so 1,001-1,345 keys make chunks of 63-85 keys, whose second pass
    // (7-29 keys: staged up to 28) is staged; `kvStage: false` reads it from the cache instead. (A first
    // draft let warps without second-pass keys overwrite the staged rows from 9 keys on, and the logits went NaN.)
    const staged = build('megakernel', EIGHT_KV_HEADS, 14, TO_1400);
    const plain = build('megakernel', EIGHT_KV_HEADS, 14, {
      ...TO_1400,
      megakernelTuning: { kvStage: false },
    });
    const layered = build('layered', EIGHT_KV_HEADS, 14, TO_1400);
    const ids = randomIds(1345, EIGHT_KV_HEADS.vocabSize, 31);
    const a = trace(staged, ids, 1000);
    const b = trace(plain, ids, 1000);
    const want = trace(layered, ids, 1000);
    for (let s = 0; s < a.length; s++) {
      expect(a[s]!.every(Number.isFinite), `step ${s} finite`).toBe(true);
      expect(sameBits(a[s]!, b[s]!), `step ${s}`).toBe(true);
      if (s > 0) expect(closenessOf(a[s]!, want[s]!).relL2, `step ${s}`).toBeLessThan(2e-2);
    }
    staged.dispose();
    plain.dispose();
    layered.dispose();
  });

  it('chunks of one pass and a staged second (chunkKeys 84) match the layered engine', () => {
    // 8 KV heads: from 57 keys on, each chunk holds up to 84 keys, so its second pass (up to 28 keys) is staged, from
    // one chunk per head through 16 (at 1,345 keys). A group of 2 (as in 0.6B and 1.7B) takes an argmax kernel that
    // stages.
    // (The staged attention off: it would take 57-384 keys.)
    const mk = build('megakernel', EIGHT_KV_HEADS, 15, {
      ...TO_1400,
      megakernelTuning: { ...CHUNKS, chunkKeys: 84 },
    });
    const layered = build('layered', EIGHT_KV_HEADS, 15, TO_1400);
    const ids = randomIds(1345, EIGHT_KV_HEADS.vocabSize, 32);
    for (const [from, to] of [
      [40, 200],
      [1300, 1345],
    ] as const) {
      const prompt = ids.slice(0, to);
      expectMatchesLayered(trace(mk, prompt, from), trace(layered, prompt, from));
    }
    mk.dispose();
    layered.dispose();
  });

  it('claimed tiles (claimTiles) give the same bits as fixed shares', () => {
    const config = CONFIGS[1]![1];
    const fixed = build('megakernel', config, 12);
    const claimed = build('megakernel', config, 12, { megakernelTuning: { claimTiles: true } });
    // Short contexts (attention blocks take no rows) through long ones (every block takes rows and attends).
    const ids = randomIds(300, config.vocabSize, 30);
    expectSameBits(trace(claimed, ids, 200), trace(fixed, ids, 200));
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    const sampled = { temperature: 0.9, topK: 40, topP: 0.9, seed: 8 };
    expect(nextSteps(claimed, ids, greedy, 40)).toEqual(nextSteps(fixed, ids, greedy, 40));
    expect(nextSteps(claimed, ids, sampled, 40)).toEqual(nextSteps(fixed, ids, sampled, 40));
    fixed.dispose();
    claimed.dispose();
  });

  it('QKV rows taken four at a time (the default) give the same bits as by pairs (qkvQuads false)', () => {
    // Hidden 256: QKV tiles of 56 rows (the short ring's 28 KB slots, launches below 512) or 40 (20 KB), and block
    // shares of 30-34 rows, so turns of two pairs and tiles that end on a lone pair, whose turn reads that pair twice
    // and publishes it once.
    const plan = megakernelPlan({ hidden: 256, qHeads: 16, kvHeads: 8, ffn: 384, layers: 2, vocab: 1000 });
    expect(plan.supported && plan.qkvQuads).toBe(true);
    const wide = megakernelPlan({ hidden: 4096, qHeads: 32, kvHeads: 8, ffn: 12288, layers: 2, vocab: 1000 });
    expect(wide.supported && wide.qkvQuads).toBe(false); // (Qwen3-8B: QKV tiles of one or two pairs)
    const quads = build('megakernel', EIGHT_KV_HEADS, 16);
    const pairs = build('megakernel', EIGHT_KV_HEADS, 16, { megakernelTuning: { qkvQuads: false } });
    const ids = randomIds(600, EIGHT_KV_HEADS.vocabSize, 33);
    expectSameBits(trace(quads, ids, 1), trace(pairs, ids, 1));
    const sampled = { temperature: 0.9, topK: 40, topP: 0.9, seed: 9 };
    expect(nextSteps(quads, ids, sampled, 60)).toEqual(nextSteps(pairs, ids, sampled, 60));
    quads.dispose();
    pairs.dispose();
  });

  it('heads of 2-3 chunks merged by the O blocks (oMerge 3) match the merge in chunk 0 (the default)', () => {
    // 8 KV heads in groups of 2: positions 56-167 split each head into 2-3 chunks of one pass, whose normalised
    // outputs the O blocks merge as they gather their input. Below 56 a head is one chunk, so both engines give the
    // same bits; from 168 (4-6 chunks here) chunk 0's block merges in both, over caches that differ by the earlier
    // roundings. (Both with the staged attention off: it would take 57-384 keys, one chunk per head.)
    knobAgainstDefault({ oMerge: 3 }, 17, 320, 34, CHUNKS);
  });

  it('the staged attention (stagedUntil) matches the attention by chunks and the layered engine, in launches of one step and of several', () => {
    // 8 KV heads in groups of 2 (as Qwen3-0.6B): from 57 keys a head splits into chunks of one pass. With the staged
    // attention, launches whose steps have 57-256 keys attend with one block per KV head over the head's rows staged
    // in shared memory, on the tensor cores: other roundings (bf16 weights), so other bits from position 56 on.
    // Up to position 299: past 256 keys both attend by chunks again, over caches the staged steps wrote.
    const { got, old } = knobAgainstDefault({ stagedUntil: 256 }, 18, 300, 35, CHUNKS);
    // (The staged steps did take the other path: their logits are not the chunked ones' bits.)
    expect(got.slice(56, 256).filter((g, s) => !sameBits(g, old[56 + s]!)).length).toBeGreaterThan(150);

    // Launches of 4 steps (stagedFrom 1: every launch within 256 keys is staged): the staged rows' barrier completes
    // once per layer of each step, so its phases must follow across steps; the tokens are those of one step per
    // launch.
    expectLaunchesOfFour(
      { stagedUntil: 256, stagedFrom: 1 },
      19,
      randomIds(5, EIGHT_KV_HEADS.vocabSize, 36),
      245,
    );
  });

  it('the staged attention over the whole ring (the default to 384 keys; stagedRing) gives the staged bits, and the same tokens in launches of several steps', () => {
    const ids = randomIds(420, EIGHT_KV_HEADS.vocabSize, 37);
    // Up to 256 keys, rows in the place of the whole ring against rows past a kept ring: the same arithmetic, so the
    // same bits at every step (there, the attending blocks also take no down rows, and stream the LM head only after
    // the last layer's attention; a GEMV's rows give the same sums on any block).
    const ring = build('megakernel', EIGHT_KV_HEADS, 20, {
      megakernelTuning: { stagedUntil: 256, stagedRing: true },
    });
    const kept = build('megakernel', EIGHT_KV_HEADS, 20, { megakernelTuning: { stagedUntil: 256 } });
    try {
      expectSameBits(trace(ring, ids.slice(0, 300), 1), trace(kept, ids.slice(0, 300), 1));
    } finally {
      ring.dispose();
      kept.dispose();
    }
    // Up to 384 keys (no slots can be kept beside them: the whole ring's place), against the chunks and the layered
    // engine; the steps of 257-384 keys did take the staged path (other bits than the chunks').
    const { got, old } = knobAgainstDefault({ stagedUntil: 384 }, 21, 420, 38, CHUNKS);
    expect(got.slice(256, 384).filter((g, s) => !sameBits(g, old[256 + s]!)).length).toBeGreaterThan(96);
    // The default (the staged attention to 384 keys, HF's roundings): the weights' division without __fdiv_rn's
    // range check gives __fdiv_rn's bits (stagedHf 2: the same attention with __fdiv_rn itself).
    const fast = build('megakernel', EIGHT_KV_HEADS, 23);
    const fdiv = build('megakernel', EIGHT_KV_HEADS, 23, { megakernelTuning: { stagedHf: 2 } });
    try {
      expectSameBits(trace(fast, ids, 1), trace(fdiv, ids, 1));
    } finally {
      fast.dispose();
      fdiv.dispose();
    }

    // Launches of 4 steps from position 1: the barrier that hands the ring back to the LM head completes once per
    // step, so its phases must follow across steps; the tokens are those of one step per launch.
    expectLaunchesOfFour({ stagedUntil: 384, stagedFrom: 1 }, 22, ids.slice(0, 5), 380);
  });

  it('the staged kernel (the default) gives the bits and tokens of the kernel with both paths (pathKernels false)', () => {
    // Launches whose steps are all staged (57-384 keys) run a kernel compiled without the attention by chunks; the
    // others run the kernel with both paths.
    const ids = randomIds(420, EIGHT_KV_HEADS.vocabSize, 39);
    const both = build('megakernel', EIGHT_KV_HEADS, 24, { megakernelTuning: { pathKernels: false } });
    const path = build('megakernel', EIGHT_KV_HEADS, 24);
    const paths = () => cudaCore.loadBinding().megakernelLaunchPaths();
    try {
      const p0 = paths();
      const want = trace(both, ids, 1);
      const p1 = paths();
      const got = trace(path, ids, 1);
      const p2 = paths();
      expectSameBits(got, want);
      // (The knob's instance ran the kernel with both paths only, a launch per decode step; the default's ran the
      // staged kernel at 57-384 keys, positions 56-383.)
      const launches = p1[0] - p0[0];
      expect(launches).toBeGreaterThanOrEqual(419);
      expect(p1[1] - p0[1]).toBe(0);
      expect([p2[0] - p1[0], p2[1] - p1[1]]).toEqual([launches - (384 - 56), 384 - 56]);
    } finally {
      both.dispose();
      path.dispose();
    }
    // Launches of 4 steps, greedy and sampled, from 5 prompt ids to 400 (so some launches cross 56/57 and 384/385
    // keys): the tokens of the kernel with both paths.
    const sampled = { temperature: 0.8, topK: 20, topP: 0.9, seed: 5 };
    for (const sampling of [{ temperature: 0, topK: 0, topP: 1, seed: 0 }, sampled]) {
      const four = build('megakernel', EIGHT_KV_HEADS, 25, { megakernelSteps: 4 });
      const plain = build('megakernel', EIGHT_KV_HEADS, 25, {
        megakernelSteps: 4,
        megakernelTuning: { pathKernels: false },
      });
      try {
        const got = nextSteps(four, ids, sampling, 400);
        expect(got).toEqual(nextSteps(plain, ids, sampling, 400));
        expect(new Set(got).size).toBeGreaterThan(10);
      } finally {
        four.dispose();
        plain.dispose();
      }
    }
  });

  it("the short-context ring (launches below the plan's shortRingUntil) gives the same bits as the default ring", () => {
    const config = CONFIGS[0]![1];
    const dims = {
      hidden: config.hiddenSize,
      qHeads: config.numHeads,
      kvHeads: config.numKvHeads,
      ffn: config.intermediateSize,
      layers: config.numLayers,
      vocab: config.vocabSize,
    };
    /** The plan and an engine with slots of `slotKb` KB (undefined: the default). */
    const withSlotKb = (slotKb: number | undefined) => {
      const tuning: MegakernelTuning = slotKb === undefined ? {} : { slotKb };
      const plan = megakernelPlan(dims, tuning);
      if (!plan.supported) throw new Error(plan.reason);
      return { plan, engine: build('megakernel', config, 14, { megakernelTuning: tuning }) };
    };
    // These rows are narrow: the default 20 KB slots stand, and launches below 512 take fewer, 28 KB ones.
    const both = withSlotKb(undefined);
    expect(both.plan.slotBytes).toBe(20 * 1024);
    expect(both.plan.shortRingUntil).toBe(512);
    expect(both.plan.shortSlotBytes).toBe(28 * 1024);
    expect(both.plan.shortSlots * both.plan.shortSlotBytes).toBeLessThanOrEqual(both.plan.sharedBytes);
    expect(both.plan.slots * both.plan.slotBytes).toBeLessThanOrEqual(both.plan.sharedBytes);
    // A requested slot size puts every launch on one ring: the default one, or one of the short ring's size.
    const only20 = withSlotKb(20);
    const only28 = withSlotKb(28);
    expect([only20.plan.slotBytes, only20.plan.shortRingUntil]).toEqual([20 * 1024, 0]);
    expect([only28.plan.slotBytes, only28.plan.slots, only28.plan.shortRingUntil]).toEqual([
      28 * 1024,
      both.plan.shortSlots,
      0,
    ]);
    // Steps from 300 to 560: the default engine crosses from its short ring to the default one at 512.
    const ids = randomIds(560, config.vocabSize, 31);
    const want = trace(only20.engine, ids, 300);
    for (const other of [both, only28]) expectSameBits(trace(other.engine, ids, 300), want);
    for (const e of [both, only20, only28]) e.engine.dispose();
  });

  it('greedy next() runs several steps per launch: claimed steps give the tokens of plain steps, superseded ones do no harm', () => {
    const config = CONFIGS[0]![1];
    const maxContext = 64;
    // 5 steps per launch: the 12-token prompt's 52 decode positions end in a launch cut short by the cache's end.
    const mk = build('megakernel', config, 4, { maxContext, megakernelSteps: 5 });
    const plain = build('megakernel', config, 4);
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    const prompt = randomIds(12, config.vocabSize, 21);
    // `mk` decodes through next() only, so every step after the first runs in a launch queued ahead, fed on the
    // device by the step before it, and is claimed.
    const got = [mk.next(prompt, 0, greedy, 0)];
    for (let p = prompt.length; p < maxContext; p++) got.push(mk.next([got.at(-1)!], p, greedy, got.length));
    // `plain` decodes the same through logits(), one step per launch, nothing queued ahead.
    const want = [argmax(plain.logits(prompt, 0))];
    for (let p = prompt.length; p < maxContext; p++) want.push(argmax(plain.logits([want.at(-1)!], p)));
    expect(got).toEqual(want);

    // Inside a launch: two tokens claimed, then another token at the third position supersedes the rest of it.
    const start = prompt.length + 20;
    const a = mk.next([want[20]!], start, greedy, 0);
    const b = mk.next([a], start + 1, greedy, 1);
    expect([a, b]).toEqual([want[21], want[22]]);
    const other = (b + 1) % config.vocabSize;
    const c = mk.next([other], start + 2, greedy, 2);
    expect(c).toBe(argmax(plain.logits([other], start + 2)));
    // And the steps queued after it still feed on from there.
    expect(mk.next([c], start + 3, greedy, 3)).toBe(argmax(plain.logits([c], start + 3)));
    // Rewinding into a launch already read: the cache rows before it are unchanged, so the step is the same.
    expect(mk.next([c], start + 3, greedy, 3)).toBe(argmax(plain.logits([c], start + 3)));
    mk.dispose();
    plain.dispose();
  });

  it('launches screen the LM head and take the unscreened argmax or draw id for id: exact ties, near ties, a vocabulary limit, x = 0, top-k 1-64', () => {
    const config = smallConfig({
      hiddenSize: 256,
      numHeads: 4,
      numKvHeads: 2,
      headDim: 128,
      intermediateSize: 384,
      vocabSize: 1001,
    });
    const V = config.vocabSize;
    const H = config.hiddenSize;
    const plan = megakernelPlan({
      hidden: H,
      qHeads: 4,
      kvHeads: 2,
      ffn: 384,
      layers: config.numLayers,
      vocab: V,
    });
    expect(plan.supported && plan.screenRowBytes).toBe(H + 16);
    const base = randomWeights(config, 9, 'bf16');
    // Rows 500-999 repeat rows 0-499, so every logit appears twice and the lower id must win each tie (the argmax's,
    // and the top-k's order and cut); row 1000 is row 3 with its first weight one bf16 step larger (a logit a
    // rounding away from row 3's).
    const rows = base.lmHead.to('f32').data as Float32Array;
    for (let i = 500; i < 1000; i++) rows.copyWithin(i * H, (i - 500) * H, (i - 499) * H);
    rows.copyWithin(1000 * H, 3 * H, 4 * H);
    rows[1000 * H] = rows[3 * H]! * (1 + 2 ** -7);
    const lmHead = Tensor.fromStorage(rows, [V, H], 'f32').to('bf16') as Tensor<'bf16'>;
    const tied = { ...base, lmHead };
    // A zero final norm makes x zero and every logit 0: every row is a candidate; id 0 wins, and the top k are 0…k−1.
    const zero = { ...base, lmHead, norm: Tensor.zeros([H], 'bf16') };
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    const cases: [string, typeof base, number | undefined, SamplingParams][] = [
      ['greedy: ties and near ties', tied, undefined, greedy],
      ['greedy: a vocabulary limit of 999', tied, 999, greedy],
      ['greedy: x = 0', zero, undefined, greedy],
      ['top-k 1: ties and near ties', tied, undefined, { temperature: 1, topK: 1, topP: 1, seed: 5 }],
      [
        'top-k 20, top-p 0.95: ties and near ties',
        tied,
        undefined,
        { temperature: 1.5, topK: 20, topP: 0.95, seed: 6 },
      ],
      ['top-k 64: a vocabulary limit of 999', tied, 999, { temperature: 2, topK: 64, topP: 1, seed: 7 }],
      ['top-k 7: x = 0', zero, undefined, { temperature: 1, topK: 7, topP: 1, seed: 8 }],
    ];
    const maxContext = 72;
    const prompt = randomIds(6, V, 31);
    let greedyTies: number[] = [];
    for (const [name, weights, vocabLimit, sampling] of cases) {
      const options = { maxContext, megakernelUntil: maxContext, vocabLimit };
      const mk = createEngine('megakernel', config, toCuda(weights), { ...options, megakernelSteps: 8 });
      const plain = createEngine('megakernel', config, toCuda(weights), {
        ...options,
        megakernelScreen: false,
      });
      expect([mk.lmScreen, plain.lmScreen], name).toEqual([true, false]);
      // `mk` decodes through next(): every step after the first in a screened launch.
      const got = [mk.next(prompt, 0, sampling, 0)];
      for (let p = prompt.length; p < maxContext; p++)
        got.push(mk.next([got.at(-1)!], p, sampling, got.length));
      if (sampling.temperature === 0) {
        // `plain` through logits(): every logit, unscreened.
        const limit = vocabLimit ?? V;
        const pick = (l: Float32Array) => argmax(l.subarray(0, limit));
        const want = [pick(plain.logits(prompt, 0))];
        let ties = 0;
        for (let p = prompt.length; p < maxContext; p++) {
          const l = plain.logits([want.at(-1)!], p);
          const top = pick(l);
          if (top < 500 && top + 500 < limit && l[top + 500] === l[top]) ties++;
          want.push(top);
        }
        expect(got, name).toEqual(want);
        if (name === 'greedy: x = 0') expect(want.every((t) => t === 0)).toBe(true);
        // (With duplicated rows the best logit is tied unless it is row 1000's, or its twin lies past the limit.)
        else expect(ties, name).toBeGreaterThanOrEqual((maxContext - prompt.length) / 2);
        if (name === 'greedy: ties and near ties') greedyTies = want;
      } else {
        // `plain` draws in unscreened launches, from every logit, with the same uniforms.
        const want = [plain.next(prompt, 0, sampling, 0)];
        for (let p = prompt.length; p < maxContext; p++)
          want.push(plain.next([want.at(-1)!], p, sampling, want.length));
        expect(got, name).toEqual(want);
        const distinct = new Set(want).size;
        if (sampling.topK === 1)
          expect(want, name).toEqual(greedyTies); // the argmax, ties to the lower id
        else if (name === 'top-k 7: x = 0') {
          expect(want.every((t) => t < 7)).toBe(true);
          expect(distinct).toBeGreaterThanOrEqual(3);
        } else expect(distinct, name).toBeGreaterThanOrEqual(10); // the draws reach past the first few candidates
      }
      mk.dispose();
      plain.dispose();
    }
  });

  it('hands decoding to the layered graph at megakernelUntil: the same bits on each side, launches cut at the switch', () => {
    const config = CONFIGS[0]![1];
    const maxContext = 64;
    const until = 40;
    const layered = build('layered', config, 7, { maxContext });
    const pure = build('megakernel', config, 7, { maxContext });
    const never = build('megakernel', config, 7, { maxContext, megakernelUntil: 0 });
    const mixed = build('megakernel', config, 7, { maxContext, megakernelUntil: until, megakernelSteps: 4 });
    const ids = randomIds(maxContext, config.vocabSize, 40);
    const wantLayered = trace(layered, ids, 12);
    const wantPure = trace(pure, ids, 12);
    // megakernelUntil 0: every decode step in the layered graph, so the layered engine's bits exactly.
    const gotNever = trace(never, ids, 12);
    for (let s = 0; s < wantLayered.length; s++)
      expect(sameBits(gotNever[s]!, wantLayered[s]!), `step ${s}`).toBe(true);
    // megakernelUntil 40: the megakernel's bits before 40 (trace step s is position 11 + s), the layered graph after
    // (over cache rows the megakernel wrote, so close to the layered engine rather than equal).
    const gotMixed = trace(mixed, ids, 12);
    let differFromPure = 0;
    for (let s = 0; s < wantPure.length; s++) {
      const position = 11 + s;
      expect(gotMixed[s]!.every(Number.isFinite), `step ${s} finite`).toBe(true);
      if (position < until) expect(sameBits(gotMixed[s]!, wantPure[s]!), `step ${s}`).toBe(true);
      else {
        expect(closenessOf(gotMixed[s]!, wantLayered[s]!).relL2, `step ${s}`).toBeLessThan(2e-2);
        if (!sameBits(gotMixed[s]!, wantPure[s]!)) differFromPure++;
      }
    }
    expect(
      differFromPure,
      'steps after the switch computed by other kernels than the megakernel',
    ).toBeGreaterThan(0);
    // Greedy through next(): launches of 4 from position 12 (12, 16, …, 36) end exactly at 40; a launch from 38 is
    // cut to 2 steps; every token equals the argmax of a one-step-at-a-time walk over the same engine kind.
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    for (const first of [12, 14]) {
      const prompt = ids.slice(0, first);
      const walk = build('megakernel', config, 7, { maxContext, megakernelUntil: until });
      const want = [argmax(walk.logits(prompt, 0))];
      for (let p = first; p < maxContext; p++) want.push(argmax(walk.logits([want.at(-1)!], p)));
      walk.dispose();
      const got = [mixed.next(prompt, 0, greedy, 0)];
      for (let p = first; p < maxContext; p++) got.push(mixed.next([got.at(-1)!], p, greedy, got.length));
      expect(got).toEqual(want);
    }
    for (const e of [layered, pure, never, mixed]) e.dispose();
  });

  it('queues no launch past the generation’s last step (sampling.lastStep), greedy and sampled, same tokens', () => {
    // Launches of 4 steps: without lastStep, reading the last step of a launch queues the next launch, also after the
    // generation's last token (work the next generation then waits behind). With lastStep, the launch that would
    // run past it is cut, and none is queued after it. Launch counts come from the addon's counters.
    const config = CONFIGS[0]![1];
    const launches = () => {
      const [a, b] = cudaCore.loadBinding().megakernelLaunchPaths();
      return a + b;
    };
    const prompt = randomIds(7, config.vocabSize, 61);
    for (const base of [
      { temperature: 0, topK: 0, topP: 1, seed: 0 },
      { temperature: 0.8, topK: 20, topP: 0.9, seed: 9 },
    ]) {
      // Generations of 9 and 11 tokens: decode steps 1…8 (two whole launches) and 1…10 (the third cut to 2 steps).
      for (const tokens of [9, 11]) {
        const runs: { ids: number[]; launched: number }[] = [];
        for (const sampling of [base, { ...base, lastStep: tokens - 1 }]) {
          const e = build('megakernel', config, 8, { megakernelSteps: 4 });
          try {
            const before = launches();
            const ids = [e.next(prompt, 0, sampling, 0)];
            for (let step = 1; step < tokens; step++) {
              ids.push(e.next([ids.at(-1)!], prompt.length + step - 1, sampling, step));
            }
            cudaCore.loadBinding().synchronize();
            runs.push({ ids, launched: launches() - before });
          } finally {
            e.dispose();
          }
        }
        const [open, bounded] = runs;
        const label = `${base.temperature === 0 ? 'greedy' : 'sampled'}, ${tokens} tokens`;
        expect(bounded!.ids, label).toEqual(open!.ids);
        const needed = Math.ceil((tokens - 1) / 4);
        expect(bounded!.launched, label).toBe(needed);
        // Without the bound, 8 steps leave a launch queued after the last token; 10 steps end inside a launch.
        expect(open!.launched, label).toBe(tokens === 9 ? needed + 1 : needed);
      }
    }
    const e = build('megakernel', config, 8);
    expect(() => e.next(prompt, 0, { temperature: 0, topK: 0, topP: 1, seed: 0, lastStep: -1 }, 0)).toThrow(
      /lastStep/,
    );
    e.dispose();
  });

  it('refuses steps per launch outside 1–64, and launches that run past the cache', () => {
    const config = CONFIGS[0]![1];
    const weights = toCuda(randomWeights(config, 6, 'bf16'));
    for (const bad of [0, 65, 2.5])
      expect(() =>
        createEngine('megakernel', config, weights, { maxContext: 16, megakernelSteps: bad }),
      ).toThrow(/megakernelSteps/);
    for (const bad of [-1, 2.5])
      expect(() =>
        createEngine('megakernel', config, weights, { maxContext: 16, megakernelUntil: bad }),
      ).toThrow(/megakernelUntil/);
    const mk = createEngine('megakernel', config, weights, {
      maxContext: 16,
      megakernelSteps: 64,
      megakernelUntil: 16,
    });
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    // 64 steps per launch, 16 cache rows: each launch is cut to the rows left.
    let token = mk.next([1, 2, 3], 0, greedy, 0);
    for (let p = 3; p < 16; p++) token = mk.next([token], p, greedy, p);
    // Position 16 is past the cache: refused before anything is launched.
    expect(() => mk.next([token], 16, greedy, 16)).toThrow(QkContextError);
    mk.dispose();
  });

  it('refuses tuning fields that are unknown, of the wrong type or out of range, naming each, in the engine and the addon', () => {
    const config = CONFIGS[0]![1];
    const weights = toCuda(randomWeights(config, 6, 'bf16'));
    const bad: [Record<string, unknown>, string][] = [
      [{ inflight: 2000 }, 'megakernelTuning.inflight'],
      [{ stagedUntil: 400 }, 'megakernelTuning.stagedUntil'],
      [{ claimTiles: 1 }, 'megakernelTuning.claimTiles'],
      [{ debug: 16 }, 'megakernelTuning.debug'],
      [{ slotKB: 20 }, 'megakernelTuning.slotKB'],
    ];
    for (const [tuning, field] of bad) {
      expect(() =>
        createEngine('megakernel', config, weights, {
          maxContext: 16,
          megakernelTuning: tuning as MegakernelTuning,
        }),
      ).toThrow(field);
    }
    // The addon checks the object again (its own table), before any CUDA work.
    const b = cudaCore.loadBinding();
    const plan = (tuning: unknown) => () =>
      b.megakernelPlan(256, 4, 2, 384, 2, 1000, tuning as MegakernelTuning);
    expect(plan({ inflight: -1 })).toThrow(
      /argument "tuning\.inflight" must be an integer in \[0, 1024\], got -1/,
    );
    expect(plan({ kvStage: 'no' })).toThrow(/argument "tuning\.kvStage" must be a boolean/);
    expect(plan({ bogus: 1 })).toThrow(/argument "tuning\.bogus" is not a megakernel tuning field/);
    expect(plan([1])).toThrow(/argument "tuning" must be an object/);
    expect(b.megakernelPlan(256, 4, 2, 384, 2, 1000, {}).supported).toBe(true);
    // And its table is the one @qk/ops checks with (the backend compares them when it loads the addon).
    expect(b.megakernelTuningFields).toEqual(MEGAKERNEL_TUNING_FIELDS);
    const mk = createEngine('megakernel', config, weights, { maxContext: 16, megakernelTuning: {} });
    mk.dispose();
  });

  it('megakernelTrace hands the per-stage timings of the traced steps to its callback at dispose', () => {
    const config = CONFIGS[0]![1];
    const summaries: MegakernelTraceSummary[] = [];
    const mk = createEngine('megakernel', config, toCuda(randomWeights(config, 2, 'bf16')), {
      maxContext: 32,
      megakernelUntil: 32,
      megakernelSteps: 4,
      megakernelTrace: (s) => summaries.push(s),
    });
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    let token = mk.next([1, 2, 3], 0, greedy, 0);
    for (let p = 3; p < 12; p++) token = mk.next([token], p, greedy, p - 2);
    expect(summaries).toHaveLength(0);
    mk.dispose();
    expect(summaries).toHaveLength(1);
    const summary = summaries[0]!;
    expect(summary.steps).toBeGreaterThanOrEqual(9);
    expect(summary.stages).toHaveLength(MEGAKERNEL_TRACE_STAGES.length + 3);
    expect(summary.stepUs).toBeGreaterThan(0);
  });

  it('has no swappable modules, refuses shapes it does not serve, and refuses use after dispose', () => {
    const config = CONFIGS[0]![1];
    const mk = build('megakernel', config, 1);
    expect(mk.patch === undefined).toBe(true);
    mk.dispose();
    expect(() => mk.logits([1], 0)).toThrow(QkDisposedError);
    const small = smallConfig(); // head size 16
    expect(() =>
      createEngine('megakernel', small, toCuda(randomWeights(small, 1, 'bf16')), { maxContext: 8 }),
    ).toThrow(QkValueError);
    const plan = megakernelPlan({ hidden: 256, qHeads: 16, kvHeads: 2, ffn: 384, layers: 2, vocab: 100 });
    expect(plan.supported).toBe(false);
    if (!plan.supported) expect(plan.reason).toMatch(/query heads per KV head/);
  });
});
