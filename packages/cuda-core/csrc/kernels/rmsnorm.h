#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../common/dtype.h"

namespace qk {

/**
 * RMSNorm over rows of `n`: out = x / sqrt(mean(x²) + eps) * weight. With `residual` set (fused add), the row is
 * first h = x + residual, rounded to the dtype and written to `residual_out`, then normalised.
 * `out` and `residual_out` may alias `x` and `residual` element for element.
 */
struct RmsnormArgs {
  DType dtype;
  void* out;
  void* residual_out;    // fused add only
  const void* x;
  const void* residual;  // nullptr: plain RMSNorm
  const void* weight;
  int64_t rows;
  int64_t n;
  float eps;
};

cudaError_t launch_rmsnorm(const RmsnormArgs& args, cudaStream_t stream);

}  // namespace qk
