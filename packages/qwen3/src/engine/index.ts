/**
 * The engine table: which implementation runs a model, where its weights must live, and which one to pick by
 * default on this machine.
 */
import { cudaAvailable, cudaStatus, type FloatDType, QkDeviceError, QkValueError } from '@qk/ops';
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
}

/** Where an engine wants its weights, and in which dtype unless the caller asks for another. */
export interface EnginePlacement {
  readonly device: 'cpu' | 'cuda';
  readonly dtype: FloatDType;
}

/** The engine names qk knows, in order of preference on a GPU. */
export const ENGINE_NAMES: readonly EngineName[] = Object.freeze(['layered', 'megakernel', 'cpu']);

/**
 * Where each engine wants its weights: `cpu` computes in float32 from CPU tensors; `layered` runs bf16 weights on
 * the GPU (the dtype of published Qwen3 checkpoints), `megakernel` likewise once it exists.
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

/** `'layered'` when a usable GPU and the qk CUDA addon are present (`cudaAvailable()`), else `'cpu'`. */
export function defaultEngine(): EngineName {
  return cudaAvailable() ? 'layered' : 'cpu';
}

/**
 * Throws, before any weights are loaded, when `name` cannot run here: an unknown name, `megakernel` (not built
 * yet), or a GPU engine without a usable GPU (the message gives `cudaStatus()`'s reason).
 *
 * @throws QkValueError for an unknown or unavailable engine.
 * @throws QkDeviceError for a GPU engine on a machine without a usable GPU.
 */
export function checkEngineAvailable(name: unknown, op = 'createEngine'): asserts name is EngineName {
  if (!isEngineName(name)) {
    throw new QkValueError(
      op,
      'engine',
      `must be one of ${ENGINE_NAMES.map((n) => `"${n}"`).join(', ')}, got ${JSON.stringify(name)}.`,
    );
  }
  if (name === 'megakernel') {
    throw new QkValueError(
      op,
      'engine',
      'is "megakernel", which is not available yet; use "layered" on a GPU (or "cpu").',
    );
  }
  if (ENGINE_PLACEMENT[name].device === 'cuda' && !cudaAvailable()) {
    const reason = (cudaStatus().reason ?? 'no reason given').replace(/\.+$/, '');
    throw new QkDeviceError(
      `engine "${name}" needs a GPU and none is usable (${reason}); use engine "cpu" instead.`,
      op,
    );
  }
}

/**
 * Builds engine `name` over `weights` (which it takes ownership of: `engine.dispose()` frees them). The weights
 * should sit where {@link ENGINE_PLACEMENT} says; the `cpu` engine converts others itself.
 *
 * @throws QkValueError for `megakernel` (not available yet) or an unknown name.
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
    default:
      checkEngineAvailable(name);
      throw new QkValueError('createEngine', 'engine', `unknown engine ${JSON.stringify(name)}.`);
  }
}
