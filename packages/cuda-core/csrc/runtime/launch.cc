// Launch-layer queries: whether kernel launches use programmatic dependent launch (see csrc/common/launch.cuh),
// the device's multiprocessor count and compute capability.
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

cudaError_t sm_count(int* out) {
  static int cached = 0;
  if (cached == 0) {
    int dev = 0;
    int sms = 0;
    const cudaError_t got = cudaGetDevice(&dev);
    if (got != cudaSuccess) return got;
    const cudaError_t attr = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (attr != cudaSuccess) return attr;
    cached = sms > 0 ? sms : 1;
  }
  *out = cached;
  return cudaSuccess;
}

int compute_capability() {
  static const int cc = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return major * 10 + minor;
  }();
  return cc;
}

bool pdl_early_trigger() {
  static const bool early = [] {
    const char* env = std::getenv("QK_PDL_TRIGGER");
    return env != nullptr && std::strcmp(env, "early") == 0;
  }();
  return early;
}

}  // namespace qk
