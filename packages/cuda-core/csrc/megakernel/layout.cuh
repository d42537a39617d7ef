// The megakernel's constants and layouts: the block's shape (warps, ring slots), the attention's sizes, the sync words
// at the start of the workspace, where each buffer lives in the workspace (computed on the host), the block's shared
// memory (ring, union of x and the attention scratch, residual, misc bytes), which steps take the staged attention,
// and the block's shared state (Block).
//
// Part of the one translation unit qwen3_decode.cu: included there inside namespace qk::{anonymous}, in the
// order listed there, after the files it relies on; not a standalone header.
#pragma once

// 7 consumer warps + the producer = 8 warps, two per SM sub-partition, so a thread may hold up to 255 registers (with
// 9 warps, one sub-partition holds 3 and the cap is 168, which spilled; spills live in L2 here, see flag_wait_slow).
// 11 consumer warps, at the same cap, measured 49-189 µs per token slower, with or without most of the spills
// (DESIGN.md, "Shape of a launch").
constexpr int kConsumerWarps = 7;
constexpr int kConsumers = kConsumerWarps * 32;
constexpr int kThreads = kConsumers + 32;  // + the producer warp
constexpr int kMaxSlots = 24;                 // ring slots, at most (their mbarriers live in the misc bytes)
constexpr size_t kDefaultSlotBytes = 20 * 1024;  // the default slot size to aim for (the best of a 12-32 KB sweep)
// The slot size of launches that start below kShortRingUntil, for models whose default slots hold a pair of their
// widest rows (on an H100, Qwen3-0.6B 581-595 against 595-600 µs per token from position 1, equal at 512; 748-751
// against 737-739 at 1024, where launches keep the default ring).
constexpr size_t kShortSlotBytes = 28 * 1024;
constexpr int kShortRingUntil = 512;
constexpr size_t kSmemLimit = 227 * 1024;        // dynamic shared memory one block may opt in to on sm_90
constexpr double kClaimBytesPerBlock = 1 << 20;  // weight bytes per block and layer from which blocks claim tiles
constexpr int kD = static_cast<int>(kMegakernelHeadDim);
constexpr int kHalf = kD / 2;
constexpr int kMaxG = static_cast<int>(kMegakernelMaxGroup);
constexpr int kKeysPerWarp = 8;  // attention: keys per warp and pass
constexpr int kPass = kConsumerWarps * kKeysPerWarp;  // attention: keys per pass
constexpr int kMinChunk = kPass;  // positions per attention work item, at least: one pass
// Keys of a chunk's second pass that can be staged in shared memory (in the warps' output area: K and V rows of 256
// bytes; K's 16-byte pieces swizzled by the row, piece ^ (row & 7), so that a warp's 8 keys use different banks)
constexpr int kStageKeys = 28;
// The staged attention (DESIGN.md, "The staged attention"): in a step of MegakernelArgs::staged_from to staged_keys
// keys (query groups of 2), each KV head is one work item. Its block copies the head's cached rows into shared memory
// past its ring (which keeps MegakernelArgs::staged_slots slots; with 0, into its whole ring: the block then takes no
// rows of the layers) before it waits for q/k/v, then attends on the tensor cores.
// A row takes kStagedRow bytes: 256 and 16 of padding, so that the eight rows of an ldmatrix fall on different banks.
constexpr int kStagedRow = static_cast<int>(kMegakernelStagedRowBytes);
constexpr int kStagedMaxKeys = kMegakernelStagedMaxKeys;  // (the weights' scratch; a multiple of the 16-key tiles)
static_assert(kStagedMaxKeys % 16 == 0 && kStagedRow == kD * 2 + 16);
// Heads of up to kFlagMergeMax chunks are merged by chunk 0's block from flagged records as they land, kFlagMergeChunks
// chunks per batch of loads; heads of more, by the last chunk to arrive, after a fence and an arrival counter (the
// flagged merge saves two round trips at a few chunks; with a second batch, 9-16 chunks gain too: 8 µs per token at
// position 512).
constexpr int kFlagMergeChunks = 8;
constexpr int kFlagMergeMax = 2 * kFlagMergeChunks;
constexpr int kSpreadBatch = 9;  // loads per thread of a merge spread over the block (G = 2: 15 chunks' records)
constexpr float kLog2e = 1.4426950408889634f;
// A debug value the binding never passes (it keeps only the documented diagnostic bits): the condition of the
// placement padding at the end of the attention.
constexpr uint32_t kPlacementPad = 0x7fffffffu;
static_assert((kPlacementPad & kMegakernelDebugBits) != kPlacementPad, "the padding's condition never holds");
constexpr int kOMergeBatch = 8;  // loads per thread of stage_merge_input: 3 chunks' records of 16 q heads (1,584 units)
constexpr int kGatherBatch = 4;  // flagged-word loads per thread issued together in a gather (8: slower)

