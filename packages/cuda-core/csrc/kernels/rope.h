#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../common/dtype.h"

namespace qk {

/**
 * Rotary position embedding (rotate-half) of x `[tokens, heads, head_dim]`, optionally preceded by a per-head
 * RMSNorm (Qwen3's QK-norm) when `weight` is set.
 *
 * For token t at position p = positions[t] and pair i < head_dim/2, angle = fl32(float(p) · inv_freq[i]) (one
 * float32 multiply, as HF builds it; `inv_freq` is f32 `[head_dim/2]` precomputed on the host), then with
 * c = cos(angle), s = sin(angle) from the accurate sincosf:
 *   y[i] = v[i]·c − v[i + half]·s,  y[i + half] = v[i + half]·c + v[i]·s
 * where v = x (rope) or v = x · w / sqrt(mean(x², head) + eps) (qkNorm + rope). Float32 math, one rounding.
 * `out` may alias `x` element for element (in-place rotation). Positions must be exact in float32 (< 2^24).
 */
struct RopeArgs {
  DType dtype;
  void* out;
  const void* x;
  const void* weight;  // nullptr: plain RoPE; else the QK-norm weight `[head_dim]`
  const int32_t* positions;
  const float* inv_freq;
  int64_t tokens;
  int64_t heads;
  int64_t head_dim;
  float eps;
};

cudaError_t launch_rope(const RopeArgs& args, cudaStream_t stream);

}  // namespace qk

namespace qk {

/** Largest head_dim `launch_qk_norm_rope_append` serves (a lane keeps four pairs in registers). */
constexpr int64_t kRopeAppendMaxHeadDim = 256;

/**
 * The attention prologue of one fused q|k|v projection, in one launch. `qkv` is `[tokens, q_heads + 2·kv_heads,
 * head_dim]`; for token t at position p = positions[t]:
 *   q_out[t, h]          = qkNormRope(qkv[t, h], q_weight)                     h < q_heads
 *   k_cache[p, h]        = qkNormRope(qkv[t, q_heads + h], k_weight)           h < kv_heads
 *   v_cache[p, h]        = qkv[t, q_heads + kv_heads + h] (bits copied)        h < kv_heads
 * with launch_rope's numerics (one float32 multiply for the angle, accurate sincosf, fp32 norm, one rounding).
 * Cache rows are written only for 0 ≤ p < cache_rows (as the scatter kernel skips ids outside the table).
 */
struct QkNormRopeAppendArgs {
  DType dtype;
  void* q_out;
  void* k_cache;
  void* v_cache;
  const void* qkv;
  const void* q_weight;
  const void* k_weight;
  const int32_t* positions;
  const float* inv_freq;
  int64_t tokens;
  int64_t q_heads;
  int64_t kv_heads;
  int64_t head_dim;
  int64_t cache_rows;
  float eps;
};

cudaError_t launch_qk_norm_rope_append(const QkNormRopeAppendArgs& args, cudaStream_t stream);

}  // namespace qk
