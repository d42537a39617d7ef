/**
 * The options of the layered kernels, which both GPU engines take (the megakernel engine besides its own), checked
 * before anything is allocated.
 */
import { QkDeviceError, QkValueError } from '@qk/ops';
import { checkQuantizedWeights, type QuantizedLayer } from '../quant/quantize.js';
import type { Qwen3Config, Qwen3Weights } from '../types.js';
import { checkWeightsMatchConfig } from './common.js';
import { checkFusable } from './projections.js';

/** Options of the layered kernels: {@link createLayeredEngine}'s, and the megakernel engine's besides its own. */
export interface LayeredEngineOptions {
  /** Cache rows: the longest prompt + generation the engine can hold. */
  readonly maxContext: number;
  /**
   * Only ids below this can be generated (default: the vocabulary). Qwen3's embedding has 151,936 rows but its
   * tokenizer 151,669 tokens; random weights would otherwise pick ids no tokenizer can print.
   */
  readonly vocabLimit?: number;
  /**
   * Prompt tokens per prefill pass (default {@link DEFAULT_PREFILL_CHUNK}). A longer prompt is prefilled chunk by
   * chunk, each chunk attending to the cache rows the earlier ones wrote, so the temporary activations (the largest
   * is chunk × FFN size × 2 for the gate/up projection) are bounded by the chunk, not by the prompt.
   */
  readonly prefillChunk?: number;
  /**
   * Weight-only quantized decoder projections, one entry per layer (from `quantizeLinears` or a quantized
   * checkpoint, on the CPU or the GPU). The engine copies them to the GPU as they are and takes ownership (they and
   * any float projections of `weights`, which may be absent, are freed); they run through `linearInt8` /
   * `linearInt4`. Embedding, LM head and norms come from `weights`. Not on the megakernel engine.
   */
  readonly quantized?: readonly QuantizedLayer[];
}

/**
 * Default prompt tokens per prefill pass: large enough that every GEMM has thousands of rows (the tensor cores stay
 * busy), small enough that the 8B gate/up activation of a chunk stays near 200 MB.
 */
export const DEFAULT_PREFILL_CHUNK = 4096;

/** {@link LayeredEngineOptions} checked, defaults applied. */
export interface LayeredSettings {
  readonly maxContext: number;
  readonly prefillChunk: number;
  readonly vocabLimit: number;
}

/**
 * Checks the weights and options the layered kernels run with, before anything is allocated (so that an error names
 * the engine's option). `floatOnly`: why the engine refuses `quantized` layers, where it does.
 */
export function checkLayeredOptions(
  op: string,
  config: Qwen3Config,
  weights: Qwen3Weights,
  options: LayeredEngineOptions,
  floatOnly?: string,
): LayeredSettings {
  if (weights.embed.device !== 'cuda') {
    throw new QkDeviceError('needs its weights on "cuda"; load them with device "cuda".', op);
  }
  const { quantized } = options;
  if (quantized === undefined) checkWeightsMatchConfig(op, config, weights);
  else {
    if (floatOnly !== undefined) throw new QkValueError(op, 'quantized', `cannot be given: ${floatOnly}.`);
    checkQuantizedWeights(op, config, weights, quantized);
    checkFusable(quantized);
  }
  const { maxContext } = options;
  if (!Number.isSafeInteger(maxContext) || maxContext < 1) {
    throw new QkValueError(op, 'maxContext', `must be a positive integer, got ${maxContext}.`);
  }
  const prefillChunk = options.prefillChunk ?? DEFAULT_PREFILL_CHUNK;
  if (!Number.isSafeInteger(prefillChunk) || prefillChunk < 1) {
    throw new QkValueError(op, 'prefillChunk', `must be a positive integer, got ${options.prefillChunk}.`);
  }
  const { vocabSize } = config;
  const vocabLimit = Math.min(options.vocabLimit ?? vocabSize, vocabSize);
  if (!Number.isSafeInteger(vocabLimit) || vocabLimit < 1) {
    throw new QkValueError(op, 'vocabLimit', `must be a positive integer, got ${options.vocabLimit}.`);
  }
  return { maxContext, prefillChunk, vocabLimit };
}
