/**
 * `loadQwen3` and `Qwen3Model`: a config, weights on an engine and a tokenizer, put together so that generating
 * and chatting take one call each.
 */
import { stat } from 'node:fs/promises';
import { freemem, totalmem } from 'node:os';
import { resolve } from 'node:path';
import {
  cudaDeviceInfo,
  cudaMemoryStats,
  type FloatDType,
  isFloatDType,
  QkOutOfMemoryError,
  QkValueError,
} from '@qk/ops';
import { promptOpensThinking } from './chat/thinking.js';
import { type ChatGeneration, type ChatToolOptions, prepareChat } from './chat/turn.js';
import { type LoadProgress, loadWeights, randomWeights, readCheckpointConfig } from './checkpoint/index.js';
import { isPresetName, PRESETS } from './config.js';
import { checkMemoryFits, checkTokenIds, engineBytes, weightsOutOfMemory } from './engine/common.js';
import {
  checkEngineAvailable,
  createEngine,
  defaultEngine,
  ENGINE_PLACEMENT,
  type MegakernelEngineOptions,
  megakernelEngineOptions,
} from './engine/index.js';
import { sampledInKernel } from './engine/megakernel/engine.js';
import type { MegakernelWeightFormat } from './engine/megakernel/kernel.js';
import { checkMegakernelTuning } from './engine/megakernel/tuning.js';
import { QkAbortError, QkBusyError, QkCheckpointError, QkContextError, QkTokenizerError } from './errors.js';
import {
  Generation,
  type GenerationJob,
  type GenerationResult,
  runGeneration,
} from './generation/generation.js';
import {
  type GenerateOptions,
  QWEN3_SAMPLING_DEFAULTS,
  type ResolvedGenerateOptions,
  readGenerationConfig,
  resolveGenerateOptions,
  type SamplingDefaults,
} from './generation/options.js';
import { PrefixCache } from './generation/prefix-cache.js';
import { TurnQueue } from './generation/queue.js';
import { isHubId, type PullOptions, resolveHubModel } from './hub/index.js';
import { loadQuantizedCheckpoint, readQuantizationConfig } from './quant/checkpoint.js';
import {
  checkWeightFormat,
  DEFAULT_GROUP_SIZE,
  disposeFloatWeights,
  disposeQuantizedLayers,
  type QuantizedLayer,
  quantizeLinears,
  type WeightFormat,
} from './quant/quantize.js';
import {
  checkStructuredOutput,
  createConstraint,
  type GrammarSpec,
  grammarTarget,
  type JsonSchema,
  type StructuredOptions,
  structuredSpec,
} from './structured/index.js';
import { loadTokenizer } from './tokenizer/index.js';
import type {
  ChatMessage,
  ChatTemplateOptions,
  Engine,
  EngineName,
  ModuleKind,
  PatchSpec,
  Qwen3Config,
  Qwen3Tokenizer,
  Qwen3Weights,
  WeightInfo,
} from './types.js';
import { describeValue } from './untrusted.js';

/**
 * Options of {@link loadQwen3}. The `megakernel*` ones ({@link MegakernelEngineOptions}: steps per launch, the
 * hand-off position, the LM-head screen, the kernel's tuning knobs, a trace) apply when the engine is `megakernel`.
 */
