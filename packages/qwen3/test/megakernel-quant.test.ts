/**
 * The megakernel engine on weight-only quantized projections (INT8 per row, INT4 groups, INT4 with AWQ/GPTQ zero
 * points) against the layered engine and the cpu engine on the same codes: decode logits step by step (the kernel's
 * unscreened LM head), greedy tokens through launches of several steps (the screened LM head, fixed shares and claimed
 * tiles, QKV rows by pairs and by quads), repeatability, and the plan's refusals. Random norm weights, GQA groups of 2
 * and 4, an odd vocabulary. Hopper only: skipped, visibly, elsewhere.
 */
import * as cudaCore from '@qk/cuda-core';
import { cudaAvailable, cudaDeviceInfo, QkValueError, useCudaBackend } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { createCpuEngine } from '../src/engine/cpu.js';
import { createEngine } from '../src/engine/index.js';
import { megakernelPlan } from '../src/engine/megakernel/kernel.js';
import type { MegakernelTuning } from '../src/engine/megakernel/tuning.js';
import type { Engine, Qwen3Config } from '../src/types.js';
import { argmaxOf, closenessOf, toCuda, logitTrace as trace } from './support/engine-checks.js';
import { type QuantFormat, quantized } from './support/quantized-model.js';
import { MEGAKERNEL_SMALL, randomIds, randomWeights, smallConfig } from './support/random-model.js';

useCudaBackend(cudaCore);
const hopper = cudaAvailable() && cudaDeviceInfo().computeCapability.major >= 9;

/** Head size 128 (the megakernel's); widths that two INT4 groups of 64 (four of 32) divide. */
const CONFIGS: [string, Qwen3Config][] = [
  ['GQA 2, untied', MEGAKERNEL_SMALL],
  [
    'GQA 4, tied, odd vocab, 3 layers',
    smallConfig({
      hiddenSize: 512,
      numLayers: 3,
      numHeads: 8,
      numKvHeads: 2,
      headDim: 128,
      intermediateSize: 640,
      vocabSize: 1001,
      tieWordEmbeddings: true,
    }),
  ],
];

const FORMATS: [string, QuantFormat][] = [
  ['int8', { bits: 8 }],
  ['int4 group 64', { bits: 4, groupSize: 64 }],
  ['int4 group 32 with zero points', { bits: 4, groupSize: 32, zeroPoints: true }],
];

const MAX_CONTEXT = 160;
const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };

/** An engine over the quantized random model `seed` (bf16 activations; the megakernel keeps every decode step). */
function build(
  name: 'layered' | 'megakernel',
  config: Qwen3Config,
  seed: number,
  f: QuantFormat,
  options: { megakernelSteps?: number; megakernelTuning?: MegakernelTuning } = {},
): Engine {
  return createEngine(name, config, toCuda(randomWeights(config, seed, 'bf16')), {
    maxContext: MAX_CONTEXT,
    quantized: quantized(config, seed, f),
    ...(name === 'megakernel' ? { megakernelUntil: MAX_CONTEXT, ...options } : {}),
  });
}

/** Greedy tokens through `next()`: a prompt, then each token fed back. */
function greedyTokens(engine: Engine, prompt: readonly number[], steps: number): number[] {
  const out = [engine.next(prompt, 0, greedy, 0)];
  for (let i = 1; i < steps; i++) out.push(engine.next([out.at(-1)!], prompt.length + i - 1, greedy, i));
  return out;
}

/** Every value finite, each decode step (from 1) within `relL2`, and the same argmax at 90% of them or more. */
function expectClose(got: Float32Array[], want: Float32Array[], relL2: number, what: string): void {
  expect(got.length).toBe(want.length);
  let agree = 0;
  for (let s = 1; s < want.length; s++) {
    expect(got[s]!.every(Number.isFinite), `${what} step ${s} finite`).toBe(true);
    expect(closenessOf(got[s]!, want[s]!).relL2, `${what} step ${s}`).toBeLessThan(relL2);
    if (argmaxOf(got[s]!) === argmaxOf(want[s]!)) agree++;
  }
  expect(agree / (want.length - 1), `${what} argmax agreement`).toBeGreaterThanOrEqual(0.9);
}

