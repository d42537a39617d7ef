// Megakernel bindings: argument conversion and checks only; the kernel is csrc/megakernel/qwen3_decode.cu. A
// megakernel instance lives behind an integer handle that owns its launch arguments (every pointer checked once,
// at creation) and its epoch; JS keeps the tensors alive while the handle lives.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "../kernels/sampling.h"
#include "../megakernel/qwen3_decode.h"
#include "args.h"
#include "megakernel_tuning.h"
#include "registry.h"

namespace qk::binding {
namespace {

// The defaults of the tuning fields that are not the plan's (MegakernelTuning of @qk/qwen3 says why each is what it is).
constexpr int64_t kDefaultInflight = 1;    // weight copies in flight per block
constexpr int64_t kDefaultLmInflight = 2;  // the LM head's, on models that take fixed shares (see lm_inflight below)
constexpr int64_t kDefaultStagedFrom = 57;  // keys: past what one pass of a chunk attends
constexpr int64_t kDefaultStagedHf = 1;     // HF's roundings
constexpr int64_t kDefaultTimeoutMs = 2000;

/** Words of the host-mapped buffer: the error word, then one token word per step of a launch. */
constexpr size_t kHostWords = 1 + kMegakernelMaxSteps;

struct Instance {
  MegakernelArgs args;
  MegakernelPlan plan;
  uint64_t* host = nullptr;         // pinned, mapped: what the kernel publishes while it runs (args.host maps it)
  // A masked launch's mask slots (MegakernelArgs::mask_tags, mask_words), made on the first masked launch: two tags,
  // then two slots of mask_stride words, in device memory (mask_dev), filled by copies from a pinned host image of the
  // same layout (mask_host) on a stream of their own (mask_stream) while the kernel runs on the op stream. (The kernel
  // reading the host image itself, over the bus, cost ~130 µs per Qwen3-0.6B step on an H200.)
  uint64_t* mask_host = nullptr;
  uint64_t* mask_dev = nullptr;
  cudaStream_t mask_stream = nullptr;
  int64_t mask_stride = 0;
  // The penalties' state (MegakernelArgs::pen_counts, then pen_seen): vocab counts, then ceil(vocab / 32) words, in
  // device memory, made and filled by megakernelHistory; launches with penalties read and update it.
  int32_t* pen_dev = nullptr;
  cudaEvent_t started = nullptr;    // recorded before the last launch: the kernel cannot have begun before it
  cudaEvent_t finished = nullptr;   // recorded after the last launch
  const void* screen = nullptr;     // the LM head's int8 screen (megakernelScreen), or nullptr
  uint32_t last_epoch = 0;          // the epoch of the last step launched so far
  uint32_t launch_epoch = 0;        // the first epoch of the last launch
  int launch_steps = 0;             // its steps
  bool launch_masked = false;       // whether it reads a mask per step (megakernelMask)
  int published = 0;                // masks published for the last launch
  bool mask_cancelled = false;      // its masked launch was cancelled by another binding call (megakernelMask: false)
  // The staged attention (tuning stagedFrom / stagedUntil, read on creation): steps of staged_from…staged_until
  // keys (rounded up to 16) use it (MegakernelArgs::staged_from, staged_keys); staged_until 0: none.
  int staged_from = 0;
  int staged_until = 0;
  bool staged_ring = false;  // tuning stagedRing: the staged rows always take the whole ring's place
};

void release(Instance& inst) {
  // Teardown: the instance is gone whatever these return.
  if (inst.started != nullptr) cudaEventDestroy(inst.started);
  if (inst.finished != nullptr) cudaEventDestroy(inst.finished);
  if (inst.host != nullptr) cudaFreeHost(inst.host);
  if (inst.mask_stream != nullptr) cudaStreamSynchronize(inst.mask_stream);
  if (inst.mask_stream != nullptr) cudaStreamDestroy(inst.mask_stream);
  if (inst.mask_dev != nullptr) cudaFree(inst.mask_dev);
  if (inst.mask_host != nullptr) cudaFreeHost(inst.mask_host);
  if (inst.pen_dev != nullptr) cudaFree(inst.pen_dev);
  inst.pen_dev = nullptr;
  inst.mask_stream = nullptr;
  inst.mask_dev = nullptr;
  inst.started = inst.finished = nullptr;
  inst.host = nullptr;
  inst.mask_host = nullptr;
}

/** Clears the workspace and the host words once the stream is idle, and restarts the epochs. */
void restart(Instance& inst, const char* op) {
  QK_CUDA_TRY(op, cudaStreamSynchronize(stream()));
  QK_CUDA_TRY(op, cudaMemsetAsync(inst.args.workspace, 0, inst.plan.workspace_bytes, stream()));
  QK_CUDA_TRY(op, cudaStreamSynchronize(stream()));
  std::memset(inst.host, 0, kHostWords * sizeof(uint64_t));
  if (inst.mask_dev != nullptr) {  // the tags: epochs restart
    QK_CUDA_TRY(op, cudaStreamSynchronize(inst.mask_stream));
    std::memset(inst.mask_host, 0, 2 * sizeof(uint64_t));
    QK_CUDA_TRY(op, cudaMemset(inst.mask_dev, 0, 2 * sizeof(uint64_t)));
  }
  inst.last_epoch = 0;
  inst.launch_epoch = 0;
  inst.launch_steps = 0;
  inst.launch_masked = false;
  inst.published = 0;
}

std::mutex instances_mu;
// The instance whose last launch is masked and still waits for a mask (0: none; under instances_mu). Its kernel holds
// the op stream until the host publishes that mask, so any other binding call cancels it first (cancel_waiting_mask):
// work queued behind it, or a host wait on the stream, would otherwise wait for the kernel's timeout.
int64_t waiting_masked = 0;
// Launches since the addon loaded, by the attention path of the kernel that ran (megakernel_launch_path: both, or the
// staged attention alone; under instances_mu). A diagnostic: megakernelLaunchPaths.
uint64_t path_launches[2] = {0, 0};
std::unordered_map<int64_t, Instance> instances;
int64_t next_instance = 1;

/** Ends `inst`'s masked launch at the step waiting for its mask (MegakernelError::Cancelled) and clears the instance. */
void cancel_masked(Instance& inst, const char* op) {
  QK_CUDA_TRY(op, cudaStreamSynchronize(inst.mask_stream));  // (the host image's tags are free to write)
  inst.mask_host[0] = inst.mask_host[1] = kMegakernelMaskCancel;
  QK_CUDA_TRY(op, cudaMemcpyAsync(inst.mask_dev, inst.mask_host, 2 * sizeof(uint64_t), cudaMemcpyHostToDevice,
                                  inst.mask_stream));
  restart(inst, op);
}

/** binding before_call: cancels the waiting masked launch unless `op` is one of its own steps' calls. */
void cancel_waiting_mask(const char* op) {
  if (waiting_masked == 0 || std::strcmp(op, "megakernelMask") == 0 || std::strcmp(op, "megakernelToken") == 0 ||
      std::strcmp(op, "megakernelCancel") == 0)
    return;
  std::lock_guard<std::mutex> lock(instances_mu);
  auto it = instances.find(waiting_masked);
  waiting_masked = 0;
  if (it != instances.end() && it->second.launch_masked) {
    cancel_masked(it->second, op);
    it->second.mask_cancelled = true;
  }
}

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

/**
 * `weights` (undefined: bf16) into `d`: { bits: 16 | 8 | 4, groupSize (INT4: a power of two ≥ 8; else absent or 0),
 * zeroPoints (INT4: whether the projections carry group offsets; default false) }.
 */
void read_weights(const Args& a, const Napi::Value& v, MegakernelDims& d) {
  if (v.IsUndefined()) return;
  if (!v.IsObject()) a.fail("weights", "must be an object { bits, groupSize, zeroPoints } or undefined");
  const Napi::Object o = v.As<Napi::Object>();
  const Napi::Value bits = o.Get("bits"), group = o.Get("groupSize"), zero = o.Get("zeroPoints");
  if (!bits.IsNumber()) a.fail("weights.bits", "must be 16, 8 or 4");
  const double b = bits.As<Napi::Number>().DoubleValue();
  if (b != 16 && b != 8 && b != 4) a.fail("weights.bits", "must be 16, 8 or 4, got " + std::to_string(b));
  d.weight_bits = static_cast<int64_t>(b);
  double g = 0;
  if (!group.IsUndefined()) {
    if (!group.IsNumber()) a.fail("weights.groupSize", "must be a number");
    g = group.As<Napi::Number>().DoubleValue();
  }
  if (d.weight_bits == 4) {
    if (!(g >= 8 && g <= 65536 && g == static_cast<double>(static_cast<int64_t>(g)) &&
          (static_cast<int64_t>(g) & (static_cast<int64_t>(g) - 1)) == 0))
      a.fail("weights.groupSize", "must be a power of two in [8, 65536] for INT4 weights");
    d.group_size = static_cast<int64_t>(g);
  } else if (g != 0) {
    a.fail("weights.groupSize", "applies to INT4 weights only");
  }
  if (!zero.IsUndefined()) {
    if (!zero.IsBoolean()) a.fail("weights.zeroPoints", "must be a boolean");
    d.zero_points = zero.As<Napi::Boolean>().Value() ? 1 : 0;
    if (d.zero_points != 0 && d.weight_bits != 4) a.fail("weights.zeroPoints", "applies to INT4 weights only");
  }
}

/** The plan for `d` and `tuning`, or false with `why` when the kernel does not serve these sizes on this device. */
bool plan_for(const Args& a, const MegakernelDims& d, const MegakernelTuning& tuning, MegakernelPlan* plan,
              std::string* why) {
  Context::get();
  const char* reason = nullptr;
  // tuning slotKb: the weight ring's slot size to aim for (absent or 0: the plan's).
  const size_t slot_bytes = static_cast<size_t>(tuning.slot_kb.value_or(0)) * 1024;
  const cudaError_t r = megakernel_plan(d, plan, &reason, slot_bytes);
  if (r == cudaErrorNotSupported || r == cudaErrorInvalidConfiguration) {
    *why = reason != nullptr ? reason : cudaGetErrorString(r);
    return false;
  }
  QK_CUDA_TRY(a.op(), r);
  return true;
}

// megakernelPlan(hidden, qHeads, kvHeads, ffn, layers, vocab, tuning = {}, weights = bf16) →
//   { supported: true, grid, threads, sharedBytes, workspaceBytes, maxChunks } | { supported: false, reason }
// (Of the tuning, only slotKb changes the plan; the whole object is checked, as megakernelCreate checks it.)
Napi::Value MegakernelPlanFn(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelPlan", [&info](const Args& a) -> Napi::Value {
    a.expect_count(6);
    MegakernelDims d = read_dims(a, 0);
    const MegakernelTuning tuning = read_megakernel_tuning(a, info[6]);
    read_weights(a, info[7], d);
    MegakernelPlan plan{};
    std::string why;
    Napi::Object o = Napi::Object::New(a.env());
    if (!plan_for(a, d, tuning, &plan, &why)) {
      o.Set("supported", false);
      o.Set("reason", why);
      return o;
    }
    o.Set("supported", true);
    o.Set("grid", plan.grid);
    o.Set("threads", plan.threads);
    o.Set("sharedBytes", static_cast<double>(plan.smem_bytes));
    o.Set("slots", plan.slots);
    o.Set("slotBytes", static_cast<double>(plan.slot_bytes));
    o.Set("shortSlots", plan.short_slots);
    o.Set("shortSlotBytes", static_cast<double>(plan.short_slot_bytes));
    o.Set("shortRingUntil", plan.short_until);
    o.Set("claimTiles", plan.claim);
    o.Set("qkvQuads", plan.qkv_quads);
    o.Set("workspaceBytes", static_cast<double>(plan.workspace_bytes));
    o.Set("maxChunks", plan.max_chunks);
    o.Set("screenRowBytes", plan.screen_rows > 0 ? static_cast<double>(megakernel_screen_row_bytes(d.hidden)) : 0.0);
    return o;
  });
}

