/**
 * The engine table: which implementation runs a model, where its weights must live, and which one to pick by
 * default on this machine.
 */
import {
  cudaAvailable,
  cudaDeviceInfo,
  cudaStatus,
  type FloatDType,
  QkDeviceError,
  QkValueError,
} from '@qk/ops';
import { DEFAULT_GROUP_SIZE, type QuantizedLayer, type WeightFormat } from '../quant/quantize.js';
import type { Engine, EngineName, Qwen3Config, Qwen3Weights } from '../types.js';
import { createCpuEngine } from './cpu.js';
import { createLayeredEngine } from './layered.js';
import { megakernelAddonMismatch } from './megakernel/addon.js';
import { createMegakernelEngine } from './megakernel/engine.js';
import { type MegakernelWeightFormat, megakernelPlan } from './megakernel/kernel.js';
import type { MegakernelEngineOptions } from './megakernel/options.js';

export { checkWeightsMatchConfig, stepSeed } from './common.js';
export { type CpuEngineOptions, createCpuEngine } from './cpu.js';
export { type MegakernelEngineOptions, megakernelEngineOptions } from './megakernel/options.js';

/** Options of {@link createEngine}. */
export interface EngineOptions extends MegakernelEngineOptions {
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
   * `cpu` and `layered`: weight-only quantized decoder projections, one entry per layer (see
   * {@link ENGINE_WEIGHT_FORMATS}); the engine takes ownership of them.
   */
  readonly quantized?: readonly QuantizedLayer[];
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

/**
 * The weight formats of the decoder projections each engine runs. `cpu` runs int8/int4 through the `@qk/ops`
 * references (the definition of correct); `layered` keeps them quantized on the GPU (`linearInt8` / `linearInt4`,
 * prefill and decode); the `megakernel` prefills as `layered` does and streams the same codes in its decode steps,
 * dequantising them under its loads.
 */
export const ENGINE_WEIGHT_FORMATS: Readonly<Record<EngineName, readonly WeightFormat[]>> = Object.freeze({
  cpu: Object.freeze(['bf16', 'int8', 'int4'] as const),
  layered: Object.freeze(['bf16', 'int8', 'int4'] as const),
  megakernel: Object.freeze(['bf16', 'int8', 'int4'] as const),
});

/** True for the names in {@link ENGINE_NAMES}. */
export function isEngineName(name: unknown): name is EngineName {
  return typeof name === 'string' && (ENGINE_NAMES as readonly string[]).includes(name);
}

/**
 * Why the megakernel cannot decode `config` in `dtype` with its projections in `format` (default bf16) on this GPU,
 * or null when it can: it needs a Hopper-class GPU (compute capability 9.0 or newer: its weight stream uses TMA bulk
 * copies), bf16 activations, and a dense Qwen3 shape it serves (head size 128, at most 4 query heads per KV head, at
 * most 40 layers: 0.6B to 8B; INT4 groups that cut every projection's width into whole pairs), from an addon built
 * from this package's sources (megakernel/addon.ts).
 */
export function megakernelUnsupported(
  config: Qwen3Config,
  dtype: FloatDType,
  format?: MegakernelWeightFormat,
): string | null {
  if (!cudaAvailable()) return 'no usable GPU';
  const addon = megakernelAddonMismatch('megakernelUnsupported');
  if (addon !== undefined) return addon;
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
    ...(format === undefined ? {} : { weights: format }),
  });
  return plan.supported ? null : plan.reason;
}

/** The megakernel's format for quantized layers (the first projection's: every one has the same). */
export function quantizedFormat(layers: readonly QuantizedLayer[]): MegakernelWeightFormat {
  const q = layers[0]?.q;
  if (q === undefined) return { bits: 16 };
  if (q.bits === 8) return { bits: 8 };
  return { bits: 4, groupSize: q.weight.groupSize, zeroPoints: q.offsets !== undefined };
}

