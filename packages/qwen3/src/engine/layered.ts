/**
 * The `layered` engine: the Qwen3 forward pass as one CUDA kernel per module, driven from TypeScript, with each
 * decode step a captured CUDA graph (layered-stack.ts says how) and greedy steps queued ahead of the caller
 * (decode-queue.ts). Its modules can be patched: any of RMSNorm, MLP, RoPE or attention swapped for another variant
 * or a user's function.
 */
import { QkValueError } from '@qk/ops';
import type { PiecewiseEngine } from '../generation/generation.js';
import type { Engine, Qwen3Config, Qwen3Weights } from '../types.js';
import { createGpuEngine } from './gpu-engine.js';
import { checkLayeredOptions, type LayeredEngineOptions } from './layered-options.js';
import { createLayeredStack } from './layered-stack.js';

export { DEFAULT_PREFILL_CHUNK, type LayeredEngineOptions } from './layered-options.js';

/**
 * The `layered` engine over `weights` (which it takes ownership of: `engine.dispose()` frees them, on the GPU).
 *
 * @throws QkDeviceError for weights that are not on the GPU; QkValueError for an option out of range, or a
 *   `megakernel` flag (the megakernel engine is `createMegakernelEngine`);
 *   QkMemoryError when the KV cache (`maxContext`) does not fit.
 */
export function createLayeredEngine(
  config: Qwen3Config,
  weights: Qwen3Weights,
  options: LayeredEngineOptions,
): Engine & PiecewiseEngine {
  const op = 'layeredEngine';
  // `{ megakernel: true }` here used to make the megakernel engine; a caller still passing it (plain JS: the type no
  // longer has it) must not silently get the layered one. (The megakernel's own options, which createEngine passes to
  // every engine, are ignored here as the cpu engine ignores them.)
  if ((options as { megakernel?: unknown }).megakernel !== undefined) {
    throw new QkValueError(
      op,
      'megakernel',
      'is not an option of the layered engine: create the megakernel engine with createMegakernelEngine(config, weights, options), or loadQwen3(dir, { engine: "megakernel" }).',
    );
  }
  const settings = checkLayeredOptions(op, config, weights, options);
  const stack = createLayeredStack(op, 'layered', config, weights, settings, options.quantized);
  return createGpuEngine(op, stack, null);
}