constexpr int kLayerPointers = 18;

// megakernelCreate(dtype, hidden, qHeads, kvHeads, ffn, layers, vocab, vocabLimit, maxContext, eps,
//                  layerPointers: BigUint64Array[layers·18], embed, finalNorm, lmHead, invFreq, state, result, logits,
//                  workspace, trace, tuning = {}, weights = bf16) → handle
// `trace` (0n: none): u64 [grid][megakernel_trace_events(layers)] that each step fills with globaltimer stamps.
// `tuning`: the knobs (megakernel_tuning.h), read here once; each absent field keeps the default set below.
// `weights`: the projections' format (read_weights; MegakernelLayer).
// Layer pointers per layer, in order: inputNorm, qkv, qNorm, kNorm, o, postNorm, gateUp, down, kCache, vCache, then
// the scales of qkv, o, gateUp, down (INT8 / INT4; else 0n) and their offsets (INT4 with zero points; else 0n).
Napi::Value MegakernelCreate(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelCreate", [&info](const Args& a) -> Napi::Value {
    a.expect_count(20);
    const DType dtype = a.float_dtype(0, "dtype");
    if (dtype != DType::BF16) a.fail("dtype", std::string("must be bf16 (the megakernel's weights), got ") + dtype_name(dtype));
    const MegakernelTuning tuning = read_megakernel_tuning(a, info[20]);
    Instance inst{};
    MegakernelArgs& r = inst.args;
    r.dims = read_dims(a, 1);
    read_weights(a, info[21], r.dims);
    const MegakernelDims& d = r.dims;
    std::string why;
    if (!plan_for(a, d, tuning, &inst.plan, &why)) a.fail("sizes", "are not served by the megakernel: " + why);
    r.slots = inst.plan.slots;
    r.slot_bytes = static_cast<int64_t>(inst.plan.slot_bytes);
    // Weight copies in flight per block, at most: 1 (a second copy in flight measured 25-70 µs per token slower: more
    // bytes in flight slow every hop; DESIGN.md, "The weight stream"). tuning inflight overrides it (0 = as many as the
    // ring has free slots).
    r.inflight = static_cast<int>(tuning.inflight.value_or(kDefaultInflight));
    // The LM head's bound: no hop waits behind its stream, so on the models that take fixed shares (narrow ring slots:
    // Qwen3-0.6B, 1.7B) two of its copies may overlap; on those that claim tiles (4B, 8B: slots of 40-48 KB) two
    // copies are too many bytes in flight. The layers' bound where that is larger (or unbounded).
    // tuning lmInflight overrides it. (On an H100, two copies gain 8-10 µs per token at 0.6B positions 512-1024 and
    // 17-26 µs at 1.7B, change nothing at 4B, and lose 20 µs at 8B position 1.)
    const int64_t lm_own = inst.plan.claim ? 1 : kDefaultLmInflight;
    const int64_t lm_default = r.inflight == 0 ? 0 : std::max<int64_t>(r.inflight, lm_own);
    r.lm_inflight = static_cast<int>(tuning.lm_inflight.value_or(lm_default));
    // Claimed tiles or fixed shares: the plan's choice by model size; tuning claimTiles overrides it.
    r.claim = tuning.claim_tiles.value_or(inst.plan.claim) ? 1 : 0;
    // Attention items up to which the attending blocks take no QKV or O rows: the plan's; tuning skipItems overrides it
    // (0 = they always take rows).
    r.skip_items = static_cast<int>(tuning.skip_items.value_or(inst.plan.skip_items));
    // Weight copies L2 evict_first, so that the KV cache stays in L2 while it fits (15-20 µs per token at 0.6B
    // position 1); tuning l2Stream false turns it off.
    r.l2_stream = tuning.l2_stream.value_or(true) ? 1 : 0;
    // tuning kvStage false reads a short second attention pass from the cache instead of staging it; chunkKeys sets the
    // keys per attention chunk to aim for (default 0: one pass; 84 measured 10-15 µs per token slower at positions
    // 128-767).
    r.kv_stage = tuning.kv_stage.value_or(true) ? 1 : 0;
    r.chunk_keys = static_cast<int>(tuning.chunk_keys.value_or(0));
    // tuning qkvQuads false deals QKV rows to the warps by pairs instead of two pairs at a time (where the plan deals
    // them by quads); kvPrefetch true prefetches the attention's cached rows to L2 at each layer's start (the old
    // default, 4-10 µs per token slower at positions 512-1024).
    r.qkv_quads = inst.plan.qkv_quads && tuning.qkv_quads.value_or(true) ? 1 : 0;
    r.kv_prefetch = tuning.kv_prefetch.value_or(false) ? 1 : 0;
    // Every merge of a head's chunks by chunk 0's block; tuning oMerge N (up to the plan's: 3 in query groups of 2,
    // else 0) has the O blocks merge heads of 2…N chunks as they gather their input instead: 30-70 µs per token slower
    // at 2-3 chunks, their larger gather costing more than the hop it saves.
    r.o_merge = static_cast<int>(std::min<int64_t>(tuning.o_merge.value_or(0), inst.plan.o_merge));
    // tuning pathKernels false: every launch runs the kernel with both attention paths (default true: launches whose
    // steps all take the staged attention run a kernel without the attention by chunks, 5-8 µs per token faster at
    // positions 128-383).
    r.path_kernels = tuning.path_kernels.value_or(true) ? 1 : 0;
    // The staged attention (DESIGN.md, "The staged attention"; query groups of 2 with fixed shares): steps of
    // stagedFrom (default 57: past one pass) to stagedUntil keys (default 384, the most, rounded up to 16; 0: none)
    // attend with one block per KV head over rows staged in shared memory, on the tensor cores: past the two or more
    // ring slots those blocks keep where the rows leave that many, else in the place of their whole ring (stagedRing
    // true: always there).
    if (d.q_heads == 2 * d.kv_heads && r.claim == 0) {
      inst.staged_until = static_cast<int>(tuning.staged_until.value_or(kMegakernelStagedMaxKeys));
      inst.staged_from = static_cast<int>(tuning.staged_from.value_or(kDefaultStagedFrom));
      // tuning stagedGateUp true: the staged attention's blocks take gate/up rows as the others do.
      r.staged_gate_up = tuning.staged_gate_up.value_or(false) ? 1 : 0;
      // tuning stagedHf 0: fp32 scores and unnormalised bf16 weights instead of HF's roundings (measured 10-13 µs per
      // token faster at positions 1 and 128, later about 5, other bits); 2: HF's roundings with __fdiv_rn (the same
      // bits, slower: a check).
      r.staged_hf = static_cast<int>(tuning.staged_hf.value_or(kDefaultStagedHf));
      inst.staged_ring = tuning.staged_ring.value_or(false);
    }
    r.vocab_limit = a.int64(7, "vocabLimit", 1, d.vocab);
    r.sample_scale = sample_weight_scale(r.vocab_limit);  // sampled launches weigh the ids below vocab_limit
    r.max_context = a.int64(8, "maxContext", 1, INT32_MAX);
    const double eps = a.number(9, "eps");
    if (!(eps > 0.0) || eps > 1.0) a.fail("eps", "must lie in (0, 1]");
    r.eps = static_cast<float>(eps);

    const Napi::Value table = info[10];
    if (!table.IsTypedArray() || table.As<Napi::TypedArray>().TypedArrayType() != napi_biguint64_array)
      a.fail("layerPointers", "must be a BigUint64Array");
    Napi::BigUint64Array ptrs = table.As<Napi::BigUint64Array>();
    if (ptrs.ElementLength() != static_cast<size_t>(d.layers * kLayerPointers))
      a.fail("layerPointers", "must hold " + std::to_string(d.layers * kLayerPointers) + " addresses (18 per layer)");
    const int64_t h = d.hidden, qd = d.q_heads * kMegakernelHeadDim, kvd = d.kv_heads * kMegakernelHeadDim;
    // Bytes of each pointer's buffer: the projections' rows and columns ([rows, k]), their codes' bytes per weight,
    // and (INT8 per row, INT4 per row and group) their scales' and offsets'.
    const int64_t proj_rows[4] = {qd + 2 * kvd, h, 2 * d.ffn, h}, proj_k[4] = {h, qd, h, d.ffn};
    const bool quant = d.weight_bits != 16;
    int64_t bytes[kLayerPointers] = {2 * h, 0, 2 * kMegakernelHeadDim, 2 * kMegakernelHeadDim, 0, 2 * h, 0, 0,
                                     2 * r.max_context * kvd, 2 * r.max_context * kvd};
    static const int proj_at[4] = {1, 4, 6, 7};
    for (int j = 0; j < 4; j++) {
      const int64_t weights = proj_rows[j] * proj_k[j];
      bytes[proj_at[j]] = d.weight_bits == 16 ? 2 * weights : d.weight_bits == 8 ? weights : weights / 2;
      const int64_t groups = d.weight_bits == 4 ? proj_k[j] / d.group_size : d.weight_bits == 8 ? 1 : 0;
      bytes[10 + j] = 4 * proj_rows[j] * groups;
      bytes[14 + j] = d.zero_points != 0 ? 2 * proj_rows[j] * groups : 0;
    }
    static const char* const names[kLayerPointers] = {
        "inputNorm",  "qkv",     "qNorm",        "kNorm",      "o",          "postNorm",
        "gateUp",     "down",    "kCache",       "vCache",     "qkvScales",  "oScales",
        "gateUpScales", "downScales", "qkvOffsets", "oOffsets", "gateUpOffsets", "downOffsets"};
    for (int64_t l = 0; l < d.layers; l++) {
      void* p[kLayerPointers];
      for (int j = 0; j < kLayerPointers; j++) {
        p[j] = reinterpret_cast<void*>(ptrs[static_cast<size_t>(l * kLayerPointers + j)]);
        const std::string name = "layerPointers[" + std::to_string(l) + "]." + names[j];
        if (bytes[j] == 0) {  // (a scale or offset the weights do not have)
          if (p[j] != nullptr) a.fail(name, quant ? "must be 0n: these weights have no zero points" : "must be 0n for bf16 weights");
          continue;
        }
        if (p[j] == nullptr) a.fail(name, "is a null device address");
        if ((reinterpret_cast<uintptr_t>(p[j]) & 15) != 0) a.fail(name, "must be 16-byte aligned");
        a.check_range(p[j], static_cast<size_t>(bytes[j]), name.c_str());
      }
      MegakernelLayer& L = r.layers[l];
      L = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]};
      for (int j = 0; j < 4; j++) {
        L.scales[j] = p[10 + j];
        L.offsets[j] = p[14 + j];
      }
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
    r.timeout_ns = static_cast<uint64_t>(tuning.timeout_ms.value_or(kDefaultTimeoutMs)) * 1000000ull;
    r.trace = static_cast<uint64_t*>(a.ptr(19, "trace", true));
    if (r.trace != nullptr)
      a.check_range(r.trace, static_cast<size_t>(inst.plan.grid * megakernel_trace_events(d.layers)) * 8, "trace");
    // A diagnostic (DESIGN.md, "The overhead budget"): tuning debug switches off parts of the step to time the rest.
    // The results are then wrong, so it says so on stderr.
    r.debug = static_cast<uint32_t>(tuning.debug.value_or(0));
    // 64 only moves a trace stamp; every other switch leaves parts of the step out.
    if ((r.debug & ~64u) != 0)
      std::fprintf(stderr, "qk: megakernel tuning debug=%u: diagnostics on, its outputs are wrong\n", r.debug);
    else if (r.debug != 0)
      std::fprintf(stderr, "qk: megakernel tuning debug=%u: a trace diagnostic; the outputs are unchanged\n", r.debug);
    // The workspace's sync words start at zero (the caller zeroes the tensor; do it here too, on the stream).
    QK_CUDA_TRY("megakernelCreate", cudaMemsetAsync(r.workspace, 0, inst.plan.workspace_bytes, stream()));
    try {
      QK_CUDA_TRY("megakernelCreate", cudaHostAlloc(reinterpret_cast<void**>(&inst.host), kHostWords * sizeof(uint64_t),
                                                    cudaHostAllocMapped | cudaHostAllocPortable));
      std::memset(inst.host, 0, kHostWords * sizeof(uint64_t));
      void* mapped = nullptr;
      QK_CUDA_TRY("megakernelCreate", cudaHostGetDevicePointer(&mapped, inst.host, 0));
      r.host = static_cast<uint64_t*>(mapped);
      QK_CUDA_TRY("megakernelCreate", cudaEventCreateWithFlags(&inst.started, cudaEventDisableTiming));
      QK_CUDA_TRY("megakernelCreate", cudaEventCreateWithFlags(&inst.finished, cudaEventDisableTiming));
    } catch (...) {
      release(inst);
      throw;
    }
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

