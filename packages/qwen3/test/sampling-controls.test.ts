/**
 * The sampling controls end to end on the cpu engine: options and their errors, then generations with penalties,
 * logit bias, min-p, a hand-written constraint and log-probabilities, replayed step by step by an oracle written
 * here (a twin engine's raw logits through the rule as the options document it), greedy and sampled.
 */
import { QkValueError } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import type { LazyStepControls } from '../src/engine/common.js';
import { createCpuEngine } from '../src/engine/cpu.js';
import { pickToken } from '../src/engine/sampling.js';
import type { TokenConstraint } from '../src/generation/constraint.js';
import type { GenerationChunk, PiecewiseEngine } from '../src/generation/generation.js';
import {
  type GenerateOptions,
  QWEN3_SAMPLING_DEFAULTS,
  resolveGenerateOptions,
} from '../src/generation/options.js';
import { Qwen3Model } from '../src/model.js';
import type { Engine, SamplingParams } from '../src/types.js';
import { randomIds, randomWeights, smallConfig } from './support/random-model.js';
import { scriptedEngine } from './support/scripted-engine.js';
import { stubTokenizer } from './support/stub-tokenizer.js';

const config = smallConfig({ eosTokenIds: [] });
/** The tokenizer knows fewer ids than the embedding has rows: the padding must never be chosen. */
const TEXT_VOCAB = 290;
const STOP = TEXT_VOCAB - 1;

function model(seed: number, maxContext = 128): Qwen3Model {
  const engine = createCpuEngine(config, randomWeights(config, seed), { maxContext, vocabLimit: TEXT_VOCAB });
  return new Qwen3Model({ config, tokenizer: stubTokenizer(TEXT_VOCAB), engine });
}

/** A constraint over `allowed(token, step)` that completes after `length` tokens and records what it accepted. */
function ruleConstraint(allowed: (t: number, step: number) => boolean, length: number) {
  const accepted: number[] = [];
  const constraint: TokenConstraint & { accepted: number[] } = {
    accepted,
    nextMask() {
      const mask = new Uint32Array(Math.ceil(config.vocabSize / 32));
      for (let t = 0; t < config.vocabSize; t++)
        if (allowed(t, accepted.length)) mask[t >>> 5]! |= 1 << (t & 31);
      return mask;
    },
    accept(token) {
      if (!allowed(token, accepted.length)) throw new Error(`token ${token} was not allowed`);
      accepted.push(token);
    },
    isComplete: () => accepted.length >= length,
  };
  return constraint;
}

interface OracleStep {
  id: number;
  logprob: number;
  top: number[];
}

/**
 * What a generation must produce: a twin engine's raw logits at each step (teacher-forced on the oracle's own
 * tokens), the controls applied by the documented rule, then argmax or the reference sampler with the step's seed.
 */
function replay(
  seed: number,
  prompt: readonly number[],
  steps: number,
  sampling: SamplingParams,
  allowed: ((t: number, step: number) => boolean) | null,
  topN: number,
): OracleStep[] {
  const twin = createCpuEngine(config, randomWeights(config, seed), { maxContext: 128 });
  const out: OracleStep[] = [];
  const generated: number[] = [];
  let raw = twin.logits(prompt, 0);
  for (let step = 0; step < steps; step++) {
    const counts = new Map<number, number>();
    for (const t of generated) counts.set(t, (counts.get(t) ?? 0) + 1);
    const x = Array.from(raw, (v, t) => {
      if (t >= TEXT_VOCAB || (allowed !== null && !allowed(t, step))) return -Infinity;
      const n = counts.get(t) ?? 0;
      const rep = sampling.repetitionPenalty ?? 1;
      let y = v;
      if (n > 0 || prompt.includes(t)) y = y > 0 ? y / rep : y * rep;
      y = y - (sampling.frequencyPenalty ?? 0) * n - (n > 0 ? (sampling.presencePenalty ?? 0) : 0);
      return Math.fround(y + Math.fround(sampling.logitBias?.get(t) ?? 0));
    });
    const max = Math.max(...x);
    const minP = sampling.minP ?? 0;
    const row = Float32Array.from(x, (v) =>
      minP > 0 && sampling.temperature > 0 && Math.exp((v - max) / sampling.temperature) < minP * (1 - 1e-12)
        ? -Infinity
        : v,
    );
    const id = sampling.temperature === 0 ? x.indexOf(max) : pickToken(row, sampling, step);
    const text = Array.from(raw.subarray(0, TEXT_VOCAB));
    const lse = Math.log(text.reduce((s, v) => s + Math.exp(v), 0));
    const order = text.map((_, i) => i).sort((a, b) => text[b]! - text[a]! || a - b);
    out.push({ id, logprob: text[id]! - lse, top: order.slice(0, topN) });
    generated.push(id);
    raw = twin.logits([id], prompt.length + step);
  }
  twin.dispose();
  return out;
}

