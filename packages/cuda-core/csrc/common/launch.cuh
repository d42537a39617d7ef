// Kernel launches with programmatic dependent launch (PDL, sm_90+).
//
// A kernel launched through `launch_kernel` may be scheduled while the kernel before it on the stream is still
// running (inside a captured CUDA graph this becomes a programmatic edge). That removes most of the gap between
// two short kernels, which is what a batch-1 decode step is made of. The contract, for every kernel launched this
// way: it calls `grid_dependency_wait()` before it reads or writes global memory. Before the wait it may only
// issue L2 prefetches (`prefetch_l2`): L2 is the device's point of coherence, so a prefetched line never hides a
// write, and that is how a GEMV starts pulling its weights from HBM under the previous kernel's tail.
// `allow_dependents_launch()` lets the next kernel be scheduled once every block of this one has called it (or
// exited); all of this one's blocks are resident by then, so the early arrivals cannot starve it.
//
// The wait returns only when the previous grid has completed and its writes are visible, and that grid itself
// waited for its predecessor, so ordering is transitive along the stream. On GPUs before sm_90, or with the
// environment variable QK_PDL=0, launches are ordinary and both device calls compile to nothing or return at once.
#pragma once
#include <cuda_runtime.h>

#include <utility>

namespace qk {

/** Waits until the previous kernel on the stream has finished and its memory is visible (PDL launches only). */
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/** Lets the next PDL kernel on the stream be scheduled (it still waits for this one's completion to read). */
__device__ __forceinline__ void allow_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/**
 * Asks L2 to fetch `bytes` (a multiple of 16) from 16-byte aligned `p` (sm_90 bulk prefetch; nothing before).
 * A hint only: it never faults the kernel's results and is safe before `grid_dependency_wait()`.
 */
__device__ __forceinline__ void prefetch_l2(const void* p, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

/** Multiprocessors of the current device (queried once; the process drives one device). */
cudaError_t sm_count(int* out);

/**
 * Compute capability of the current device as major · 10 + minor (90 on an H100/H200), queried once; 0 when it
 * cannot be read. Kernels built for sm_90a run only where this is exactly 90.
 */
int compute_capability();

/** Whether launches use PDL: compute capability ≥ 9.0 on the current device and QK_PDL not "0" (read once). */
bool pdl_enabled();

/**
 * Whether GEMV kernels release their dependents at their start instead of at their last tile: QK_PDL_TRIGGER=early
 * (read once). A tuning switch kept for measurement; the default is the late release.
 */
bool pdl_early_trigger();

/**
 * Launches `kernel` on `stream` with the PDL attribute when {@link pdl_enabled}; returns the launch's error. The
 * kernel must follow the contract in this file's header.
 */
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = pdl_enabled() ? 1 : 0;
  const cudaError_t launched = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  const cudaError_t last = cudaGetLastError();  // consumed here so that no later call reports it as its own
  return launched != cudaSuccess ? launched : last;
}

}  // namespace qk
