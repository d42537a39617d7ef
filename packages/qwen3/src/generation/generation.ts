/**
 * A running generation: the token loop (prefill, then one decode step per token, yielding to the event loop in
 * between so abort signals and Ctrl-C are seen) and the `Generation` object that streams its text.
 */

import type { LazyStepControls, StepControlsMaker } from '../engine/common.js';
import {
  chooseToken,
  hasLogitControls,
  maskWordsFor,
  noTokenAllowed,
  pickToken,
} from '../engine/sampling.js';
import { QkAbortError, QkBusyError } from '../errors.js';
import type {
  Engine,
  Qwen3Tokenizer,
  SampledToken,
  SamplingParams,
  StepControls,
  TokenHistory,
} from '../types.js';
import type { TokenConstraint } from './constraint.js';
import type { PrefixCache } from './prefix-cache.js';
import type { Turn } from './queue.js';
import { StopStringFilter } from './stop-strings.js';

/**
 * Why a generation ended: a stop token (`'stop'`), a user stop string (`'stop-string'`), `maxTokens` reached
 * (`'length'`), the context full before `maxTokens` (`'context'`), or the consumer leaving its `for await` loop
 * early (`'cancelled'`). An abort is not a finish reason: it rejects with `QkAbortError`.
 */
export type FinishReason = 'stop' | 'stop-string' | 'length' | 'context' | 'cancelled';

/** Measurements of one generation. Times are wall-clock milliseconds. */
export interface GenerationStats {
  /** Tokens of the prompt (for chat: of the whole rendered conversation). */
  readonly promptTokens: number;
  /** Leading prompt tokens whose KV rows were reused from the previous generation, so not prefilled again. */
  readonly cachedPromptTokens: number;
  /** Tokens the model produced, a final stop token included (so it can exceed `ids.length` by one). */
  readonly generatedTokens: number;
  /** The effective token limit: `maxTokens`, or less when the prompt left less room in the context. */
  readonly maxTokens: number;
  /**
   * Time spent turning `schema`/`grammar`/`tools` into the constraint (compiling the grammar, or finding it among
   * those compiled before, and starting its matcher); 0 for an unconstrained generation. Part of
   * `timeToFirstTokenMs`.
   */
  readonly grammarMs: number;
  /** Time spent waiting for earlier generations on the same model. */
  readonly queuedMs: number;
  /** The prompt's forward pass, which also picks the first token. */
  readonly prefillMs: number;
  /** From the call to `generate()`/`chat()` to the first token: tokenising, queueing and prefill. */
  readonly timeToFirstTokenMs: number;
  /** From the first token to the last: `generatedTokens − 1` decode steps. */
  readonly decodeMs: number;
  /** `(generatedTokens − 1) / decodeMs`, per second; 0 when fewer than two tokens were produced. */
  readonly decodeTokensPerSecond: number;
  readonly finishReason: FinishReason;
}

/** What a finished generation produced. */
export interface GenerationResult {
  /** The generated text, without a stop token's text and cut before a user stop string. */
  readonly text: string;
  /**
   * The generated ids, without a final stop token. A user stop string cuts the text but not the ids: they
   * include the tokens that spelled it.
   */
  readonly ids: readonly number[];
  /**
   * When `logprobs` or `topLogprobs` was asked for: per id of {@link ids}, its log-probability under the model's raw
   * distribution and the most likely alternatives.
   */
  readonly logprobs?: readonly SampledToken[];
  readonly stats: GenerationStats;
}

/**
 * One piece of a generation's stream as {@link Generation.chunks} delivers it: the text that became final and the
 * tokens produced since the previous chunk (with their log-probabilities when asked for). Text and tokens do not
 * align one to one: a token can end inside a UTF-8 character or a possible stop string, and its text then comes
 * with a later chunk; the last chunk may carry text and no token.
 */
export interface GenerationChunk {
  readonly text: string;
  readonly tokens: readonly SampledToken[];
}

/** Where a producer delivers text, and how it learns that the consumer left. */
export interface GenerationSink {
  /** Delivers `chunk` of text and the token that produced it (absent for text that no new token came with). */
  push(chunk: string, token?: SampledToken): void;
  /** True once every iterator that was reading left its loop early (`break`, `return`, a thrown error). */
  readonly cancelled: boolean;
}

/**
 * The text of a generation as it is produced: iterate it (`for await (const chunk of generation)`) for chunks,
 * or await {@link Generation.result} for the whole text, ids and stats. The iterator's final (`done`) value is
 * that same result. The work starts when the generation is created, whether or not anyone reads it; each new
 * iterator replays the chunks from the beginning. Leaving a `for await` loop early cancels the generation
 * (`finishReason: 'cancelled'`).
 */
