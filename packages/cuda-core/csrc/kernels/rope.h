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
