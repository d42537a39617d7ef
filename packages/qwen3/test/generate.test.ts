/**
 * Generation: streaming, stop tokens and strings, context limits, abort, dispose, queueing, cancellation, options.
 * Most tests drive a scripted engine (next token = a function of the context) through a character tokenizer, so
 * the expected text is known exactly; one group runs the real cpu engine on a small random model.
 */
import { QkIndexError, QkValueError } from '@qk/ops';
import { describe, expect, it } from 'vitest';
import { createCpuEngine } from '../src/engine/cpu.js';
import { QkAbortError, QkBusyError, QkContextError } from '../src/errors.js';
import type { Generation, GenerationResult } from '../src/generation/generation.js';
import { StopStringFilter } from '../src/generation/stop-strings.js';
import { Qwen3Model } from '../src/model.js';
import { randomIds, randomWeights, smallConfig } from './support/random-model.js';
import { type ScriptedEngine, scriptedEngine } from './support/scripted-engine.js';
import { charId, stubTokenizer } from './support/stub-tokenizer.js';

const config = smallConfig({ eosTokenIds: [] });
const STOP = config.vocabSize - 1;

/** Next printable character after the last one: prompt "a" continues "bcdef…". */
const successor = (context: readonly number[]) => (context[context.length - 1]! + 1) % 95;

function scripted(
  nextToken: (context: readonly number[], step: number) => number = successor,
  maxContext = 256,
  patchable = false,
): { model: Qwen3Model; engine: ScriptedEngine } {
  const engine = scriptedEngine(config, maxContext, nextToken, patchable);
  return { model: new Qwen3Model({ config, tokenizer: stubTokenizer(config.vocabSize), engine }), engine };
}

/** `n` printable characters starting at a random letter, and what `successor` continues them with. */
function randomRun(n: number): string {
  const first = 33 + Math.floor(Math.random() * 60);
  return Array.from({ length: n }, (_, i) => String.fromCharCode(32 + ((first + i) % 95))).join('');
}

async function collect(generation: Generation): Promise<{ chunks: string[]; result: GenerationResult }> {
  const chunks: string[] = [];
  const iterator = generation[Symbol.asyncIterator]();
  for (;;) {
    const r = await iterator.next();
    if (r.done) return { chunks, result: r.value };
    chunks.push(r.value);
  }
}