/**
 * The engine to use when none is named: with a usable GPU (`cudaAvailable()`), `'megakernel'` for a `config` it
 * serves with its projections in `weights` ({@link megakernelUnsupported}: Hopper or newer, the dense head-128
 * shapes; for INT4, groups that cut every projection into whole pairs: `format` says which, default groups of 128
 * without zero points), else `'layered'`; without a GPU, `'cpu'`. The megakernel engine decodes in the megakernel
 * up to its hand-off position and in the layered graph beyond (`megakernelUntil`), so it is at least as fast as the
 * layered engine at every position measured (packages/cuda-core/csrc/megakernel/DESIGN.md, "Numbers"; INT8 and INT4:
 * "Quantized weights"); it has no swappable modules: name `'layered'` to patch modules. Without `config`, a GPU gives
 * `'layered'`.
 */
export function defaultEngine(
  config?: Qwen3Config,
  weights: WeightFormat = 'bf16',
  format?: MegakernelWeightFormat,
): EngineName {
  if (!cudaAvailable()) return 'cpu';
  if (config === undefined) return 'layered';
  const kernel: MegakernelWeightFormat =
    format ??
    (weights === 'int8'
      ? { bits: 8 }
      : weights === 'int4'
        ? { bits: 4, groupSize: DEFAULT_GROUP_SIZE }
        : { bits: 16 });
  return megakernelUnsupported(config, 'bf16', kernel) === null ? 'megakernel' : 'layered';
}

/**
 * Throws, before any weights are loaded, when `name` cannot run here: an unknown name, a weight format the engine
 * does not run ({@link ENGINE_WEIGHT_FORMATS}; checked first, the same answer on every machine), or a GPU engine
 * without a usable GPU (the message gives `cudaStatus()`'s reason). With `config`, also a `megakernel` that cannot
 * serve the model in `dtype` ({@link megakernelUnsupported}).
 *
 * @throws QkValueError for an unknown or unavailable engine, or one that does not run `weights`.
 * @throws QkDeviceError for a GPU engine on a machine without a usable GPU.
 */
export function checkEngineAvailable(
  name: unknown,
  op = 'createEngine',
  model?: {
    config?: Qwen3Config;
    dtype?: FloatDType;
    weights?: WeightFormat;
    format?: MegakernelWeightFormat;
  },
): asserts name is EngineName {
  if (!isEngineName(name)) {
    throw new QkValueError(
      op,
      'engine',
      `must be one of ${ENGINE_NAMES.map((n) => `"${n}"`).join(', ')}, got ${JSON.stringify(name)}.`,
    );
  }
  const weights = model?.weights ?? 'bf16';
  if (!ENGINE_WEIGHT_FORMATS[name].includes(weights)) {
    throw new QkValueError(
      op,
      'engine',
      `is "${name}", which cannot run ${weights} weights; use one of ${ENGINE_NAMES.filter((n) =>
        ENGINE_WEIGHT_FORMATS[n].includes(weights),
      )
        .map((n) => `"${n}"`)
        .join(', ')}.`,
    );
  }
  if (ENGINE_PLACEMENT[name].device === 'cuda' && !cudaAvailable()) {
    const reason = (cudaStatus().reason ?? 'no reason given').replace(/\.+$/, '');
    throw new QkDeviceError(
      `engine "${name}" needs a GPU and none is usable (${reason}); use engine "cpu" instead.`,
      op,
    );
  }
  if (name === 'megakernel' && model?.config !== undefined) {
    const why = megakernelUnsupported(model.config, model.dtype ?? 'bf16', model.format);
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
      checkEngineAvailable(name, 'createEngine', {
        config,
        dtype: weights.embed.dtype,
        ...(options.quantized === undefined
          ? {}
          : {
              weights: options.quantized[0]?.q.bits === 4 ? ('int4' as const) : ('int8' as const),
              format: quantizedFormat(options.quantized),
            }),
      });
      return createMegakernelEngine(config, weights, options);
    default:
      checkEngineAvailable(name);
      throw new QkValueError('createEngine', 'engine', `unknown engine ${JSON.stringify(name)}.`);
  }
}
