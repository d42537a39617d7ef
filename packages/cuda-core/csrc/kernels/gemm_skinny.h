// The small-M ("skinny") tensor-core linear: the path between the GEMV kernels (M = 1) and the tiled GEMMs, for
// chunked decode, verification of several tokens, small batches, and quantized weights at any M. Design and
// measurements: GEMM_SKINNY.md.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../common/dtype.h"
#include "gemv.h"

namespace qk {

/** How W is stored: dtype rows [N, K]; int8 [N, K] with one f32 scale per row; int4 packed [N, K/2] with f32 scales
 * [N, K/group] (low nibble = even k, stored q + 8), the layouts of quant.h. */
enum class SkinnyWeight : int32_t { Dense = 0, Int8 = 1, Int4 = 2 };

/**
 * out[M, N] = act(x[M, K] · Ŵᵀ + bias[N]) with Ŵ = W (dense), q·scale[n] (int8) or q·scale[n, k / group] (int4).
 * bf16/f16 only; fp32 accumulation, one rounding to the dtype. `bias` may be null; the quantized formats take
 * Activation::None only (what the quantized linear ops define).
 */
struct SkinnyArgs {
  DType dtype;
  SkinnyWeight weight;
  void* out;
  const void* x;
  const void* w;
  const float* scales;  // int8: [N]; int4: [N, K / group]; dense: unused
  const void* bias;     // nullptr: none
  int64_t m;
  int64_t k;
  int64_t n;
  int64_t group;  // int4 only
  Activation act;
};

/**
 * The M range in which launch_linear and the quantized linears prefer this kernel: from kSkinnyMinM rows up (the
 * GEMV kernels below), to `skinny_max_dense_m()` rows for dense W (the tiled GEMMs above): kSkinnyMaxDenseM, or
 * kSkinnyMaxDenseMHopper where the Hopper GEMM with split K takes over (on Hopper, projections of at least
 * kGemmSm90SmallMinCols columns go to that GEMM's swapped form from 2 rows: launch_linear); quantized W has no tiled
 * kernel, so it stays here at every M from kSkinnyMinM. Chosen from measurements (GEMM_SKINNY.md, GEMM_SM90.md).
 */
constexpr int64_t kSkinnyMinM = 2;
constexpr int64_t kSkinnyMaxDenseM = 32;
constexpr int64_t kSkinnyMaxDenseMHopper = 16;

/** The largest dense M this kernel keeps on the current device (see kSkinnyMaxDenseM). */
int64_t skinny_max_dense_m();

/** Rows of x one block covers; larger M runs as several row tiles, each reading W again (mostly from L2). */
constexpr int64_t kSkinnyTileM = 64;

/**
 * Whether the kernel takes these arguments: bf16/f16; K a positive multiple of 32; x and W 16-byte aligned; int4
 * groups of 32·2^i elements; the activation allowed for the format; M, N, K within int32 and M/64 row tiles within
 * a grid dimension.
 */
bool gemm_skinny_supports(const SkinnyArgs& args);

/**
 * Runs the kernel; cudaErrorInvalidValue when `gemm_skinny_supports` is false. `splits` > 0 forces the number of
 * K slices (measurement only; it is clamped to what the workspace and shared memory allow); 0 lets the launcher
 * choose from the grid it would otherwise leave idle.
 */
cudaError_t launch_gemm_skinny(const SkinnyArgs& args, cudaStream_t stream, int splits = 0);

/**
 * The kernel when it applies to these arguments (supported, M in its preferred range for the format) — then
 * `*launched` is true and the launch's error is returned — else nothing runs and the caller takes its own path.
 * A launch that finds no workspace during stream capture also leaves it to the caller.
 */
cudaError_t try_gemm_skinny(const SkinnyArgs& args, cudaStream_t stream, bool* launched);

}  // namespace qk
