/**
 * The `layered` engine: the Qwen3 forward pass as one CUDA kernel per module, driven from TypeScript, with each
 * decode step a captured CUDA graph (layered-stack.ts says how) and greedy steps queued ahead of the caller
 * (decode-queue.ts). Its modules can be patched: any of RMSNorm, MLP, RoPE or attention swapped for another variant
 * or a user's function.
 */
import type { PiecewiseEngine } from '../generation/generation.js';
import type { Engine, Qwen3Config, Qwen3Weights } from '../types.js';
import { createGpuEngine } from './gpu-engine.js';
import { checkLayeredOptions, type LayeredEngineOptions } from './layered-options.js';
import { createLayeredStack } from './layered-stack.js';

export { DEFAULT_PREFILL_CHUNK, type LayeredEngineOptions } from './layered-options.js';

/**
 * The `layered` engine over `weights` (which it takes ownership of: `engine.dispose()` frees them, on the GPU).
 *
 * @throws QkDeviceError for weights that are not on the GPU; QkValueError for an option out of range;
 *   QkMemoryError when the KV cache (`maxContext`) does not fit.
 */
export function createLayeredEngine(
  config: Qwen3Config,
  weights: Qwen3Weights,
  options: LayeredEngineOptions,
): Engine & PiecewiseEngine {
  const op = 'layeredEngine';
  const settings = checkLayeredOptions(op, config, weights, options);
  const stack = createLayeredStack(op, 'layered', config, weights, settings, options.quantized);
  return createGpuEngine(op, stack, null);
}