// megakernelScreen(handle, screen) → attached: builds the LM head's int8 screen in `screen` (u8, vocab · plan
// screenRowBytes bytes, 16-byte aligned; queued on the stream) and lets the instance's launches, greedy and sampled,
// screen the LM head with it (MegakernelArgs::lm_screen). false, with nothing built, for an instance that claims its tiles
// (tuning claimTiles true on a model whose plan takes fixed shares). A null `screen` detaches it.
Napi::Value MegakernelScreen(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelScreen", [](const Args& a) -> Napi::Value {
    a.expect_count(2);
    std::lock_guard<std::mutex> lock(instances_mu);
    Instance& inst = instance_at(a, 0);
    void* screen = a.ptr(1, "screen", true);
    if (screen == nullptr) {
      inst.screen = nullptr;
      return Napi::Boolean::New(a.env(), false);
    }
    const MegakernelDims& d = inst.args.dims;
    if (inst.plan.screen_rows <= 0)
      a.fail("screen", "cannot be used: this model's megakernel does not screen its LM head (its plan's screenRowBytes is 0)");
    if (inst.args.claim != 0) return Napi::Boolean::New(a.env(), false);  // (the screen needs fixed shares)
    if ((reinterpret_cast<uintptr_t>(screen) & 15) != 0) a.fail("screen", "must be 16-byte aligned");
    a.check_range(screen, static_cast<size_t>(d.vocab * megakernel_screen_row_bytes(d.hidden)), "screen");
    QK_CUDA_TRY("megakernelScreen", megakernel_screen_build(inst.args.lm_head, d.vocab, d.hidden, screen, stream()));
    inst.screen = screen;
    return Napi::Boolean::New(a.env(), true);
  });
}