describe('generation with a scripted engine', () => {
  it('streams chunks that add up to the result, which is also the iterator’s done value', async () => {
    const { model } = scripted();
    const run = randomRun(9);
    const generation = model.generate(run.slice(0, 1), { maxTokens: 8 });
    const { chunks, result } = await collect(generation);
    expect(chunks.join('')).toBe(run.slice(1));
    expect(result).toBe(await generation.result);
    expect(result.text).toBe(run.slice(1));
    expect(result.ids).toEqual([...run.slice(1)].map(charId));
    const { stats } = result;
    expect(stats).toMatchObject({
      promptTokens: 1,
      generatedTokens: 8,
      maxTokens: 8,
      finishReason: 'length',
    });
    expect(stats.timeToFirstTokenMs).toBeGreaterThanOrEqual(stats.prefillMs);
    expect(stats.decodeMs).toBeGreaterThanOrEqual(0);
    expect(stats.decodeTokensPerSecond).toBeGreaterThanOrEqual(0);
  });

  it('feeds each token back at the next position with the step index', async () => {
    const { model, engine } = scripted();
    const prompt = randomRun(4);
    await model.generate(prompt, { maxTokens: 4 }).result;
    expect(engine.calls.map((c) => [c.start, c.ids.length, c.step])).toEqual([
      [0, 4, 0],
      [4, 1, 1],
      [5, 1, 2],
      [6, 1, 3],
    ]);
  });

  it('ends at a stop token, which is neither in the text nor in the ids', async () => {
    const { model } = scripted((context, step) => (step === 3 ? STOP : successor(context)));
    const { result } = await collect(model.generate('a', { maxTokens: 50 }));
    expect(result.text).toBe('bcd');
    expect(result.ids).toEqual([...'bcd'].map(charId));
    expect(result.stats.generatedTokens).toBe(4);
    expect(result.stats.finishReason).toBe('stop');
  });

  it('also stops on the config’s EOS ids and extra stop ids', async () => {
    for (const [eos, extra] of [
      [[150], []],
      [[], [150]],
    ] as const) {
      const engine = scriptedEngine(config, 64, (c, step) => (step === 2 ? 150 : successor(c)));
      const model = new Qwen3Model({
        config: { ...config, eosTokenIds: eos },
        tokenizer: stubTokenizer(config.vocabSize),
        engine,
        stopIds: extra,
      });
      const result = await model.generate('a').result;
      expect(result.text).toBe('bc');
      expect(result.stats.finishReason).toBe('stop');
    }
  });

  it('never picks an embedding row the tokenizer has no token for: it redraws with those rows masked', async () => {
    const textVocab = 250;
    const padding = 250 + Math.floor(Math.random() * 49);
    const fallback = Math.floor(Math.random() * 95);
    const engine = scriptedEngine(
      config,
      64,
      (context, step) => (step === 2 ? padding : successor(context)),
      false,
      () => {
        const logits = new Float32Array(config.vocabSize).fill(-5);
        logits[padding] = 10;
        logits[fallback] = 3;
        return logits;
      },
    );
    const model = new Qwen3Model({ config, tokenizer: stubTokenizer(textVocab), engine });
    const result = await model.generate('a', { maxTokens: 3, temperature: 0 }).result;
    expect(result.ids).toEqual([charId('b'), charId('c'), fallback]);
    // The redraw re-ran the same step (same ids, same position) for its logits.
    expect(engine.calls.slice(-2).map((c) => [c.start, c.step])).toEqual([
      [2, 2],
      [2, -1],
    ]);
  });

  it('cuts at a stop string split across tokens and never emits any of it', async () => {
    const { model } = scripted();
    const { chunks, result } = await collect(model.generate('a', { stop: ['def'], maxTokens: 20 }));
    expect(result.text).toBe('bc');
    expect(chunks.join('')).toBe('bc');
    expect(chunks.some((c) => c.includes('d'))).toBe(false);
    expect(result.stats.finishReason).toBe('stop-string');
    // The ids include the tokens that spelled the stop string.
    expect(result.ids).toEqual([...'bcdef'].map(charId));
  });

  it('picks the earliest of several stop strings and releases held text that never completed one', async () => {
    const { model } = scripted();
    expect((await model.generate('a', { stop: ['fg', 'cd'] }).result).text).toBe('b');
    const { chunks, result } = await collect(model.generate('a', { stop: ['dex'], maxTokens: 4 }));
    expect(result.text).toBe('bcde');
    expect(chunks.join('')).toBe('bcde');
    expect(result.stats.finishReason).toBe('length');
  });

  it('refuses an empty prompt and one that leaves no room; clamps maxTokens to the room left', async () => {
    const { model, engine } = scripted(successor, 10);
    expect(() => model.generate('')).toThrow(QkContextError);
    expect(() => model.generate([])).toThrow(/empty/);
    expect(() => model.generate('abcdefghij')).toThrow(QkContextError);
    expect(() => model.generate('abcdefghijk')).toThrow(/11 tokens but the context holds 10/);
    const clamped = await model.generate('abcdefg', { maxTokens: 10 }).result;
    expect(clamped.ids).toHaveLength(3);
    expect(clamped.stats).toMatchObject({ maxTokens: 3, finishReason: 'context' });
    const fits = await model.generate('abcdefg', { maxTokens: 3 }).result;
    expect(fits.stats).toMatchObject({ maxTokens: 3, finishReason: 'length' });
    expect(engine.calls.every((c) => c.start + c.ids.length <= 10)).toBe(true);
  });

  it('an abort mid-generation throws QkAbortError after the chunks already yielded; the model stays usable', async () => {
    const { model } = scripted();
    const prompt = randomRun(3);
    const solo = await model.generate(prompt, { maxTokens: 30 }).result;
    const controller = new AbortController();
    const generation = model.generate(prompt, { maxTokens: 30, signal: controller.signal });
    const chunks: string[] = [];
    const consume = async () => {
      for await (const chunk of generation) {
        chunks.push(chunk);
        if (chunks.length === 3) controller.abort();
      }
    };
    await expect(consume()).rejects.toBeInstanceOf(QkAbortError);
    await expect(generation.result).rejects.toBeInstanceOf(QkAbortError);
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    expect(chunks.length).toBeLessThan(30);
    expect(solo.text.startsWith(chunks.join(''))).toBe(true);
    expect((await model.generate(prompt, { maxTokens: 30 }).result).text).toBe(solo.text);
  });

  it('yields to the event loop between tokens, so a timer can abort a generation nobody iterates', async () => {
    const { model, engine } = scripted(successor, 200_000);
    const controller = new AbortController();
    const generation = model.generate('a', { maxTokens: 100_000, signal: controller.signal });
    setTimeout(() => controller.abort(new Error('user pressed Ctrl-C')), 0);
    const error = await generation.result.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QkAbortError);
    expect((error as Error).message).toContain('user pressed Ctrl-C');
    expect(engine.calls.length).toBeLessThan(100_000);
  });

  it('an already aborted signal rejects without running the engine', async () => {
    const { model, engine } = scripted();
    const generation = model.generate('a', { signal: AbortSignal.abort() });
    await expect(generation.result).rejects.toBeInstanceOf(QkAbortError);
    expect(engine.calls).toHaveLength(0);
  });

  it('queues concurrent generations: the second starts after the first ends and tokens never interleave', async () => {
    const { model, engine } = scripted();
    const p1 = randomRun(2);
    // Another first letter: a prompt that starts as the cache does would reuse its rows (prefix reuse).
    let p2 = randomRun(3);
    while (p2[0] === p1[0]) p2 = randomRun(3);
    const g1 = model.generate(p1, { maxTokens: 6 });
    const g2 = model.generate(p2, { maxTokens: 5 });
    const [r1, r2] = await Promise.all([collect(g1), collect(g2)]);
    expect(r1.chunks.join('')).toBe(successorsOf(p1, 6));
    expect(r2.chunks.join('')).toBe(successorsOf(p2, 5));
    // Six calls for the first (prefill + 5 decodes), then the second's prefill from position 0.
    expect(engine.calls.slice(0, 6).map((c) => c.start)).toEqual([0, 2, 3, 4, 5, 6]);
    expect(engine.calls[6]).toMatchObject({ start: 0, ids: [...p2].map(charId) });
    expect(engine.calls).toHaveLength(11);
    expect(r2.result.stats.queuedMs).toBeGreaterThanOrEqual(0);
  });

  it('a generation aborted while queued gives up its place without letting a later one overtake', async () => {
    const { model, engine } = scripted();
    const controller = new AbortController();
    const g1 = model.generate('a', { maxTokens: 20 });
    const g2 = model.generate('k', { maxTokens: 5, signal: controller.signal });
    const g3 = model.generate('u', { maxTokens: 5 });
    controller.abort();
    await expect(g2.result).rejects.toBeInstanceOf(QkAbortError);
    const [r1, r3] = await Promise.all([g1.result, g3.result]);
    expect(r1.text).toBe(successorsOf('a', 20));
    expect(r3.text).toBe(successorsOf('u', 5));
    expect(engine.calls.slice(0, 20).every((c, i) => c.start === (i === 0 ? 0 : i))).toBe(true);
    expect(engine.calls.filter((c) => c.start === 0).map((c) => c.ids)).toEqual([
      [charId('a')],
      [charId('u')],
    ]);
  });

  it('dispose during a generation ends it with QkBusyError, rejects queued ones, and refuses later calls', async () => {
    const { model, engine } = scripted();
    const running = model.generate('a', { maxTokens: 50 });
    const queued = model.generate('k', { maxTokens: 5 });
    const chunks: string[] = [];
    const consume = async () => {
      for await (const chunk of running) {
        chunks.push(chunk);
        if (chunks.length === 2) model.dispose();
      }
    };
    await expect(consume()).rejects.toThrow(/model was disposed/);
    await expect(running.result).rejects.toBeInstanceOf(QkBusyError);
    await expect(queued.result).rejects.toBeInstanceOf(QkBusyError);
    expect(chunks.join('')).toBe(successorsOf('a', chunks.length));
    expect(engine.disposed).toBe(true);
    expect(model.disposed).toBe(true);
    expect(() => model.generate('a')).toThrow(QkBusyError);
    expect(() => model.chat([{ role: 'user', content: 'hi' }])).toThrow(QkBusyError);
    model.dispose();
  });

  it('leaving a for-await loop early cancels the generation and frees the model', async () => {
    const { model, engine } = scripted();
    const generation = model.generate('a', { maxTokens: 200 });
    for await (const chunk of generation) if (chunk === 'c') break;
    const result = await generation.result;
    expect(result.stats.finishReason).toBe('cancelled');
    expect(engine.calls.length).toBeLessThan(10);
    expect((await model.generate('a', { maxTokens: 3 }).result).text).toBe('bcd');
  });

  it('replays every chunk to each new iterator', async () => {
    const { model } = scripted();
    const generation = model.generate('a', { maxTokens: 5 });
    const first = await collect(generation);
    const second = await collect(generation);
    expect(second.chunks).toEqual(first.chunks);
    expect(second.result).toBe(first.result);
  });

  it('checks its options and prompt ids', () => {
    const { model } = scripted();
    for (const bad of [
      { maxTokens: 0 },
      { maxTokens: 1.5 },
      { temperature: -1 },
      { topP: 0 },
      { topP: 1.5 },
      { topK: -1 },
      { seed: -2 },
    ]) {
      expect(() => model.generate('a', bad), JSON.stringify(bad)).toThrow(QkValueError);
    }
    expect(() => model.generate('a', { stop: 'x' as never })).toThrow(/stop/);
    expect(() => model.generate([1, config.vocabSize])).toThrow(QkIndexError);
    expect(() => model.generate([1, -1])).toThrow(QkIndexError);
    expect(() => model.generate(42 as never)).toThrow(QkValueError);
    expect(() => model.chat([])).toThrow(QkValueError);
  });

  it('chat renders the history with the template, passing the thinking switch', async () => {
    const { model, engine } = scripted();
    const tokenizer = model.tokenizer as ReturnType<typeof stubTokenizer>;
    const messages = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
    ] as const;
    const result = await model.chat(messages, { maxTokens: 2, enableThinking: false }).result;
    const rendered = 'system: be brief\nuser: hi\nassistant: [no-think]';
    expect(tokenizer.lastTemplateOptions).toEqual({ addGenerationPrompt: true, enableThinking: false });
    expect(engine.calls[0]!.ids).toEqual([...rendered].map(charId));
    expect(result.stats.promptTokens).toBe(rendered.length);
    await model.chat(messages, { maxTokens: 1 }).result;
    expect(tokenizer.lastTemplateOptions).toEqual({ addGenerationPrompt: true, enableThinking: true });
  });

  it('patch and variants delegate to a patchable engine and name the engine otherwise', async () => {
    const plain = scripted().model;
    expect(() => plain.patch({ rmsnorm: 'eager' })).toThrow(/"cpu", which has no swappable modules/);
    expect(() => plain.variants()).toThrow(QkValueError);
    const { model, engine } = scripted(successor, 64, true);
    expect(model.variants().rmsnorm).toContain('eager');
    const restore = model.patch({ rmsnorm: 'eager' });
    expect((engine as unknown as { patches: unknown[] }).patches).toHaveLength(1);
    restore();
    expect((engine as unknown as { patches: unknown[] }).patches).toHaveLength(0);
    const running = model.generate('a', { maxTokens: 5 });
    expect(() => model.patch({ rmsnorm: 'eager' })).toThrow(QkBusyError);
    await running.result;
    model.patch({ mlp: 'fused' })();
  });
});

