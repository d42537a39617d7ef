// Megakernel bindings: argument conversion and checks only; the kernel is csrc/megakernel/qwen3_decode.cu. A
// megakernel instance lives behind an integer handle that owns its launch arguments (every pointer checked once,
// at creation) and its epoch; JS keeps the tensors alive while the handle lives.
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>

#include "../megakernel/qwen3_decode.h"
#include "args.h"
#include "registry.h"

namespace qk::binding {
namespace {

struct Instance {
  MegakernelArgs args;
  MegakernelPlan plan;
};

std::mutex instances_mu;
std::unordered_map<int64_t, Instance> instances;
int64_t next_instance = 1;

MegakernelDims read_dims(const Args& a, size_t first) {
  MegakernelDims d{};
  d.hidden = a.int64(first, "hidden", 1, INT32_MAX);
  d.q_heads = a.int64(first + 1, "qHeads", 1, 65535);
  d.kv_heads = a.int64(first + 2, "kvHeads", 1, 65535);
  d.ffn = a.int64(first + 3, "ffn", 1, INT32_MAX);
  d.layers = a.int64(first + 4, "layers", 1, 65535);
  d.vocab = a.int64(first + 5, "vocab", 1, INT32_MAX);
  return d;
}

/** The plan for `d`, or nullptr with `why` when the kernel does not serve these sizes on this device. */
bool plan_for(const Args& a, const MegakernelDims& d, MegakernelPlan* plan, std::string* why) {
  Context::get();
  const char* reason = nullptr;
  const cudaError_t r = megakernel_plan(d, plan, &reason);
  if (r == cudaErrorNotSupported || r == cudaErrorInvalidConfiguration) {
    *why = reason != nullptr ? reason : cudaGetErrorString(r);
    return false;
  }
  QK_CUDA_TRY(a.op(), r);
  return true;
}

// megakernelPlan(hidden, qHeads, kvHeads, ffn, layers, vocab) →
//   { supported: true, grid, threads, sharedBytes, workspaceBytes, maxChunks } | { supported: false, reason }
Napi::Value MegakernelPlanFn(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelPlan", [](const Args& a) -> Napi::Value {
    a.expect_count(6);
    const MegakernelDims d = read_dims(a, 0);
    MegakernelPlan plan{};
    std::string why;
    Napi::Object o = Napi::Object::New(a.env());
    if (!plan_for(a, d, &plan, &why)) {
      o.Set("supported", false);
      o.Set("reason", why);
      return o;
    }
    o.Set("supported", true);
    o.Set("grid", plan.grid);
    o.Set("threads", plan.threads);
    o.Set("sharedBytes", static_cast<double>(plan.smem_bytes));
    o.Set("workspaceBytes", static_cast<double>(plan.workspace_bytes));
    o.Set("maxChunks", plan.max_chunks);
    return o;
  });
}

constexpr int kLayerPointers = 10;

