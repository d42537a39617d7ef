// Sampling bindings: argument conversion and checks only; the math is in csrc/kernels/sampling.cu.
#include <cmath>
#include <string>

#include "../kernels/logit_controls.h"
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

// applyLogitControls(dtype, out, logits, rows, vocab, counts, promptTokens, bias, mask, repetitionPenalty,
//                    presencePenalty, frequencyPenalty, logMinP, temperature, scratch)
// counts / promptTokens / bias / mask may be 0n (absent); scratch (u32 [rows]) only when logMinP is −∞ (min-p off).
Napi::Value ApplyLogitControls(const Napi::CallbackInfo& info) {
  return guard(info, "applyLogitControls", [](const Args& a) -> Napi::Value {
    a.expect_count(15);
    LogitControlsArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.rows = a.int64(3, "rows", 0, 65535);
    r.vocab = a.int64(4, "vocab", 1, INT32_MAX);
    const int64_t cells = r.rows * r.vocab;
    const int64_t words = r.rows * ((r.vocab + 31) / 32);
    r.out = static_cast<float*>(a.tensor(1, "out", DType::F32, cells));
    r.logits = a.tensor(2, "logits", r.dtype, cells);
    r.counts = static_cast<const int32_t*>(a.tensor(5, "counts", DType::I32, cells, true));
    r.prompt_tokens = static_cast<const uint32_t*>(a.tensor(6, "promptTokens", DType::I32, words, true));
    r.bias = static_cast<const float*>(a.tensor(7, "bias", DType::F32, cells, true));
    r.mask = static_cast<const uint32_t*>(a.tensor(8, "mask", DType::I32, words, true));
    r.repetition_penalty = a.number(9, "repetitionPenalty");
    if (!std::isfinite(r.repetition_penalty) || r.repetition_penalty <= 0.0) {
      a.fail("repetitionPenalty", "must be a finite number > 0 (1 is off)");
    }
    r.presence_penalty = a.number(10, "presencePenalty");
    if (!std::isfinite(r.presence_penalty)) a.fail("presencePenalty", "must be a finite number (0 is off)");
    r.frequency_penalty = a.number(11, "frequencyPenalty");
    if (!std::isfinite(r.frequency_penalty)) a.fail("frequencyPenalty", "must be a finite number (0 is off)");
    r.log_min_p = a.number(12, "logMinP");
    if (std::isnan(r.log_min_p) || r.log_min_p > 0.0) a.fail("logMinP", "must be ln(minP) <= 0, or -Infinity (off)");
    r.temperature = a.number(13, "temperature");
    const bool min_p = r.log_min_p != -INFINITY;
    if (min_p && (!std::isfinite(r.temperature) || r.temperature <= 0.0)) {
      a.fail("temperature", "must be a finite number > 0 when min-p is on");
    }
    r.scratch = static_cast<uint32_t*>(a.tensor(14, "scratch", DType::I32, r.rows, !min_p));
    launched("applyLogitControls", launch_logit_controls(r, stream()));
    return a.env().Undefined();
  });
}

// addTokenCounts(counts, ids, rows, vocab)
Napi::Value AddTokenCounts(const Napi::CallbackInfo& info) {
  return guard(info, "addTokenCounts", [](const Args& a) -> Napi::Value {
    a.expect_count(4);
    TokenCountArgs r{};
    r.rows = a.int64(2, "rows", 0, INT32_MAX);
    r.vocab = a.int64(3, "vocab", 1, INT32_MAX);
    r.counts = static_cast<int32_t*>(a.tensor(0, "counts", DType::I32, r.rows * r.vocab));
    r.ids = static_cast<const int32_t*>(a.tensor(1, "ids", DType::I32, r.rows));
    launched("addTokenCounts", launch_add_token_counts(r, stream()));
    return a.env().Undefined();
  });
}

// tokenLogprobsScratchBytes(rows, vocab): the bytes of tokenLogprobs' scratch.
Napi::Value TokenLogprobsScratchBytes(const Napi::CallbackInfo& info) {
  return guard(info, "tokenLogprobsScratchBytes", [](const Args& a) -> Napi::Value {
    a.expect_count(2);
    const int64_t rows = a.int64(0, "rows", 0, 65535);
    const int64_t vocab = a.int64(1, "vocab", 1, INT32_MAX);
    return Napi::Number::New(a.env(), static_cast<double>(token_logprobs_scratch_bytes(rows, vocab)));
  });
}

// tokenLogprobs(dtype, logprobs, topIds, topLogprobs, logits, ids, rows, vocab, topN, scratch)
// topIds / topLogprobs may be 0n when topN is 0; scratch: u8 of tokenLogprobsScratchBytes(rows, vocab).
Napi::Value TokenLogprobs(const Napi::CallbackInfo& info) {
  return guard(info, "tokenLogprobs", [](const Args& a) -> Napi::Value {
    a.expect_count(10);
    TokenLogprobsArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.rows = a.int64(6, "rows", 0, 65535);
    r.vocab = a.int64(7, "vocab", 1, INT32_MAX);
    r.top_n = static_cast<int>(a.int64(8, "topN", 0, kMaxTopLogprobs));
    if (r.top_n > r.vocab) a.fail("topN", "must not exceed the vocabulary");
    const bool none = r.top_n == 0;
    r.logprobs = static_cast<float*>(a.tensor(1, "logprobs", DType::F32, r.rows));
    r.top_ids = static_cast<int32_t*>(a.tensor(2, "topIds", DType::I32, r.rows * r.top_n, none));
    r.top_logprobs = static_cast<float*>(a.tensor(3, "topLogprobs", DType::F32, r.rows * r.top_n, none));
    r.logits = a.tensor(4, "logits", r.dtype, r.rows * r.vocab);
    r.ids = static_cast<const int32_t*>(a.tensor(5, "ids", DType::I32, r.rows));
    r.scratch = a.tensor(9, "scratch", DType::U8, static_cast<int64_t>(token_logprobs_scratch_bytes(r.rows, r.vocab)));
    launched("tokenLogprobs", launch_token_logprobs(r, stream()));
    return a.env().Undefined();
  });
}

}  // namespace

void register_sampling_ops(Napi::Env env, Napi::Object& exports) {
  define(env, exports, "argmax", Argmax);
  define(env, exports, "sampleWorkspaceBytes", SampleWorkspaceBytes);
  define(env, exports, "sample", Sample);
  define(env, exports, "applyLogitControls", ApplyLogitControls);
  define(env, exports, "addTokenCounts", AddTokenCounts);
  define(env, exports, "tokenLogprobs", TokenLogprobs);
  define(env, exports, "tokenLogprobsScratchBytes", TokenLogprobsScratchBytes);
}

}  // namespace qk::binding
