/**
 * Prefix KV reuse: a generation whose prompt starts with what the cache holds (a chat's next turn) prefills only
 * the rest, and its tokens are exactly those of a cold prefill. The cpu engine on a small random model, wrapped to
 * record every forward pass it runs.
 */
import { describe, expect, it } from 'vitest';
import { createCpuEngine } from '../src/engine/cpu.js';
import { QkAbortError } from '../src/errors.js';
import type { PiecewiseEngine } from '../src/generation/generation.js';
import type { GenerateOptions } from '../src/generation/options.js';
import { PrefixCache } from '../src/generation/prefix-cache.js';
import { Qwen3Model } from '../src/model.js';
import type { Engine, SamplingParams } from '../src/types.js';
import { randomIds, randomWeights, smallConfig } from './support/random-model.js';
import { stubTokenizer } from './support/stub-tokenizer.js';

const config = smallConfig({ eosTokenIds: [] });
const seed = 11;

interface Pass {
  readonly start: number;
  readonly tokens: number;
}

/** A cpu engine that records the start and length of every forward pass. */
function countingEngine(): { engine: Engine; passes: Pass[] } {
  type Piecewise = Engine & PiecewiseEngine;
  const inner = createCpuEngine(config, randomWeights(config, seed), { maxContext: 256 }) as Piecewise;
  const passes: Pass[] = [];
  const engine = {
    name: inner.name,
    config: inner.config,
    dtype: inner.dtype,
    maxContext: inner.maxContext,
    logits(ids: readonly number[], start: number) {
      passes.push({ start, tokens: ids.length });
      return inner.logits(ids, start);
    },
    next(ids: readonly number[], start: number, sampling: SamplingParams, step: number) {
      passes.push({ start, tokens: ids.length });
      return inner.next(ids, start, sampling, step);
    },
    nextAsync(
      ids: readonly number[],
      start: number,
      sampling: SamplingParams,
      step: number,
      between: () => Promise<void>,
    ) {
      passes.push({ start, tokens: ids.length });
      return inner.nextAsync(ids, start, sampling, step, between);
    },
    dispose: () => inner.dispose(),
  } satisfies Piecewise;
  return { engine, passes };
}

function model(prefixCache: boolean) {
  const { engine, passes } = countingEngine();
  return {
    model: new Qwen3Model({ config, tokenizer: stubTokenizer(config.vocabSize), engine, prefixCache }),
    passes,
  };
}

/** Three turns of a conversation: each prompt is the last prompt, its reply, and a new message. */
async function conversation(m: Qwen3Model, options: GenerateOptions): Promise<number[][]> {
  const replies: number[][] = [];
  let prompt = randomIds(20, 95, seed + 1);
  for (let turn = 0; turn < 3; turn++) {
    const { ids } = await m.generate(prompt, { maxTokens: 6, ...options }).result;
    replies.push([...ids]);
    prompt = [...prompt, ...ids, ...randomIds(7, 95, seed + 2 + turn)];
  }
  return replies;
}

describe('prefix KV reuse', () => {
  for (const [name, options] of [
    ['greedy', { temperature: 0 }],
    ['sampled', { temperature: 0.9, topK: 0, topP: 0.95, seed: 5 }],
  ] as const) {
    it(`gives the tokens of a cold prefill (${name}) and prefills only the new suffix`, async () => {
      const warm = model(true);
      const cold = model(false);
      const warmReplies = await conversation(warm.model, options);
      const coldReplies = await conversation(cold.model, options);
      expect(warmReplies).toEqual(coldReplies);
      // Cold: every turn's prefill starts at 0 and runs the whole prompt.
      const coldPrefills = cold.passes.filter((p) => p.tokens > 1);
      expect(coldPrefills.map((p) => p.start)).toEqual([0, 0, 0]);
      // Warm: the second and third prefills start where the cache's rows stop: the previous prompt plus every
      // reply token but the last (which was never fed back), and run only the rest.
      const warmPrefills = warm.passes.filter((p) => p.start === 0 || p.tokens > 1);
      expect(warmPrefills[0]).toEqual({ start: 0, tokens: 20 });
      let promptLength = 20;
      for (let turn = 1; turn < 3; turn++) {
        const reply = warmReplies[turn - 1]!;
        const cached = promptLength + reply.length - 1;
        const next = promptLength + reply.length + 7;
        expect(warmPrefills[turn]).toEqual({ start: cached, tokens: next - cached });
        promptLength = next;
      }
      const prefilled = (passes: Pass[]) => passes.reduce((sum, p) => sum + p.tokens, 0);
      expect(prefilled(warm.passes)).toBeLessThan(prefilled(cold.passes) / 2);
      warm.model.dispose();
      cold.model.dispose();
    });
  }

  it('re-runs the whole prompt when it shares nothing, and at least one token when it shares everything', async () => {
    const { model: m, passes } = model(true);
    const prompt = randomIds(12, 95, seed + 7);
    const first = await m.generate(prompt, { temperature: 0, maxTokens: 3 }).result;
    passes.length = 0;
    const again = await m.generate(prompt, { temperature: 0, maxTokens: 3 }).result;
    expect(again.ids).toEqual(first.ids);
    expect(passes[0]).toEqual({ start: 11, tokens: 1 });
    expect(again.stats.cachedPromptTokens).toBe(11);
    passes.length = 0;
    const other = prompt.map((id) => (id + 1) % 95);
    const fresh = await m.generate(other, { temperature: 0, maxTokens: 3 }).result;
    expect(passes[0]).toEqual({ start: 0, tokens: 12 });
    expect(fresh.stats.cachedPromptTokens).toBe(0);
    // forgetPrefix: the same prompt again runs whole, and gives the same tokens.
    m.forgetPrefix();
    passes.length = 0;
    const forgotten = await m.generate(other, { temperature: 0, maxTokens: 3 }).result;
    expect(passes[0]).toEqual({ start: 0, tokens: 12 });
    expect(forgotten.stats.cachedPromptTokens).toBe(0);
    expect(forgotten.ids).toEqual(fresh.ids);
    m.dispose();
  });

  it('stays correct after a generation aborted half-way through its prefill', async () => {
    const reference = model(false);
    const { model: m } = model(true);
    const prompt = randomIds(40, 95, seed + 9);
    const expected = await reference.model.generate(prompt, { temperature: 0, maxTokens: 5 }).result;
    await m.generate(prompt.slice(0, 10), { temperature: 0, maxTokens: 2 }).result;
    const controller = new AbortController();
    const aborted = m.generate(prompt, { temperature: 0, maxTokens: 5, signal: controller.signal });
    setImmediate(() => controller.abort(new Error('stop')));
    await expect(aborted.result).rejects.toBeInstanceOf(QkAbortError);
    const after = await m.generate(prompt, { temperature: 0, maxTokens: 5 }).result;
    expect(after.ids).toEqual(expected.ids);
    reference.model.dispose();
    m.dispose();
  });

  it('claims the longest shared prefix, keeps one token to run, and forgets on clear', () => {
    const cache = new PrefixCache();
    expect(cache.claim([1, 2, 3])).toBe(0);
    cache.extend([1, 2, 3, 4]);
    expect(cache.claim([1, 2, 9, 9])).toBe(2);
    expect(cache.length).toBe(2);
    cache.extend([3, 4]);
    expect(cache.claim([1, 2, 3, 4])).toBe(3);
    cache.clear();
    expect(cache.claim([1, 2, 3, 4])).toBe(0);
    const off = new PrefixCache(false);
    off.extend([1, 2]);
    expect(off.claim([1, 2, 3])).toBe(0);
  });
});
