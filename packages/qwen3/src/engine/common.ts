/**
 * Checks and helpers every engine shares: the weights must match the config, forward-pass arguments must address
 * the cache correctly, and a sampling step draws from a seed derived from the generation's seed and the step.
 */
import { formatShape, QkIndexError, QkShapeError, QkValueError, type Tensor } from '@qk/ops';
import { QkContextError, QkMemoryError } from '../errors.js';
import type { Qwen3Config, Qwen3Weights, SamplingParams } from '../types.js';

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

/** Bytes an engine commits for `config`: the weights at `weightBytes` per element plus the KV cache and logits. */
export function engineBytes(
  config: Qwen3Config,
  maxContext: number,
  weightBytes: number,
  cacheBytes = weightBytes,
): number {
  const { numLayers, numKvHeads, headDim, vocabSize, hiddenSize, tieWordEmbeddings } = config;
  // The parameter count of `config.ts`, inlined to keep this module free of the config parser.
  const attention = hiddenSize * headDim * (config.numHeads + numKvHeads) * 2 + headDim * 2;
  const layer = attention + 3 * hiddenSize * config.intermediateSize + 2 * hiddenSize;
  const parameters = vocabSize * hiddenSize * (tieWordEmbeddings ? 1 : 2) + numLayers * layer + hiddenSize;
  const cache = numLayers * 2 * maxContext * numKvHeads * headDim * cacheBytes;
  return parameters * weightBytes + cache + vocabSize * 4;
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