export class Generation implements AsyncIterable<string> {
  /** Resolves when the generation ends; rejects with its error (`QkAbortError`, `QkBusyError`, …). */
  readonly result: Promise<GenerationResult>;
  readonly #chunks: GenerationChunk[] = [];
  #state: 'running' | 'done' | 'failed' = 'running';
  #value: GenerationResult | undefined;
  #error: unknown;
  #wakers: (() => void)[] = [];
  #cancelled = false;

  /**
   * Runs `producer` (on the next microtask) with a sink for its chunks. `Qwen3Model.generate` and `chat` create
   * generations; wrap your own producer to give other sources the same streaming interface.
   */
  constructor(producer: (sink: GenerationSink) => Promise<GenerationResult>) {
    const self = this;
    const sink: GenerationSink = {
      push(chunk, token) {
        if (chunk.length === 0 && token === undefined) return;
        self.#chunks.push({ text: chunk, tokens: token === undefined ? [] : [token] });
        self.#wake();
      },
      get cancelled() {
        return self.#cancelled;
      },
    };
    this.result = Promise.resolve()
      .then(() => producer(sink))
      .then(
        (value) => {
          this.#value = value;
          this.#state = 'done';
          this.#wake();
          return value;
        },
        (error: unknown) => {
          this.#error = error;
          this.#state = 'failed';
          this.#wake();
          throw error;
        },
      );
    // Iterating users see the error from the iterator; without this, an unawaited `result` would crash the process.
    this.result.catch(() => {});
  }