// megakernelLaunch(handle, steps = 1[, topK, temperature, topP, uniforms, position, screen, masked, controls]): queues `steps` decode steps in
// one launch (reads state; writes the logits of each step in turn, result, state; publishes each step's token to the
// host as it is made). Each step takes its argmax, or with topK > 0 draws by `sample`'s rule (top-k ≤ 64,
// temperature > 0, top-p in (0, 1]) with uniforms[s] (a Float64Array of `steps` values in [0, 1)); with topK = 0
// the arguments after it are not read, except `position`: the launch's first position (the one in state), which
// picks the weight ring (the plan's short-context ring below its shortRingUntil; absent: the default ring), and
// `screen` (default true): a launch of an instance with a screen (megakernelScreen) screens the LM head and writes no
// logits; false computes every logit, as a launch without a screen does. `controls` (a Float64Array [repetition,
// presence, frequency, ln min-p], or absent): the sampling controls in the kernel (MegakernelArgs::pen_counts,
// log_min_p); penalties other than (1, 0, 0) read and update the state megakernelHistory uploaded.
Napi::Value MegakernelLaunch(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelLaunch", [&info](const Args& a) -> Napi::Value {
    a.expect_count(1);
    const int steps = a.count() > 1 ? static_cast<int>(a.int64(1, "steps", 1, kMegakernelMaxSteps)) : 1;
    const int top_k = a.count() > 2 ? static_cast<int>(a.int64(2, "topK", 0, kMegakernelMaxTopK)) : 0;
    double temperature = 1.0, top_p = 1.0;
    double uniforms[kMegakernelMaxSteps] = {};
    if (top_k > 0) {
      a.expect_count(6);
      temperature = a.number(3, "temperature");
      if (!(temperature > 0.0) || !std::isfinite(temperature)) a.fail("temperature", "must be a finite number > 0");
      top_p = a.number(4, "topP");
      if (!(top_p > 0.0 && top_p <= 1.0)) a.fail("topP", "must lie in (0, 1]");
      const Napi::Value u = info[5];
      if (!u.IsTypedArray() || u.As<Napi::TypedArray>().TypedArrayType() != napi_float64_array)
        a.fail("uniforms", "must be a Float64Array");
      Napi::Float64Array arr = u.As<Napi::Float64Array>();
      if (arr.ElementLength() != static_cast<size_t>(steps))
        a.fail("uniforms", "must hold one value per step (" + std::to_string(steps) + ")");
      for (int s = 0; s < steps; s++) {
        uniforms[s] = arr[static_cast<size_t>(s)];
        if (!(uniforms[s] >= 0.0 && uniforms[s] < 1.0)) a.fail("uniforms", "must lie in [0, 1)");
      }
    }
    const int64_t position = a.count() > 6 && !info[6].IsUndefined() ? a.int64(6, "position", 0, INT32_MAX) : -1;
    const bool screen = a.count() > 7 && !info[7].IsUndefined() ? a.boolean(7, "screen") : true;
    const bool masked = a.count() > 8 && !info[8].IsUndefined() ? a.boolean(8, "masked") : false;
    double controls[4] = {1.0, 0.0, 0.0, -HUGE_VAL};
    if (a.count() > 9 && !info[9].IsUndefined()) {
      const Napi::Value c = info[9];
      if (!c.IsTypedArray() || c.As<Napi::TypedArray>().TypedArrayType() != napi_float64_array ||
          c.As<Napi::Float64Array>().ElementLength() != 4)
        a.fail("controls", "must be a Float64Array [repetition, presence, frequency, ln min-p]");
      Napi::Float64Array arr = c.As<Napi::Float64Array>();
      for (size_t i = 0; i < 4; i++) controls[i] = arr[i];
      if (!(std::isfinite(controls[0]) && controls[0] > 0.0))
        a.fail("controls", "repetition penalty must be a finite number > 0");
      if (!std::isfinite(controls[1]) || !std::isfinite(controls[2]))
        a.fail("controls", "presence and frequency penalties must be finite");
      if (!(controls[3] <= 0.0)) a.fail("controls", "ln min-p must be ≤ 0 (−Infinity: no min-p)");
    }
    const bool penalties = controls[0] != 1.0 || controls[1] != 0.0 || controls[2] != 0.0;
    std::lock_guard<std::mutex> lock(instances_mu);
    Instance& inst = instance_at(a, 0);
    if (penalties && inst.pen_dev == nullptr)
      a.fail("controls", "ask for penalties, but no history was uploaded (megakernelHistory first)");
    if (inst.args.trace != nullptr && steps != 1) a.fail("steps", "must be 1 when the instance records a trace");
    if (masked && inst.mask_dev == nullptr) {
      // Two slots, so that the host may fill the next step's while the kernel may still read this one's.
      const int64_t words = (inst.args.dims.vocab + 31) / 32;
      const int64_t stride = (words + 3) / 4 * 4;
      const size_t bytes = 2 * sizeof(uint64_t) + 2 * static_cast<size_t>(stride) * sizeof(uint32_t);
      try {
        QK_CUDA_TRY("megakernelLaunch", cudaHostAlloc(reinterpret_cast<void**>(&inst.mask_host), bytes,
                                                      cudaHostAllocPortable));
        std::memset(inst.mask_host, 0, bytes);
        QK_CUDA_TRY("megakernelLaunch", cudaMalloc(reinterpret_cast<void**>(&inst.mask_dev), bytes));
        QK_CUDA_TRY("megakernelLaunch", cudaMemset(inst.mask_dev, 0, bytes));
        QK_CUDA_TRY("megakernelLaunch", cudaStreamCreateWithFlags(&inst.mask_stream, cudaStreamNonBlocking));
      } catch (...) {
        if (inst.mask_dev != nullptr) cudaFree(inst.mask_dev);
        if (inst.mask_host != nullptr) cudaFreeHost(inst.mask_host);
        inst.mask_dev = nullptr;
        inst.mask_host = nullptr;
        throw;
      }
      inst.mask_stride = stride;
    }
    // The ring: the plan's short-context one for a launch known to start below its bound. (The kernel reads the
    // position from state; a wrong hint costs speed only, never correctness: both rings serve every position.)
    const bool short_ring = position >= 0 && position < inst.plan.short_until;
    inst.args.slots = short_ring ? inst.plan.short_slots : inst.plan.slots;
    inst.args.slot_bytes = static_cast<int64_t>(short_ring ? inst.plan.short_slot_bytes : inst.plan.slot_bytes);
    // The staged attention, for a launch known to have steps within its keys. The kernel decides each step by its
    // keys, so that a step's bits do not depend on how steps are cut into launches (a wrong hint makes those steps
    // attend by chunks: other roundings, never wrong values).
    inst.args.staged_keys = 0;
    inst.args.staged_from = 1;
    inst.args.staged_slots = 0;
    const int keys = (inst.staged_until + 15) / 16 * 16;
    if (keys > 0 && position >= 0 && position + 1 <= keys && position + steps >= inst.staged_from) {
      const int kept = megakernel_staged_slots(inst.args.slots, inst.args.slot_bytes, keys);
      inst.args.staged_from = std::max(inst.staged_from, 1);
      if (kept >= 2 && !inst.staged_ring) {
        inst.args.staged_keys = keys;
        inst.args.staged_slots = kept;
      } else if (keys <= inst.plan.staged_ring_keys && inst.args.skip_items >= inst.args.dims.kv_heads &&
                 inst.args.dims.kv_heads < inst.plan.grid) {
        inst.args.staged_keys = keys;  // over the whole ring (staged_slots 0)
      }
    }
    // Step s of the launch tags its flagged words with epoch + s. Epochs never repeat between clears of the
    // workspace; 0 is what the cleared workspace holds, so numbering starts at 1, and it starts again (after a clear)
    // before it would wrap.
    if (inst.last_epoch > UINT32_MAX - static_cast<uint32_t>(steps)) restart(inst, "megakernelLaunch");
    inst.args.position = static_cast<int>(position);  // (−1: no hint; it picks the kernel's attention path)
    inst.args.epoch = inst.last_epoch + 1;
    inst.args.steps = steps;
    inst.args.top_k = top_k;
    inst.args.lm_screen = screen ? inst.screen : nullptr;
    inst.args.mask_tags = masked ? inst.mask_dev : nullptr;
    inst.args.mask_words = masked ? reinterpret_cast<const uint32_t*>(inst.mask_dev + 2) : nullptr;
    inst.args.mask_stride = masked ? inst.mask_stride : 0;
    inst.args.temperature = temperature;
    inst.args.top_p = top_p;
    const int64_t vocab = inst.args.dims.vocab;
    inst.args.pen_counts = penalties ? inst.pen_dev : nullptr;
    inst.args.pen_seen = penalties ? reinterpret_cast<uint32_t*>(inst.pen_dev + vocab) : nullptr;
    inst.args.repetition_penalty = controls[0];
    inst.args.presence_penalty = controls[1];
    inst.args.frequency_penalty = controls[2];
    inst.args.log_min_p = top_k > 0 ? controls[3] : -HUGE_VAL;
    std::memcpy(inst.args.uniforms, uniforms, sizeof(uniforms));
    QK_CUDA_TRY("megakernelLaunch", cudaEventRecord(inst.started, stream()));
    launched("megakernelLaunch", launch_megakernel(inst.args, inst.plan, stream()));
    path_launches[megakernel_launch_path(inst.args)]++;
    QK_CUDA_TRY("megakernelLaunch", cudaEventRecord(inst.finished, stream()));
    inst.last_epoch += static_cast<uint32_t>(steps);
    inst.launch_epoch = inst.args.epoch;
    inst.launch_steps = steps;
    inst.launch_masked = masked;
    inst.published = 0;
    inst.mask_cancelled = false;
    if (masked) waiting_masked = a.int64(0, "handle", 1);
    return a.env().Undefined();
  });
}

