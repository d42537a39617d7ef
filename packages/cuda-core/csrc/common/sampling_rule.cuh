// The pieces of `sample`'s rule that more than one kernel applies: the candidate order key and the fixed-point
// weight (its scale is sample_weight_scale, kernels/sampling.h). The sampling kernels (kernels/sampling.cu) and the
// megakernel's in-kernel sampling both use these, so a token drawn in either place from the same logits and uniform
// is the same token.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace qk {

/**
 * A u32 key whose unsigned order is the float order of `x` (−0 counts as +0: the reference's comparator makes them
 * tie). NaN never reaches it.
 */
__device__ __forceinline__ unsigned sample_order_key(float x) {
  const unsigned u = x == 0.f ? 0u : __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/** The float of an order key (the inverse of sample_order_key). */
__device__ __forceinline__ float sample_key_value(unsigned k) {
  const unsigned u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
  return __uint_as_float(u);
}

/**
 * The fixed-point weight of a candidate, round(exp((x − max) / T) · scale), from a float64 exp; the division (not a
 * reciprocal) mirrors the TypeScript reference.
 */
__device__ __forceinline__ unsigned long long sample_weight(float x, double maxv, double temperature, double scale) {
  const double w = exp((static_cast<double>(x) - maxv) / temperature);
  return __double2ull_rn(w * scale);
}

/** Inclusive prefix sum of a u64 across the warp's lanes (integer: exact, the same in any order). */
__device__ __forceinline__ unsigned long long warp_inclusive_scan_u64(unsigned long long v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const unsigned long long t = __shfl_up_sync(0xffffffffu, v, off);
    if (lane >= off) v += t;
  }
  return v;
}

}  // namespace qk
