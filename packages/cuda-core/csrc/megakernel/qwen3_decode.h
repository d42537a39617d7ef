// The Qwen3 decode megakernel: one persistent kernel runs a whole batch-1 decode step of a dense Qwen3 model
// (embedding row → layers → final norm → LM head → argmax, or a top-k sample). See qwen3_decode.cu for the
// design and DESIGN.md for what bounds it and the measurements behind it.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace qk {

/** The head size every dense Qwen3 model uses; the kernel's attention is written for it. */
constexpr int64_t kMegakernelHeadDim = 128;
/** Layers one launch can describe (its per-layer pointers travel in the kernel parameters). */
constexpr int kMegakernelMaxLayers = 40;
/** Query heads per KV head (GQA group) the attention stage serves: Qwen3-0.6B/1.7B have 2, 4B/8B have 4. */
constexpr int64_t kMegakernelMaxGroup = 4;
/** Decode steps one launch may run (each step's token feeds the next one on the device). */
constexpr int kMegakernelMaxSteps = 64;
/** The largest top-k the kernel samples with (Qwen3's recommended top-k is 20); larger ones, or none, are refused. */
constexpr int kMegakernelMaxTopK = 64;
/** Heads of up to this many attention chunks may be merged by the O blocks (MegakernelArgs::o_merge). */
constexpr int kMegakernelOMergeMax = 3;
// The staged attention (MegakernelArgs::staged_keys): keys per head at most, and the shared-memory bytes of one
// staged key or value row (256 and 16 of padding).
constexpr int kMegakernelStagedMaxKeys = 384;
constexpr int64_t kMegakernelStagedRowBytes = 2 * kMegakernelHeadDim + 16;

/** Shared-memory bytes of `keys` staged key and value rows. */
#ifdef __CUDACC__
__host__ __device__
#endif
inline int64_t megakernel_staged_bytes(int keys) { return 2 * static_cast<int64_t>(keys) * kMegakernelStagedRowBytes; }

/**
 * The ring slots the staged attention's blocks keep when their ring has `slots` slots of `slot_bytes` and they stage
 * `keys` key and value rows past it (MegakernelArgs::staged_slots); below 2, that ring leaves no room for them.
 */
inline int megakernel_staged_slots(int slots, int64_t slot_bytes, int keys) {
  if (slot_bytes <= 0) return 0;
  const int64_t rows = megakernel_staged_bytes(keys);
  return slots - static_cast<int>((rows + slot_bytes - 1) / slot_bytes);
}

/**
 * Device addresses of one decoder layer. `qkv` is `[q; k; v]` by rows, `gate_up` is `[gate; up]`. The norms and the
 * cache are bf16; the four projections (`qkv`, `o`, `gate_up`, `down`) hold the codes of MegakernelDims::weight_bits:
 * bf16 rows, INT8 rows (one f32 scale per row in `scales`), or INT4 rows (two codes per byte, low nibble first, each
 * stored as q + 8; one f32 scale per row and group in `scales`, `[rows, k / group_size]`, and with
 * MegakernelDims::zero_points one bf16 offset per row and group in `offsets`, added as offset · Σ x over the group).
 * `scales` and `offsets` are indexed QKV, O, gate/up, down; nullptr where the weights have none.
 */
struct MegakernelLayer {
  const void* input_norm;  // [hidden]
  const void* qkv;         // [(qHeads + 2·kvHeads)·128, hidden]
  const void* q_norm;      // [128]
  const void* k_norm;      // [128]
  const void* o;           // [hidden, qHeads·128]
  const void* post_norm;   // [hidden]
  const void* gate_up;     // [2·ffn, hidden]
  const void* down;        // [hidden, ffn]
  void* k_cache;           // [maxContext, kvHeads, 128]
  void* v_cache;           // [maxContext, kvHeads, 128]
  const void* scales[4] = {nullptr, nullptr, nullptr, nullptr};   // f32, INT8 / INT4 only
  const void* offsets[4] = {nullptr, nullptr, nullptr, nullptr};  // bf16, INT4 with zero points only
};