// megakernelCreate(dtype, hidden, qHeads, kvHeads, ffn, layers, vocab, vocabLimit, maxContext, eps,
//                  layerPointers: BigUint64Array[layers·10], embed, finalNorm, lmHead, invFreq, state, result, logits,
//                  workspace, timeoutMs, trace = 0n) → handle
// `trace` (optional): u64 [grid][megakernel_trace_events(layers)] that each step fills with globaltimer stamps.
// Layer pointers per layer, in order: inputNorm, qkv, qNorm, kNorm, o, postNorm, gateUp, down, kCache, vCache.
Napi::Value MegakernelCreate(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelCreate", [&info](const Args& a) -> Napi::Value {
    a.expect_count(20);
    const DType dtype = a.float_dtype(0, "dtype");
    if (dtype != DType::BF16) a.fail("dtype", std::string("must be bf16 (the megakernel's weights), got ") + dtype_name(dtype));
    Instance inst{};
    MegakernelArgs& r = inst.args;
    r.dims = read_dims(a, 1);
    const MegakernelDims& d = r.dims;
    std::string why;
    if (!plan_for(a, d, &inst.plan, &why)) a.fail("sizes", "are not served by the megakernel: " + why);
    r.vocab_limit = a.int64(7, "vocabLimit", 1, d.vocab);
    r.max_context = a.int64(8, "maxContext", 1, INT32_MAX);
    const double eps = a.number(9, "eps");
    if (!(eps > 0.0) || eps > 1.0) a.fail("eps", "must lie in (0, 1]");
    r.eps = static_cast<float>(eps);

    const Napi::Value table = info[10];
    if (!table.IsTypedArray() || table.As<Napi::TypedArray>().TypedArrayType() != napi_biguint64_array)
      a.fail("layerPointers", "must be a BigUint64Array");
    Napi::BigUint64Array ptrs = table.As<Napi::BigUint64Array>();
    if (ptrs.ElementLength() != static_cast<size_t>(d.layers * kLayerPointers))
      a.fail("layerPointers", "must hold " + std::to_string(d.layers * kLayerPointers) + " addresses (10 per layer)");
    const int64_t h = d.hidden, qd = d.q_heads * kMegakernelHeadDim, kvd = d.kv_heads * kMegakernelHeadDim;
    const int64_t extents[kLayerPointers] = {h, (qd + 2 * kvd) * h, kMegakernelHeadDim, kMegakernelHeadDim, h * qd,
                                             h, 2 * d.ffn * h,      h * d.ffn,          r.max_context * kvd,
                                             r.max_context * kvd};
    static const char* const names[kLayerPointers] = {"inputNorm", "qkv",    "qNorm", "kNorm",  "o",
                                                      "postNorm",  "gateUp", "down",  "kCache", "vCache"};
    for (int64_t l = 0; l < d.layers; l++) {
      void* p[kLayerPointers];
      for (int j = 0; j < kLayerPointers; j++) {
        p[j] = reinterpret_cast<void*>(ptrs[static_cast<size_t>(l * kLayerPointers + j)]);
        const std::string name = "layerPointers[" + std::to_string(l) + "]." + names[j];
        if (p[j] == nullptr) a.fail(name, "is a null device address");
        if ((reinterpret_cast<uintptr_t>(p[j]) & 15) != 0) a.fail(name, "must be 16-byte aligned");
        a.check_range(p[j], static_cast<size_t>(extents[j]) * 2, name.c_str());
      }
      r.layers[l] = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]};
    }
    r.embed = a.tensor(11, "embed", DType::BF16, d.vocab * h);
    r.final_norm = a.tensor(12, "finalNorm", DType::BF16, h);
    r.lm_head = a.tensor(13, "lmHead", DType::BF16, d.vocab * h);
    if ((reinterpret_cast<uintptr_t>(r.lm_head) & 15) != 0) a.fail("lmHead", "must be 16-byte aligned");
    r.inv_freq = static_cast<const float*>(a.tensor(14, "invFreq", DType::F32, kMegakernelHeadDim / 2));
    r.state = static_cast<int32_t*>(a.tensor(15, "state", DType::I32, 2));
    r.result = static_cast<int32_t*>(a.tensor(16, "result", DType::I32, 2));
    r.logits = a.tensor(17, "logits", DType::BF16, d.vocab);
    r.workspace = a.tensor(18, "workspace", DType::U8, static_cast<int64_t>(inst.plan.workspace_bytes));
    if ((reinterpret_cast<uintptr_t>(r.workspace) & 255) != 0) a.fail("workspace", "must be 256-byte aligned");
    const int64_t timeout_ms = a.int64(19, "timeoutMs", 1, 86400000);
    r.timeout_ns = static_cast<uint64_t>(timeout_ms) * 1000000ull;
    if (a.count() > 20) {
      r.trace = static_cast<uint64_t*>(a.ptr(20, "trace", true));
      if (r.trace != nullptr)
        a.check_range(r.trace, static_cast<size_t>(inst.plan.grid * megakernel_trace_events(d.layers)) * 8, "trace");
    }
    // A diagnostic for the development log (NOTES.md): switches off parts of the step to time the rest. The
    // results are then wrong, so it says so on stderr.
    if (const char* dbg = std::getenv("QK_MEGAKERNEL_DEBUG")) {
      r.debug = static_cast<uint32_t>(std::strtoul(dbg, nullptr, 10));
      if (r.debug != 0)
        std::fprintf(stderr, "qk: QK_MEGAKERNEL_DEBUG=%u: megakernel diagnostics on, its outputs are wrong\n", r.debug);
    }
    // The workspace's sync words start at zero (the caller zeroes the tensor; do it here too, on the stream).
    QK_CUDA_TRY("megakernelCreate", cudaMemsetAsync(r.workspace, 0, inst.plan.workspace_bytes, stream()));
    std::lock_guard<std::mutex> lock(instances_mu);
    const int64_t handle = next_instance++;
    instances[handle] = inst;
    return Napi::Number::New(a.env(), static_cast<double>(handle));
  });
}

Instance& instance_at(const Args& a, size_t i) {
  const int64_t h = a.int64(i, "handle", 1);
  auto it = instances.find(h);
  if (it == instances.end()) a.fail("handle", "is not a live megakernel handle");
  return it->second;
}

// megakernelLaunch(handle): queues one decode step (reads state, writes result, logits, state).
Napi::Value MegakernelLaunch(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelLaunch", [](const Args& a) -> Napi::Value {
    a.expect_count(1);
    std::lock_guard<std::mutex> lock(instances_mu);
    Instance& inst = instance_at(a, 0);
    // The epoch tags this launch's flagged words; 0 is what the zeroed workspace holds, so it is skipped.
    inst.args.epoch += 1;
    if (inst.args.epoch == 0) inst.args.epoch = 1;
    const cudaError_t r = launch_megakernel(inst.args, inst.plan, stream());
    launched("megakernelLaunch", r);
    return a.env().Undefined();
  });
}

// megakernelReset(handle): after a launch reported an error, clears the workspace (flagged words, merge counters, the
// abort flag) and restarts the epoch.
Napi::Value MegakernelReset(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelReset", [](const Args& a) -> Napi::Value {
    a.expect_count(1);
    std::lock_guard<std::mutex> lock(instances_mu);
    Instance& inst = instance_at(a, 0);
    QK_CUDA_TRY("megakernelReset", cudaStreamSynchronize(stream()));
    QK_CUDA_TRY("megakernelReset", cudaMemsetAsync(inst.args.workspace, 0, inst.plan.workspace_bytes, stream()));
    inst.args.epoch = 0;
    return a.env().Undefined();
  });
}

// megakernelDestroy(handle)
Napi::Value MegakernelDestroy(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelDestroy", [](const Args& a) -> Napi::Value {
    a.expect_count(1);
    std::lock_guard<std::mutex> lock(instances_mu);
    instance_at(a, 0);
    instances.erase(a.int64(0, "handle", 1));
    return a.env().Undefined();
  });
}

}  // namespace

void register_megakernel_ops(Napi::Env env, Napi::Object& exports) {
  define(env, exports, "megakernelPlan", MegakernelPlanFn);
  define(env, exports, "megakernelCreate", MegakernelCreate);
  define(env, exports, "megakernelLaunch", MegakernelLaunch);
  define(env, exports, "megakernelReset", MegakernelReset);
  define(env, exports, "megakernelDestroy", MegakernelDestroy);
}

}  // namespace qk::binding
