#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../common/dtype.h"

namespace qk {

/**
 * Flash-style attention of a block of queries against a KV cache, with GQA:
 * q `[q_len, q_heads, head_dim]`, k and v `[kv_len, kv_heads, head_dim]`, out `[q_len, q_heads, head_dim]`.
 * Query t sits at position `position_offset + t`; when `causal` it attends to keys j ≤ that position, otherwise
 * to all kv_len keys. Query head h reads KV head h / (q_heads / kv_heads). Float32 math (online softmax), one
 * rounding at the store. Causal callers guarantee position_offset + q_len ≤ kv_len.
 */
struct AttentionPrefillArgs {
  DType dtype;
  void* out;
  const void* q;
  const void* k;
  const void* v;
  int64_t q_len;
  int64_t kv_len;
  int64_t q_heads;
  int64_t kv_heads;
  int64_t head_dim;
  int64_t position_offset;
  bool causal;
  float scale;
};

/** Largest head_dim the prefill kernel accepts. */
constexpr int64_t kAttentionPrefillMaxHeadDim = 256;

cudaError_t launch_attention_prefill(const AttentionPrefillArgs& args, cudaStream_t stream);

}  // namespace qk