/** Model sizes. */
struct MegakernelDims {
  int64_t hidden = 0;
  int64_t q_heads = 0;
  int64_t kv_heads = 0;
  int64_t ffn = 0;
  int64_t layers = 0;
  int64_t vocab = 0;
  // The decoder projections' weights (MegakernelLayer): 16 (bf16), 8 (INT8 per row) or 4 (INT4 per group of
  // group_size inputs, a power of two from 8 on; zero_points 1: with per-group offsets). The embedding, the LM head
  // and the norms are bf16 whatever these say.
  int64_t weight_bits = 16;
  int64_t group_size = 0;
  int64_t zero_points = 0;
};

/**
 * Bytes one weight row of `k` columns takes in a ring slot: its codes, then, for INT4, its group scales (f32) and
 * offsets (bf16). (INT8 rows' scales are read from global memory, one per row.)
 */
#ifdef __CUDACC__
__host__ __device__
#endif
inline int64_t megakernel_row_bytes(const MegakernelDims& d, int64_t k) {
  if (d.weight_bits == 8) return k;
  if (d.weight_bits == 4) {
    const int64_t groups = k / d.group_size;
    return k / 2 + groups * 4 + (d.zero_points != 0 ? groups * 2 : 0);
  }
  return 2 * k;
}

/** Flagged-word buffers of one layer, as byte offsets within the layer's region (4 bytes per value: two bf16 and the
 * epoch per 8 bytes); `mid` is the residual after O. */
struct MegakernelLayerOffsets {
  size_t qkv = 0, attn = 0, mid = 0, act = 0, out = 0, bytes = 0;
};

/** Where each buffer lives in the workspace (byte offsets). */
struct MegakernelWorkspaceLayout {
  MegakernelLayerOffsets ll;  // per layer, repeated `layers` times from `layers_at`
  size_t layers_at = 0;
  size_t part_acc = 0, part_ml = 0;  // per layer too: [layer][kv][chunk][G·128] and [layer][kv][chunk][G][2] floats
  size_t part_acc_layer = 0, part_ml_layer = 0;
  size_t part_rec = 0, part_rec_layer = 0;  // per layer too: [layer][kv][chunk < 16][G·130 words]
  size_t omerge = 0, omerge_layer = 0;      // per layer too: [layer][chunk < kMegakernelOMergeMax][record words]
  size_t arg = 0;
  size_t cand = 0, cand_bad = 0;  // sampling: each block's best candidates [grid][kMegakernelMaxTopK] (u64 keys), and
                                  // whether it saw a NaN or +inf logit [grid] (u32)
  size_t total = 0;
};

/** How a launch is shaped on this device, and the scratch it needs. */
struct MegakernelPlan {
  int grid = 0;           // persistent blocks: one per SM, all resident
  int threads = 0;        // consumer warps + one producer warp
  size_t smem_bytes = 0;  // dynamic shared memory per block
  int slots = 0;          // weight ring: slots of slot_bytes each
  size_t slot_bytes = 0;
  // The ring of launches that start below `short_until` (0: none): fewer, larger slots, so fewer tiles per stage,
  // where attention is short and needs less run-ahead (28 KB against 20 KB for Qwen3-0.6B: up to 14 µs per token
  // from position 1; DESIGN.md, "The weight stream"). A launch passes one of the two rings in MegakernelArgs::slots /
  // slot_bytes.
  int short_slots = 0;
  size_t short_slot_bytes = 0;
  int short_until = 0;
  bool claim = false;     // blocks claim GEMV tiles from counters (MegakernelArgs::claim) rather than fixed shares
  int o_merge = 0;         // heads of up to this many chunks may be merged by the O blocks (MegakernelArgs::o_merge)
  bool qkv_quads = false;  // every ring's QKV tiles hold four pairs or more: the warps may take QKV rows four at a
                           // time (MegakernelArgs::qkv_quads)
  size_t workspace_bytes = 0;
  int max_chunks = 0;     // attention chunks per KV head, at most
  int skip_items = 0;     // attention items up to which the attending blocks take no QKV or O rows (half the
                          // grid with fixed shares, a quarter with claimed tiles: DESIGN.md,
                          // "The stages of a layer")
  // LM-head rows of one block at most when launches may screen the LM head (MegakernelArgs::lm_screen); 0 when they
  // cannot: claimed tiles, a hidden size that is not a multiple of 16, or no room in shared memory.
  int screen_rows = 0;
  // The staged attention with its blocks' whole ring (MegakernelArgs::staged_slots 0): keys whose rows fit in the
  // ring's place (smem_bytes covers them); 0 where none can (query groups other than 2, claimed tiles).
  int staged_ring_keys = 0;
};