/** What `successor` generates after `prompt`: the next `n` printable characters. */
function successorsOf(prompt: string, n: number): string {
  let last = charId(prompt[prompt.length - 1]!);
  let out = '';
  for (let i = 0; i < n; i++) {
    last = (last + 1) % 95;
    out += String.fromCharCode(32 + last);
  }
  return out;
}

describe('stop-string filter', () => {
  it('holds back exactly the longest suffix that could start a stop string', () => {
    const filter = new StopStringFilter(['<|end|>', 'STOP']);
    expect(filter.push('hello <|')).toEqual({ text: 'hello ', stopped: false });
    expect(filter.push('en')).toEqual({ text: '', stopped: false });
    expect(filter.push('x S')).toEqual({ text: '<|enx ', stopped: false });
    expect(filter.push('TO')).toEqual({ text: '', stopped: false });
    expect(filter.push('P and more')).toEqual({ text: '', stopped: true });
    expect(filter.push('anything')).toEqual({ text: '', stopped: true });
  });

  it('emits, across random chunkings, exactly the text up to the earliest stop string once one is complete', () => {
    for (let trial = 0; trial < 300; trial++) {
      const pick = (n: number) =>
        Array.from({ length: n }, () => 'abc'[Math.floor(Math.random() * 3)]).join('');
      const stops = [pick(1 + Math.floor(Math.random() * 3)), pick(2 + Math.floor(Math.random() * 3))];
      const chunks: string[] = [];
      for (let left = 20; left > 0; ) {
        const n = Math.min(left, 1 + Math.floor(Math.random() * 3));
        chunks.push(pick(n));
        left -= n;
      }
      // Oracle: the generation stops after the first chunk that completes a stop string, cut at its earliest match.
      let expected = '';
      for (const chunk of chunks) {
        expected += chunk;
        const cuts = stops.map((s) => expected.indexOf(s)).filter((i) => i >= 0);
        if (cuts.length > 0) {
          expected = expected.slice(0, Math.min(...cuts));
          break;
        }
      }
      const filter = new StopStringFilter(stops);
      let out = '';
      let stopped = false;
      for (const chunk of chunks) {
        const r = filter.push(chunk);
        out += r.text;
        stopped = r.stopped;
        if (stopped) break;
      }
      if (!stopped) out += filter.end().text;
      expect(out, `${JSON.stringify(stops)} in ${JSON.stringify(chunks)}`).toBe(expected);
    }
  });

  it('ignores empty stop strings', () => {
    expect(new StopStringFilter(['']).end('abc')).toEqual({ text: 'abc', stopped: false });
  });
});

