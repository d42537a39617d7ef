/**
 * CUDA paths of the sampling controls, token counts and log-probabilities (kernels:
 * packages/cuda-core/csrc/kernels/logit_controls.cu). The min-p pass keeps one row maximum per row in a small
 * scratch tensor allocated per call through the caching allocator (released once the launch is queued: later work
 * on the same stream is the only reuse). Log-probabilities are read back here to refuse a row the kernel marked
 * (NaN), as the CPU path refuses it before computing.
 */

import type { ResolvedLogitControls, TokenLogprobs } from '../core/logit-controls.js';
import type { FloatDType } from '../dtype.js';
import { QkValueError } from '../errors.js';
import { Tensor } from '../tensor.js';
import { cudaOutput, dtypeCode, launch, ptr } from './common.js';

/** The control tensors of one call, already checked for dtype, shape and device. */
export interface CudaControlTensors {
  counts: Tensor | undefined;
  promptTokens: Tensor | undefined;
  bias: Tensor | undefined;
  mask: Tensor | undefined;
}

const optionalPtr = (t: Tensor | undefined): bigint => (t === undefined ? 0n : ptr(t));

export function cudaApplyLogitControls(
  logits: Tensor<FloatDType>,
  t: CudaControlTensors,
  r: ResolvedLogitControls,
  out?: Tensor,
): Tensor<'f32'> {
  const op = 'applyLogitControls';
  const [rows, vocab] = logits.shape as [number, number];
  const y = cudaOutput(op, out, [rows, vocab], 'f32');
  if (rows === 0) return y;
  const minP = r.logMinP !== -Infinity;
  const scratch = minP ? Tensor.empty([rows], 'i32', 'cuda') : undefined;
  try {
    launch(op, (b) =>
      b.applyLogitControls(
        dtypeCode(logits.dtype),
        ptr(y),
        ptr(logits),
        rows,
        vocab,
        optionalPtr(t.counts),
        optionalPtr(t.promptTokens),
        optionalPtr(t.bias),
        optionalPtr(t.mask),
        r.repetitionPenalty,
        r.presencePenalty,
        r.frequencyPenalty,
        r.logMinP,
        r.temperature,
        optionalPtr(scratch),
      ),
    );
  } finally {
    scratch?.dispose();
  }
  return y;
}

export function cudaAddTokenCounts(counts: Tensor, ids: Tensor): void {
  const [rows, vocab] = counts.shape as [number, number];
  if (rows === 0) return;
  launch('addTokenCounts', (b) => b.addTokenCounts(ptr(counts), ptr(ids), rows, vocab));
}

export function cudaTokenLogprobs(logits: Tensor<FloatDType>, ids: Tensor, topN: number): TokenLogprobs {
  const op = 'tokenLogprobs';
  const [rows, vocab] = logits.shape as [number, number];
  const logprobs = Tensor.empty([rows], 'f32', 'cuda');
  const topIds = Tensor.empty([rows, topN], 'i32', 'cuda');
  const topLogprobs = Tensor.empty([rows, topN], 'f32', 'cuda');
  try {
    if (rows > 0) {
      // The chunks' partial records (released once the launch is queued: the caching allocator hands the block only
      // to later work on the same stream).
      const bytes = launch(op, (b) => b.tokenLogprobsScratchBytes(rows, vocab));
      const scratch = Tensor.empty([bytes], 'u8', 'cuda');
      try {
        launch(op, (b) =>
          b.tokenLogprobs(
            dtypeCode(logits.dtype),
            ptr(logprobs),
            topN === 0 ? 0n : ptr(topIds),
            topN === 0 ? 0n : ptr(topLogprobs),
            ptr(logits),
            ptr(ids),
            rows,
            vocab,
            topN,
            ptr(scratch),
          ),
        );
      } finally {
        scratch.dispose();
      }
    }
    const values = logprobs.toArray();
    const bad = values.findIndex((v) => Number.isNaN(v));
    if (bad >= 0) {
      throw new QkValueError(
        op,
        'logits',
        `row ${bad} holds NaN or +Infinity, is entirely -Infinity, or its id lies outside the vocabulary [0, ${vocab}); logits must be finite or -Infinity with at least one finite value per row.`,
      );
    }
  } catch (e) {
    for (const t of [logprobs, topIds, topLogprobs]) t.dispose();
    throw e;
  }
  return { logprobs, topIds, topLogprobs };
}