/** Bytes of floats after each row's weights in the LM head's int8 screen: its scale, a bound on its rounding error's
 * norm, a bound on its norm, 0. */
constexpr int kMegakernelScreenMeta = 16;

/** Bytes of one row of the LM head's int8 screen: the row's int8 weights, then kMegakernelScreenMeta. */
#ifdef __CUDACC__
__host__ __device__
#endif
inline int64_t megakernel_screen_row_bytes(int64_t hidden) { return hidden + kMegakernelScreenMeta; }

/** Everything one decode step reads and writes. */
struct MegakernelArgs {
  MegakernelDims dims;
  MegakernelLayer layers[kMegakernelMaxLayers];
  const void* embed = nullptr;       // [vocab, hidden]
  const void* final_norm = nullptr;  // [hidden]
  const void* lm_head = nullptr;     // [vocab, hidden] (the embedding when tied)
  const float* inv_freq = nullptr;   // [64] RoPE inverse frequencies
  int32_t* state = nullptr;          // [token id, position]: read at the start; a launch of n steps leaves
                                     // [its last token, position + n]
  int32_t* result = nullptr;         // [last token, error code] (MegakernelError)
  // Host-mapped words the host polls while the launch runs: [0] = (epoch << 32) | error code of a failed launch,
  // [1 + s] = (epoch + s) << 32 | the token of step s, written the moment the step's argmax is known.
  uint64_t* host = nullptr;
  int steps = 1;                     // decode steps of this launch, 1…kMegakernelMaxSteps
  int slots = 0;                     // the plan's ring (MegakernelPlan::slots, slot_bytes)
  int64_t slot_bytes = 0;
  int inflight = 0;                  // weight copies in flight per block, at most (0: as many as the ring has free)
  int lm_inflight = 0;               // the same bound for the LM head's copies (no hop waits on them)
  int claim = 0;                     // 1: blocks claim GEMV tiles from per-stage counters; 0: fixed shares
  int skip_items = 0;                // attention items up to which the attending blocks take no QKV or O rows
                                     // (MegakernelPlan::skip_items)
  int l2_stream = 1;                 // 1: weight copies are L2 evict_first (the KV cache stays); 0: default policy
  int chunk_keys = 0;                // keys per attention chunk to aim for (at most one pass: 0, the default)
  int kv_stage = 1;                  // 1: a second attention pass of up to 28 keys is staged in shared memory
  int qkv_quads = 0;                 // 1: QKV rows are dealt to the warps four at a time (MegakernelPlan::qkv_quads)
  int kv_prefetch = 0;               // 1: the attention's cached rows are prefetched to L2 at each layer's start
                                     // (the old default: 4-10 µs per token slower at positions 512-1024)
  // The staged attention (query groups of 2; DESIGN.md, "The staged attention"): steps of staged_from to staged_keys
  // keys (a multiple of 16, at most kMegakernelStagedMaxKeys; 0: none) attend with one block per KV head, over the
  // head's cached rows copied into shared memory past the ring of blocks [0, kv_heads), which keep staged_slots of its
  // slots (at least 2), or, with staged_slots 0, over the place of their whole ring (at most
  // MegakernelPlan::staged_ring_keys keys): those blocks then take no rows of the layers in a staged step, and stream
  // its LM head once its last layer's attention is done.
  int staged_keys = 0;
  int staged_from = 1;               // the staged attention takes the steps of staged_from…staged_keys keys (≥ 1)
  int staged_slots = 0;
  int staged_gate_up = 0;            // 1: the staged attention's blocks take gate/up rows too (a knob; 0: they do not)
  int staged_hf = 1;                 // 1: the staged attention rounds its scores and weights as HF's eager bf16
                                     // attention does; 2: the same with __fdiv_rn (the first division: the same bits,
                                     // slower; a check); 0: fp32 scores, unnormalised bf16 weights (flash-style)
  // 1 (the default): a launch whose steps all take the staged attention runs a kernel compiled without the attention
  // by chunks (a third less code, 5-8 µs per token faster); 0: every launch runs the kernel with both (a knob).
  // `position` must then be the state's: the staged kernel fails a launch with a step it cannot attend (WrongPath).
  int path_kernels = 1;
  int position = -1;                 // the state's position where the caller knows it (−1: not known; then the
                                     // kernel with both paths runs)
  int o_merge = 0;                   // query groups of 2: heads of 2…o_merge chunks (at most kMegakernelOMergeMax)
                                     // publish each chunk's normalised output, merged by every O block as it gathers
                                     // its input (30-68 µs per token slower); 0 (the default): chunk 0's block
                                     // merges them
  void* logits = nullptr;            // [vocab] bf16 (not written by a screened launch: lm_screen)
  // The LM head's int8 screen (megakernel_screen_build, rows of megakernel_screen_row_bytes), or nullptr. The step
  // then streams the screen instead of the bf16 LM head, bounds every logit from it, and recomputes in bf16 (the
  // unscreened arithmetic, from the LM head) only the rows whose bound reaches the block's best lower bound (argmax)
  // or its top_k-th best (sampling), so its argmax, or its top-k with their logits, and so its token, are the same;
  // the logits are not written.
  const void* lm_screen = nullptr;
  // A constraint's mask, in device memory the host fills while the launch runs (copies on a stream of its own): the
  // words of the step tagged e (the step's epoch) land at mask_words + (e & 1) · mask_stride, then e lands in
  // mask_tags[e & 1] (or kMegakernelMaskCancel, to end the launch at its next wait: MegakernelError::Cancelled). The
  // step's LM head, screened or not, waits for that tag (bounded by timeout_ns), reads the words of its rows, and takes
  // its argmax or top-k over the ids below vocab_limit whose bit (t & 31 of word t >> 5) is set. nullptr: every id.
  const uint64_t* mask_tags = nullptr;
  const uint32_t* mask_words = nullptr;
  int64_t mask_stride = 0;  // words per slot: at least ceil(vocab / 32)
  void* workspace = nullptr;         // plan.workspace_bytes, zeroed once before the first launch
  int64_t max_context = 0;           // cache rows
  int64_t vocab_limit = 0;           // argmax (or sample) over ids below this
  // Sampling (top_k > 0), by `sample`'s rule over the ids below vocab_limit: candidates in (logit descending, index
  // ascending) order, the first top_k kept, fixed-point weights round(exp((x − max)/T) · sample_scale), the shortest
  // prefix reaching top_p of the kept weight, then the first candidate whose cumulative weight exceeds
  // uniforms[s] · (the prefix's weight). top_k 0: argmax.
  int top_k = 0;                     // 0 (argmax) or 1…kMegakernelMaxTopK
  double temperature = 1.0;          // > 0
  double top_p = 1.0;                // (0, 1]
  double sample_scale = 0.0;         // sample_weight_scale(vocab_limit)
  double uniforms[kMegakernelMaxSteps] = {};  // step s draws with uniforms[s], in [0, 1)
  // Sampling controls in the kernel, as `applyLogitControls` applies them before `sample` (argmax steps too). With
  // pen_counts: a logit x of an id t whose bit is set in pen_seen (an id of the prompt, or one generated before) goes
  // through the penalties in float64 (repetition: x > 0 ? x / r : x · r; then x − frequency · counts[t]; then
  // − presence where counts[t] > 0), rounded to f32; the others keep x. Every step's token then adds 1 to its count
  // and sets its bit, so the launch's later steps (and the next launch, when the host leaves them) see it. With
  // log_min_p > −inf (sampling): candidates whose (x − max) / temperature lies below it get no weight. The screened
  // LM head bounds the penalised logits through the same (monotone) arithmetic, so the candidates stay exact.
  int32_t* pen_counts = nullptr;     // [vocab] counts of the generated ids, or nullptr: no penalties
  uint32_t* pen_seen = nullptr;      // [ceil(vocab / 32)] words: prompt ids | generated ids
  double repetition_penalty = 1.0;   // > 0
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  double log_min_p = -HUGE_VAL;      // ln(min-p); −inf: off
  float eps = 1e-6f;
  uint32_t epoch = 0;                // tags step 0's flagged words; step s uses epoch + s (never 0: the host skips it)
  uint64_t timeout_ns = 0;           // bound of every wait inside the kernel
  uint32_t debug = 0;                // diagnostics (tuning debug; all but 64 make the outputs wrong): 1 = no
                                     // waits for flagged words, 2 = no attention, 4 = no GEMV dot products (the
                                     // epilogues publish zeros, so waits still work), 8 = no input gathers, 32 = the
                                     // producer copies no weights (only the slot descriptors; use with 4), 64 = the
                                     // trace's "RoPE" stamp moves to after the attention passes (outputs unchanged)
  uint64_t* trace = nullptr;         // optional: [grid][megakernel_trace_events(layers)] globaltimer stamps
  // Set by launch_megakernel from the plan (callers leave it): where the workspace's buffers are. Read from the
  // parameters, it takes no registers; computed by each thread, it held 38 of the G = 2 kernels' 252.
  MegakernelWorkspaceLayout layout;
};

