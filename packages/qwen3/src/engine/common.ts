/**
 * Checks and helpers every engine shares: the weights must match the config, forward-pass arguments must address
 * the cache correctly, and a sampling step draws from a seed derived from the generation's seed and the step.
 */
import {
  formatShape,
  MAX_TOP_LOGPROBS,
  QkIndexError,
  QkShapeError,
  QkValueError,
  type Tensor,
} from '@qk/ops';
import { QkContextError, QkMemoryError } from '../errors.js';
import type { Qwen3Config, Qwen3Weights, SamplingParams, StepControls } from '../types.js';

/** The shape every tensor of {@link Qwen3Weights} must have under `config`, keyed by a readable path. */
export function expectedWeightShapes(config: Qwen3Config): {
  readonly global: Readonly<Record<'embed' | 'norm' | 'lmHead', readonly number[]>>;
  readonly layer: Readonly<Record<string, readonly number[]>>;
} {
  const { hiddenSize: h, numHeads, numKvHeads, headDim: d, intermediateSize: ffn, vocabSize: v } = config;
  return {
    global: { embed: [v, h], norm: [h], lmHead: [v, h] },
    layer: {
      inputNorm: [h],
      q: [numHeads * d, h],
      k: [numKvHeads * d, h],
      v: [numKvHeads * d, h],
      qNorm: [d],
      kNorm: [d],
      o: [h, numHeads * d],
      postNorm: [h],
      gate: [ffn, h],
      up: [ffn, h],
      down: [h, ffn],
    },
  };
}

function checkShape(op: string, arg: string, t: Tensor | undefined, shape: readonly number[]): void {
  const same = t !== undefined && t.shape.length === shape.length && t.shape.every((x, i) => x === shape[i]);
  if (!same) {
    throw new QkShapeError({
      op,
      arg,
      expected: formatShape(shape),
      got: t === undefined ? 'nothing' : formatShape(t.shape),
      hint: 'the weights do not match the config; load them with the same config.json',
    });
  }
}

/** Throws `QkShapeError` naming the first weight whose shape disagrees with `config` (or a missing layer). */
export function checkWeightsMatchConfig(op: string, config: Qwen3Config, weights: Qwen3Weights): void {
  const shapes = expectedWeightShapes(config);
  if (weights.layers.length !== config.numLayers) {
    throw new QkShapeError({
      op,
      arg: 'weights.layers',
      expected: `${config.numLayers} layers`,
      got: `${weights.layers.length}`,
      hint: 'the weights do not match the config; load them with the same config.json',
    });
  }
  for (const [name, shape] of Object.entries(shapes.global)) {
    checkShape(op, `weights.${name}`, weights[name as keyof typeof shapes.global], shape);
  }
  weights.layers.forEach((layer, i) => {
    for (const [name, shape] of Object.entries(shapes.layer)) {
      checkShape(op, `weights.layers[${i}].${name}`, layer[name as keyof typeof layer], shape);
    }
  });
}

/** Throws `QkIndexError` naming the first of `ids` that is not an integer in `[0, vocab)`. */
export function checkTokenIds(op: string, arg: string, ids: readonly number[], vocab: number): void {
  ids.forEach((id, i) => {
    if (!Number.isInteger(id) || id < 0 || id >= vocab) {
      throw new QkIndexError(
        op,
        arg,
        id,
        vocab,
        `at index ${i}: token ids must be integers within the vocabulary`,
      );
    }
  });
}

/**
 * Checks one forward call: `ids` non-empty integers in `[0, vocab)`, `start` a non-negative integer no later than
 * `filled` (the rows already written: the cache must stay contiguous), and `start + ids.length ≤ maxContext`.
 */
