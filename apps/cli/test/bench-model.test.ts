/** The bytes a decode step reads, as the decode bench counts them (the GB/s and % of ceiling columns); its draws. */
import { loadQwen3, PRESETS } from '@qk/qwen3';
import { describe, expect, it, vi } from 'vitest';
import {
  benchModel,
  bytesPerToken,
  samplingLabel,
  structuredBenchModel,
} from '../src/commands/bench-model.js';

describe('bytesPerToken', () => {
  // Qwen3-0.6B: 28 layers of 15,730,944 weights (q/k/v 4,194,304, o 2,097,152, gate/up/down 9,437,184, norms 2,304),
  // the final norm, one embedding row, and the tied LM head of 151,936 × 1,024.
  const c = PRESETS['0.6b'];
  const layers = 28 * 15_730_944;
  const lmHead = 151_936 * 1024;

  it('counts every bf16 weight once, one embedding row, and the KV cache up to the position', () => {
    expect(bytesPerToken(c, 0)).toBe((layers + 1024 + 1024 + lmHead) * 2);
    expect(bytesPerToken(c, 100) - bytesPerToken(c, 0)).toBe(2 * 28 * 8 * 128 * 100 * 2);
  });

  it('counts a screened LM head as its int8 screen: one byte per weight and 16 per row', () => {
    expect(bytesPerToken(c, 0, 2, true)).toBe((layers + 1024 + 1024) * 2 + 151_936 * (1024 + 16));
    expect(bytesPerToken(c, 0, 2, false) - bytesPerToken(c, 0, 2, true)).toBe(153_151_488);
  });

  it('counts quantized projections as the bytes the engine holds, the rest in the float dtype', () => {
    // 28 layers × 15,728,640 projection weights (norms excluded): 880,803,840 bf16 bytes.
    const projections = 28 * 15_728_640;
    const held = 123_456_789;
    expect(bytesPerToken(c, 0) - bytesPerToken(c, 0, 2, false, held)).toBe(projections * 2 - held);
    expect(bytesPerToken(c, 100, 2, false, held) - bytesPerToken(c, 0, 2, false, held)).toBe(
      2 * 28 * 8 * 128 * 100 * 2,
    );
  });
});

describe('benchModel', () => {
  it('decodes greedily unless given sampling, which it labels with the model defaults filled in and passes on', async () => {
    const model = await loadQwen3('tiny', { engine: 'cpu' });
    try {
      expect(samplingLabel(model, { temperature: 0 })).toBe('greedy');
      expect(samplingLabel(model, {})).toBe('temperature 0.6, top-k 20, top-p 0.95, seed 0');
      expect(samplingLabel(model, { topK: 5, seed: 2 })).toBe('temperature 0.6, top-k 5, top-p 0.95, seed 2');
      const spy = vi.spyOn(model, 'generate');
      const greedy = benchModel(model);
      expect(greedy.sampling).toBeUndefined();
      await greedy.generate([1, 2, 3], 4);
      expect(spy.mock.lastCall?.[1]).toEqual({ temperature: 0, maxTokens: 4 });
      const sampled = benchModel(model, { temperature: 0.8, topK: 3 });
      expect(sampled.sampling).toBe('temperature 0.8, top-k 3, top-p 0.95, seed 0');
      const stats = await sampled.generate([1, 2, 3], 5);
      expect(spy.mock.lastCall?.[1]).toEqual({ temperature: 0.8, topK: 3, maxTokens: 5 });
      expect(stats.decodeTokensPerSecond).toBeGreaterThan(0);
      // The cpu engine has no screen: every draw counts the bf16 LM head, and no note.
      expect(sampled.bytesPerToken(0)).toBe(bytesPerToken(model.config, 0, 4));
      expect(sampled.note).toBeUndefined();
      // Runs repeat one prompt: each must prefill it whole, not reuse the previous run's cached rows.
      const prompt = [5, 6, 7, 8, 9, 10];
      await greedy.generate(prompt, 2);
      const repeated = (await greedy.generate(prompt, 2)) as { cachedPromptTokens?: number };
      expect(repeated.cachedPromptTokens).toBe(0);
      expect((await model.generate(prompt, { maxTokens: 1 }).result).stats.cachedPromptTokens).toBe(5);
    } finally {
      model.dispose();
    }
  });
});

describe('structuredBenchModel', () => {
  it('generates greedily from a text prompt, with the schema when given, reporting the grammar time', async () => {
    const model = await loadQwen3('tiny', { engine: 'cpu' });
    const wrapped = structuredBenchModel(model);
    const schema = {
      type: 'object',
      properties: { ok: { type: 'boolean' } },
      required: ['ok'],
      additionalProperties: false,
    };
    try {
      expect(wrapped.engine).toBe('cpu');
      const free = await wrapped.generate('Say: ', 3);
      expect(free.grammarMs).toBe(0);
      expect(free.generatedTokens).toBe(3);
      const constrained = await wrapped.generate('Say: ', 40, schema);
      expect(constrained.grammarMs).toBeGreaterThan(0);
      expect(constrained.finishReason).toBe('stop');
    } finally {
      wrapped.dispose();
    }
    expect(() => model.generate('x')).toThrow(/dispos/);
  }, 120_000);
});