// Sync words at the start of the workspace (u32).
constexpr int kAbortWord = 0;
constexpr int kArgmaxCounter = 1;
constexpr int kTokenWord = 2;           // u64 at byte 8: (epoch << 32) | the token of the step tagged epoch
constexpr int kMergeCounters = 64;      // [layer][KV head]
constexpr int kMaxKvHeads = 64;
constexpr size_t kSyncBytes = 16384;
// Claim counters of the GEMV stages (with `claim`): two sets, used by steps of even and odd epochs in turn; the block
// that reduces a step's argmax clears that step's set (every claim of the step is behind it by then), and no block
// claims in the step two ahead before it has seen that step's token.
constexpr int kClaimCounters = kMergeCounters + kMaxKvHeads * kMegakernelMaxLayers;
constexpr int kClaimsPerSet = kMegakernelMaxLayers * 4 + 1;  // 4 GEMV stages per layer, and the LM head
static_assert(kClaimCounters + 2 * kClaimsPerSet <= static_cast<int>(kSyncBytes / 4));

enum Stage : int { kQkv = 0, kAttention = 1, kO = 2, kGateUp = 3, kDown = 4 };

// Where each buffer lives in the workspace (MegakernelWorkspaceLayout, qwen3_decode.h): computed once per launch on the
// host (workspace_layout below) and read by the kernel from its parameters, so that no thread holds it in registers.
using Layout = MegakernelWorkspaceLayout;

__host__ __device__ inline size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/**
 * Words of one attention chunk's flagged partial (8 bytes each: an fp32 value and the step's epoch): the group's G·128
 * unnormalised outputs, then each head's running max and sum.
 */
__host__ __device__ inline int part_record_words(int group) { return group * (kD + 2); }

/**
 * Words of one chunk's record for the O blocks' merge (MegakernelArgs::o_merge; 8 bytes each): every q head's
 * normalised output as flagged bf16 pairs (the attention output's layout), then each head's (max, sum) as flagged fp32
 * words.
 */
__host__ __device__ inline int omerge_record_words(int q_heads) { return q_heads * kD / 2 + 2 * q_heads; }

