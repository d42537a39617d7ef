#include <cstdint>

#include "../common/cuda_check.h"
#include "copy.h"

namespace qk {
namespace {

constexpr int kUnroll = 4;

__global__ void __launch_bounds__(256) copy_vec_kernel(uint4* __restrict__ dst, const uint4* __restrict__ src, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) v[u] = __ldcs(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; u++) __stcs(dst + i + u * stride, v[u]);
  }
  for (; i < n; i += stride) __stcs(dst + i, __ldcs(src + i));
}

__global__ void copy_bytes_kernel(uint8_t* __restrict__ dst, const uint8_t* __restrict__ src, size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

}  // namespace

cudaError_t launch_copy(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  int device = 0, sms = 0, per_sm = 0;
  QK_RETURN_IF_ERROR(cudaGetDevice(&device));
  QK_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  QK_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, copy_vec_kernel, 256, 0));
  const unsigned grid = static_cast<unsigned>(sms * (per_sm > 0 ? per_sm : 1));
  const bool aligned = ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0;
  const size_t vecs = aligned ? bytes / 16 : 0;
  if (vecs > 0) copy_vec_kernel<<<grid, 256, 0, stream>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src), vecs);
  const size_t done = vecs * 16;
  if (done < bytes) {
    copy_bytes_kernel<<<grid, 256, 0, stream>>>(static_cast<uint8_t*>(dst) + done, static_cast<const uint8_t*>(src) + done, bytes - done);
  }
  return cudaGetLastError();
}

}  // namespace qk