// megakernelToken(handle, index) → the token of step `index` of the last launch, once the kernel has published it
// (the host spins on the mapped word; the kernel keeps running), or −code when the launch failed (MegakernelError).
// Throws when the launch ended without it or nothing arrives within the timeout after the kernel could start.
Napi::Value MegakernelToken(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelToken", [](const Args& a) -> Napi::Value {
    a.expect_count(2);
    std::lock_guard<std::mutex> lock(instances_mu);
    Instance& inst = instance_at(a, 0);
    if (inst.launch_steps == 0) a.fail("handle", "has no launch to read a token of");
    const int index = static_cast<int>(a.int64(1, "index", 0, inst.launch_steps - 1));
    const volatile uint64_t* word = inst.host + 1 + index;
    const volatile uint64_t* error = inst.host;
    const uint32_t epoch = inst.launch_epoch + static_cast<uint32_t>(index);
    using Clock = std::chrono::steady_clock;
    // Each step is bounded inside the kernel by the wait timeout; this bounds the host's wait the same way, counted
    // from when the kernel could begin (the stream may first finish earlier work, a long prefill).
    const auto bound = std::chrono::nanoseconds(inst.args.timeout_ns) * (index + 2);
    Clock::time_point began{};
    bool started = false;
    for (unsigned spin = 0;; spin++) {
      // Every 256th spin also asks whether the launch has ended, before the words are read: once it has, its host
      // writes are all visible to that read. (A token already there is returned without asking.)
      const bool check = (spin & 255) == 255;
      const cudaError_t f = check ? cudaEventQuery(inst.finished) : cudaErrorNotReady;
      const uint64_t w = *word;
      if (static_cast<uint32_t>(w >> 32) == epoch) return Napi::Number::New(a.env(), static_cast<uint32_t>(w));
      const uint64_t e = *error;
      if (static_cast<uint32_t>(e >> 32) == inst.launch_epoch && static_cast<uint32_t>(e) != 0)
        return Napi::Number::New(a.env(), -static_cast<int>(static_cast<uint32_t>(e)));
      if (!check) continue;
      if (f == cudaSuccess)
        throw CudaError("megakernelToken", cudaErrorUnknown, "the megakernel launch ended without publishing the token");
      if (f != cudaErrorNotReady) QK_CUDA_TRY("megakernelToken", f);
      if (!started) {
        const cudaError_t s = cudaEventQuery(inst.started);
        if (s == cudaSuccess) {
          started = true;
          began = Clock::now();
        } else if (s != cudaErrorNotReady) {
          QK_CUDA_TRY("megakernelToken", s);
        }
      } else if (Clock::now() - began > bound) {
        throw CudaError("megakernelToken", cudaErrorLaunchTimeout,
                        "waiting for the megakernel's token (the kernel neither published it nor failed in time)");
      }
    }
  });
}

