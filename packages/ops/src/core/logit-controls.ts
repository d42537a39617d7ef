/**
 * The shapes that the sampling controls' CPU reference (ops/logit-controls.ts) and CUDA path (cuda/logit-controls.ts)
 * share, kept here so that the CUDA dispatch does not import the ops that call it.
 */
import type { Tensor } from '../tensor.js';

/** The scalar controls after checks, in the form the CPU and CUDA paths share. */
export interface ResolvedLogitControls {
  repetitionPenalty: number;
  presencePenalty: number;
  frequencyPenalty: number;
  /** ln(minP), or −∞ when min-p is off (minP 0 or temperature 0). */
  logMinP: number;
  temperature: number;
}

/** What `tokenLogprobs` returns, on the logits' device. */
export interface TokenLogprobs {
  /** f32 `[rows]`: `log softmax(logits[r])[ids[r]]`. */
  logprobs: Tensor<'f32'>;
  /** i32 `[rows, topN]`: the `topN` most likely tokens, by (logit descending, index ascending). */
  topIds: Tensor<'i32'>;
  /** f32 `[rows, topN]`: their log-probabilities. */
  topLogprobs: Tensor<'f32'>;
}
