#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "../common/dtype.h"

namespace qk {

/**
 * Index of the largest element of each row of x `[rows, n]` → out i32 `[rows]`, with torch.argmax semantics:
 * ties go to the lowest index and the first NaN wins over everything.
 */
struct ArgmaxArgs {
  DType dtype;
  int32_t* out;
  const void* x;
  int64_t rows;
  int64_t n;
};

cudaError_t launch_argmax(const ArgmaxArgs& args, cudaStream_t stream);

/**
 * One token id per row of logits `[rows, vocab]` → out i32 `[rows]`, following `@qk/ops`' `sample`: candidates in
 * (logit descending, index ascending) order, the first `top_k` kept (0: all), weights p = exp((x − max)/T), the
 * shortest prefix whose weight reaches `top_p` of the kept total (1: all), then the first candidate whose
 * cumulative weight exceeds uniforms[r] · (nucleus total). `temperature` 0 or `top_k` 1 take the argmax.
 *
 * The selection never sorts: it locates the top-k boundary, the nucleus boundary and the drawn position in the
 * candidate order by searching a histogram of the order keys (16-bit bins; float32 logits refine the one bin
 * that holds a boundary), with weights accumulated as 2^-S fixed-point integers (S = 62 − ⌈log2 vocab⌉, float64
 * exp), so every sum is exact and order-independent: repeated runs give identical ids.
 *
 * A row holding NaN or +inf, or whose maximum is −inf (everything masked), gets id −1 (the caller reports it).
 */
struct SampleArgs {
  DType dtype;
  int32_t* out;
  const void* logits;
  int64_t rows;
  int64_t vocab;
  double temperature;
  int64_t top_k;
  double top_p;
  const double* uniforms;  // [rows]; unused (may be null) when temperature == 0 or top_k == 1
  void* workspace;         // sample_workspace_bytes(rows, vocab); unused (may be null) on the greedy path
  size_t workspace_bytes;
};

/**
 * The scale of sample's fixed-point weights for a row of `vocab` candidates: 2^S with S = 62 − ⌈log2 vocab⌉, so
 * any sum of weights (each ≤ 2^S) stays below 2^62.
 */
inline double sample_weight_scale(int64_t vocab) {
  int bits = 0;
  while ((static_cast<int64_t>(1) << bits) < vocab) bits++;
  return std::ldexp(1.0, 62 - bits);
}

/** Scratch bytes of launch_sample (any dtype): a 16-bit-bin histogram and an index list per row. */
size_t sample_workspace_bytes(int64_t rows, int64_t vocab);

/** True when launch_sample takes the argmax path (no uniforms, no workspace). */
inline bool sample_is_greedy(double temperature, int64_t top_k) { return temperature == 0.0 || top_k == 1; }

cudaError_t launch_sample(const SampleArgs& args, cudaStream_t stream);

}  // namespace qk