/** The diagnostic bits of MegakernelArgs::debug (the binding passes no others). */
constexpr uint32_t kMegakernelDebugBits = 1 | 2 | 4 | 8 | 32 | 64;

/** Trace stamps per layer: start, then after each of: QKV input (RMSNorm), QKV first tile, QKV, attention (its
 * loads issued, q/k/v gathered, roped, done), O input (the wait for attention), O first tile, O, gate/up input
 * (RMSNorm), gate/up first tile, gate/up, down input, down first tile, down. */
constexpr int kMegakernelTraceEventsPerLayer = 17;
/** Trace stamps per block for a model of `layers` layers (the layers, then LM-head input, LM head, end). */
#ifdef __CUDACC__
__host__ __device__
#endif
constexpr int64_t megakernel_trace_events(int64_t layers) { return layers * kMegakernelTraceEventsPerLayer + 3; }

/** Error codes the kernel leaves in result[1]. */
enum class MegakernelError : int32_t {
  None = 0,
  Timeout = 1,         // a wait exceeded timeout_ns (a block never arrived: the GPU is shared, or a bug)
  BadPosition = 2,     // state[1] outside [0, max_context)
  BadToken = 3,        // state[0] outside [0, vocab)
  NonFinite = 4,       // argmax and sampling alike (`sample`'s rule): a NaN or +inf logit among the ids below
                       // vocab_limit, or all of them −inf
  WrongPath = 5,       // the staged kernel (MegakernelArgs::path_kernels) found a step that is not staged: the
                       // launch's position was not the state's
  Cancelled = 6,       // a masked launch's step found its mask slot tagged kMegakernelMaskCancel: the host dropped
                       // the launch's remaining steps
};

