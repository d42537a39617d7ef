#include <cuda_runtime.h>

namespace qk {

__global__ void probe_kernel(int* out) { *out = 42; }

cudaError_t launch_probe_kernel(int* out, cudaStream_t stream) {
  probe_kernel<<<1, 1, 0, stream>>>(out);
  return cudaGetLastError();
}

}  // namespace qk
