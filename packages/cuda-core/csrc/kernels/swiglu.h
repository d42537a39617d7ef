#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../common/dtype.h"

namespace qk {

/**
 * SwiGLU: out[r, i] = silu(gate[r, i]) · up[r, i] for r < rows, i < ffn, computed in float32 and rounded once.
 * `gate` and `up` rows are `in_stride` elements apart (separate projections: in_stride = ffn; a fused gate-up
 * projection `[rows, 2·ffn]`: up = gate + ffn, in_stride = 2·ffn); `out` is dense `[rows, ffn]` and must not
 * overlap `gate` or `up` except exactly (in_stride = ffn, out = gate or out = up).
 */
struct SwigluArgs {
  DType dtype;
  void* out;
  const void* gate;
  const void* up;
  int64_t rows;
  int64_t ffn;
  int64_t in_stride;
};

cudaError_t launch_swiglu(const SwigluArgs& args, cudaStream_t stream);

}  // namespace qk
