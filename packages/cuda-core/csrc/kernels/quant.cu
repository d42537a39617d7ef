// Weight quantization (int8 per row, int4 per group) matching the @qk/ops references exactly, and the
// weight-only quantized linears, which run on the GEMV engine of gemv.cu.
//
// Quantization: one warp per group (a whole row for int8). The absmax is exact in fp32; the scale is
// f32(absmax / qmax) with the division in float64 and q = rint(w / scale) in float64, because the reference
// divides JavaScript numbers: an fp32 quotient could round to a .5 that the float64 one is not, and round the
// other way. Weights are read twice (absmax, then codes); this runs once per model load.
#include "../common/cuda_check.h"
#include "../common/numeric.cuh"
#include "gemm_skinny.h"
#include "gemv.h"
#include "quant.h"

namespace qk {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <int kQmax>
__device__ __forceinline__ int quantize_one(float v, float scale) {
  if (!(scale > 0.f)) return 0;  // all-zero group (scale 0) or non-finite group (NaN scale)
  double q = rint(static_cast<double>(v) / static_cast<double>(scale));
  q = fmin(fmax(q, -static_cast<double>(kQmax)), static_cast<double>(kQmax));
  return static_cast<int>(q);
}

template <typename T, bool kInt4>
__global__ void __launch_bounds__(kThreads)
    quantize_kernel(void* __restrict__ qweight, float* __restrict__ scales, const T* __restrict__ weight, int64_t n,
                    int64_t k, int64_t group) {
  constexpr int kQmax = kInt4 ? 7 : 127;
  const int lane = threadIdx.x & 31;
  const int64_t groups_per_row = k / group;
  const int64_t gid = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (gid >= n * groups_per_row) return;  // whole warps only: no block-level barrier follows
  const int64_t row = gid / groups_per_row;
  const int64_t g = gid - row * groups_per_row;
  const T* src = weight + row * k + g * group;

  float amax = 0.f;
  bool finite = true;
  for (int64_t i = lane; i < group; i += 32) {
    const float v = to_float(src[i]);
    finite = finite && isfinite(v);
    amax = fmaxf(amax, fabsf(v));
  }
  amax = warp_max(amax);
  finite = __all_sync(0xffffffffu, finite);
  const float scale =
      finite ? __double2float_rn(static_cast<double>(amax) / static_cast<double>(kQmax)) : __int_as_float(0x7fc00000);
  if (lane == 0) scales[gid] = scale;

  if constexpr (kInt4) {
    uint8_t* dst = static_cast<uint8_t*>(qweight) + row * (k / 2) + g * (group / 2);
    for (int64_t j = lane; j < group / 2; j += 32) {
      const int lo = quantize_one<kQmax>(to_float(src[2 * j]), scale);
      const int hi = quantize_one<kQmax>(to_float(src[2 * j + 1]), scale);
      dst[j] = static_cast<uint8_t>((lo + 8) | ((hi + 8) << 4));
    }
  } else {
    int8_t* dst = static_cast<int8_t*>(qweight) + row * k + g * group;
    for (int64_t i = lane; i < group; i += 32) dst[i] = static_cast<int8_t>(quantize_one<kQmax>(to_float(src[i]), scale));
  }
}

template <bool kInt4>
cudaError_t launch_quantize(const QuantizeArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.k < 0) return cudaErrorInvalidValue;
  if (a.n == 0 || a.k == 0) return cudaSuccess;
  if (a.group <= 0 || a.k % a.group != 0 || (kInt4 && a.group % 2 != 0)) return cudaErrorInvalidValue;
  const int64_t groups = a.n * (a.k / a.group);
  const int64_t blocks = (groups + kWarps - 1) / kWarps;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  QK_DISPATCH_FLOAT(a.dtype, T, {
    quantize_kernel<T, kInt4><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        a.qweight, a.scales, static_cast<const T*>(a.weight), a.n, a.k, a.group);
    return cudaGetLastError();
  });
  return cudaSuccess;
}

QuantGemvArgs to_gemv(const QuantLinearArgs& a, QuantFormat format) {
  QuantGemvArgs g{};
  g.format = format;
  g.dtype = a.dtype;
  g.out = a.out;
  g.x = a.x;
  g.qweight = a.qweight;
  g.scales = a.scales;
  g.bias = a.bias;
  g.m = a.m;
  g.k = a.k;
  g.n = a.n;
  g.group = a.group;
  return g;
}

}  // namespace

cudaError_t launch_quantize_int8(const QuantizeArgs& a, cudaStream_t stream) {
  QuantizeArgs row = a;
  row.group = a.k;  // one scale per output channel
  return launch_quantize<false>(row, stream);
}

cudaError_t launch_quantize_int4(const QuantizeArgs& a, cudaStream_t stream) { return launch_quantize<true>(a, stream); }

namespace {

/** M from kSkinnyMinM: the tensor-core kernel of gemm_skinny.cu (W read once per 64 rows); else the GEMV engine. */
cudaError_t launch_linear_quant(const QuantLinearArgs& a, QuantFormat format, cudaStream_t stream) {
  SkinnyArgs s{};
  s.dtype = a.dtype;
  s.weight = format == QuantFormat::Int8 ? SkinnyWeight::Int8 : SkinnyWeight::Int4;
  s.out = a.out;
  s.x = a.x;
  s.w = a.qweight;
  s.scales = a.scales;
  s.bias = a.bias;
  s.m = a.m;
  s.k = a.k;
  s.n = a.n;
  s.group = a.group;
  s.act = Activation::None;
  bool launched = false;
  const cudaError_t skinny = try_gemm_skinny(s, stream, &launched);
  if (launched) return skinny;
  return launch_gemv_quant(to_gemv(a, format), stream);
}

}  // namespace

cudaError_t launch_linear_int8(const QuantLinearArgs& a, cudaStream_t stream) {
  return launch_linear_quant(a, QuantFormat::Int8, stream);
}

cudaError_t launch_linear_int4(const QuantLinearArgs& a, cudaStream_t stream) {
  return launch_linear_quant(a, QuantFormat::Int4, stream);
}

}  // namespace qk
