#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../common/dtype.h"

namespace qk {

/**
 * Split-KV ("flash-decoding") attention of one query token per head against a KV cache:
 * q `[q_heads, head_dim]`, k and v `[kv_len, kv_heads, head_dim]`, out `[q_heads, head_dim]`; query head h reads
 * KV head h / (q_heads / kv_heads) and attends to all `kv_len` keys: out = softmax(scale · q·Kᵀ) · V.
 *
 * The keys are cut into chunks; one block per (KV head, chunk, tile of ≤ 2 query heads) streams its chunk of K and
 * V through shared memory and serves the query heads of its tile, keeping a running max and sum in float32 (online
 * softmax). Each block writes a partial (max, sum, unnormalised acc[head_dim]) per query head to `workspace`;
 * a second kernel merges the chunks in a fixed order (deterministic). With a single chunk the first kernel writes
 * `out` directly. With `kv_len_device` a captured CUDA graph serves every context length up to
 * `kv_len` (the workspace is sized for `kv_len`).
 */
struct AttentionDecodeArgs {
  DType dtype;
  void* out;
  const void* q;
  const void* k;
  const void* v;
  int64_t kv_len;             // keys; with kv_len_device, the capacity (rows k and v hold)
  const int* kv_len_device;   // nullptr, or an int32 in device memory with the key count (1 … kv_len) read at run time
  int64_t q_heads;
  int64_t kv_heads;
  int64_t head_dim;
  float scale;
  void* workspace;          // float32 scratch, at least attention_decode_workspace_bytes(q_heads, head_dim, kv_len)
  size_t workspace_bytes;
};

/** Largest head_dim the decode kernels accept. */
constexpr int64_t kAttentionDecodeMaxHeadDim = 256;

/**
 * Scratch bytes `launch_attention_decode` needs for these sizes: an upper bound over every kv_heads and dtype,
 * non-decreasing in kv_len (a buffer sized for the longest context serves every shorter one).
 */
size_t attention_decode_workspace_bytes(int64_t q_heads, int64_t head_dim, int64_t kv_len);

cudaError_t launch_attention_decode(const AttentionDecodeArgs& args, cudaStream_t stream);

}  // namespace qk