async function collectChunks(g: AsyncIterable<GenerationChunk>): Promise<GenerationChunk[]> {
  const chunks: GenerationChunk[] = [];
  for await (const c of g) chunks.push(c);
  return chunks;
}

describe('generation options of the sampling controls', () => {
  const resolve = (o: GenerateOptions) => resolveGenerateOptions('test', o, QWEN3_SAMPLING_DEFAULTS, 300);

  it('leaves every control off by default and converts a logit-bias object to a map', () => {
    const plain = resolve({});
    expect(plain.sampling).toEqual({ temperature: 0.6, topK: 20, topP: 0.95, seed: 0 });
    expect(plain.topLogprobs).toBeNull();
    expect(plain.constraint).toBeUndefined();
    const r = resolve({ logitBias: { '5': -100, '17': 2.5, '40': 0 }, topLogprobs: 3, presencePenalty: 1.5 });
    expect([...r.sampling.logitBias!]).toEqual([
      [5, -100],
      [17, 2.5],
    ]);
    expect(r.topLogprobs).toBe(3); // topLogprobs implies logprobs
    expect(r.sampling.presencePenalty).toBe(1.5);
    expect(resolve({ logprobs: true }).topLogprobs).toBe(0);
  });

  it('refuses each control out of range with a QkValueError naming it', () => {
    const bad: [GenerateOptions, string][] = [
      [{ presencePenalty: 2.5 }, 'presencePenalty'],
      [{ presencePenalty: Number.NaN }, 'presencePenalty'],
      [{ frequencyPenalty: -3 }, 'frequencyPenalty'],
      [{ repetitionPenalty: 0 }, 'repetitionPenalty'],
      [{ repetitionPenalty: Infinity }, 'repetitionPenalty'],
      [{ minP: 1.01 }, 'minP'],
      [{ minP: -0.5 }, 'minP'],
      [{ logitBias: { abc: 1 } }, 'logitBias'],
      [{ logitBias: { '3': 101 } }, 'logitBias'],
      [{ logitBias: new Map([[-1, 1]]) }, 'logitBias'],
      [{ logitBias: { '300': 1 } }, 'logitBias'],
      [{ logprobs: 'yes' as never }, 'logprobs'],
      [{ topLogprobs: 21 }, 'topLogprobs'],
      [{ topLogprobs: 1.5 }, 'topLogprobs'],
      [{ constraint: {} as never }, 'constraint'],
    ];
    for (const [options, arg] of bad) {
      let caught: unknown;
      try {
        resolve(options);
      } catch (e) {
        caught = e;
      }
      expect(caught, arg).toBeInstanceOf(QkValueError);
      expect((caught as QkValueError).arg).toBe(arg);
    }
  });
});