describe('generation with the cpu engine', () => {
  const seed = Math.floor(Math.random() * 1e6);
  const cpuModel = (maxContext = 64) =>
    new Qwen3Model({
      config,
      tokenizer: stubTokenizer(config.vocabSize),
      engine: createCpuEngine(config, randomWeights(config, seed), { maxContext }),
    });

  it('greedy generation follows argmax of the logits, token by token', async () => {
    const model = cpuModel();
    const prompt = randomIds(6, 95, seed + 1);
    const result = await model.generate(prompt, { temperature: 0, maxTokens: 12 }).result;
    const reference = createCpuEngine(config, randomWeights(config, seed), { maxContext: 64 });
    const expected: number[] = [];
    let logits = reference.logits(prompt, 0);
    for (let i = 0; i < 12; i++) {
      let best = 0;
      for (let v = 1; v < logits.length; v++) if (logits[v]! > logits[best]!) best = v;
      if (best === STOP) break;
      expected.push(best);
      logits = reference.logits([best], prompt.length + i);
    }
    expect(result.ids).toEqual(expected);
    expect(result.text).toBe(model.tokenizer.decode(expected));
    model.dispose();
    reference.dispose();
  });

  it('sampling repeats exactly for a seed and differs across seeds', async () => {
    const model = cpuModel();
    const prompt = randomIds(4, 95, seed + 2);
    const options = { temperature: 1.2, topK: 50, topP: 0.95, maxTokens: 10 };
    const a = await model.generate(prompt, { ...options, seed: 5 }).result;
    const b = await model.generate(prompt, { ...options, seed: 5 }).result;
    expect(b.ids).toEqual(a.ids);
    const others = await Promise.all(
      [6, 7, 8, 9].map((s) => model.generate(prompt, { ...options, seed: s }).result),
    );
    expect(others.some((r) => r.ids.join() !== a.ids.join())).toBe(true);
    model.dispose();
  });

  it('two concurrent consumers on one cpu model each get their solo text', async () => {
    const model = cpuModel();
    const [p1, p2] = [randomIds(5, 95, seed + 3), randomIds(7, 95, seed + 4)];
    const solo1 = await model.generate(p1, { temperature: 0, maxTokens: 8 }).result;
    const solo2 = await model.generate(p2, { temperature: 0, maxTokens: 8 }).result;
    const [r1, r2] = await Promise.all([
      collect(model.generate(p1, { temperature: 0, maxTokens: 8 })),
      collect(model.generate(p2, { temperature: 0, maxTokens: 8 })),
    ]);
    expect(r1.chunks.join('')).toBe(solo1.text);
    expect(r2.chunks.join('')).toBe(solo2.text);
    model.dispose();
  });
});

