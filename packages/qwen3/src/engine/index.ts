/**
 * The engine table: which implementation runs a model, where its weights must live, and which one to pick by
 * default on this machine.
 */
import {
  cudaAvailable,
  cudaDeviceInfo,
  cudaStatus,
  type FloatDType,
  megakernelPlan,
  QkDeviceError,
  QkValueError,
} from '@qk/ops';
import type { Engine, EngineName, Qwen3Config, Qwen3Weights } from '../types.js';
import { createCpuEngine } from './cpu.js';
import { createLayeredEngine } from './layered.js';

export { checkWeightsMatchConfig, stepSeed } from './common.js';
export { type CpuEngineOptions, createCpuEngine } from './cpu.js';

/** Options of {@link createEngine}. */
export interface EngineOptions {
  /** Cache rows: the longest prompt + generation the engine can hold. */
  readonly maxContext: number;
  /** Only ids below this are generated (default: the whole vocabulary); pass the tokenizer's `vocabSize`. */
  readonly vocabLimit?: number;
  /**
   * GPU engines: prompt tokens per prefill pass (default 4096); longer prompts prefill in chunks, so temporary
   * memory is bounded by the chunk.
   */
  readonly prefillChunk?: number;
  /**
   * `megakernel` only: decode steps per kernel launch, 1–64 (default 4, or QK_MEGAKERNEL_STEPS), greedy or sampled
   * with a top-k of at most 64. Tokens still reach the caller one at a time, as the kernel makes them.
   */
  readonly megakernelSteps?: number;
  /**
   * `megakernel` only: the decode position from which steps run in the layered graph instead (same weights and
   * cache). Default {@link megakernelHandoff}, or QK_MEGAKERNEL_UNTIL.
   */
  readonly megakernelUntil?: number;
  /**
   * `megakernel` only: decode steps, greedy and sampled in the kernel (top-k 1–64), screen the LM head in int8 and
   * recompute in bf16 only the rows that can hold the argmax or the top-k (the same tokens, about half the LM head's
   * bytes, an int8 copy of it in GPU memory). Default true where the megakernel can, unless QK_MEGAKERNEL_SCREEN=0.
   */
  readonly megakernelScreen?: boolean;
}

/** Where an engine wants its weights, and in which dtype unless the caller asks for another. */
export interface EnginePlacement {
  readonly device: 'cpu' | 'cuda';
  readonly dtype: FloatDType;
}

/** The engine names qk knows, in order of preference on a GPU. */
export const ENGINE_NAMES: readonly EngineName[] = Object.freeze(['layered', 'megakernel', 'cpu']);

/**
 * Where each engine wants its weights: `cpu` computes in float32 from CPU tensors; `layered` and `megakernel` run
 * bf16 weights on the GPU (the dtype of published Qwen3 checkpoints).
 */
export const ENGINE_PLACEMENT: Readonly<Record<EngineName, EnginePlacement>> = Object.freeze({
  cpu: Object.freeze({ device: 'cpu', dtype: 'f32' }),
  layered: Object.freeze({ device: 'cuda', dtype: 'bf16' }),
  megakernel: Object.freeze({ device: 'cuda', dtype: 'bf16' }),
});

/** True for the names in {@link ENGINE_NAMES}. */
export function isEngineName(name: unknown): name is EngineName {
  return typeof name === 'string' && (ENGINE_NAMES as readonly string[]).includes(name);
}

/**
 * Why the megakernel cannot decode `config` in `dtype` on this GPU, or null when it can: it needs a Hopper-class
 * GPU (compute capability 9.0 or newer: its weight stream uses TMA bulk copies), bf16 weights, and a dense Qwen3
 * shape it serves (head size 128, at most 4 query heads per KV head, at most 40 layers: 0.6B to 8B).
 */
