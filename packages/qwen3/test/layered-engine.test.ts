/**
 * The layered CUDA engine against the cpu engine on the same random weights: prefill logits, decode through the
 * captured graph (positions past the prefill, so the device-side length and KV append are exercised), every
 * patch variant, user-function patches and undo, repeatability, and bad input. GPU only: skipped, visibly,
 * where no GPU is usable.
 */
import * as cudaCore from '@qk/cuda-core';
import { cudaAvailable, QkDisposedError, QkValueError, type Tensor, useCudaBackend } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { createCpuEngine } from '../src/engine/cpu.js';
import { createLayeredEngine } from '../src/engine/layered.js';
import { QkContextError } from '../src/errors.js';
import type { Qwen3Config } from '../src/types.js';
import { argmaxOf, closenessOf, toCuda, logitTrace as trace } from './support/engine-checks.js';
import { randomIds, randomWeights, smallConfig } from './support/random-model.js';

useCudaBackend(cudaCore);
const gpu = cudaAvailable();

function engines(config: Qwen3Config, dtype: 'f32' | 'bf16', seed: number) {
  const cpu = createCpuEngine(config, randomWeights(config, seed), { maxContext: 64 });
  const layered = createLayeredEngine(config, toCuda(randomWeights(config, seed, dtype)), { maxContext: 64 });
  return { cpu, layered };
}

