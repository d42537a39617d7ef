// The process's CUDA context: one device, one non-blocking stream that every op launches on, timing events and
// captured CUDA graphs addressed by integer handles.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace qk {

struct ProbeResult {
  int runtime_version = 0;
  int driver_version = 0;
  int device_count = 0;
  cudaError_t error = cudaSuccess;  // first failure on the way to a launched test kernel
  std::string stage;                // which step failed: "driver", "device", "kernel"
};

/** Checks driver, device and that this binary holds code the device can run, without throwing. */
ProbeResult probe();

class Context {
 public:
  static Context& get();
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }
  const cudaDeviceProp& props() const { return props_; }
  /** Forces a synchronize after every op (QK_CUDA_SYNC=1) so asynchronous faults name the op that caused them. */
  bool sync_each_op() const { return sync_each_op_; }

 private:
  Context();
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaDeviceProp props_{};
  bool sync_each_op_ = false;
};

/** After a launch: the launch error, or with QK_CUDA_SYNC=1 the first asynchronous error. */
void check_launch(const char* op, cudaError_t launch_result);

}  // namespace qk