export function megakernelUnsupported(config: Qwen3Config, dtype: FloatDType): string | null {
  if (!cudaAvailable()) return 'no usable GPU';
  const { major, minor } = cudaDeviceInfo().computeCapability;
  if (major < 9) return `the GPU has compute capability ${major}.${minor}; the megakernel needs 9.0 or newer`;
  if (dtype !== 'bf16') return `it runs bf16 weights, not ${dtype}`;
  if (config.headDim !== 128) return `it needs head size 128, the model has ${config.headDim}`;
  const plan = megakernelPlan({
    hidden: config.hiddenSize,
    qHeads: config.numHeads,
    kvHeads: config.numKvHeads,
    ffn: config.intermediateSize,
    layers: config.numLayers,
    vocab: config.vocabSize,
  });
  return plan.supported ? null : plan.reason;
}

/**
 * The engine to use when none is named: with a usable GPU (`cudaAvailable()`), `'megakernel'` for a `config` it
 * serves in bf16 ({@link megakernelUnsupported}: Hopper or newer, the dense head-128 shapes), else `'layered'`;
 * without a GPU, `'cpu'`. The megakernel engine decodes in the megakernel up to its hand-off position and in the
 * layered graph beyond (`megakernelUntil`), so it is at least as fast as the layered engine at every position
 * measured (packages/cuda-core/csrc/megakernel/DESIGN.md, "Numbers"); it has no swappable modules: name `'layered'`
 * to patch modules. Without `config`, a GPU gives `'layered'`.
 */
export function defaultEngine(config?: Qwen3Config): EngineName {
  if (!cudaAvailable()) return 'cpu';
  return config !== undefined && megakernelUnsupported(config, 'bf16') === null ? 'megakernel' : 'layered';
}

/**
 * Throws, before any weights are loaded, when `name` cannot run here: an unknown name, or a GPU engine without a
 * usable GPU (the message gives `cudaStatus()`'s reason). With `config`, also a `megakernel` that cannot serve
 * the model in `dtype` ({@link megakernelUnsupported}).
 *
 * @throws QkValueError for an unknown or unavailable engine.
 * @throws QkDeviceError for a GPU engine on a machine without a usable GPU.
 */
export function checkEngineAvailable(
  name: unknown,
  op = 'createEngine',
  model?: { config: Qwen3Config; dtype: FloatDType },
): asserts name is EngineName {
  if (!isEngineName(name)) {
    throw new QkValueError(
      op,
      'engine',
      `must be one of ${ENGINE_NAMES.map((n) => `"${n}"`).join(', ')}, got ${JSON.stringify(name)}.`,
    );
  }
  if (ENGINE_PLACEMENT[name].device === 'cuda' && !cudaAvailable()) {
    const reason = (cudaStatus().reason ?? 'no reason given').replace(/\.+$/, '');
    throw new QkDeviceError(
      `engine "${name}" needs a GPU and none is usable (${reason}); use engine "cpu" instead.`,
      op,
    );
  }
  if (name === 'megakernel' && model !== undefined) {
    const why = megakernelUnsupported(model.config, model.dtype);
    if (why !== null) {
      throw new QkValueError(
        op,
        'engine',
        `is "megakernel", which cannot run this model here: ${why}; use "layered".`,
      );
    }
  }
}

/**
 * Builds engine `name` over `weights` (which it takes ownership of: `engine.dispose()` frees them). The weights
 * should sit where {@link ENGINE_PLACEMENT} says; the `cpu` engine converts others itself.
 *
 * @throws QkValueError for an unknown name, or a `megakernel` that cannot serve the model.
 */
export function createEngine(
  name: EngineName,
  config: Qwen3Config,
  weights: Qwen3Weights,
  options: EngineOptions,
): Engine {
  switch (name) {
    case 'cpu':
      return createCpuEngine(config, weights, options);
    case 'layered':
      return createLayeredEngine(config, weights, options);
    case 'megakernel':
      checkEngineAvailable(name, 'createEngine', { config, dtype: weights.embed.dtype });
      return createLayeredEngine(config, weights, { ...options, megakernel: true });
    default:
      checkEngineAvailable(name);
      throw new QkValueError('createEngine', 'engine', `unknown engine ${JSON.stringify(name)}.`);
  }
}