describe('generation with sampling controls on the cpu engine', () => {
  const cases: [string, GenerateOptions, ((t: number, s: number) => boolean) | null][] = [
    [
      'greedy with penalties and bias',
      {
        temperature: 0,
        presencePenalty: 1.5,
        frequencyPenalty: 0.5,
        repetitionPenalty: 1.3,
        logitBias: { '7': 3, '11': -100 },
      },
      null,
    ],
    [
      'sampled with penalties, min-p and top-k',
      { temperature: 0.9, topK: 40, topP: 0.9, minP: 0.05, presencePenalty: 0.8, repetitionPenalty: 1.1 },
      null,
    ],
    [
      'greedy under a rotating constraint',
      { temperature: 0, presencePenalty: 2 },
      (t, s) => t < 200 && (t + s) % 7 === 0,
    ],
    [
      'sampled under a constraint with a bias',
      { temperature: 1.2, topK: 0, topP: 1, logitBias: new Map([[14, 5]]) },
      (t, s) => t % (2 + (s % 3)) === 0,
    ],
  ];
  for (const [name, options, allowed] of cases) {
    it(`produces the oracle's tokens and log-probabilities: ${name}`, async () => {
      const seed = 1 + Math.floor(Math.random() * 1000);
      const prompt = randomIds(6, TEXT_VOCAB - 1, seed);
      const steps = 7;
      const constraint = allowed === null ? undefined : ruleConstraint(allowed, steps);
      const m = model(seed);
      const generation = m.generate(prompt, {
        ...options,
        seed,
        maxTokens: steps,
        topLogprobs: 4,
        ...(constraint === undefined ? {} : { constraint }),
      });
      const chunks = await collectChunks(generation.chunks());
      const result = await generation.result;
      const resolved = resolveGenerateOptions('test', { ...options, seed }, QWEN3_SAMPLING_DEFAULTS, 300);
      const want = replay(seed, prompt, steps, resolved.sampling, allowed, 4);
      // The generation ends at the stop token (not among its ids); the oracle draws on past it.
      const stopped = want.findIndex((w) => w.id === STOP);
      const wantIds = (stopped < 0 ? want : want.slice(0, stopped)).map((w) => w.id);
      expect(result.ids, `seed ${seed}`).toEqual(wantIds);
      expect(result.stats.finishReason).toBe(constraint === undefined && stopped < 0 ? 'length' : 'stop');
      if (constraint !== undefined)
        expect(constraint.accepted.slice(0, result.ids.length)).toEqual(result.ids);
      result.logprobs!.forEach((lp, i) => {
        expect(lp.id).toBe(want[i]!.id);
        expect(lp.logprob).toBeCloseTo(want[i]!.logprob, 4);
        expect(lp.topLogprobs!.map((t) => t.id)).toEqual(want[i]!.top);
      });
      // The chunks carry the same tokens, in order, with the same log-probabilities.
      expect(chunks.flatMap((c) => c.tokens)).toEqual(result.logprobs);
      expect(chunks.map((c) => c.text).join('')).toBe(result.text);
      m.dispose();
    });
  }

  it('counts the whole prompt for the repetition penalty when the cache already holds its start', async () => {
    const seed = 77;
    const m = model(seed);
    const first = randomIds(8, TEXT_VOCAB - 1, 5);
    await m.generate(first, { temperature: 0, maxTokens: 2 }).result;
    const prompt = [...first, ...randomIds(3, TEXT_VOCAB - 1, 6)];
    const options = { temperature: 0, repetitionPenalty: 3, maxTokens: 5 };
    const result = await m.generate(prompt, options).result;
    expect(result.stats.cachedPromptTokens).toBeGreaterThan(0);
    const resolved = resolveGenerateOptions('test', options, QWEN3_SAMPLING_DEFAULTS, 300);
    expect(result.ids).toEqual(replay(seed, prompt, 5, resolved.sampling, null, 0).map((w) => w.id));
    m.dispose();
  });

  it('ends with a QkValueError naming the constraint when its mask allows nothing printable', async () => {
    for (const allowed of [() => false, (t: number) => t >= TEXT_VOCAB]) {
      const m = model(3);
      const constraint = ruleConstraint(allowed, 5);
      const error = await m.generate([1, 2, 3], { constraint, maxTokens: 4 }).result.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(QkValueError);
      expect((error as QkValueError).arg).toBe('constraint');
      m.dispose();
    }
  });

  it('passes on the error of a constraint that refuses the token it is told about', async () => {
    const m = model(4);
    const constraint: TokenConstraint = {
      nextMask: () => null,
      accept: (t) => {
        throw new RangeError(`refused ${t}`);
      },
      isComplete: () => false,
    };
    await expect(m.generate([5, 6], { constraint, temperature: 0 }).result).rejects.toThrow(RangeError);
    m.dispose();
  });

  it('engine.next refuses controls it would ignore; engine.choose refuses malformed step controls', () => {
    const engine = createCpuEngine(config, randomWeights(config, 1), { maxContext: 16 });
    const sampling = { temperature: 0, topK: 0, topP: 1, seed: 0, presencePenalty: 1 };
    expect(() => engine.next([1, 2], 0, sampling, 0)).toThrow(QkValueError);
    const history = { prompt: [1, 2], generated: [] };
    for (const [controls, arg] of [
      [{ history, mask: [1, 2], topLogprobs: null }, 'controls.mask'],
      [{ history, mask: null, topLogprobs: 21 }, 'controls.topLogprobs'],
      [{ history: { prompt: [1] }, mask: null, topLogprobs: null }, 'controls.history'],
    ] as const) {
      let caught: unknown;
      try {
        engine.choose!([1, 2], 0, sampling, 0, controls as never);
      } catch (e) {
        caught = e;
      }
      expect(caught, arg).toBeInstanceOf(QkValueError);
      expect((caught as QkValueError).arg).toBe(arg);
    }
    expect(
      engine.choose!([1, 2], 0, sampling, 0, { history, mask: null, topLogprobs: 2 }).topLogprobs,
    ).toHaveLength(2);
    engine.dispose();
  });

  it('applies the controls through logits() on an engine without choose()', async () => {
    const logits = Float32Array.from(randomIds(config.vocabSize, 1000, 9), (v) => v / 100);
    const engine = scriptedEngine(
      config,
      64,
      () => 0,
      false,
      () => logits.slice(),
    );
    const m = new Qwen3Model({ config, tokenizer: stubTokenizer(TEXT_VOCAB), engine });
    const allowed = (t: number) => t % 5 === 1 && t < 100;
    const result = await m.generate([3], {
      temperature: 0,
      maxTokens: 3,
      constraint: ruleConstraint(allowed, 3),
      frequencyPenalty: 2,
    }).result;
    // Each step takes the best allowed token not yet penalised below another (scores fall by 2 per use).
    const scores = Array.from(logits, (v, t) => (allowed(t) ? v : -Infinity));
    const expected: number[] = [];
    for (let s = 0; s < 3; s++) {
      const best = scores.indexOf(Math.max(...scores));
      expected.push(best);
      scores[best] = Math.fround(scores[best]! - 2);
    }
    expect(result.ids).toEqual(expected);
    m.dispose();
  });

  it('streams plain text as before when nothing is asked for, with token ids in the chunks', async () => {
    const m = model(12);
    const prompt = randomIds(4, TEXT_VOCAB - 1, 12);
    const generation = m.generate(prompt, { temperature: 0, maxTokens: 5 });
    const chunks = await collectChunks(generation.chunks());
    const result = await generation.result;
    expect(result.logprobs).toBeUndefined();
    const tokens = chunks.flatMap((c) => c.tokens);
    expect(tokens.map((t) => t.id)).toEqual(result.ids);
    expect(tokens.every((t) => t.logprob === undefined)).toBe(true);
    expect(result.ids).toEqual(
      replay(12, prompt, result.ids.length, { temperature: 0, topK: 0, topP: 1, seed: 0 }, null, 0).map(
        (w) => w.id,
      ),
    );
    expect(result.ids.includes(STOP)).toBe(false);
    m.dispose();
  });
});