describe.skipIf(!gpu)('layered engine (CUDA)', () => {
  const configs: [string, Qwen3Config][] = [
    ['untied', smallConfig()],
    ['tied, MHA, odd vocab', smallConfig({ tieWordEmbeddings: true, numKvHeads: 4, vocabSize: 257 })],
  ];
  for (const [name, config] of configs) {
    it(`matches the cpu engine in f32 through prefill and graph decode (${name})`, () => {
      const { cpu, layered } = engines(config, 'f32', 3);
      const ids = randomIds(20, config.vocabSize, 11);
      const want = trace(cpu, ids, 9);
      const got = trace(layered, ids, 9);
      for (let s = 0; s < want.length; s++) {
        const c = closenessOf(got[s]!, want[s]!);
        expect(c.relL2, `step ${s}`).toBeLessThan(2e-5);
        expect(got[s]!.every(Number.isFinite)).toBe(true);
      }
      cpu.dispose();
      layered.dispose();
    });
  }

  it('prefills a long prompt in chunks (a last chunk shorter than the rest) as the cpu engine does in one pass', () => {
    const config = smallConfig({ numKvHeads: 2 });
    const cpu = createCpuEngine(config, randomWeights(config, 31), { maxContext: 128 });
    const chunked = createLayeredEngine(config, toCuda(randomWeights(config, 31)), {
      maxContext: 128,
      prefillChunk: 13,
    });
    // 61 prompt tokens: chunks of 13, 13, 13, 13 and 9, then decode steps over the chunked cache.
    const ids = randomIds(66, config.vocabSize, 32);
    const want = trace(cpu, ids, 61);
    const got = trace(chunked, ids, 61);
    for (let s = 0; s < want.length; s++) {
      const c = closenessOf(got[s]!, want[s]!);
      expect(c.relL2, `step ${s}`).toBeLessThan(2e-5);
      expect(got[s]!.every(Number.isFinite)).toBe(true);
    }
    expect(() =>
      createLayeredEngine(config, toCuda(randomWeights(config, 31)), { maxContext: 8, prefillChunk: 0 }),
    ).toThrow(QkValueError);
    cpu.dispose();
    chunked.dispose();
  });

  it('nextAsync pauses between prefill chunks (an abort there stops it) and picks the token next picks', async () => {
    const config = smallConfig({ numKvHeads: 2 });
    const options = { maxContext: 128, prefillChunk: 13 };
    const whole = createLayeredEngine(config, toCuda(randomWeights(config, 33)), options);
    const pieces = createLayeredEngine(config, toCuda(randomWeights(config, 33)), options);
    const ids = randomIds(61, config.vocabSize, 34);
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    let pauses = 0;
    const token = await pieces.nextAsync(ids, 0, greedy, 0, async () => {
      pauses++;
    });
    // 61 tokens: four chunks of 13 then one of 9, with a pause after each of the first four.
    expect(pauses).toBe(4);
    expect(token).toBe(whole.next(ids, 0, greedy, 0));
    const stop = new Error('stop');
    await expect(
      pieces.nextAsync(ids, 0, greedy, 0, async () => {
        throw stop;
      }),
    ).rejects.toBe(stop);
    // The abort left one chunk's rows filled: the engine goes on from there as from any shorter prefill.
    expect(pieces.next(ids.slice(13), 13, greedy, 0)).toBe(token);
    whole.dispose();
    pieces.dispose();
  });

  it('decodes across cache-row buckets (one captured graph each) as the cpu engine does', () => {
    // Decode steps at positions 250 … 265 run the graph of the 256-row bucket, then capture and run the 512-row one.
    const config = smallConfig();
    const cpu = createCpuEngine(config, randomWeights(config, 21), { maxContext: 512 });
    const layered = createLayeredEngine(config, toCuda(randomWeights(config, 21)), { maxContext: 512 });
    const ids = randomIds(266, config.vocabSize, 22);
    const want = trace(cpu, ids, 250);
    const got = trace(layered, ids, 250);
    for (let s = 0; s < want.length; s++) {
      const c = closenessOf(got[s]!, want[s]!);
      expect(c.relL2, `step ${s}`).toBeLessThan(2e-5);
    }
    cpu.dispose();
    layered.dispose();
  });

  it('decodes greedily one step ahead: next() picks what logits() gives, also when a call departs from the guess', () => {
    const config = smallConfig();
    const seed = 8;
    const layered = createLayeredEngine(config, toCuda(randomWeights(config, seed)), { maxContext: 64 });
    const reference = createLayeredEngine(config, toCuda(randomWeights(config, seed)), { maxContext: 64 });
    const cpu = createCpuEngine(config, randomWeights(config, seed), { maxContext: 64 });
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    const prompt = randomIds(5, config.vocabSize, 17);
    // Each next() launches the step that feeds its token back; the following call claims it.
    const got = [layered.next(prompt, 0, greedy, 0)];
    for (let p = 5; p < 12; p++) got.push(layered.next([got.at(-1)!], p, greedy, p));
    const want = [argmaxOf(reference.logits(prompt, 0))];
    for (let p = 5; p < 12; p++) want.push(argmaxOf(reference.logits([want.at(-1)!], p)));
    expect(got).toEqual(want);
    cpu.logits([...prompt, ...want.slice(0, -1)], 0);
    // A different id at the guessed position, then logits() while a step is launched ahead: both run after it.
    const other = (got.at(-1)! + 1) % config.vocabSize;
    const a = layered.next([other], 12, greedy, 12);
    expect(a).toBe(argmaxOf(reference.logits([other], 12)));
    const l = layered.logits([a], 13);
    const w = cpu.logits([other, a], 12);
    expect(closenessOf(l, w).relL2).toBeLessThan(2e-5);
    // A step launched ahead is dropped by a patch; decoding goes on from the cache under the new modules.
    reference.logits([a], 13);
    const b = layered.next([a], 14, greedy, 14);
    const wb = reference.logits([a], 14);
    expect(b).toBe(argmaxOf(wb));
    const undo = layered.patch!({ rmsnorm: 'eager' });
    const lc = layered.logits([b], 15);
    const wc = reference.logits([b], 15);
    expect(closenessOf(lc, wc).relL2).toBeLessThan(2e-5);
    undo();
    for (const e of [layered, reference, cpu]) e.dispose();
  });

  it('matches in bf16 within bf16 error and agrees on argmax', () => {
    const config = smallConfig();
    const { cpu, layered } = engines(config, 'bf16', 5);
    const ids = randomIds(24, config.vocabSize, 12);
    const want = trace(cpu, ids, 8);
    const got = trace(layered, ids, 8);
    let agree = 0;
    for (let s = 0; s < want.length; s++) {
      expect(closenessOf(got[s]!, want[s]!).relL2, `step ${s}`).toBeLessThan(3e-2);
      if (argmaxOf(got[s]!) === argmaxOf(want[s]!)) agree++;
    }
    expect(agree / want.length).toBeGreaterThanOrEqual(0.9);
    cpu.dispose();
    layered.dispose();
  });

  it('gives the same logits under every patch variant, and undo restores the default', () => {
    const config = smallConfig();
    const { cpu, layered } = engines(config, 'f32', 7);
    const ids = randomIds(14, config.vocabSize, 13);
    const base = trace(layered, ids, 6);
    const variants = layered.variants!();
    expect(variants.rmsnorm).toEqual(expect.arrayContaining(['fused', 'eager']));
    for (const [kind, names] of Object.entries(variants)) {
      for (const variant of names) {
        const undo = layered.patch!({ [kind]: variant });
        const got = trace(layered, ids, 6);
        undo();
        for (let s = 0; s < base.length; s++) {
          const c = closenessOf(got[s]!, base[s]!);
          expect(c.relL2, `${kind}=${variant} step ${s}`).toBeLessThan(2e-5);
        }
      }
    }
    expect(() => layered.patch!({ rmsnorm: 'nonsense' })).toThrow(QkValueError);
    expect(() => layered.patch!({ nonsense: 'eager' } as never)).toThrow(QkValueError);
    cpu.dispose();
    layered.dispose();
  });

  it('runs a user function patch inside the captured step, and undo removes it', () => {
    const config = smallConfig();
    const { cpu, layered } = engines(config, 'f32', 9);
    const ids = randomIds(10, config.vocabSize, 14);
    const base = trace(layered, ids, 5);
    let calls = 0;
    const undo = layered.patch!({
      rmsnorm: (args: { x: Tensor; out: Tensor }) => {
        calls++;
        args.out.copyFrom(args.x); // not a norm: the logits must change
      },
    } as never);
    const patched = trace(layered, ids, 5);
    expect(calls).toBeGreaterThan(0);
    expect(closenessOf(patched[0]!, base[0]!).relL2).toBeGreaterThan(1e-2);
    undo();
    const restored = trace(layered, ids, 5);
    expect(restored.map((r) => Array.from(r))).toEqual(base.map((r) => Array.from(r)));
    cpu.dispose();
    layered.dispose();
  });

  it('repeats bit for bit, picks with next() like argmax of logits(), and refuses bad input', () => {
    const config = smallConfig();
    const { cpu, layered } = engines(config, 'bf16', 4);
    const ids = randomIds(12, config.vocabSize, 15);
    const a = trace(layered, ids, 4);
    const b = trace(layered, ids, 4);
    expect(b.map((r) => Array.from(r))).toEqual(a.map((r) => Array.from(r)));
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    const first = layered.next(ids.slice(0, 4), 0, greedy, 0);
    const logits = layered.logits(ids.slice(0, 4), 0);
    expect(first).toBe(logits.indexOf(Math.max(...logits)));
    expect(() => layered.logits([config.vocabSize], 0)).toThrow();
    expect(() => layered.logits(randomIds(65, config.vocabSize, 16), 0)).toThrow(QkContextError);
    layered.dispose();
    expect(() => layered.logits([1], 0)).toThrow(QkDisposedError);
    cpu.dispose();
  });
});