export function checkForwardArgs(
  op: string,
  config: Qwen3Config,
  maxContext: number,
  filled: number,
  ids: readonly number[],
  start: number,
): void {
  if (!Array.isArray(ids) || ids.length === 0) {
    throw new QkValueError(op, 'ids', 'must be a non-empty array of token ids.');
  }
  checkTokenIds(op, 'ids', ids, config.vocabSize);
  if (!Number.isSafeInteger(start) || start < 0) {
    throw new QkValueError(op, 'start', `must be a non-negative integer position, got ${start}.`);
  }
  if (start > filled) {
    throw new QkValueError(
      op,
      'start',
      `(${start}) leaves a gap: only positions 0…${filled - 1} are cached, so the next call must start at ${filled} or earlier.`,
    );
  }
  if (start + ids.length > maxContext) {
    throw new QkContextError(
      `positions ${start}…${start + ids.length - 1} do not fit in the context of ${maxContext} tokens; shorten the prompt or generation, or load the model with a larger maxContext.`,
    );
  }
}

/** Checks sampling parameters (the ops check them again, but this names the generation's option). */
export function checkSampling(op: string, sampling: SamplingParams): void {
  const { temperature, topK, topP, seed } = sampling;
  if (!Number.isFinite(temperature) || temperature < 0) {
    throw new QkValueError(
      op,
      'temperature',
      `must be a finite number >= 0 (0 means greedy), got ${temperature}.`,
    );
  }
  if (!Number.isSafeInteger(topK) || topK < 0) {
    throw new QkValueError(op, 'topK', `must be a non-negative integer (0 keeps every token), got ${topK}.`);
  }
  if (!(topP > 0 && topP <= 1)) throw new QkValueError(op, 'topP', `must lie in (0, 1], got ${topP}.`);
  if (!Number.isSafeInteger(seed) || seed < 0) {
    throw new QkValueError(op, 'seed', `must be a non-negative safe integer, got ${seed}.`);
  }
  const { lastStep } = sampling;
  if (lastStep !== undefined && (!Number.isSafeInteger(lastStep) || lastStep < 0)) {
    throw new QkValueError(op, 'lastStep', `must be a non-negative integer (a step index), got ${lastStep}.`);
  }
  checkLogitControls(op, sampling);
}

/**
 * A step's controls, or a function that makes them. The piecewise engines' `chooseAsync` takes the function form and
 * calls it once, after it has queued the step's forward pass: the host work it does (a constraint's next mask) then
 * runs while the device computes the logits, instead of before it.
 */
export type LazyStepControls = StepControls | StepControlsMaker;

/**
 * A function that makes a step's controls. `maskOnly: true` promises that what it makes asks for no
 * log-probabilities (`topLogprobs` null): only the mask (and, for the sampling's penalties, the history) matters, so
 * an engine may take the token in a kernel that reads the mask while the step runs and applies the penalties itself
 * (the megakernel; see gpu-engine.ts), before the controls are made.
 */
export type StepControlsMaker = (() => StepControls) & { readonly maskOnly?: boolean };

/** `controls`, made now if they are a function, and checked (see {@link checkStepControls}). */
export function resolveStepControls(op: string, controls: LazyStepControls): StepControls {
  const made = typeof controls === 'function' ? controls() : controls;
  checkStepControls(op, made);
  return made;
}

/** Checks the per-step inputs of `Engine.choose` (a caller's own engine driver may pass anything). */
export function checkStepControls(op: string, controls: StepControls): void {
  if (controls === null || typeof controls !== 'object') {
    throw new QkValueError(op, 'controls', 'must be an object { history, mask, topLogprobs }.');
  }
  const { history, mask, topLogprobs } = controls;
  if (
    history === null ||
    typeof history !== 'object' ||
    !Array.isArray(history.prompt) ||
    !Array.isArray(history.generated)
  ) {
    throw new QkValueError(op, 'controls.history', 'must be { prompt, generated }, two arrays of token ids.');
  }
  if (mask !== null && !(mask instanceof Uint32Array)) {
    throw new QkValueError(
      op,
      'controls.mask',
      'must be a Uint32Array bitset (bit t & 31 of word t >>> 5) or null.',
    );
  }
  if (
    topLogprobs !== null &&
    (!Number.isSafeInteger(topLogprobs) || topLogprobs < 0 || topLogprobs > MAX_TOP_LOGPROBS)
  ) {
    throw new QkValueError(
      op,
      'controls.topLogprobs',
      `must be null (no log-probabilities) or an integer in [0, ${MAX_TOP_LOGPROBS}], got ${String(topLogprobs)}.`,
    );
  }
}

