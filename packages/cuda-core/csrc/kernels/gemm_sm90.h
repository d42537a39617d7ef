// Internal to the GEMM launcher: the Hopper path behind launch_gemm (gemm_sm90.cu, GEMM_SM90.md).
#pragma once
#include "gemm.h"

namespace qk {

/**
 * Smallest M that launch_gemm sends to the Hopper kernel. It beat the mma.sync kernel at every M measured
 * (16 and up, by 1.3–3×); below 16 nothing was measured, and callers send M ≤ kGemvMaxM to the GEMV kernels.
 */
constexpr int64_t kGemmSm90MinM = 16;

/** Tuning overrides for measurement; zero fields mean the launcher's own choice. */
struct GemmSm90Options {
  int bn = 0;        // output tile width: 256 or 128 cooperative, 128 or 64 ping-pong; 0 = the launcher's choice
  int pingpong = 0;  // with bn: ping-pong consumers (1) or cooperative (0)
  int group_m = 0;   // row blocks per rasterisation group
  int splits = 0;    // K slices (split K through the workspace, splitk_workspace.h); 0 = the launcher's choice
};

/**
 * Whether the Hopper kernel can run these arguments: a compute capability 9.0 device, bf16/f16, K a positive
 * multiple of 8 (TMA row strides are whole 16-byte units) and 16-byte aligned A and B. No M threshold.
 */
bool gemm_sm90_supports(const GemmArgs& args);

/** `gemm_sm90_supports` and M at least kGemmSm90MinM: what launch_gemm uses to pick this path. */
bool gemm_sm90_applies(const GemmArgs& args);

/** The Hopper kernel (TMA + wgmma, persistent); cudaErrorInvalidValue when `gemm_sm90_supports` is false. */
cudaError_t launch_gemm_sm90(const GemmArgs& args, cudaStream_t stream, const GemmSm90Options& options = {});

}  // namespace qk
