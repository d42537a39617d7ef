#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../common/cuda_check.h"
#include "finite.h"

namespace qk {
namespace {

constexpr int kThreads = 256;

// A value is NaN or ±Inf exactly when all of its exponent bits are set; checked on the raw bits, so no conversion
// (and no flush of subnormals) can change the answer.
__device__ __forceinline__ bool bad16(uint32_t bits, uint32_t mask) { return (bits & mask) == mask; }
__device__ __forceinline__ bool bad32(uint32_t bits) { return (bits & 0x7f800000u) == 0x7f800000u; }

/** Adds this thread's (count, first) to the totals: one atomic pair per warp that found anything. */
__device__ __forceinline__ void publish(unsigned long long count, unsigned long long first, unsigned long long* stats) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    count += __shfl_xor_sync(0xffffffffu, count, o);
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, first, o);
    first = other < first ? other : first;
  }
  if ((threadIdx.x & 31) == 0 && count != 0) {
    atomicAdd(stats, count);
    atomicMin(stats + 1, first);
  }
}

/**
 * Elements of `bytes_per_elem` 2 or 4, read 16 bytes at a time over the aligned middle (`vec_begin` .. `vec_end` in
 * 16-byte units from the element-aligned base) and one element at a time over the head and tail.
 */
template <int kBytes>
__global__ void __launch_bounds__(kThreads)
    find_kernel(const uint8_t* __restrict__ x, int64_t count, int64_t head, uint32_t mask16, unsigned long long* stats) {
  constexpr int kPer = 16 / kBytes;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned long long n = 0, first = ~0ull;
  auto check = [&](uint32_t bits, int64_t index) {
    const bool bad = kBytes == 4 ? bad32(bits) : bad16(bits, mask16);
    if (bad) {
      n++;
      if (static_cast<unsigned long long>(index) < first) first = static_cast<unsigned long long>(index);
    }
  };
  auto element = [&](int64_t i) -> uint32_t {
    if constexpr (kBytes == 4) return reinterpret_cast<const uint32_t*>(x)[i];
    else return reinterpret_cast<const uint16_t*>(x)[i];
  };
  // Unaligned head (fewer than kPer elements) and the tail after the last whole 16-byte vector.
  const int64_t vecs = (count - head) / kPer;
  const int64_t tail = head + vecs * kPer;
  for (int64_t i = tid; i < head; i += stride) check(element(i), i);
  for (int64_t i = tail + tid; i < count; i += stride) check(element(i), i);
  const uint4* v = reinterpret_cast<const uint4*>(x + head * kBytes);
  for (int64_t j = tid; j < vecs; j += stride) {
    const uint4 w = __ldcs(v + j);
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    const int64_t base = head + j * kPer;
#pragma unroll
    for (int k = 0; k < 4; k++) {
      if constexpr (kBytes == 4) {
        check(words[k], base + k);
      } else {
        check(words[k] & 0xffffu, base + 2 * k);
        check(words[k] >> 16, base + 2 * k + 1);
      }
    }
  }
  publish(n, first, stats);
}

__global__ void reset_kernel(unsigned long long* stats) {
  stats[0] = 0;
  stats[1] = ~0ull;
}

}  // namespace

cudaError_t launch_find_non_finite(DType dtype, const void* x, int64_t count, unsigned long long* stats,
                                   cudaStream_t stream) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16) return cudaErrorInvalidValue;
  reset_kernel<<<1, 1, 0, stream>>>(stats);
  QK_RETURN_IF_ERROR(cudaGetLastError());
  if (count == 0) return cudaSuccess;
  const int bytes = static_cast<int>(dtype_size(dtype));
  const uintptr_t addr = reinterpret_cast<uintptr_t>(x);
  // Elements before the first 16-byte boundary; every element is aligned to its own size.
  int64_t head = static_cast<int64_t>(((16 - (addr & 15)) & 15) / bytes);
  if (head > count) head = count;
  int device = 0, sms = 0;
  QK_RETURN_IF_ERROR(cudaGetDevice(&device));
  QK_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t vecs = (count - head) * bytes / 16;
  int64_t blocks = (vecs + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  const int64_t cap = static_cast<int64_t>(sms) * 8;
  if (blocks > cap) blocks = cap;
  const auto* p = static_cast<const uint8_t*>(x);
  if (bytes == 4) {
    find_kernel<4><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p, count, head, 0, stats);
  } else {
    const uint32_t mask = dtype == DType::BF16 ? 0x7f80u : 0x7c00u;
    find_kernel<2><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p, count, head, mask, stats);
  }
  return cudaGetLastError();
}

}  // namespace qk
