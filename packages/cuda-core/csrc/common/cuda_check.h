// Every CUDA runtime call is checked. Kernel launchers return cudaError_t (launch layer, no N-API); the binding
// layer turns a failure into a JS exception that names the op through QK_CUDA_TRY.
#pragma once
#include <cuda_runtime.h>
#include <stdexcept>
#include <string>

namespace qk {

/** A failed CUDA call, carrying the op that made it and the CUDA error code. */
class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& op, cudaError_t code, const char* what)
      : std::runtime_error(op + ": " + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ") in " + what),
        op_(op),
        code_(code) {}
  const std::string& op() const { return op_; }
  cudaError_t code() const { return code_; }

 private:
  std::string op_;
  cudaError_t code_;
};

/** Out of device memory after the allocator released its cache: requested and free bytes for the message. */
class OutOfMemory : public std::runtime_error {
 public:
  OutOfMemory(const std::string& op, size_t requested, size_t free_bytes, size_t total_bytes)
      : std::runtime_error(op + ": out of GPU memory"), requested(requested), free_bytes(free_bytes), total_bytes(total_bytes) {}
  size_t requested, free_bytes, total_bytes;
};

/** A bad argument detected before any CUDA work (wrong extent, pointer outside a live allocation, …). */
class ArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace qk

#define QK_CUDA_TRY(op, expr)                                      \
  do {                                                             \
    cudaError_t qk_err_ = (expr);                                  \
    if (qk_err_ != cudaSuccess) throw ::qk::CudaError((op), qk_err_, #expr); \
  } while (0)

/** Inside launchers (which return cudaError_t): return the first failure. */
#define QK_RETURN_IF_ERROR(expr)            \
  do {                                      \
    cudaError_t qk_err_ = (expr);           \
    if (qk_err_ != cudaSuccess) return qk_err_; \
  } while (0)

/** Dispatches a float dtype to a type alias `T` and runs the body; other dtypes return cudaErrorInvalidValue. */
#define QK_DISPATCH_FLOAT(dtype, T, ...)                 \
  switch (dtype) {                                       \
    case ::qk::DType::F32: {                             \
      using T = float;                                   \
      __VA_ARGS__                                        \
    } break;                                             \
    case ::qk::DType::F16: {                             \
      using T = __half;                                  \
      __VA_ARGS__                                        \
    } break;                                             \
    case ::qk::DType::BF16: {                            \
      using T = __nv_bfloat16;                           \
      __VA_ARGS__                                        \
    } break;                                             \
    default:                                             \
      return cudaErrorInvalidValue;                      \
  }