  #wake(): void {
    const wakers = this.#wakers;
    this.#wakers = [];
    for (const wake of wakers) wake();
  }

  /** The text chunks, then (as the iterator's return value) the {@link GenerationResult}. */
  async *[Symbol.asyncIterator](): AsyncGenerator<string, GenerationResult, undefined> {
    const chunks = this.chunks();
    try {
      for (;;) {
        const r = await chunks.next();
        if (r.done) return r.value;
        if (r.value.text.length > 0) yield r.value.text;
      }
    } finally {
      // Leaving this loop early must leave the chunk loop too: that is what cancels the generation.
      await chunks.return(undefined as never);
    }
  }

  /**
   * The stream with its tokens: one {@link GenerationChunk} per generated token (its text may be empty while a
   * character or a possible stop string is incomplete), then the {@link GenerationResult} as the return value.
   * Leaving the loop early cancels the generation, as with the text iterator.
   */
  async *chunks(): AsyncGenerator<GenerationChunk, GenerationResult, undefined> {
    let next = 0;
    let completed = false;
    try {
      for (;;) {
        while (next < this.#chunks.length) yield this.#chunks[next++]!;
        if (this.#state !== 'running') break;
        await new Promise<void>((wake) => this.#wakers.push(wake));
      }
      completed = true;
      if (this.#state === 'failed') throw this.#error;
      return this.#value!;
    } finally {
      if (!completed) this.#cancelled = true;
    }
  }
}

/** Everything the token loop needs from its model, fixed when `generate()` is called. */
export interface GenerationJob {
  readonly engine: Engine;
  readonly tokenizer: Pick<Qwen3Tokenizer, 'createStream'>;
  readonly stopIds: ReadonlySet<number>;
  /** Ids at or above this are rows of the embedding that the tokenizer has no token for; they are never chosen. */
  readonly textVocabSize: number;
  readonly promptIds: readonly number[];
  /** The effective limit (already clamped to the context). */
  readonly maxTokens: number;
  /** True when `maxTokens` was clamped to the room left in the context. */
  readonly contextLimited: boolean;
  readonly sampling: SamplingParams;
  readonly stop: readonly string[];
  readonly signal: AbortSignal | undefined;
  /** This generation's place in its model's queue, taken when `generate()` was called. */
  readonly turn: Turn;
  readonly isDisposed: () => boolean;
  /** `performance.now()` when `generate()` was called. */
  readonly calledAt: number;
  /** What the engine's cache holds, for prefix reuse; absent: every prefill starts at position 0. */
  readonly prefix?: PrefixCache;
  /** Restricts each step's tokens (see {@link TokenConstraint}); absent: none. */
  readonly constraint?: TokenConstraint;
  /** How long making {@link constraint} took (reported as `stats.grammarMs`); absent: 0. */
  readonly grammarMs?: number;
  /** Log-probabilities to report: alternatives per token, or absent / `null` for none. */
  readonly topLogprobs?: number | null;
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

function disposedError(): QkBusyError {
  return new QkBusyError('model was disposed; load it again with loadQwen3() to generate more.');
}

function throwIfInterrupted(job: GenerationJob): void {
  if (job.isDisposed()) throw disposedError();
  if (job.signal?.aborted) throw new QkAbortError('generation', job.signal.reason);
}

/** Waits for this generation's turn on the model, giving up early when the signal fires. */
async function waitForTurn(job: GenerationJob): Promise<() => void> {
  const { signal, turn } = job;
  if (signal === undefined) {
    await turn.ready;
    return turn.release;
  }
  let onAbort: (() => void) | undefined;
  try {
    await Promise.race([
      turn.ready,
      new Promise<never>((_, reject) => {
        onAbort = () => reject(new QkAbortError('generation', signal.reason));
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
    return turn.release;
  } catch (e) {
    turn.release();
    throw e;
  } finally {
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
  }
}

/**
 * The engine's pick for the token after `ids`. The embedding usually has more rows than the tokenizer has tokens
 * (151936 against 151669 for Qwen3): those padding rows are untrained in real checkpoints, but random weights pick
 * them now and then. Engines built by `loadQwen3` mask them (`vocabLimit`); for any other engine that returns one,
 * the step runs again for its logits and the token is drawn with the padding masked, by the same rule and seed, so
 * the text never holds an id that cannot be printed.
 */
/**
 * An engine that can run a step in pieces, awaiting `between()` in between (the cpu engine: after every layer; the
 * GPU engines: after every prefill chunk), so an abort stops a long prefill within a piece (issue #51: within 1 s).
 * `between()` rejects to stop; the engine then holds valid rows only up to the pieces it finished.
 */
export interface PiecewiseEngine {
  nextAsync(
    ids: readonly number[],
    start: number,
    sampling: SamplingParams,
    step: number,
    between: () => Promise<void>,
  ): Promise<number>;
  /**
   * `Engine.choose` in pieces, as `nextAsync` is `next` in pieces. Controls given as a function are made once, after
   * the step's forward pass is queued (see `LazyStepControls`).
   */
  chooseAsync?(
    ids: readonly number[],
    start: number,
    sampling: SamplingParams,
    step: number,
    controls: LazyStepControls,
    between: () => Promise<void>,
  ): Promise<SampledToken>;
  /**
   * The generation has ended: steps the engine queued ahead for it are dropped now (a kernel step waiting for a mask
   * that will not come stops), not when the next call supersedes them.
   */
  dropQueued?(): void;
}

function isPiecewise(engine: unknown): engine is PiecewiseEngine {
  return typeof (engine as Partial<PiecewiseEngine>).nextAsync === 'function';
}

/** Whether the job's steps go through `Engine.choose` (controls, a constraint or log-probabilities). */
function needsControls(job: GenerationJob): boolean {
  return (
    hasLogitControls(job.sampling) ||
    job.constraint !== undefined ||
    (job.topLogprobs !== undefined && job.topLogprobs !== null)
  );
}

/**
 * The engine's pick for the token after `ids`, with the controls `controlsOf` makes when the job has any (see
 * {@link needsControls}). An engine that runs steps in pieces makes them after it has queued the forward pass, so a
 * constraint's mask is computed while the device works; the others get them first. Made once either way.
 */
async function nextToken(
  job: GenerationJob,
  ids: readonly number[],
  start: number,
  step: number,
  controlsOf: StepControlsMaker | null,
): Promise<SampledToken> {
  const { engine, sampling } = job;
  // Where the engine allows it, abort signals and Ctrl-C are seen between layers, not only between tokens.
  const between = async () => {
    await yieldToEventLoop();
    throwIfInterrupted(job);
  };
  let made: StepControls | null = null;
  const controls = Object.assign(
    (): StepControls => {
      made ??= controlsOf!();
      return made;
    },
    { maskOnly: controlsOf?.maskOnly === true },
  );
  let choice: SampledToken;
  if (controlsOf === null) {
    const id = isPiecewise(engine)
      ? await engine.nextAsync(ids, start, sampling, step, between)
      : engine.next(ids, start, sampling, step);
    choice = { id };
  } else if (isPiecewise(engine) && engine.chooseAsync !== undefined) {
    choice = await engine.chooseAsync(ids, start, sampling, step, controls, between);
  } else if (engine.choose !== undefined) {
    choice = engine.choose(ids, start, sampling, step, controls());
  } else {
    // An engine without controls of its own: its logits through the TypeScript reference.
    const logits = engine.logits(ids, start);
    return chooseToken(logits, sampling, step, controls(), job.textVocabSize);
  }
  if (choice.id < job.textVocabSize || job.stopIds.has(choice.id)) return choice;
  const logits = engine.logits(ids, start);
  if (controlsOf !== null) return chooseToken(logits, sampling, step, controls(), job.textVocabSize);
  logits.fill(-Infinity, job.textVocabSize);
  return { id: pickToken(logits, sampling, step) };
}

/**
 * What makes the controls of step `step` (see {@link nextToken}): the constraint's mask (checked to allow a printable
 * token), the history and the log-probabilities asked for; `null` when the job needs none. Call it after the
 * constraint has accepted the previous step's token.
 */
function stepControls(job: GenerationJob, history: TokenHistory, step: number): StepControlsMaker | null {
  if (!needsControls(job)) return null;
  const make = () => makeStepControls(job, history, step);
  // No log-probabilities: an engine may take the token in a kernel that reads the mask as it comes (and applies the
  // sampling's logit controls itself, where it can).
  const maskOnly = job.topLogprobs === undefined || job.topLogprobs === null;
  return Object.assign(make, { maskOnly });
}

function makeStepControls(job: GenerationJob, history: TokenHistory, step: number): StepControls {
  let mask: Uint32Array | null = null;
  if (job.constraint !== undefined) {
    mask = job.constraint.nextMask();
    if (mask !== null) {
      if (!(mask instanceof Uint32Array)) {
        throw new TypeError('constraint.nextMask() must return a Uint32Array bitset or null.');
      }
      const vocab = job.engine.config.vocabSize;
      if (!maskWordsFor(mask, vocab, Math.min(job.textVocabSize, vocab)).any)
        throw noTokenAllowed('generate', step);
      // The constraint may reuse its array: the engine reads a copy.
      mask = mask.slice();
    }
  }
  return { history, mask, topLogprobs: job.topLogprobs ?? null };
}

/** The token loop of one generation: waits its turn, prefills, decodes until a finish reason, streams to `sink`. */
export async function runGeneration(job: GenerationJob, sink: GenerationSink): Promise<GenerationResult> {
  const enqueuedAt = performance.now();
  const release = await waitForTurn(job);
  try {
    throwIfInterrupted(job);
    const { promptIds } = job;
    const stream = job.tokenizer.createStream();
    const filter = new StopStringFilter(job.stop);
    const ids: number[] = [];
    let text = '';
    const emit = (chunk: string, token?: SampledToken) => {
      text += chunk;
      sink.push(chunk, token);
    };
    const startedAt = performance.now();
    // Rows the cache already holds for the prompt's start are not computed again (see prefix-cache.ts).
    const cached = job.prefix?.claim(promptIds) ?? 0;
    const history: TokenHistory = { prompt: promptIds, generated: ids };
    const logprobs: SampledToken[] | undefined =
      job.topLogprobs === undefined || job.topLogprobs === null ? undefined : [];
    const { constraint } = job;
    let choice = await nextToken(job, promptIds.slice(cached), cached, 0, stepControls(job, history, 0));
    constraint?.accept(choice.id);
    let token = choice.id;
    job.prefix?.extend(promptIds.slice(cached));
    const firstAt = performance.now();
    let lastAt = firstAt;
    let produced = 1;
    let finishReason: FinishReason;
    for (;;) {
      if (job.stopIds.has(token)) {
        finishReason = 'stop';
        break;
      }
      ids.push(token);
      logprobs?.push(choice);
      const filtered = filter.push(stream.push(token));
      emit(filtered.text, choice);
      if (filtered.stopped) {
        finishReason = 'stop-string';
        break;
      }
      if (constraint?.isComplete()) {
        finishReason = 'stop';
        break;
      }
      if (ids.length >= job.maxTokens) {
        finishReason = job.contextLimited ? 'context' : 'length';
        break;
      }
      await yieldToEventLoop();
      throwIfInterrupted(job);
      if (sink.cancelled) {
        finishReason = 'cancelled';
        break;
      }
      const step = ids.length;
      choice = await nextToken(
        job,
        [token],
        promptIds.length + step - 1,
        step,
        stepControls(job, history, step),
      );
      constraint?.accept(choice.id);
      token = choice.id;
      job.prefix?.extend(ids.slice(-1));
      lastAt = performance.now();
      produced++;
    }
    if (finishReason !== 'stop-string') {
      const tail = filter.end(stream.flush());
      emit(tail.text);
      if (tail.stopped) finishReason = 'stop-string';
    }
    const decodeMs = lastAt - firstAt;
    return {
      text,
      ids,
      ...(logprobs === undefined ? {} : { logprobs }),
      stats: {
        promptTokens: promptIds.length,
        cachedPromptTokens: cached,
        generatedTokens: produced,
        maxTokens: job.maxTokens,
        grammarMs: job.grammarMs ?? 0,
        queuedMs: startedAt - enqueuedAt,
        prefillMs: firstAt - startedAt,
        timeToFirstTokenMs: firstAt - job.calledAt,
        decodeMs,
        decodeTokensPerSecond: produced > 1 && decodeMs > 0 ? ((produced - 1) / decodeMs) * 1000 : 0,
        finishReason,
      },
    };
  } finally {
    try {
      if (isPiecewise(job.engine)) job.engine.dropQueued?.();
    } catch {
      // (The generation's own result or error stands; a device that failed here fails the engine's next call too.)
    } finally {
      release();
    }
  }
}