export interface LoadOptions extends MegakernelEngineOptions {
  /**
   * Which engine runs the model. Default `defaultEngine(config)`: `'megakernel'` where it serves the model in bf16
   * (one persistent kernel runs several greedy decode steps per launch, handing long contexts to the layered graph;
   * Hopper or newer, Qwen3-0.6B to 8B shapes), else `'layered'` with a usable GPU, else `'cpu'`. Name `'layered'`
   * to patch modules (the megakernel has none to swap).
   */
  readonly engine?: EngineName;
  /**
   * Dtype of the weights. Default: the engine's (`'bf16'` for `'layered'` and `'megakernel'`; `'f32'` for `'cpu'`, which computes in
   * float32 whatever the weights' dtype, so `'bf16'` there means bf16-rounded weights).
   */
  readonly dtype?: FloatDType;
  /**
   * Weight format of the decoder projections (q/k/v/o/gate/up/down). `'bf16'` (default) keeps them in `dtype`;
   * `'int8'` (per output channel) and `'int4'` (groups of `groupSize` inputs) quantize them at load with the
   * `@qk/ops` quantizers (on the GPU for the `layered` engine). Embedding, LM head and norms stay in `dtype`.
   * Quantized weights run on the `layered` engine (the default for them with a GPU; they stay quantized in GPU
   * memory) and on `cpu`; the `megakernel` streams bf16 only, and naming it for them throws `QkValueError`.
   */
  readonly weights?: WeightFormat;
  /** INT4 group size (default 128). */
  readonly groupSize?: number;
  /**
   * KV-cache rows: the longest prompt + generation. Default `min(config.maxPositionEmbeddings, 4096)`; at most
   * `config.maxPositionEmbeddings`.
   */
  readonly maxContext?: number;
  /**
   * GPU engines: prompt tokens per prefill pass (default 4096). A longer prompt prefills in chunks, so the prefill's
   * temporary GPU memory is bounded by the chunk (and a stop is seen between chunks); a smaller chunk needs less
   * memory and runs a little slower. A positive integer.
   */
  readonly prefillChunk?: number;
  /** Seed of a preset's random weights (a non-negative safe integer). Default 0. Ignored for directories. */
  readonly seed?: number;
  /** Called after each tensor is loaded (or made, for a preset). */
  readonly onLoadProgress?: (progress: LoadProgress) => void;
  /** Aborts the load: the promise rejects with `QkAbortError` and nothing loaded is leaked. */
  readonly signal?: AbortSignal;
  /** Where and how a hub id (`'Qwen/Qwen3-0.6B'`) is fetched: revision, cache folder, token, download progress. */
  readonly hub?: PullOptions;
  /**
   * Check, before anything is allocated, that the weights and KV cache fit in the memory the engine uses: host RAM
   * for `cpu` (`os.freemem()`), free device memory for the GPU engines. Default `true`.
   */
  readonly checkMemory?: boolean;
  /**
   * Check every weight for NaN and ±Inf while loading a checkpoint and refuse one that holds any, naming the tensor.
   * Default `true`; `false` loads them anyway (the cpu engine then reports non-finite logits when they appear).
   */
  readonly checkWeights?: boolean;
}

/**
 * Bytes per weight of the decoder projections while a GPU engine loads `weights`: a stored quantized checkpoint at
 * its codes and scales (INT4 with its worst case, group 64 with zero-point offsets: 0.5 + (4 + 2)/64); a float
 * checkpoint quantized at load holds its float copy and the quantized one at once.
 */
function projectionBytesOnGpu(weights: WeightFormat, stored: boolean, floatBytes: number): number {
  if (weights === 'bf16') return floatBytes;
  const quantized = weights === 'int8' ? 1 : 0.5 + 6 / 64;
  return stored ? quantized : floatBytes + quantized;
}

/** Refuses an engine whose weights and cache cannot fit in the memory it would use; see {@link LoadOptions.checkMemory}. */
function checkEngineMemory(
  engine: EngineName,
  config: Qwen3Config,
  maxContext: number,
  dtype: FloatDType,
  source: string,
  weights: { format: WeightFormat; stored: boolean },
): void {
  const op = 'loadQwen3';
  if (engine === 'cpu') {
    // The cpu engine computes in float32 whatever the loaded dtype.
    checkMemoryFits(
      op,
      engineBytes(config, maxContext, 4),
      { totalBytes: totalmem(), freeBytes: freemem() },
      'host memory (the cpu engine holds float32 weights)',
      `the ${source} model cannot run on the cpu engine here: use a smaller model, a GPU engine, or a smaller maxContext (--max-context)`,
    );
    return;
  }
  let free: number;
  let total: number;
  try {
    const info = cudaDeviceInfo();
    const stats = cudaMemoryStats();
    // Blocks cached by qk's allocator are free for this model too.
    free = info.freeMemoryBytes + Math.max(0, stats.reservedBytes - stats.allocatedBytes);
    total = info.totalMemoryBytes;
  } catch {
    return; // No device facts: the engine's own allocation reports an out-of-memory error.
  }
  checkMemoryFits(
    op,
    engineBytes(
      config,
      maxContext,
      dtype === 'f32' ? 4 : 2,
      2,
      projectionBytesOnGpu(weights.format, weights.stored, dtype === 'f32' ? 4 : 2),
    ),
    { totalBytes: total, freeBytes: free },
    'GPU memory',
    `free GPU memory (other processes, other models), or use a smaller model or a smaller maxContext (--max-context)`,
  );
}

