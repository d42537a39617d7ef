#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../common/dtype.h"

namespace qk {

/** Fused epilogue of the linear kernels; the codes are `ActivationCode` of src/binding.ts. */
enum class Activation : int32_t { None = 0, Silu = 1, Gelu = 2, GeluTanh = 3, Swiglu = 4 };
/** Codes `linear` accepts from JS; Swiglu (which pairs rows) is reached only through rmsnormLinear's `glu`. */
constexpr int32_t kActivationCount = 4;

/** Largest M that `launch_linear` serves with the GEMV kernels; larger M runs the tensor-core GEMM (gemm.h). */
constexpr int64_t kGemvMaxM = 8;

/**
 * out[M, N] = act(x[M, K] · W[N, K]ᵀ + bias[N]) with W in nn.Linear layout (one row per output). fp32
 * accumulation, one rounding to the dtype. `bias` may be null. M ≤ kGemvMaxM: GEMV kernels that stream W once
 * with 16-byte loads; above: the tiled GEMM of gemm.cu.
 */
struct LinearArgs {
  DType dtype;
  void* out;
  const void* x;
  const void* weight;
  const void* bias;  // nullptr: none
  int64_t m;
  int64_t k;
  int64_t n;
  Activation act;
};

cudaError_t launch_linear(const LinearArgs& args, cudaStream_t stream);

/**
 * `out[M, N] = silu(x · gateᵀ) · (x · upᵀ)` with `args.weight` `[2N, K]` (gate rows, then up rows), in one
 * tensor-core GEMM whose epilogue pairs gate and up in registers (gemm_sm90.cu), where that kernel applies: a
 * compute capability 9.0 device, bf16/f16, M above the small-M kernels' range (skinny_max_dense_m()) or, from 2 rows,
 * at least kGemmSm90SmallMinCols rows in the fused weight; K a multiple of 8, 16-byte aligned x and weight. Sets `*launched` to whether it ran; when it did not, nothing was written and the
 * caller runs `launch_linear` over the 2N rows and the SwiGLU kernel. `args.bias` must be null, `args.act` None.
 */
cudaError_t launch_linear_swiglu(const LinearArgs& args, cudaStream_t stream, bool* launched);

/**
 * The decode GEMV with its neighbours fused in: out = glu(rmsnorm(x + residual, norm_weight, eps) · Wᵀ).
 * - residual (optional, needs norm_weight): h = x + residual rounded to the dtype, as the fused add+RMSNorm kernel
 *   rounds it; residual_out (optional) receives h, written once (by the blocks of grid column 0). It must not
 *   overlap x or residual: every block reads those.
 * - norm_weight (optional): each block normalises its rows itself (fp32 sum of squares, the normalised value
 *   rounded to the dtype exactly as the rmsnorm kernel writes it); null: the rows are used as they are.
 * - swiglu: W is [2n, k] = [gate; up] and out[m, j] = silu(g)·u of the two fp32 dot products (no rounding
 *   between), one rounding; else W is [n, k].
 * M above 8 is processed in chunks of 8 rows (each chunk streams W again).
 */
struct RmsnormLinearArgs {
  DType dtype;
  void* out;
  const void* x;
  const void* norm_weight;   // nullptr: no norm
  const void* weight;
  const void* residual;      // nullptr: none
  void* residual_out;        // nullptr: not written
  int64_t m;
  int64_t k;
  int64_t n;                 // output features
  float eps;
  bool swiglu;
};

cudaError_t launch_rmsnorm_linear(const RmsnormLinearArgs& args, cudaStream_t stream);

/** Weight formats of the GEMV engine's weight-only quantized paths (used by quant.cu). */
enum class QuantFormat : int32_t { Int8 = 0, Int4 = 1 };

/**
 * The GEMV engine on quantized weights: int8 `[N, K]` with one f32 scale per row, or int4 packed `[N, K/2]`
 * (low nibble = even k, stored q + 8) with f32 scales `[N, K/group]`. Any M (chunks of 8 rows re-stream W).
 */
struct QuantGemvArgs {
  QuantFormat format;
  DType dtype;  // of x, bias and out
  void* out;
  const void* x;
  const void* qweight;
  const float* scales;
  const void* bias;  // nullptr: none
  int64_t m;
  int64_t k;
  int64_t n;
  int64_t group;  // int4 only
};

cudaError_t launch_gemv_quant(const QuantGemvArgs& args, cudaStream_t stream);

}  // namespace qk

#if defined(__CUDACC__)
#include <math.h>
namespace qk {

/** The epilogue activation in fp32, matching the @qk/ops scalar definitions (erf GELU, tanh GELU, SiLU). */
template <Activation A>
__device__ __forceinline__ float activate(float v) {
  if constexpr (A == Activation::Silu) {
    return v / (1.f + expf(-v));
  } else if constexpr (A == Activation::Gelu) {
    return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
  } else if constexpr (A == Activation::Swiglu) {
    return v / (1.f + expf(-v));  // the gate's SiLU; the caller multiplies by the up projection
  } else if constexpr (A == Activation::GeluTanh) {
    const float u = 0.79788456080286536f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.f + tanhf(u));
  } else {
    return v;
  }
}

}  // namespace qk
#endif
