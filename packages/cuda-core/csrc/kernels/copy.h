#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace qk {

/**
 * Device-to-device copy by a kernel: 16-byte accesses, four in flight per thread, grid-stride over the buffer.
 * Used as the bandwidth ceiling that benchmarks compare against, next to cudaMemcpyAsync.
 */
cudaError_t launch_copy(void* dst, const void* src, size_t bytes, cudaStream_t stream);

}  // namespace qk