/** Options of {@link Qwen3Model.chat}: generation options plus the chat template's switches. */
export type ChatOptions = GenerateOptions &
  StructuredOptions &
  ChatToolOptions &
  Omit<ChatTemplateOptions, 'tools'> & {
    /**
     * Tokenise special-token text inside message contents as control tokens, as `encode(applyChatTemplate(…))`
     * does (default `false`: only the template's own markers are control tokens, so a message cannot forge a
     * `<|im_start|>system` turn).
     */
    readonly parseSpecialTokens?: boolean;
  };

/** A tokenizer that can keep message contents from becoming control tokens (the Hugging Face one can). */
interface ChatEncoder {
  encodeChat(
    messages: readonly ChatMessage[],
    options: ChatTemplateOptions & { readonly parseSpecialTokens?: boolean },
  ): number[];
}

function isChatEncoder(tokenizer: unknown): tokenizer is ChatEncoder {
  return typeof (tokenizer as Partial<ChatEncoder>).encodeChat === 'function';
}

/** The parts of a {@link Qwen3Model}, for wrapping an engine and tokenizer of your own. */
export interface Qwen3ModelParts {
  readonly config: Qwen3Config;
  readonly tokenizer: Qwen3Tokenizer;
  /** Owned by the model from now on: `dispose()` disposes it. */
  readonly engine: Engine;
  /** Whether the weights are random (a preset). Default false. */
  readonly randomWeights?: boolean;
  /** Where the model came from: a preset name or a directory. Default `'custom'`. */
  readonly source?: string;
  /** What generation options default to. Default {@link QWEN3_SAMPLING_DEFAULTS}. */
  readonly samplingDefaults?: SamplingDefaults;
  /** Ids that end generation besides `tokenizer.stopIds` and `config.eosTokenIds`. Default none. */
  readonly stopIds?: readonly number[];
  /**
   * Reuse the KV rows of a prompt prefix the previous generation left in the cache (a chat's next turn prefills
   * only its new tokens). Default true.
   */
  readonly prefixCache?: boolean;
}

function checkTokenizerFits(tokenizer: Qwen3Tokenizer, config: Qwen3Config): void {
  if (tokenizer.vocabSize > config.vocabSize) {
    throw new QkTokenizerError(
      `the tokenizer knows ${tokenizer.vocabSize} tokens but the model only ${config.vocabSize}; use the checkpoint's own tokenizer.json and tokenizer_config.json.`,
    );
  }
}

/** Default context when the caller gives none: enough for chat, without a 40k-row cache per model. */
export const DEFAULT_MAX_CONTEXT = 4096;

/**
 * A loaded Qwen3: generate text from a prompt or chat over a message history, streaming either way. Generations
 * on one model take turns (one KV cache): a second call waits for the first to finish. A generation whose prompt
 * starts with ids the cache already holds (a chat's next turn) prefills only the rest.
 */
