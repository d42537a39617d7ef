#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../common/dtype.h"
#include "gemv.h"

namespace qk {

/**
 * out[M, N] = act(a[M, K] · b[N, K]ᵀ + bias[N]), both operands K-contiguous (x rows and nn.Linear weight rows).
 * bf16/f16: tensor cores (mma.sync m16n8k16, fp32 accumulation) on shared-memory tiles filled by a 3-stage cp.async
 * pipeline when K is a whole number of 16-byte vectors and the operands are aligned, plain loads otherwise.
 * f32: a SIMT tiled kernel. Any M, N, K (edges are masked; K = 0 gives act(bias)). `bias` may be null.
 */
struct GemmArgs {
  DType dtype;
  void* out;
  const void* a;
  const void* b;
  const void* bias;  // nullptr: none
  int64_t m;
  int64_t n;
  int64_t k;
  Activation act;
};

cudaError_t launch_gemm(const GemmArgs& args, cudaStream_t stream);

}  // namespace qk