// megakernelMask(handle, index, words) → published: publishes the mask of step `index` of the last launch (a masked
// one): `words` (a Uint32Array of ceil(vocab / 32) words, bit t & 31 of word t >> 5 allowing id t) go into the step's
// slot, then its tag, which the step's LM head waits for. Each step's mask is published once, in order: step `index`
// after step index − 1's token has been published (the kernel has then read every word of the slot being
// overwritten). false, publishing nothing, when another binding call cancelled the launch first (a kernel waiting for
// a mask holds the op stream, so every other call cancels it: cancel_waiting_mask); the instance is then cleared.
Napi::Value MegakernelMask(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelMask", [&info](const Args& a) -> Napi::Value {
    a.expect_count(3);
    std::lock_guard<std::mutex> lock(instances_mu);
    Instance& inst = instance_at(a, 0);
    if (inst.mask_cancelled) return Napi::Boolean::New(a.env(), false);
    if (inst.launch_steps == 0 || !inst.launch_masked || inst.mask_dev == nullptr)
      a.fail("handle", "has no masked launch to publish a mask for (megakernelLaunch with masked true)");
    const int index = static_cast<int>(a.int64(1, "index", 0, inst.launch_steps - 1));
    const Napi::Value v = info[2];
    if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array)
      a.fail("words", "must be a Uint32Array");
    Napi::Uint32Array words = v.As<Napi::Uint32Array>();
    const int64_t count = (inst.args.dims.vocab + 31) / 32;
    if (static_cast<int64_t>(words.ElementLength()) != count)
      a.fail("words", "must hold ceil(vocab / 32) = " + std::to_string(count) + " words");
    const uint32_t epoch = inst.launch_epoch + static_cast<uint32_t>(index);
    const unsigned slot = epoch & 1u;
    if (inst.mask_host[slot] == epoch) a.fail("index", "names a step whose mask is already published");
    if (index > 0) {
      const uint64_t before = static_cast<const volatile uint64_t*>(inst.host)[index];  // step index − 1's token word
      if (static_cast<uint32_t>(before >> 32) != epoch - 1)
        a.fail("index", "names a step whose previous step has not published its token yet (megakernelToken first)");
    }
    // The host image's slot was last copied for the step two before this one, whose copy the kernel saw land before
    // that step's token (which came before the previous step's): it is free.
    uint32_t* words_host = reinterpret_cast<uint32_t*>(inst.mask_host + 2) + static_cast<int64_t>(slot) * inst.mask_stride;
    uint32_t* words_dev = reinterpret_cast<uint32_t*>(inst.mask_dev + 2) + static_cast<int64_t>(slot) * inst.mask_stride;
    std::memcpy(words_host, words.Data(), static_cast<size_t>(count) * sizeof(uint32_t));
    inst.mask_host[slot] = epoch;
    // The words, then the tag, in order on the mask stream: the kernel waits for the tag, then reads the words.
    QK_CUDA_TRY("megakernelMask", cudaMemcpyAsync(words_dev, words_host, static_cast<size_t>(count) * sizeof(uint32_t),
                                                  cudaMemcpyHostToDevice, inst.mask_stream));
    QK_CUDA_TRY("megakernelMask", cudaMemcpyAsync(inst.mask_dev + slot, inst.mask_host + slot, sizeof(uint64_t),
                                                  cudaMemcpyHostToDevice, inst.mask_stream));
    if (++inst.published >= inst.launch_steps && waiting_masked == a.int64(0, "handle", 1)) waiting_masked = 0;
    return Napi::Boolean::New(a.env(), true);
  });
}

