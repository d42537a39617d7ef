#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../common/dtype.h"

namespace qk {

/**
 * Symmetric weight quantization of `weight` [N, K] (float dtype), bit for bit the @qk/ops reference: per group of
 * `group` consecutive values of a row, scale = f32(absmax / qmax) and q = clamp(roundHalfEven(w / scale), ±qmax),
 * both divisions in float64 as the JavaScript reference does them; an all-zero group gets scale 0 and q 0.
 * int8: qmax 127, one group per row (`group` = K), `qweight` int8 [N, K], `scales` f32 [N].
 * int4: qmax 7, `group` even and dividing K, `qweight` u8 [N, K/2] (low nibble = even k, stored q + 8),
 * `scales` f32 [N, K/group].
 * A group holding NaN or ±inf (the reference throws) gets a NaN scale and q = 0.
 */
struct QuantizeArgs {
  DType dtype;
  void* qweight;
  float* scales;
  const void* weight;
  int64_t n;
  int64_t k;
  int64_t group;
};

cudaError_t launch_quantize_int8(const QuantizeArgs& args, cudaStream_t stream);
cudaError_t launch_quantize_int4(const QuantizeArgs& args, cudaStream_t stream);

/**
 * Weight-only quantized linear, out[M, N] = x[M, K] · Wᵀ + bias with W dequantised in registers: int8
 * (Σ x·q)·scale[n]; int4 Σ_groups scale[n, g]·Σ x·q. fp32 accumulation, one rounding to x's dtype. The GEMV engine
 * of gemv.cu (16-byte loads of W, x staged in shared memory); M above 8 runs in chunks of 8 rows.
 */
struct QuantLinearArgs {
  DType dtype;
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

cudaError_t launch_linear_int8(const QuantLinearArgs& args, cudaStream_t stream);
cudaError_t launch_linear_int4(const QuantLinearArgs& args, cudaStream_t stream);

}  // namespace qk
