// Sampling bindings: argument conversion and checks only; the math is in csrc/kernels/sampling.cu.
#include <cmath>
#include <string>

#include "../kernels/sampling.h"
#include "args.h"
#include "registry.h"

namespace qk::binding {
namespace {

// argmax(dtype, out, x, rows, n)
Napi::Value Argmax(const Napi::CallbackInfo& info) {
  return guard(info, "argmax", [](const Args& a) -> Napi::Value {
    a.expect_count(5);
    ArgmaxArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.rows = a.int64(3, "rows", 0, INT32_MAX);
    r.n = a.int64(4, "n", 1, INT32_MAX);
    r.out = static_cast<int32_t*>(a.tensor(1, "out", DType::I32, r.rows));
    r.x = a.tensor(2, "x", r.dtype, r.rows * r.n);
    launched("argmax", launch_argmax(r, stream()));
    return a.env().Undefined();
  });
}

// sampleWorkspaceBytes(rows, vocab)
Napi::Value SampleWorkspaceBytes(const Napi::CallbackInfo& info) {
  return guard(info, "sampleWorkspaceBytes", [](const Args& a) -> Napi::Value {
    a.expect_count(2);
    const int64_t rows = a.int64(0, "rows", 0, 65535);
    const int64_t vocab = a.int64(1, "vocab", 1, INT32_MAX);
    return Napi::Number::New(a.env(), static_cast<double>(sample_workspace_bytes(rows, vocab)));
  });
}

// sample(dtype, out, logits, rows, vocab, temperature, topK, topP, uniforms, workspace, workspaceBytes)
// On the greedy path (temperature 0 or topK 1) `uniforms` and `workspace` may be 0n: they are not read.
Napi::Value Sample(const Napi::CallbackInfo& info) {
  return guard(info, "sample", [](const Args& a) -> Napi::Value {
    a.expect_count(11);
    SampleArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.rows = a.int64(3, "rows", 0, 65535);
    r.vocab = a.int64(4, "vocab", 1, INT32_MAX);
    r.temperature = a.number(5, "temperature");
    if (!std::isfinite(r.temperature) || r.temperature < 0.0) a.fail("temperature", "must be a finite number >= 0");
    r.top_k = a.int64(6, "topK", 0, INT64_MAX);
    r.top_p = a.number(7, "topP");
    if (!(r.top_p > 0.0 && r.top_p <= 1.0)) a.fail("topP", "must lie in (0, 1]");
    r.out = static_cast<int32_t*>(a.tensor(1, "out", DType::I32, r.rows));
    r.logits = a.tensor(2, "logits", r.dtype, r.rows * r.vocab);
    const bool greedy = sample_is_greedy(r.temperature, r.top_k);
    void* uniforms = a.ptr(8, "uniforms", greedy);
    if (uniforms != nullptr) {
      if ((reinterpret_cast<uintptr_t>(uniforms) & 7) != 0) a.fail("uniforms", "must be 8-byte aligned (f64)");
      a.check_range(uniforms, static_cast<size_t>(r.rows) * sizeof(double), "uniforms");
    }
    r.uniforms = static_cast<const double*>(uniforms);
    r.workspace = a.ptr(9, "workspace", greedy);
    const int64_t ws_bytes = a.int64(10, "workspaceBytes");
    if (!greedy) {
      const size_t needed = sample_workspace_bytes(r.rows, r.vocab);
      if (static_cast<size_t>(ws_bytes) < needed) {
        throw Napi::RangeError::New(a.env(), "sample: argument \"workspaceBytes\" (" + std::to_string(ws_bytes) +
                                                 ") is below the " + std::to_string(needed) +
                                                 " bytes sampleWorkspaceBytes gives for these sizes");
      }
    }
    if (r.workspace != nullptr) {
      if ((reinterpret_cast<uintptr_t>(r.workspace) & 15) != 0) a.fail("workspace", "must be 16-byte aligned");
      a.check_range(r.workspace, static_cast<size_t>(ws_bytes), "workspace");
    }
    r.workspace_bytes = static_cast<size_t>(ws_bytes);
    launched("sample", launch_sample(r, stream()));
    return a.env().Undefined();
  });
}

}  // namespace

void register_sampling_ops(Napi::Env env, Napi::Object& exports) {
  define(env, exports, "argmax", Argmax);
  define(env, exports, "sampleWorkspaceBytes", SampleWorkspaceBytes);
  define(env, exports, "sample", Sample);
}

}  // namespace qk::binding
