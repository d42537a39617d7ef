// Host side of TMA: cuTensorMapEncodeTiled, looked up once from the driver at run time (the addon links the
// static cudart, not libcuda), shared by the Hopper kernels that describe their operands with tensor maps.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace qk {

using TensorMapEncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

/** The driver's cuTensorMapEncodeTiled (cudaErrorNotSupported when the driver has none). */
inline cudaError_t tensor_map_encoder(TensorMapEncodeTiled* out) {
  struct Found {
    TensorMapEncodeTiled fn = nullptr;
    cudaError_t err = cudaSuccess;
  };
  static const Found found = [] {
    Found f;
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    f.err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status);
    if (f.err == cudaSuccess && (status != cudaDriverEntryPointSuccess || p == nullptr)) f.err = cudaErrorNotSupported;
    if (f.err == cudaSuccess) f.fn = reinterpret_cast<TensorMapEncodeTiled>(p);
    return f;
  }();
  *out = found.fn;
  return found.err;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace qk
