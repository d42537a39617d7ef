#include "context.h"

#include <cstdlib>
#include <cstring>

#include "../common/cuda_check.h"

namespace qk {

// A one-thread kernel proves the binary carries code (SASS or PTX) this device can run.
cudaError_t launch_probe_kernel(int* out, cudaStream_t stream);

ProbeResult probe() {
  ProbeResult r;
  cudaRuntimeGetVersion(&r.runtime_version);
  r.error = cudaDriverGetVersion(&r.driver_version);
  if (r.error != cudaSuccess || r.driver_version == 0) {
    r.stage = "driver";
    if (r.error == cudaSuccess) r.error = cudaErrorInsufficientDriver;
    return r;
  }
  r.error = cudaGetDeviceCount(&r.device_count);
  if (r.error != cudaSuccess || r.device_count == 0) {
    r.stage = "device";
    if (r.error == cudaSuccess) r.error = cudaErrorNoDevice;
    cudaGetLastError();
    return r;
  }
  int* d = nullptr;
  r.error = cudaMalloc(&d, sizeof(int));
  if (r.error == cudaSuccess) {
    r.error = launch_probe_kernel(d, nullptr);
    if (r.error == cudaSuccess) r.error = cudaDeviceSynchronize();
    int value = 0;
    if (r.error == cudaSuccess) r.error = cudaMemcpy(&value, d, sizeof(int), cudaMemcpyDeviceToHost);
    if (r.error == cudaSuccess && value != 42) r.error = cudaErrorUnknown;
    cudaFree(d);
  }
  if (r.error != cudaSuccess) {
    r.stage = "kernel";
    cudaGetLastError();
  }
  return r;
}

Context::Context() {
  const char* dev = std::getenv("QK_CUDA_DEVICE");
  device_ = dev != nullptr ? std::atoi(dev) : 0;
  QK_CUDA_TRY("init", cudaSetDevice(device_));
  QK_CUDA_TRY("init", cudaGetDeviceProperties(&props_, device_));
  QK_CUDA_TRY("init", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  const char* sync = std::getenv("QK_CUDA_SYNC");
  sync_each_op_ = sync != nullptr && std::strcmp(sync, "0") != 0 && sync[0] != '\0';
}

Context& Context::get() {
  static Context* instance = new Context();  // never destroyed: the driver may unload first at exit
  return *instance;
}

void check_launch(const char* op, cudaError_t launch_result) {
  if (launch_result != cudaSuccess) throw CudaError(op, launch_result, "kernel launch");
  const cudaError_t last = cudaGetLastError();
  if (last != cudaSuccess) throw CudaError(op, last, "kernel launch");
  Context& ctx = Context::get();
  if (ctx.sync_each_op()) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    QK_CUDA_TRY(op, cudaStreamIsCapturing(ctx.stream(), &capturing));
    if (capturing == cudaStreamCaptureStatusNone) QK_CUDA_TRY(op, cudaStreamSynchronize(ctx.stream()));
  }
}

}  // namespace qk
