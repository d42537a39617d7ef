// Attention bindings: argument conversion and checks only; the math is in csrc/kernels/attention_*.cu.
#include <string>

#include "../kernels/attention_decode.h"
#include "../kernels/attention_prefill.h"
#include "args.h"
#include "registry.h"

namespace qk::binding {
namespace {

/** qHeads must be a multiple of kvHeads (GQA groups). */
void check_groups(const Args& a, int64_t q_heads, int64_t kv_heads) {
  if (q_heads % kv_heads != 0) {
    a.fail("qHeads", "(" + std::to_string(q_heads) + ") must be a multiple of kvHeads (" + std::to_string(kv_heads) + ")");
  }
}

float finite_scale(const Args& a, size_t i) {
  const double s = a.number(i, "scale");
  if (!(s > 0.0) || s > 3.4e38) a.fail("scale", "must be a positive finite float32 number");
  return static_cast<float>(s);
}

// attentionDecodeWorkspaceBytes(qHeads, headDim, kvLen)
Napi::Value AttentionDecodeWorkspaceBytes(const Napi::CallbackInfo& info) {
  return guard(info, "attentionDecodeWorkspaceBytes", [](const Args& a) -> Napi::Value {
    a.expect_count(3);
    const int64_t q_heads = a.int64(0, "qHeads", 1, 65535);
    const int64_t head_dim = a.int64(1, "headDim", 1, kAttentionDecodeMaxHeadDim);
    const int64_t kv_len = a.int64(2, "kvLen", 1, INT32_MAX);
    return Napi::Number::New(a.env(), static_cast<double>(attention_decode_workspace_bytes(q_heads, head_dim, kv_len)));
  });
}

// attentionDecode(dtype, out, q, k, v, kvLen, qHeads, kvHeads, headDim, scale, workspace, workspaceBytes,
//                 kvLenDevice = 0n)
Napi::Value AttentionDecode(const Napi::CallbackInfo& info) {
  return guard(info, "attentionDecode", [](const Args& a) -> Napi::Value {
    a.expect_count(12);
    AttentionDecodeArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.kv_len = a.int64(5, "kvLen", 1, INT32_MAX);
    r.q_heads = a.int64(6, "qHeads", 1, 65535);
    r.kv_heads = a.int64(7, "kvHeads", 1, 65535);
    r.head_dim = a.int64(8, "headDim", 1, kAttentionDecodeMaxHeadDim);
    check_groups(a, r.q_heads, r.kv_heads);
    r.scale = finite_scale(a, 9);
    const int64_t q_count = r.q_heads * r.head_dim;
    const int64_t kv_count = r.kv_len * r.kv_heads * r.head_dim;
    r.out = a.tensor(1, "out", r.dtype, q_count);
    r.q = a.tensor(2, "q", r.dtype, q_count);
    r.k = a.tensor(3, "k", r.dtype, kv_count);
    r.v = a.tensor(4, "v", r.dtype, kv_count);
    const int64_t ws_bytes = a.int64(11, "workspaceBytes");
    const size_t needed = attention_decode_workspace_bytes(r.q_heads, r.head_dim, r.kv_len);
    if (static_cast<size_t>(ws_bytes) < needed) {
      throw Napi::RangeError::New(a.env(), "attentionDecode: argument \"workspaceBytes\" (" + std::to_string(ws_bytes) +
                                               ") is below the " + std::to_string(needed) +
                                               " bytes attentionDecodeWorkspaceBytes gives for these sizes");
    }
    r.workspace = a.ptr(10, "workspace");
    if ((reinterpret_cast<uintptr_t>(r.workspace) & 15) != 0) a.fail("workspace", "must be 16-byte aligned");
    a.check_range(r.workspace, static_cast<size_t>(ws_bytes), "workspace");
    r.workspace_bytes = static_cast<size_t>(ws_bytes);
    r.kv_len_device = a.count() > 12 ? static_cast<const int*>(a.ptr(12, "kvLenDevice", true)) : nullptr;
    if (r.kv_len_device != nullptr) a.check_range(r.kv_len_device, sizeof(int32_t), "kvLenDevice");
    launched("attentionDecode", launch_attention_decode(r, stream()));
    return a.env().Undefined();
  });
}

// attentionPrefill(dtype, out, q, k, v, qLen, kvLen, qHeads, kvHeads, headDim, positionOffset, causal, scale)
Napi::Value AttentionPrefill(const Napi::CallbackInfo& info) {
  return guard(info, "attentionPrefill", [](const Args& a) -> Napi::Value {
    a.expect_count(13);
    AttentionPrefillArgs r{};
    r.dtype = a.float_dtype(0, "dtype");
    r.q_len = a.int64(5, "qLen", 0, INT32_MAX);
    r.kv_len = a.int64(6, "kvLen", 1, INT32_MAX);
    r.q_heads = a.int64(7, "qHeads", 1, 65535);
    r.kv_heads = a.int64(8, "kvHeads", 1, 65535);
    r.head_dim = a.int64(9, "headDim", 1, kAttentionPrefillMaxHeadDim);
    check_groups(a, r.q_heads, r.kv_heads);
    r.position_offset = a.int64(10, "positionOffset", 0, INT32_MAX);
    r.causal = a.boolean(11, "causal");
    r.scale = finite_scale(a, 12);
    if (r.causal && r.position_offset + r.q_len > r.kv_len) {
      throw Napi::RangeError::New(a.env(), "attentionPrefill: argument \"positionOffset\" (" +
                                               std::to_string(r.position_offset) + ") + qLen (" + std::to_string(r.q_len) +
                                               ") exceeds kvLen (" + std::to_string(r.kv_len) + ") of a causal call");
    }
    const int64_t q_count = r.q_len * r.q_heads * r.head_dim;
    const int64_t kv_count = r.kv_len * r.kv_heads * r.head_dim;
    r.out = a.tensor(1, "out", r.dtype, q_count);
    r.q = a.tensor(2, "q", r.dtype, q_count);
    r.k = a.tensor(3, "k", r.dtype, kv_count);
    r.v = a.tensor(4, "v", r.dtype, kv_count);
    launched("attentionPrefill", launch_attention_prefill(r, stream()));
    return a.env().Undefined();
  });
}

}  // namespace

void register_attention_ops(Napi::Env env, Napi::Object& exports) {
  define(env, exports, "attentionDecodeWorkspaceBytes", AttentionDecodeWorkspaceBytes);
  define(env, exports, "attentionDecode", AttentionDecode);
  define(env, exports, "attentionPrefill", AttentionPrefill);
}

}  // namespace qk::binding
