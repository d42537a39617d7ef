#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../common/dtype.h"

namespace qk {

/**
 * The sampling controls of `@qk/ops`' `applyLogitControls` over logits `[rows, vocab]` (any float dtype) → out f32
 * `[rows, vocab]`, operation for operation as the reference (float64, explicit rounding, no contraction): per token
 * with c = counts[t] and seen = c > 0 or prompt bit t, repetition (seen: x > 0 ? x / r : x · r), x − f·c, x − p when
 * c > 0, + bias[t], rounded to f32; a token outside `mask` becomes −∞; then, when `log_min_p` > −∞, every token with
 * (x − row max) / temperature < log_min_p becomes −∞. NaN and +∞ pass through unchanged so `sample` refuses the row.
 * Absent tensors (null) mean no history, no bias, no mask. Bitsets are u32 words, ⌈vocab / 32⌉ per row.
 */
struct LogitControlsArgs {
  DType dtype;
  float* out;
  const void* logits;
  int64_t rows;
  int64_t vocab;
  const int32_t* counts;         // [rows, vocab] or null
  const uint32_t* prompt_tokens;  // [rows, words] or null
  const float* bias;             // [rows, vocab] or null
  const uint32_t* mask;          // [rows, words] or null
  double repetition_penalty;     // > 0; 1 is off
  double presence_penalty;
  double frequency_penalty;
  double log_min_p;    // ln(min-p), −∞ when off
  double temperature;  // > 0 when min-p is on
  uint32_t* scratch;   // [rows]: row maxima; needed (non-null) only when min-p is on
};

cudaError_t launch_logit_controls(const LogitControlsArgs& args, cudaStream_t stream);

/** counts[r, ids[r]] += 1 for every row whose id lies in [0, vocab) (a refused row's −1 is skipped). */
struct TokenCountArgs {
  int32_t* counts;  // [rows, vocab]
  const int32_t* ids;  // [rows]
  int64_t rows;
  int64_t vocab;
};

cudaError_t launch_add_token_counts(const TokenCountArgs& args, cudaStream_t stream);

/** The most alternatives launch_token_logprobs reports per row. */
constexpr int kMaxTopLogprobs = 20;

/**
 * `@qk/ops`' `tokenLogprobs`: per row, logprob = x[ids[r]] − (max + ln Σ exp(x − max)) (float64 sums), and the
 * `top_n` largest logits by (value descending, index ascending) with their log-probabilities. A row holding NaN or
 * +∞, or entirely −∞, or whose id lies outside the vocabulary gets logprob NaN and top ids −1 (the caller reports it).
 */
struct TokenLogprobsArgs {
  DType dtype;
  float* logprobs;      // [rows]
  int32_t* top_ids;     // [rows, top_n] (null when top_n is 0)
  float* top_logprobs;  // [rows, top_n] (null when top_n is 0)
  const void* logits;   // [rows, vocab]
  const int32_t* ids;   // [rows]
  int64_t rows;
  int64_t vocab;
  int top_n;  // 0 … kMaxTopLogprobs
  void* scratch;  // token_logprobs_scratch_bytes(rows, vocab), 8-byte aligned
};

/** Bytes of TokenLogprobsArgs::scratch for `rows` rows of `vocab` logits. */
size_t token_logprobs_scratch_bytes(int64_t rows, int64_t vocab);

cudaError_t launch_token_logprobs(const TokenLogprobsArgs& args, cudaStream_t stream);

}  // namespace qk