describe.skipIf(!hopper)('megakernel engine, quantized weights (Hopper)', () => {
  for (const [cname, config] of CONFIGS) {
    for (const [fname, f] of FORMATS) {
      it(`${cname}, ${fname}: decode logits match the layered engine and the cpu reference on the same codes`, () => {
        const seed = 3 + f.bits;
        const mk = build('megakernel', config, seed, f);
        const layered = build('layered', config, seed, f);
        const cpu = createCpuEngine(config, randomWeights(config, seed), {
          maxContext: MAX_CONTEXT,
          quantized: quantized(config, seed, f),
        });
        try {
          // 90 positions: past 56 keys, query groups of 2 attend by the staged attention (DESIGN.md), below by chunks.
          const ids = randomIds(90, config.vocabSize, 17);
          const got = trace(mk, ids, 6);
          // The megakernel and the layered engine round the same bf16 activations, summing in other orders.
          expectClose(got, trace(layered, ids, 6), 2e-2, `${fname} vs layered`);
          // The cpu engine computes in f32 over the same codes: the bf16 bound of the layered engine's own test.
          expectClose(got, trace(cpu, ids, 6), 3e-2, `${fname} vs cpu`);
        } finally {
          mk.dispose();
          layered.dispose();
          cpu.dispose();
        }
      });
    }
  }

  // Launches of 8 steps through the screened LM head, with fixed shares and with claimed tiles (unscreened), QKV by
  // quads where the plan deals them so and by pairs: every token is the argmax of one-step launches' logits.
  const tunings: [string, MegakernelTuning][] = [
    ['fixed shares', {}],
    ['QKV by pairs', { qkvQuads: false }],
    ['claimed tiles', { claimTiles: true }],
  ];
  for (const [tname, tuning] of tunings) {
    for (const [fname, f] of FORMATS) {
      it(`${fname}, ${tname}: greedy tokens in launches of 8 are the argmax of the kernel's own logits; runs repeat`, () => {
        const config = CONFIGS[1]![1];
        const many = build('megakernel', config, 21, f, { megakernelSteps: 8, megakernelTuning: tuning });
        const one = build('megakernel', config, 21, f, { megakernelTuning: tuning });
        try {
          const prompt = randomIds(9, config.vocabSize, 23);
          const tokens = greedyTokens(many, prompt, 40);
          const logits = trace(one, [...prompt, ...tokens.slice(0, -1)], prompt.length);
          expect(tokens).toEqual(logits.map(argmaxOf));
          expect(greedyTokens(many, prompt, 40)).toEqual(tokens);
        } finally {
          many.dispose();
          one.dispose();
        }
      });
    }
  }

  it('the plan serves INT4 widths of whole group pairs (of four with zero points) and says why not otherwise', () => {
    const dims = { hidden: 256, qHeads: 4, kvHeads: 2, ffn: 384, layers: 2, vocab: 1000 };
    expect(megakernelPlan({ ...dims, weights: { bits: 8 } }).supported).toBe(true);
    expect(megakernelPlan({ ...dims, weights: { bits: 4, groupSize: 64 } }).supported).toBe(true);
    const odd = megakernelPlan({ ...dims, weights: { bits: 4, groupSize: 128 } });
    expect(odd.supported).toBe(false);
    expect(odd.supported ? '' : odd.reason).toMatch(/multiples of 2 INT4 groups/);
    const zero = megakernelPlan({ ...dims, weights: { bits: 4, groupSize: 64, zeroPoints: true } });
    expect(zero.supported ? '' : zero.reason).toMatch(/multiples of 4 INT4 groups/);
    expect(() => megakernelPlan({ ...dims, weights: { bits: 4, groupSize: 48 } })).toThrow(QkValueError);
    const mha = megakernelPlan({ ...dims, qHeads: 2, weights: { bits: 8 } });
    expect(mha.supported ? '' : mha.reason).toMatch(/query groups of 2 and 4/);
    expect(megakernelPlan({ ...dims, qHeads: 2 }).supported).toBe(true);
    expect(() => megakernelPlan({ ...dims, weights: { bits: 8, zeroPoints: true } })).toThrow(
      /INT4 weights only/,
    );
    // INT4 rows are a quarter of bf16's: a slot holds four times the units, and the 8B's layers no longer claim tiles.
    const wide = { hidden: 4096, qHeads: 32, kvHeads: 8, ffn: 12288, layers: 2, vocab: 1000 };
    const bf16 = megakernelPlan(wide);
    const int4 = megakernelPlan({ ...wide, weights: { bits: 4, groupSize: 128 } });
    expect(bf16.supported && bf16.claimTiles).toBe(true);
    expect(int4.supported && !int4.claimTiles).toBe(true);
  });

  it('an engine over INT4 groups the megakernel cannot cut is refused with the reason, naming the layered engine', () => {
    const config = CONFIGS[0]![1];
    expect(() => build('megakernel', config, 1, { bits: 4, groupSize: 128 })).toThrow(
      /multiples of 2 INT4 groups; use "layered"/,
    );
  });
});