// Host only: the plan sizes the workspace with it, and launch_megakernel passes it in the kernel's parameters (a
// kernel that computed it held 38 more registers per thread).
inline Layout workspace_layout(const MegakernelDims& d, int grid, int max_chunks) {
  const size_t group = static_cast<size_t>(d.q_heads / d.kv_heads);
  Layout l{};
  size_t at = 0;
  l.ll.qkv = at;
  at = align_up(at + (d.q_heads + 2 * d.kv_heads) * kD * 4, 256);
  l.ll.attn = at;
  at = align_up(at + d.q_heads * kD * 4, 256);
  l.ll.mid = at;
  at = align_up(at + d.hidden * 4, 256);
  l.ll.act = at;
  at = align_up(at + d.ffn * 4, 256);
  l.ll.out = at;
  at = align_up(at + d.hidden * 4, 256);
  l.ll.bytes = at;
  l.layers_at = kSyncBytes;
  at = l.layers_at + l.ll.bytes * d.layers;
  l.part_acc_layer = align_up(d.kv_heads * max_chunks * group * kD * 4, 256);
  l.part_acc = at;
  at += l.part_acc_layer * d.layers;
  l.part_ml_layer = align_up(d.kv_heads * max_chunks * group * 2 * 4, 256);
  l.part_ml = at;
  at += l.part_ml_layer * d.layers;
  const size_t rec_chunks = static_cast<size_t>(max_chunks < kFlagMergeMax ? max_chunks : kFlagMergeMax);
  l.part_rec_layer = align_up(d.kv_heads * rec_chunks * part_record_words(static_cast<int>(group)) * 8, 256);
  l.part_rec = at;
  at += l.part_rec_layer * d.layers;
  l.omerge_layer = align_up(static_cast<size_t>(kMegakernelOMergeMax) * omerge_record_words(d.q_heads) * 8, 256);
  l.omerge = at;
  at += l.omerge_layer * d.layers;
  l.arg = at;
  at = align_up(at + static_cast<size_t>(grid) * 8, 256);
  l.cand = at;
  at = align_up(at + static_cast<size_t>(grid) * kMegakernelMaxTopK * 8, 256);
  l.cand_bad = at;
  at = align_up(at + static_cast<size_t>(grid) * 4, 256);
  l.total = at;
  return l;
}

/** Elements of the block's input-vector buffer: the widest GEMV input. */
__host__ __device__ inline int64_t x_elems(const MegakernelDims& d) {
  int64_t n = d.hidden > d.ffn ? d.hidden : d.ffn;
  return n > d.q_heads * kD ? n : d.q_heads * kD;
}

/** Attention scratch (floats): roped queries [G][128], the warps' outputs [warps][G·128], their max and sum. */
constexpr int kAttnScratchFloats = kMaxG * kD + kConsumerWarps * kMaxG * kD + kConsumerWarps * kMaxG * 2;
static_assert(2 * kStageKeys * kD * 2 <= kConsumerWarps * kMaxG * kD * 4, "a staged pass fits the warps' outputs");
/** The group's q heads, then k and v (bf16), staged after the attention scratch. */
constexpr int kAttnStageElems = (kMaxG + 2) * kD;
static_assert(kFlagMergeMax * 2 * (kD + 2) * 4 <= kAttnScratchFloats * 4 + kAttnStageElems * 2,
              "the records of a spread merge (G ≤ 2) fit the attention scratch and the staged q/k/v");

// The staged attention's scratch (floats, in the attention scratch): q (bf16) [2][128], the weights of key pairs
// [tiles][2][8], the warps' maxes and sums [7][2] each, the warps' partial outputs [7][2][128].
constexpr int kStagedQ = 0, kStagedP = kStagedQ + kD;
constexpr int kStagedMax = kStagedP + kStagedMaxKeys, kStagedSum = kStagedMax + 2 * kConsumerWarps;
constexpr int kStagedPart = kStagedSum + 2 * kConsumerWarps, kStagedEnd = kStagedPart + kConsumerWarps * 2 * kD;
static_assert(kStagedPart % 2 == 0, "the partial outputs are read as float2");
// Key tiles per warp in the staged attention, at most.
constexpr int kStagedTilesPerWarp = (kStagedMaxKeys / 16 + kConsumerWarps - 1) / kConsumerWarps;
static_assert(kStagedEnd <= kAttnScratchFloats, "the staged attention's scratch fits the attention scratch");

__host__ __device__ inline size_t union_bytes(const MegakernelDims& d) {
  const size_t x = static_cast<size_t>(x_elems(d)) * 2;
  const size_t a = static_cast<size_t>(kAttnScratchFloats) * 4 + static_cast<size_t>(kAttnStageElems) * 2;
  return align_up(x > a ? x : a, 128);
}

__host__ __device__ inline size_t residual_bytes(const MegakernelDims& d) {
  return align_up(static_cast<size_t>(d.hidden) * 2, 128);
}