describe('controls made after the step is queued', () => {
  type Piecewise = Engine & PiecewiseEngine;

  /** `inner` (a piecewise engine) with `onChoose` called at the start of each `chooseAsync`, with its arguments. */
  function watched(
    inner: Piecewise,
    onChoose: (step: number, controls: LazyStepControls) => void,
  ): Piecewise {
    return {
      name: inner.name,
      config: inner.config,
      dtype: inner.dtype,
      maxContext: inner.maxContext,
      logits: (ids: readonly number[], start: number) => inner.logits(ids, start),
      next: (ids: readonly number[], start: number, s: SamplingParams, step: number) =>
        inner.next(ids, start, s, step),
      nextAsync: (
        ids: readonly number[],
        start: number,
        s: SamplingParams,
        step: number,
        between: () => Promise<void>,
      ) => inner.nextAsync(ids, start, s, step, between),
      chooseAsync(
        ids: readonly number[],
        start: number,
        s: SamplingParams,
        step: number,
        controls: LazyStepControls,
        between: () => Promise<void>,
      ) {
        onChoose(step, controls);
        return inner.chooseAsync!(ids, start, s, step, controls, between);
      },
      dispose: () => inner.dispose(),
    } satisfies Piecewise;
  }

  const cpu = (seed: number) =>
    createCpuEngine(config, randomWeights(config, seed), {
      maxContext: 64,
      vocabLimit: TEXT_VOCAB,
    }) as Piecewise;

  /**
   * A piecewise engine hands its `chooseAsync` a function instead of the controls, and calls it once the step's
   * forward pass is queued: the constraint's mask is then computed while the device works. Recorded here on the cpu
   * engine wrapped to log when each step starts and when its controls are made.
   */
  it('asks the constraint for each mask once, inside the step, after the forward pass starts', async () => {
    const events: string[] = [];
    const engine = watched(cpu(31), (step, controls) => {
      events.push(`step ${step}`);
      expect(typeof controls).toBe('function');
    });
    const rule = ruleConstraint((t) => t % 3 === 1, 5);
    const constraint: TokenConstraint = {
      nextMask: () => {
        events.push(`mask ${rule.accepted.length}`);
        return rule.nextMask();
      },
      accept: (t) => rule.accept(t),
      isComplete: () => rule.isComplete(),
    };
    const m = new Qwen3Model({ config, tokenizer: stubTokenizer(TEXT_VOCAB), engine });
    const prompt = randomIds(6, TEXT_VOCAB - 1, 31);
    const result = await m.generate(prompt, { temperature: 0, maxTokens: 10, constraint }).result;
    expect(result.ids.length).toBe(5);
    expect(result.ids.every((t) => t % 3 === 1)).toBe(true);
    expect(events).toEqual([0, 1, 2, 3, 4].flatMap((s) => [`step ${s}`, `mask ${s}`]));
    // The same tokens as the controls made first (the reference engine's own choose).
    const twin = model(31, 64);
    const eager = await twin.generate(prompt, {
      temperature: 0,
      maxTokens: 10,
      constraint: ruleConstraint((t) => t % 3 === 1, 5),
    }).result;
    expect(result.ids).toEqual(eager.ids);
    twin.dispose();
    m.dispose();
  });

  /**
   * The maker says when its controls ask for no log-probabilities (`maskOnly`): an engine may then take the token in
   * a kernel that reads the mask as it comes and applies the logit controls it can (the megakernel: penalties and
   * min-p). Log-probabilities rule it out; logit controls leave the choice to the engine.
   */
  it('marks a maker maskOnly exactly when the job asks for no log-probabilities', async () => {
    const cases: [string, Partial<GenerateOptions>, boolean, boolean][] = [
      ['a constraint alone', {}, true, true],
      ['a constraint and log-probabilities', { logprobs: true, topLogprobs: 2 }, true, false],
      ['a constraint and a presence penalty', { presencePenalty: 0.5 }, true, true],
      ['a constraint and min-p', { minP: 0.1, temperature: 0.7 }, true, true],
      ['a presence penalty alone', { presencePenalty: 0.5 }, false, true],
      ['a logit bias and log-probabilities', { logitBias: { 3: 2 }, logprobs: true }, false, false],
    ];
    for (const [label, options, constrained, want] of cases) {
      const seen: (boolean | undefined)[] = [];
      const engine = watched(cpu(41), (_step, controls) => {
        seen.push(typeof controls === 'function' ? controls.maskOnly : undefined);
      });
      const m = new Qwen3Model({ config, tokenizer: stubTokenizer(TEXT_VOCAB), engine });
      const prompt = randomIds(5, TEXT_VOCAB - 1, 41);
      const constraint = ruleConstraint((t) => t % 2 === 0, 4);
      await m.generate(prompt, {
        temperature: 0,
        maxTokens: constrained ? 6 : 4,
        ...options,
        ...(constrained ? { constraint } : {}),
      }).result;
      expect(seen.length, label).toBe(4);
      expect(
        seen.every((v) => v === want),
        label,
      ).toBe(true);
      m.dispose();
    }
  });
});
