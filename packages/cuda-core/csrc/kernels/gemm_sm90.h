// Internal to the GEMM launcher: the Hopper path behind launch_gemm (gemm_sm90.cu, GEMM_SM90.md).
#pragma once
#include "gemm.h"

namespace qk {

/**
 * Smallest M that launch_gemm sends to the Hopper kernel: from 2 rows its swapped form (below) streams the weight
 * faster than the mma.sync kernel (GEMM_SM90.md); one row is a GEMV, and launch_linear sends it to the GEMV kernels.
 */
constexpr int64_t kGemmSm90MinM = 2;

/**
 * Up to this many rows the launcher runs the kernel with swapped operands (weight rows on wgmma's M of 64, tokens
 * on its N of 16, 32 or 64): at small M the unswapped tile's 128 rows are mostly zero padding.
 */
constexpr int64_t kGemmSm90SwapMaxM = 64;

/**
 * Within the small-M linear's rows (skinny_max_dense_m(), 16 on Hopper) launch_linear and launch_linear_swiglu take
 * the swapped form from this many output columns (SwiGLU: the 2N rows of the fused weight) and leave narrower
 * projections to the small-M linear, whose fixed cost is lower. H200, M 2–16: at 1,024 columns the small-M linear
 * wins (Qwen3-0.6B `o`: 5.2 against 6.7 µs), from 4,096 the swapped form does (0.6B `qkv` level, 8B `o` 12.9 against
 * 15.4 µs, 8B `gate_up` 54.7 against 57.3).
 */
constexpr int64_t kGemmSm90SmallMinCols = 2048;

/**
 * Whether launch_linear / launch_linear_swiglu hand M ≤ skinny_max_dense_m() rows to the Hopper kernel instead of the
 * small-M linear: the device and operands qualify (gemm_sm90_applies) and the projection has at least
 * kGemmSm90SmallMinCols output columns (`cols` counts both halves of a SwiGLU weight).
 */
bool gemm_sm90_takes_small_m(const GemmArgs& args, int64_t cols);

/** Tuning overrides for measurement; zero fields mean the launcher's own choice. */
struct GemmSm90Options {
  int bn = 0;        // output tile width: 256 or 128 cooperative, 128 or 64 ping-pong; 0 = the launcher's choice
  int pingpong = 0;  // with bn: ping-pong consumers (1) or cooperative (0)
  int group_m = 0;   // row blocks per rasterisation group
  int splits = 0;    // K slices (split K through the workspace, splitk_workspace.h); -1: stream K (swapped form); 0 = the launcher's choice
  int swap = 0;      // 1: swapped operands (bn = 16, 32 or 64 tokens per tile), -1: never; 0 = the launcher's choice
  int prefetch = -1;  // weight boxes per block prefetched to L2 before the PDL wait; -1 = the launcher's choice
  int issue_group = 0;  // K blocks whose loads the producer issues back to back; 0 = the launcher's choice
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