describe('lmScreenFor', () => {
  /** A model whose engine screens its LM head (or not), with the given sampling defaults. */
  const screenedModel = (
    lmScreen: boolean,
    samplingDefaults?: { temperature: number; topK: number; topP: number },
  ) =>
    new Qwen3Model({
      config,
      tokenizer: stubTokenizer(config.vocabSize),
      engine: Object.assign(scriptedEngine(config, 64, successor), { lmScreen }),
      ...(samplingDefaults ? { samplingDefaults } : {}),
    });

  it('says which draws read a screened LM head: greedy ones and top-k 1-64 sampling, over the model defaults', () => {
    const m = screenedModel(true);
    expect(m.lmScreen).toBe(true);
    expect(m.lmScreenFor({ temperature: 0 })).toBe(true);
    expect(m.lmScreenFor({ temperature: 0, topK: 0 })).toBe(true); // greedy: top-k is not read
    expect(m.lmScreenFor()).toBe(true); // Qwen3's defaults: temperature 0.6, top-k 20
    expect(m.lmScreenFor({ topK: 1 })).toBe(true);
    expect(m.lmScreenFor({ topK: 64 })).toBe(true);
    expect(m.lmScreenFor({ topK: 65 })).toBe(false); // drawn on the host, from every logit
    expect(m.lmScreenFor({ topK: 0 })).toBe(false);
    const wide = screenedModel(true, { temperature: 1, topK: 100, topP: 1 });
    expect(wide.lmScreenFor()).toBe(false);
    expect(wide.lmScreenFor({ topK: 10 })).toBe(true);
    expect(wide.lmScreenFor({ temperature: 0 })).toBe(true);
    const plain = screenedModel(false);
    expect([plain.lmScreenFor(), plain.lmScreenFor({ temperature: 0 })]).toEqual([false, false]);
  });

  it('keeps the screen for penalties and min-p (the kernel applies them), not for a logit bias or log-probabilities', () => {
    const m = screenedModel(true);
    expect(m.lmScreenFor({ presencePenalty: 1.5 })).toBe(true);
    expect(m.lmScreenFor({ temperature: 0, repetitionPenalty: 1.1, frequencyPenalty: 0.2 })).toBe(true);
    expect(m.lmScreenFor({ minP: 0.05 })).toBe(true);
    expect(m.lmScreenFor({ presencePenalty: 1.5, topK: 0 })).toBe(false); // drawn on the host
    expect(m.lmScreenFor({ logitBias: { 5: 2 } })).toBe(false);
    expect(m.lmScreenFor({ temperature: 0, logprobs: true })).toBe(false);
    expect(m.lmScreenFor({ topLogprobs: 3 })).toBe(false);
  });
});
