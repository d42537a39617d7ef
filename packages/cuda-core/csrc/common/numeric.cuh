// Conversions between storage types and float32 for kernels, and 16-byte vector access. Kernels compute in
// float32 and convert at load and store, the way the @qk/ops references round once at the end.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

namespace qk {

template <typename T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

/** Elements of T in one 16-byte vector. */
template <typename T> constexpr int kVec = 16 / sizeof(T);

/** 16 bytes of T, loaded and stored as one uint4. */
template <typename T> struct alignas(16) Vec {
  T v[kVec<T>];
};

template <typename T> __device__ __forceinline__ Vec<T> load_vec(const T* p) {
  Vec<T> out;
  *reinterpret_cast<uint4*>(&out) = *reinterpret_cast<const uint4*>(p);
  return out;
}

/** 16-byte load that skips L1 allocation: for data read once (weights, activations streamed through). */
template <typename T> __device__ __forceinline__ Vec<T> load_vec_stream(const T* p) {
  Vec<T> out;
  uint4 raw;
  // Not volatile: the compiler may hoist these loads and keep several in flight.
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(raw.x), "=r"(raw.y), "=r"(raw.z), "=r"(raw.w)
               : "l"(p));
  *reinterpret_cast<uint4*>(&out) = raw;
  return out;
}

template <typename T> __device__ __forceinline__ void store_vec(T* p, const Vec<T>& v) {
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&v);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/** Sum over the block; every thread gets the result. `scratch` holds one float per warp. */
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = lane < warps ? scratch[lane] : 0.f;
  return warp_sum(total);
}

/**
 * Position of a 16-byte chunk as (row, column chunk) over rows of `cpr` chunks, advanced by a fixed grid-stride
 * step without dividing: the step's whole rows and remaining chunks are divided out once per thread.
 */
struct RowCursor {
  int64_t row;
  int64_t col;
  __device__ __forceinline__ void advance(int64_t rows_step, int64_t cols_step, int64_t cpr) {
    row += rows_step;
    col += cols_step;
    if (col >= cpr) {
      col -= cpr;
      row++;
    }
  }
};

}  // namespace qk