export class Qwen3Model {
  readonly config: Qwen3Config;
  readonly tokenizer: Qwen3Tokenizer;
  /** Name of the engine running the forward pass. */
  readonly engine: EngineName;
  /** KV-cache rows: prompt + generated tokens never exceed this. */
  readonly maxContext: number;
  /**
   * Whether decode steps, greedy and sampled with top-k 1–64, screen the LM head in int8 (the `megakernel` engine
   * where it can): the same tokens, about half the LM head's bytes read per step.
   */
  readonly lmScreen: boolean;
  /**
   * What the engine holds as weights, where the engine reports it: the decoder projections' format (`'bf16'` for
   * float ones, `'int8'`, `'int4'`) and the bytes of the projections and of the rest.
   */
  readonly weightInfo: WeightInfo | undefined;
  /** True when the weights are random (a preset): the text is meaningless. */
  readonly randomWeights: boolean;
  /** The preset name or directory the model came from. */
  readonly source: string;
  /** What {@link GenerateOptions}' sampling options default to. */
  readonly samplingDefaults: SamplingDefaults;
  /** Every id that ends a generation. */
  readonly stopIds: ReadonlySet<number>;
  readonly #engine: Engine;
  readonly #queue = new TurnQueue();
  readonly #prefix: PrefixCache;
  #disposed = false;

  /** @throws QkTokenizerError when the tokenizer has more tokens than the model's vocabulary. */
  constructor(parts: Qwen3ModelParts) {
    checkTokenizerFits(parts.tokenizer, parts.config);
    this.config = parts.config;
    this.tokenizer = parts.tokenizer;
    this.#engine = parts.engine;
    this.#prefix = new PrefixCache(parts.prefixCache ?? true);
    this.engine = parts.engine.name;
    this.maxContext = parts.engine.maxContext;
    this.lmScreen = parts.engine.lmScreen ?? false;
    this.weightInfo = parts.engine.weightInfo;
    this.randomWeights = parts.randomWeights ?? false;
    this.source = parts.source ?? 'custom';
    this.samplingDefaults = parts.samplingDefaults ?? QWEN3_SAMPLING_DEFAULTS;
    this.stopIds = new Set([
      ...parts.tokenizer.stopIds,
      ...parts.config.eosTokenIds,
      ...(parts.stopIds ?? []),
    ]);
  }

  /** True after {@link Qwen3Model.dispose}. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * Whether decode steps that draw by `options` (over {@link samplingDefaults}) read the LM head's int8 screen: on a
   * model whose engine screens it ({@link lmScreen}), greedy steps and steps sampled in the megakernel (top-k 1–64),
   * penalties, min-p and a constraint included (the kernel applies them). Other sampled steps compute every logit and
   * draw on the host, and so do steps with a logit bias or log-probabilities (see `Engine.choose`).
   */
  lmScreenFor(options: GenerateOptions = {}): boolean {
    const temperature = options.temperature ?? this.samplingDefaults.temperature;
    const topK = options.topK ?? this.samplingDefaults.topK;
    const resolved = resolveGenerateOptions('Qwen3Model.lmScreenFor', options, this.samplingDefaults);
    const host = (resolved.sampling.logitBias?.size ?? 0) > 0 || resolved.topLogprobs !== null;
    return this.lmScreen && !host && (temperature === 0 || sampledInKernel({ temperature, topK }));
  }

  #checkLive(op: string): void {
    if (this.#disposed) throw new QkBusyError(`${op}: model was disposed; load it again with loadQwen3().`);
  }