// megakernelHistory(handle, counts, seen): the state penalised launches start from: `counts` (an Int32Array of vocab
// counts of the generated ids, each ≥ 0) and `seen` (a Uint32Array of ceil(vocab / 32) words: bit t & 31 of word
// t >> 5 set for an id of the prompt or a generated one), copied to the device in stream order (after the launches
// queued before, which may still update the state, and before the next). A launch with penalties adds its own tokens.
Napi::Value MegakernelHistory(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelHistory", [&info](const Args& a) -> Napi::Value {
    a.expect_count(3);
    std::lock_guard<std::mutex> lock(instances_mu);
    Instance& inst = instance_at(a, 0);
    const int64_t vocab = inst.args.dims.vocab, words = (vocab + 31) / 32;
    const Napi::Value c = info[1], w = info[2];
    if (!c.IsTypedArray() || c.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array ||
        static_cast<int64_t>(c.As<Napi::Int32Array>().ElementLength()) != vocab)
      a.fail("counts", "must be an Int32Array of vocab = " + std::to_string(vocab) + " counts");
    if (!w.IsTypedArray() || w.As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array ||
        static_cast<int64_t>(w.As<Napi::Uint32Array>().ElementLength()) != words)
      a.fail("seen", "must be a Uint32Array of ceil(vocab / 32) = " + std::to_string(words) + " words");
    Napi::Int32Array counts = c.As<Napi::Int32Array>();
    for (int64_t t = 0; t < vocab; t++) {
      if (counts[static_cast<size_t>(t)] < 0) a.fail("counts", "must hold counts ≥ 0");
    }
    if (inst.pen_dev == nullptr) {
      QK_CUDA_TRY("megakernelHistory", cudaMalloc(reinterpret_cast<void**>(&inst.pen_dev),
                                                  static_cast<size_t>(vocab + words) * sizeof(int32_t)));
    }
    // Pageable sources: each copy returns once its bytes are staged, so the arrays may change right after.
    QK_CUDA_TRY("megakernelHistory", cudaMemcpyAsync(inst.pen_dev, counts.Data(), static_cast<size_t>(vocab) * 4,
                                                     cudaMemcpyHostToDevice, stream()));
    QK_CUDA_TRY("megakernelHistory", cudaMemcpyAsync(inst.pen_dev + vocab, w.As<Napi::Uint32Array>().Data(),
                                                     static_cast<size_t>(words) * 4, cudaMemcpyHostToDevice, stream()));
    return a.env().Undefined();
  });
}

