// Binding helpers: convert N-API values, check each argument (a TypeError naming it when it is wrong) and map
// C++ failures to JS exceptions that name the op. The binding layer does nothing else.
#pragma once
#include <napi.h>

#include <cstdint>
#include <string>

#include "../common/cuda_check.h"
#include "../common/dtype.h"
#include "../runtime/allocator.h"
#include "../runtime/context.h"

namespace qk::binding {

class Args {
 public:
  Args(const Napi::CallbackInfo& info, const char* op) : info_(info), op_(op) {}
  Napi::Env env() const { return info_.Env(); }
  const char* op() const { return op_; }

  [[noreturn]] void fail(const std::string& arg, const std::string& what) const {
    throw Napi::TypeError::New(env(), std::string(op_) + ": argument \"" + arg + "\" " + what);
  }

  /** Arguments passed (optional trailing arguments are read only when present). */
  size_t count() const { return info_.Length(); }

  void expect_count(size_t n) const {
    if (info_.Length() < n) {
      throw Napi::TypeError::New(env(), std::string(op_) + ": expected " + std::to_string(n) + " arguments, got " +
                                            std::to_string(info_.Length()));
    }
  }

  /** A device address passed as a bigint (0n means "none" only where `optional`). */
  void* ptr(size_t i, const char* name, bool optional = false) const {
    const Napi::Value v = info_[i];
    if (!v.IsBigInt()) fail(name, "must be a bigint device address");
    bool lossless = false;
    const uint64_t raw = v.As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless) fail(name, "is not a valid 64-bit device address");
    if (raw == 0 && !optional) fail(name, "is a null device address");
    return reinterpret_cast<void*>(raw);
  }

  int64_t int64(size_t i, const char* name, int64_t min = 0, int64_t max = INT64_MAX) const {
    const Napi::Value v = info_[i];
    if (!v.IsNumber()) fail(name, "must be a number");
    const double d = v.As<Napi::Number>().DoubleValue();
    if (d != static_cast<double>(static_cast<int64_t>(d))) fail(name, "must be an integer");
    const auto x = static_cast<int64_t>(d);
    if (x < min || x > max) fail(name, "must lie in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " + std::to_string(x));
    return x;
  }

  double number(size_t i, const char* name) const {
    const Napi::Value v = info_[i];
    if (!v.IsNumber()) fail(name, "must be a number");
    return v.As<Napi::Number>().DoubleValue();
  }

  bool boolean(size_t i, const char* name) const {
    const Napi::Value v = info_[i];
    if (!v.IsBoolean()) fail(name, "must be a boolean");
    return v.As<Napi::Boolean>().Value();
  }

  DType dtype(size_t i, const char* name) const {
    const int64_t code = int64(i, name, 0, kDTypeCount - 1);
    return static_cast<DType>(code);
  }

  DType float_dtype(size_t i, const char* name) const {
    const DType d = dtype(i, name);
    if (!is_float(d)) fail(name, std::string("must be a float dtype (f32, f16, bf16), got ") + dtype_name(d));
    return d;
  }

  /** Throws unless [p, p + bytes) lies in live GPU memory. */
  void check_range(const void* p, size_t bytes, const char* name) const {
    if (bytes == 0) return;
    try {
      allocator().check_range(p, bytes, op_, name);
    } catch (const ArgumentError& e) {
      throw Napi::RangeError::New(env(), e.what());
    }
  }

  /** `ptr(i)` checked to cover `count` elements of `d`. */
  void* tensor(size_t i, const char* name, DType d, int64_t count, bool optional = false) const {
    void* p = ptr(i, name, optional);
    if (p != nullptr) check_range(p, static_cast<size_t>(count) * dtype_size(d), name);
    return p;
  }

 private:
  const Napi::CallbackInfo& info_;
  const char* op_;
};

/**
 * Run before the body of every binding call, with its op name, when set: the megakernel ops set it so that a masked
 * launch waiting for the host's next mask is cancelled before any other work can queue behind it on the op stream
 * (ops_megakernel.cc, megakernelMask).
 */
inline void (*before_call)(const char* op) = nullptr;

/** Runs `body`, turning C++ failures into JS exceptions: CudaError → Error{code:'QK_CUDA'}, OutOfMemory →
 * Error{code:'QK_OOM', requested, free, total}. */
template <typename F>
Napi::Value guard(const Napi::CallbackInfo& info, const char* op, F&& body) {
  Napi::Env env = info.Env();
  try {
    if (before_call != nullptr) before_call(op);
    return body(Args(info, op));
  } catch (const Napi::Error&) {
    throw;
  } catch (const OutOfMemory& e) {
    Napi::Error err = Napi::Error::New(env, e.what());
    err.Set("code", Napi::String::New(env, "QK_OOM"));
    err.Set("op", Napi::String::New(env, op));
    err.Set("requested", Napi::Number::New(env, static_cast<double>(e.requested)));
    err.Set("free", Napi::Number::New(env, static_cast<double>(e.free_bytes)));
    err.Set("total", Napi::Number::New(env, static_cast<double>(e.total_bytes)));
    throw err;
  } catch (const CudaError& e) {
    Napi::Error err = Napi::Error::New(env, e.what());
    err.Set("code", Napi::String::New(env, "QK_CUDA"));
    err.Set("op", Napi::String::New(env, e.op()));
    err.Set("cudaError", Napi::String::New(env, cudaGetErrorName(e.code())));
    throw err;
  } catch (const ArgumentError& e) {
    throw Napi::TypeError::New(env, e.what());
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, std::string(op) + ": " + e.what());
  }
}

/** Registers `fn` on `exports` under `name`. */
inline void define(Napi::Env env, Napi::Object& exports, const char* name, Napi::Function::Callback fn) {
  exports.Set(name, Napi::Function::New(env, fn, name));
}

/** Launch result of a kernel launcher → exception naming the op (and a sync in QK_CUDA_SYNC mode). */
inline void launched(const char* op, cudaError_t result) { check_launch(op, result); }

inline cudaStream_t stream() { return Context::get().stream(); }

}  // namespace qk::binding