constexpr size_t kMiscBytes = 1024;  // mbarriers, slot descriptors, reduction scratch, flags
static_assert(3 * kMaxSlots * 8 + 64 * 4 + 16 + 16 <= kMiscBytes);
constexpr size_t kStagedBarrier = kMiscBytes - 8;  // the staged attention's mbarrier, at the misc bytes' end
// The staged attention over the whole ring: completes once per step when the last layer's attention is done with the
// staged rows, so that the producer may stream the LM head through the ring (and through them).
constexpr size_t kStagedFreeBarrier = kMiscBytes - 16;

/** Bytes at the start of shared memory for the ring, and for the staged attention's rows where they take its place. */
__host__ __device__ inline size_t ring_region_bytes(const MegakernelArgs& a) {
  const size_t ring = static_cast<size_t>(a.slots) * static_cast<size_t>(a.slot_bytes);
  const size_t rows = a.staged_keys > 0 && a.staged_slots == 0
                          ? static_cast<size_t>(megakernel_staged_bytes(a.staged_keys))
                          : 0;
  return ring > rows ? ring : rows;
}

/**
 * Whether the step at `pos` (pos + 1 keys) takes the staged attention: from a.staged_from to a.staged_keys keys.
 * Decided per step, so that a step's bits do not depend on how steps are cut into launches.
 */
__host__ __device__ inline bool staged_step(const MegakernelArgs& a, int pos) {
  return a.staged_keys > 0 && pos + 1 >= a.staged_from && pos + 1 <= a.staged_keys;
}

/**
 * The launch's staged steps before step `step` (they are consecutive: keys grow by one per step), starting at
 * `pos0`: the phases of the staged attention's barriers, each completing once per staged step (per layer, the rows').
 */
__host__ __device__ inline int staged_steps_before(const MegakernelArgs& a, int pos0, int step) {
  const int first = a.staged_from - 1 - pos0;  // the first staged step, if the launch has one
  return step - (first > 0 ? first : 0);
}

/** Shared memory besides the ring. */
size_t fixed_smem_bytes(const MegakernelDims& d) { return union_bytes(d) + residual_bytes(d) + kMiscBytes; }

// ---------------------------------------------------------------------------------------------------------------
// The block's shared state

/** Shared state of one block. */
struct Block {
  uint8_t* slots;
  uint64_t* full;   // [a.slots]
  uint64_t* empty;  // [a.slots]
  uint2* desc;      // [a.slots] the tile in each slot: first unit; units | 1 << 31 on the stage's last tile
  float* red;       // [64] reduction scratch
  int* flag;        // [0] abort seen by this block, [1] merge winner, [2] the step's input token, [3] last to arrive
  bf16* x;          // the stage's input vector (union with the attention scratch)
  float* scratch;   // attention scratch (same memory as x)
  bf16* qkv_in;     // the attention item's q heads, k, v (after the scratch)
  bf16* res;        // the residual this block last read (the O and down epilogues add it)
  unsigned* sync;   // the workspace's sync words
  int32_t* result;  // [next token, error code]
  const bf16* embed_row;  // the step's token row: layer 0's residual
  uint64_t timeout_ns;
  uint64_t* host;         // the host-mapped words (MegakernelArgs::host)
  unsigned launch_epoch;  // the epoch of the launch's first step: tags its host error word
  unsigned epoch;         // the epoch of this step: tags the flagged words it writes and waits for
  int attn_skip;          // attention_skip() of this step
  int nslots;             // this block's ring slots: a.slots, or a.staged_slots on the staged attention's blocks
                          // where they keep slots beside its rows
};

/** The mbarrier at byte `at` of the block's misc bytes (they start at b.full): kStagedBarrier, kStagedFreeBarrier. */
__device__ __forceinline__ uint64_t* misc_barrier(const Block& b, size_t at) {
  return reinterpret_cast<uint64_t*>(reinterpret_cast<uint8_t*>(b.full) + at);
}
