// Shared-memory addressing and the sm_80 asynchronous copy (cp.async) used by the tiled kernels.
#pragma once

#include <cstdint>

namespace qk {

/** The 32-bit shared-space address of a pointer into shared memory (what PTX shared loads and copies take). */
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/** 16-byte async copy global → shared (L2 only); `src_bytes` = 0 fills the destination with zeros, reading nothing. */
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/** Waits until at most `N` committed groups of this thread are still in flight. */
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/** One 16-byte shared load (one instruction; the compiler may split a generic uint4 load). */
__device__ __forceinline__ uint4 lds128(const void* p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(shared_address(p)));
  return v;
}

}  // namespace qk