/**
 * The ranges of the sampling controls (OpenAI's for the presence and frequency penalties and the bias values), so
 * a generation option and an engine argument are refused with the same sentence.
 */
export function checkLogitControls(op: string, s: SamplingParams): void {
  const range = (arg: string, v: number | undefined, ok: (x: number) => boolean, what: string) => {
    if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || !ok(v))) {
      throw new QkValueError(op, arg, `must be ${what}, got ${String(v)}.`);
    }
  };
  range('presencePenalty', s.presencePenalty, (x) => x >= -2 && x <= 2, 'a number in [-2, 2] (0 is off)');
  range('frequencyPenalty', s.frequencyPenalty, (x) => x >= -2 && x <= 2, 'a number in [-2, 2] (0 is off)');
  range('repetitionPenalty', s.repetitionPenalty, (x) => x > 0, 'a finite number > 0 (1 is off)');
  range('minP', s.minP, (x) => x >= 0 && x <= 1, 'a number in [0, 1] (0 is off)');
  if (s.logitBias !== undefined) {
    if (!(s.logitBias instanceof Map))
      throw new QkValueError(op, 'logitBias', 'must be a Map of token id → bias.');
    for (const [id, bias] of s.logitBias) {
      if (!Number.isSafeInteger(id) || id < 0) {
        throw new QkValueError(
          op,
          'logitBias',
          `has key ${String(id)}; keys must be token ids (integers >= 0).`,
        );
      }
      if (typeof bias !== 'number' || !Number.isFinite(bias) || bias < -100 || bias > 100) {
        throw new QkValueError(
          op,
          'logitBias',
          `maps token ${id} to ${String(bias)}; biases must lie in [-100, 100] (-100 all but bans a token).`,
        );
      }
    }
  }
}

const MASK64 = (1n << 64n) - 1n;

/**
 * The seed of sampling step `step` of a generation seeded with `seed`: SplitMix64 of `seed·φ + step`, so nearby
 * seeds and steps give unrelated streams and a run repeats exactly on every machine.
 */
export function stepSeed(seed: number, step: number): bigint {
  let z = (BigInt(seed) * 0x9e3779b97f4a7c15n + BigInt(step) + 0x9e3779b97f4a7c15n) & MASK64;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return z ^ (z >> 31n);
}

/**
 * Bytes an engine commits for `config`: the weights at `weightBytes` per element (the decoder projections at
 * `projectionBytes` per weight when given: a quantized model's codes and scales) plus the KV cache and logits.
 */
export function engineBytes(
  config: Qwen3Config,
  maxContext: number,
  weightBytes: number,
  cacheBytes = weightBytes,
  projectionBytes = weightBytes,
): number {
  const { numLayers, numKvHeads, headDim, vocabSize, hiddenSize, tieWordEmbeddings } = config;
  // The parameter count of `config.ts`, inlined to keep this module free of the config parser.
  const projections =
    hiddenSize * headDim * (config.numHeads + numKvHeads) * 2 + 3 * hiddenSize * config.intermediateSize;
  const rest = headDim * 2 + 2 * hiddenSize;
  const floats = vocabSize * hiddenSize * (tieWordEmbeddings ? 1 : 2) + numLayers * rest + hiddenSize;
  const cache = numLayers * 2 * maxContext * numKvHeads * headDim * cacheBytes;
  return floats * weightBytes + numLayers * projections * projectionBytes + cache + vocabSize * 4;
}

const GIB = 1024 ** 3;
const gib = (bytes: number) => `${(bytes / GIB).toFixed(bytes < 10 * GIB ? 1 : 0)} GiB`;

/** Memory a machine reports: what it has and what is free now (`os.totalmem()` / `os.freemem()` on the host). */
export interface MemoryInfo {
  readonly totalBytes: number;
  readonly freeBytes: number;
}

/**
 * Refuses, before anything is allocated, an engine that cannot fit: `neededBytes` against the memory `where` has
 * free (host RAM for the cpu engine, device memory for the GPU engines).
 *
 * @throws QkMemoryError saying how much is needed, how much there is, and what to do.
 */