// megakernelCancel(handle): ends a masked launch that still waits for masks: both slots are tagged
// kMegakernelMaskCancel, so its waiting step fails with Cancelled at its LM head; then, once the stream is idle, the
// instance is cleared as megakernelReset clears it. Nothing for an instance whose last launch is not masked.
Napi::Value MegakernelCancel(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelCancel", [](const Args& a) -> Napi::Value {
    a.expect_count(1);
    std::lock_guard<std::mutex> lock(instances_mu);
    Instance& inst = instance_at(a, 0);
    if (waiting_masked == a.int64(0, "handle", 1)) waiting_masked = 0;
    if (inst.launch_steps == 0 || !inst.launch_masked || inst.mask_dev == nullptr) return a.env().Undefined();
    cancel_masked(inst, "megakernelCancel");
    return a.env().Undefined();
  });
}

// megakernelReset(handle): after a launch reported an error, clears the workspace (flagged words, merge counters, the
// abort flag) and the host words, and restarts the epochs.
Napi::Value MegakernelReset(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelReset", [](const Args& a) -> Napi::Value {
    a.expect_count(1);
    std::lock_guard<std::mutex> lock(instances_mu);
    restart(instance_at(a, 0), "megakernelReset");
    return a.env().Undefined();
  });
}

// megakernelDestroy(handle)
Napi::Value MegakernelDestroy(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelDestroy", [](const Args& a) -> Napi::Value {
    a.expect_count(1);
    std::lock_guard<std::mutex> lock(instances_mu);
    Instance& inst = instance_at(a, 0);
    // The kernel may still write the mapped words: wait for it before they are freed.
    const cudaError_t idle = cudaStreamSynchronize(stream());
    release(inst);
    instances.erase(a.int64(0, "handle", 1));
    QK_CUDA_TRY("megakernelDestroy", idle);
    return a.env().Undefined();
  });
}

// megakernelLaunchPaths() → [both, staged]: launches since the addon loaded, by the attention path of the kernel
// that ran (a diagnostic, for tests and benchmarks).
Napi::Value MegakernelLaunchPaths(const Napi::CallbackInfo& info) {
  return guard(info, "megakernelLaunchPaths", [](const Args& a) -> Napi::Value {
    a.expect_count(0);
    std::lock_guard<std::mutex> lock(instances_mu);
    Napi::Array out = Napi::Array::New(a.env(), 2);
    for (uint32_t i = 0; i < 2; i++) out.Set(i, Napi::Number::New(a.env(), static_cast<double>(path_launches[i])));
    return out;
  });
}

}  // namespace

void register_megakernel_ops(Napi::Env env, Napi::Object& exports) {
  before_call = cancel_waiting_mask;
  define(env, exports, "megakernelPlan", MegakernelPlanFn);
  define(env, exports, "megakernelCreate", MegakernelCreate);
  define(env, exports, "megakernelScreen", MegakernelScreen);
  define(env, exports, "megakernelLaunch", MegakernelLaunch);
  define(env, exports, "megakernelToken", MegakernelToken);
  define(env, exports, "megakernelMask", MegakernelMask);
  define(env, exports, "megakernelCancel", MegakernelCancel);
  define(env, exports, "megakernelHistory", MegakernelHistory);
  define(env, exports, "megakernelReset", MegakernelReset);
  define(env, exports, "megakernelDestroy", MegakernelDestroy);
  define(env, exports, "megakernelLaunchPaths", MegakernelLaunchPaths);
  // The limits qwen3_decode.h owns, for TypeScript to check its copies against when the addon loads.
  Napi::Object limits = Napi::Object::New(env);
  limits.Set("headDim", Napi::Number::New(env, static_cast<double>(kMegakernelHeadDim)));
  limits.Set("maxSteps", Napi::Number::New(env, kMegakernelMaxSteps));
  limits.Set("maxTopK", Napi::Number::New(env, kMegakernelMaxTopK));
  limits.Set("traceEventsPerLayer", Napi::Number::New(env, kMegakernelTraceEventsPerLayer));
  limits.Freeze();
  exports.Set("megakernelLimits", limits);
  exports.Set("megakernelTuningFields", megakernel_tuning_fields(env));
}

}  // namespace qk::binding