  /**
   * Generates a continuation of `promptOrIds` (text, tokenised as is, or token ids). Argument problems throw
   * here, before anything runs; problems while running reject the iterator and `result`.
   *
   * @throws QkContextError when the prompt is empty or leaves no room in the context.
   * @throws QkValueError / QkIndexError for an option out of range or an id outside the vocabulary.
   * @throws QkBusyError after `dispose()`.
   */
  generate(
    promptOrIds: string | readonly number[],
    options?: GenerateOptions & StructuredOptions,
  ): Generation {
    const op = 'Qwen3Model.generate';
    const calledAt = performance.now();
    this.#checkLive(op);
    const resolved = resolveGenerateOptions(op, options, this.samplingDefaults, this.config.vocabSize);
    let ids: readonly number[];
    if (typeof promptOrIds === 'string') ids = this.tokenizer.encode(promptOrIds);
    else if (Array.isArray(promptOrIds)) ids = this.#checkIds(op, promptOrIds);
    else throw new QkValueError(op, 'promptOrIds', 'must be a string or an array of token ids.');
    const spec = structuredSpec(op, options);
    return this.#start(
      ids,
      resolved,
      calledAt,
      spec && { spec, param: spec.kind, ...(spec.kind === 'schema' ? { schema: spec.schema } : {}) },
    );
  }

  /**
   * Answers the last message of `messages` (rendered with the chat template, the whole history every call):
   * the assistant's reply, streamed. `enableThinking` (default true) lets Qwen3 think in a `<think>` block first.
   * The result takes the reply apart: `reasoning` (the thinking), `content` (the answer) and `toolCalls` (with
   * `tools`). `schema` / `grammar` constrain the answer (after the thinking block).
   *
   * @throws QkValueError for an empty or malformed message list, malformed tools or a schema that cannot be
   *   enforced; see also {@link Qwen3Model.generate}.
   */
  chat(messages: readonly ChatMessage[], options?: ChatOptions): ChatGeneration {
    const op = 'Qwen3Model.chat';
    const calledAt = performance.now();
    this.#checkLive(op);
    if (!Array.isArray(messages) || messages.length === 0) {
      throw new QkValueError(op, 'messages', 'must be a non-empty array of { role, content } messages.');
    }
    const resolved = resolveGenerateOptions(op, options, this.samplingDefaults, this.config.vocabSize);
    const prepared = prepareChat(op, options);
    const { templateOptions } = prepared;
    const parseSpecialTokens = options?.parseSpecialTokens ?? false;
    if (typeof parseSpecialTokens !== 'boolean') {
      throw new QkValueError(
        op,
        'parseSpecialTokens',
        `must be true or false, got ${describeValue(parseSpecialTokens)}.`,
      );
    }
    const ids = isChatEncoder(this.tokenizer)
      ? this.tokenizer.encodeChat(messages, { ...templateOptions, parseSpecialTokens })
      : this.tokenizer.encode(this.tokenizer.applyChatTemplate(messages, templateOptions));
    const opened = prepared.thinks && promptOpensThinking((p) => this.tokenizer.decode(p), ids);
    return this.#start(ids, resolved, calledAt, prepared.constraint(opened), (result) =>
      prepared.finish(result, opened),
    ) as ChatGeneration;
  }

  #checkIds(op: string, ids: readonly number[]): readonly number[] {
    checkTokenIds(op, 'promptOrIds', ids, this.config.vocabSize);
    return [...ids];
  }

  /**
   * `structured`: compiled (while the generation waits for its turn) into the job's constraint; `finish`: applied
   * to the result (a chat turn's parts).
   */
  #start(
    promptIds: readonly number[],
    options: ResolvedGenerateOptions,
    calledAt: number,
    structured?: { readonly spec: GrammarSpec; readonly param: string; readonly schema?: JsonSchema },
    finish?: (result: GenerationResult) => GenerationResult,
  ): Generation {
    if (promptIds.length === 0) {
      throw new QkContextError('the prompt is empty; give at least one token of text to continue from.');
    }
    const room = this.maxContext - promptIds.length;
    if (room < 1) {
      throw new QkContextError(
        `the prompt has ${promptIds.length} tokens but the context holds ${this.maxContext}, leaving no room to generate; shorten the prompt or load the model with a larger maxContext (at most ${this.config.maxPositionEmbeddings}).`,
      );
    }
    if (structured !== undefined && options.constraint !== undefined) {
      throw new QkValueError(
        'Qwen3Model',
        'constraint',
        `cannot be combined with ${structured.param}; pass one of them.`,
      );
    }
    const target =
      structured && grammarTarget('Qwen3Model', this.tokenizer, this.config.vocabSize, this.stopIds);
    const job: GenerationJob = {
      engine: this.#engine,
      tokenizer: this.tokenizer,
      stopIds: this.stopIds,
      textVocabSize: this.tokenizer.vocabSize,
      promptIds,
      maxTokens: Math.min(options.maxTokens, room),
      contextLimited: options.maxTokens > room,
      // Step indices run 0 … maxTokens − 1: the engine queues no decode step past the last.
      sampling: { ...options.sampling, lastStep: Math.min(options.maxTokens, room) - 1 },
      stop: options.stop,
      signal: options.signal,
      constraint: options.constraint,
      topLogprobs: options.topLogprobs,
      turn: this.#queue.enter(),
      isDisposed: () => this.#disposed,
      calledAt,
      prefix: this.#prefix,
    };
    if (structured === undefined && finish === undefined)
      return new Generation((sink) => runGeneration(job, sink));
    return new Generation(async (sink) => {
      let { constraint } = job;
      let grammarMs = 0;
      if (structured !== undefined) {
        const compileStart = performance.now();
        try {
          constraint = await createConstraint('Qwen3Model', structured.param, structured.spec, target!);
        } catch (e) {
          job.turn.release();
          throw e;
        }
        grammarMs = performance.now() - compileStart;
      }
      const result = await runGeneration({ ...job, constraint, grammarMs }, sink);
      const parts = finish === undefined ? result : finish(result);
      if (structured?.schema !== undefined) checkStructuredOutput(structured.param, structured.schema, parts);
      return parts;
    });
  }

  /**
   * Forgets which prompt prefix the cache holds, so the next generation prefills its whole prompt (benchmarks
   * measure a cold prefill this way). The cached rows themselves stay; they are simply not reused.
   */
  forgetPrefix(): void {
    this.#checkLive('Qwen3Model.forgetPrefix');
    this.#prefix.clear();
  }

  /** The built-in variants per module kind of a patchable engine (`layered`). @throws QkValueError otherwise. */
  variants(): Readonly<Record<ModuleKind, readonly string[]>> {
    this.#checkLive('Qwen3Model.variants');
    if (this.#engine.variants === undefined) throw this.#notPatchable('Qwen3Model.variants');
    return this.#engine.variants();
  }

  /**
   * Swaps module implementations of a patchable engine (`layered`); returns a function that restores them.
   *
   * @throws QkValueError when the engine has no swappable modules (`cpu`).
   * @throws QkBusyError while a generation is running or queued: patching mid-generation would mix two models.
   */
  patch(spec: PatchSpec): () => void {
    this.#checkLive('Qwen3Model.patch');
    if (this.#engine.patch === undefined) throw this.#notPatchable('Qwen3Model.patch');
    if (this.#queue.size > 0) {
      throw new QkBusyError(
        'cannot patch while a generation is running or queued; await their results first.',
      );
    }
    // Other modules make other rows: nothing cached before the patch (or after it, once restored) is reusable.
    this.#prefix.clear();
    const restore = this.#engine.patch(spec);
    return () => {
      restore();
      this.#prefix.clear();
    };
  }

  #notPatchable(op: string): QkValueError {
    return new QkValueError(
      op,
      'engine',
      `is "${this.engine}", which has no swappable modules; load the model with engine "layered" to patch it.`,
    );
  }

  /**
   * Frees the engine's weights and cache. A running generation ends at its next token with `QkBusyError`, queued
   * ones reject likewise, and later calls throw. Calling it twice is harmless.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#engine.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

function resolveMaxContext(config: Qwen3Config, requested: number | undefined): number {
  const limit = config.maxPositionEmbeddings;
  const value = requested ?? Math.min(limit, DEFAULT_MAX_CONTEXT);
  if (!Number.isSafeInteger(value) || value < 1 || value > limit) {
    throw new QkValueError(
      'loadQwen3',
      'maxContext',
      `must be an integer in [1, ${limit}] (the model's max_position_embeddings), got ${value}.`,
    );
  }
  return value;
}

/**
 * Loads a Qwen3 model. `dirOrPreset` is a preset name (`'tiny'`, `'0.6b'`, `'1.7b'`, `'4b'`, `'8b'`, `'14b'`,
 * `'32b'`: deterministic random weights made in memory, with the bundled tokenizer; the text is meaningless) or a
 * Hugging Face Qwen3 checkpoint directory (`config.json`, `*.safetensors`, and its tokenizer files when present,
 * else the bundled tokenizer; `generation_config.json` supplies the sampling defaults). Preset names win: write
 * `./tiny` for a directory called `tiny`.
 *
 * @throws QkCheckpointError for a missing or broken checkpoint; QkConfigError for a config qk cannot run;
 *   QkValueError / QkDeviceError for an engine that cannot run here; QkAbortError when `signal` fires.
 */
export async function loadQwen3(dirOrPreset: string, options: LoadOptions = {}): Promise<Qwen3Model> {
  const op = 'loadQwen3';
  if (typeof dirOrPreset !== 'string' || dirOrPreset.length === 0) {
    throw new QkValueError(
      op,
      'dirOrPreset',
      'must be a preset name (tiny, 0.6b, …) or a checkpoint directory.',
    );
  }
  const requested = options.weights === undefined ? undefined : checkWeightFormat(op, options.weights);
  if (options.engine !== undefined) {
    checkEngineAvailable(options.engine, op, requested === undefined ? undefined : { weights: requested });
  }
  if (options.dtype !== undefined && !isFloatDType(options.dtype))
    throw new QkValueError(
      op,
      'dtype',
      `must be "bf16", "f16" or "f32", got ${describeValue(options.dtype)}.`,
    );
  const seed = options.seed ?? 0;
  if (!Number.isSafeInteger(seed) || seed < 0) {
    throw new QkValueError(op, 'seed', `must be a non-negative safe integer, got ${seed}.`);
  }
  // (before any weight is read: a misspelt knob should not cost a load)
  checkMegakernelTuning(op, options.megakernelTuning);
  const { signal, onLoadProgress: onProgress } = options;
  const preset = isPresetName(dirOrPreset);
  // A hub id (owner/name that is no directory here) loads from the hub cache, downloading on first use.
  if (!preset && isHubId(dirOrPreset) && !(await isDirectory(dirOrPreset))) {
    const hubOptions = { ...options.hub, ...(signal === undefined ? {} : { signal }) };
    return loadQwen3(await resolveHubModel(dirOrPreset, hubOptions), options);
  }
  if (!preset && !(await isDirectory(dirOrPreset))) {
    throw new QkCheckpointError(
      `is neither a preset (${Object.keys(PRESETS).join(', ')}), a directory nor a hub id (owner/name); pass a Hugging Face Qwen3 checkpoint directory (config.json + *.safetensors) or a hub id such as Qwen/Qwen3-0.6B.`,
      dirOrPreset,
    );
  }
  const dir = preset ? undefined : resolve(dirOrPreset);
  const config = preset ? PRESETS[dirOrPreset] : await readCheckpointConfig(dir!);
  // A qk quantized checkpoint loads as stored: no re-quantizing, and no dequantizing to another format.
  const stored = dir === undefined ? undefined : await readQuantizationConfig(dir);
  const storedFormat: WeightFormat | undefined = stored === undefined ? undefined : `int${stored.bits}`;
  if (storedFormat !== undefined && requested !== undefined && requested !== storedFormat) {
    throw new QkValueError(
      op,
      'weights',
      `is "${requested}" but ${dir} holds a checkpoint quantized to ${storedFormat}; omit weights (or pass "${storedFormat}"), or load the float checkpoint it was made from.`,
    );
  }
  const weightFormat = storedFormat ?? requested ?? 'bf16';
  const bits = weightFormat === 'int8' ? 8 : weightFormat === 'int4' ? 4 : undefined;
  // (The projections' format as the megakernel takes it: stored, or what quantizing at load will make.)
  const format: MegakernelWeightFormat | undefined =
    bits === 8
      ? { bits: 8 }
      : bits === 4
        ? {
            bits: 4,
            groupSize: stored?.group_size ?? options.groupSize ?? DEFAULT_GROUP_SIZE,
            zeroPoints: stored !== undefined && stored.quant_method !== 'qk',
          }
        : undefined;
  const engineName: EngineName =
    options.engine ??
    (options.dtype === undefined || options.dtype === 'bf16'
      ? defaultEngine(config, weightFormat, format)
      : defaultEngine());
  const placement = ENGINE_PLACEMENT[engineName];
  const dtype = options.dtype ?? placement.dtype;
  checkEngineAvailable(engineName, op, {
    config,
    dtype,
    weights: weightFormat,
    ...(format === undefined ? {} : { format }),
  });
  const maxContext = resolveMaxContext(config, options.maxContext);
  const { prefillChunk } = options;
  if (prefillChunk !== undefined && (!Number.isSafeInteger(prefillChunk) || prefillChunk < 1)) {
    throw new QkValueError(
      'loadQwen3',
      'prefillChunk',
      `must be a positive integer, got ${String(prefillChunk)}.`,
    );
  }
  if (options.checkMemory ?? true) {
    checkEngineMemory(engineName, config, maxContext, dtype, dirOrPreset, {
      format: weightFormat,
      stored: stored !== undefined,
    });
  }
  const generationConfig = dir === undefined ? undefined : await readGenerationConfig(dir);
  const tokenizer = await loadTokenizer({
    ...(dir === undefined ? {} : { dir }),
    eosTokenIds: config.eosTokenIds,
  });
  if (tokenizer.vocabSize > config.vocabSize) {
    throw new QkTokenizerError(
      `the tokenizer knows ${tokenizer.vocabSize} tokens but the model only ${config.vocabSize}; put the checkpoint's own tokenizer.json and tokenizer_config.json in ${dir ?? 'the model directory'}.`,
    );
  }
  const loadOptions = {
    dtype,
    device: placement.device,
    ...(onProgress === undefined ? {} : { onProgress }),
    ...(signal === undefined ? {} : { signal }),
  };
  let quantized: QuantizedLayer[] | undefined;
  let weights: Qwen3Weights;
  let engine: Engine;
  // With the memory check skipped (or wrong), the upload or the quantizing can run out of device memory: @qk/ops'
  // generic error becomes one that says what to do about a model. The loaders and the catch below free what was
  // uploaded first; the engine's own out-of-memory error (already a QkMemoryError) passes through.
  try {
    if (stored !== undefined) {
      ({ weights, quantized } = await loadQuantizedCheckpoint(dir!, config, stored, {
        dtype: loadOptions.dtype,
        device: placement.device,
        checkFinite: options.checkWeights ?? true,
        ...(onProgress === undefined ? {} : { onProgress }),
        ...(signal === undefined ? {} : { signal }),
      }));
    } else {
      weights = preset
        ? await randomWeights(config, { ...loadOptions, seed })
        : await loadWeights(dir!, config, { ...loadOptions, checkFinite: options.checkWeights ?? true });
    }
    try {
      if (signal?.aborted) throw new QkAbortError('loading the model', signal.reason);
      const engineOptions = {
        maxContext,
        vocabLimit: tokenizer.vocabSize,
        ...(options.prefillChunk === undefined ? {} : { prefillChunk: options.prefillChunk }),
        ...megakernelEngineOptions(options),
      };
      // A float checkpoint asked for int8/int4 is quantized here, where its weights are (on the GPU for layered).
      if (bits !== undefined) {
        quantized ??= quantizeLinears(weights, {
          bits,
          ...(options.groupSize === undefined ? {} : { groupSize: options.groupSize }),
        });
      }
      engine = createEngine(engineName, config, weights, {
        ...engineOptions,
        ...(quantized === undefined ? {} : { quantized }),
      });
    } catch (e) {
      disposeFloatWeights(weights);
      if (quantized !== undefined) disposeQuantizedLayers(quantized);
      throw e;
    }
  } catch (e) {
    throw e instanceof QkOutOfMemoryError ? weightsOutOfMemory(op, e) : e;
  }
  return new Qwen3Model({
    config,
    tokenizer,
    engine,
    randomWeights: preset,
    source: preset ? dirOrPreset : dir!,
    samplingDefaults: generationConfig?.sampling ?? QWEN3_SAMPLING_DEFAULTS,
    stopIds: generationConfig?.eosTokenIds ?? [],
  });
}