/** The mask tag that cancels a masked launch (MegakernelArgs::mask_tags): its waiting step fails with Cancelled. */
constexpr uint64_t kMegakernelMaskCancel = ~0ull;

/**
 * The launch shape for `dims` on the current device, or an error: cudaErrorNotSupported when the sizes are not a
 * dense Qwen3 shape the kernel serves (`why` says which), cudaErrorInvalidConfiguration when one block per SM
 * cannot be resident with the shared memory the kernel needs. `slot_bytes`: the weight ring's slot size to aim for
 * (0: the default, 20 KB); it is raised to hold a pair of the widest rows.
 */
cudaError_t megakernel_plan(const MegakernelDims& dims, MegakernelPlan* plan, const char** why, size_t slot_bytes = 0);

/**
 * Queues one launch of `args.steps` decode steps (argmax, or sampling when `args.top_k` > 0). `plan` must come from
 * megakernel_plan for the same dims.
 */
cudaError_t launch_megakernel(const MegakernelArgs& args, const MegakernelPlan& plan, cudaStream_t stream);

/**
 * The attention path of the kernel launch_megakernel runs for `args`: 1, the staged attention alone, where every step
 * takes it (MegakernelArgs::path_kernels, a known position, query groups of 2), else 0, the kernel with both paths.
 */
int megakernel_launch_path(const MegakernelArgs& args);

/**
 * Queues the build of the LM head's int8 screen (`vocab` rows of megakernel_screen_row_bytes(hidden) bytes at `out`,
 * 16-byte aligned) from the bf16 LM head `lm_head` ([vocab, hidden], hidden a multiple of 16). Each row keeps its
 * weights rounded to int8 on a scale of its largest magnitude / 127, that scale, and upper bounds on the norms of
 * its rounding error and of the row (+infinity for a row with a NaN or infinite weight).
 */
cudaError_t megakernel_screen_build(const void* lm_head, int64_t vocab, int64_t hidden, void* out,
                                    cudaStream_t stream);

}  // namespace qk
