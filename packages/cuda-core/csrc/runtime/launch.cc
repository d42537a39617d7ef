// Whether kernel launches use programmatic dependent launch (see csrc/common/launch.cuh).
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

namespace qk {

bool pdl_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("QK_PDL");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    int dev = 0;
    int major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major >= 9;
  }();
  return enabled;
}

bool pdl_early_trigger() {
  static const bool early = [] {
    const char* env = std::getenv("QK_PDL_TRIGGER");
    return env != nullptr && std::strcmp(env, "early") == 0;
  }();
  return early;
}

}  // namespace qk