export function checkMemoryFits(
  op: string,
  neededBytes: number,
  memory: MemoryInfo,
  where: string,
  advice: string,
): void {
  if (neededBytes <= memory.freeBytes) return;
  const whole = neededBytes > memory.totalBytes;
  throw new QkMemoryError(
    op,
    `the model needs about ${gib(neededBytes)} of ${where} but ${whole ? `the machine has ${gib(memory.totalBytes)} in all` : `only ${gib(memory.freeBytes)} of ${gib(memory.totalBytes)} is free`}; ${advice} (loadQwen3's checkMemory: false, or qk's --skip-checks, skips this check).`,
    neededBytes,
    memory.freeBytes,
    memory.totalBytes,
  );
}

/** `bytes` for a sentence: GiB from 1 GiB up, else MiB (a small request still shows its size). */
const sizeText = (bytes: number) => (bytes >= GIB ? gib(bytes) : `${(bytes / 2 ** 20).toFixed(1)} MiB`);

/** What @qk/ops' `QkOutOfMemoryError` reports: the allocation asked for, and the device's memory at that moment. */
export interface DeviceShortfall {
  readonly requestedBytes: number;
  readonly freeBytes: number;
  readonly totalBytes: number;
}

/**
 * The error for a GPU engine whose allocation ran out of device memory while it was made (its weights' fused copies,
 * its KV cache of `maxContext` rows taking `cacheBytes`, its workspaces): how much was asked and free, what the
 * cache takes, and what to do. Nothing the engine made is left allocated by then (the caller frees it first).
 */
export function engineOutOfMemory(
  op: string,
  engine: string,
  shortfall: DeviceShortfall,
  cache: { readonly maxContext: number; readonly bytes: number },
): QkMemoryError {
  return outOfGpuMemory(
    op,
    `the ${engine} engine ran out of GPU memory`,
    shortfall,
    ` (its KV cache for maxContext ${cache.maxContext} takes ${sizeText(cache.bytes)} in all)`,
    'a smaller maxContext (--max-context), a smaller model',
  );
}

/**
 * The error for weights that ran out of device memory while they were uploaded (the memory check was skipped:
 * `checkMemory: false`, `--skip-checks`), in {@link engineOutOfMemory}'s words. The loaders free what they
 * uploaded before it is thrown.
 */
export function weightsOutOfMemory(op: string, shortfall: DeviceShortfall): QkMemoryError {
  return outOfGpuMemory(op, 'loading the weights ran out of GPU memory', shortfall, '', 'a smaller model');
}

/**
 * The error for a prompt whose prefill ran out of device memory: its activations (a chunk of `chunk` rows at a
 * time) did not fit beside the weights and the KV cache. The rows of the chunks that finished stay valid; nothing
 * records the failed one, so the next generation prefills it again.
 */
export function prefillOutOfMemory(
  op: string,
  shortfall: DeviceShortfall,
  prompt: { readonly tokens: number; readonly chunk: number },
): QkMemoryError {
  return outOfGpuMemory(
    op,
    `running the prompt (${prompt.tokens} tokens, prefilled ${Math.min(prompt.tokens, prompt.chunk)} at a time) ran out of GPU memory`,
    shortfall,
    '',
    'a smaller prefill chunk (prefillChunk, --prefill-chunk), a shorter prompt, a smaller maxContext (--max-context)',
  );
}

/** "<what>: it asked for X with Y free of Z<detail>; use <smaller>, or int8/int4 weights …, or free the GPU …". */
function outOfGpuMemory(
  op: string,
  what: string,
  { requestedBytes, freeBytes, totalBytes }: DeviceShortfall,
  detail: string,
  smaller: string,
): QkMemoryError {
  return new QkMemoryError(
    op,
    `${what}: it asked for ${sizeText(requestedBytes)} with ${sizeText(freeBytes)} free of ${sizeText(totalBytes)}${detail}; use ${smaller}, or int8/int4 weights (--weights int8 or int4), or free the GPU memory other processes or models hold.`,
    requestedBytes,
    freeBytes,
    totalBytes,
  );
}
