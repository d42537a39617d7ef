// The Qwen3 decode megakernel: whole batch-1 decode steps (embedding row, every layer, final norm, LM head, argmax
// or a top-k sample) in one persistent, non-cooperative kernel; one launch runs 1…64 steps, each step's token
// feeding the next on the device.
//
// Shape of a launch: one block per SM, all resident (checked with the occupancy API before the first launch).
// Each block has 7 consumer warps that compute and one producer warp that streams weights. Every weight matrix is
// cut by row pairs into one contiguous slice per block, and each slice into tiles of at most one shared-memory slot
// (a run-time size, 20 KB by default, at least a pair of the widest rows; launches that start at short contexts may
// take fewer, larger slots: MegakernelPlan::short_until). The producer walks the block's slices of
// every step in order (QKV, O, gate/up, down of each layer, then the LM head) and copies each tile into the ring of
// slots with TMA bulk copies (16-byte aligned, L1 bypassed), completing on the slot's "full" mbarrier, with at most
// `inflight` copies outstanding (more bytes in flight make every L2 round trip of the other stages slower).
// Weights do not depend on activations, so the producer runs ahead of the consumers by the whole ring, across
// stages, layers and steps: while the blocks wait for each other's outputs, HBM keeps streaming the next weights.
//
// Synchronisation between blocks has no grid barrier and no arrival counter on the data path. Every activation a
// stage hands to other blocks is written in "flagged words": 8 bytes holding two bf16 values and the step's epoch,
// stored with one 8-byte store (single-copy atomic). A reader spins on the words it needs until each carries this
// step's epoch, so one L2 round trip both waits for and delivers the data, and a block waits only for the values
// it reads (attention blocks for their own heads' q/k/v; nobody else for them). Each layer and stage has its own
// buffer, written once per step; no block starts a step before every block has finished the previous one (they all
// wait for its token), so nothing is overwritten while another block may still read it, and no buffer needs
// clearing (epochs never repeat: the epoch tells this step's words from older ones).
//
// Stages of a layer:
//   1. QKV: RMSNorm of the residual recomputed by every block, then the block's QKV rows.
//   2. Attention: work items (KV head, chunk of positions). The block of an item waits for its group's q (and,
//      where its chunk holds the new position, k and v), QK-norms and RoPEs them, appends the new key and value to
//      the cache, and attends. Chunks of one head are merged in fixed chunk order (the same bits every run): up to
//      kFlagMergeMax chunks by chunk 0's block, from flagged records as they land; more by whichever block
//      finishes last (after a fence and an arrival counter per layer and KV head). (A knob, MegakernelArgs::o_merge,
//      has the O blocks merge heads of 2-3 chunks as they gather their input instead: 30-68 µs per token slower;
//      DESIGN.md, "Attention by chunks".)
//      (By default, in query groups of 2 with fixed shares (Qwen3-0.6B and 1.7B), steps of 57-384 keys attend with
//      one block per KV head over the head's rows copied into its shared memory, on the tensor cores, each warp
//      taking its key tiles from the scores to its share of the output: attend_staged, MegakernelArgs::staged_keys,
//      DESIGN.md, "The staged attention". A launch whose steps all attend so runs a kernel compiled without the
//      attention by chunks: a third less code, 5-8 µs per token faster; AttnPath.)
//   3. O projection, residual add in the epilogue (from the block's own copy of the residual it normalised).
//   4. RMSNorm (recomputed per block) + gate/up rows of the block's FFN units, SwiGLU in the epilogue.
//   5. Down projection, residual add in the epilogue.
// Then the final RMSNorm and the LM head rows, each block keeping its best logit (or, when sampling, each warp its k
// best, merged per block; launches with a screen stream the LM head's int8 copy instead and recompute in bf16 only the
// rows that can hold the block's best or k best: consume_screen); the last block to arrive reduces the blocks' bests
// (or merges their k best and draws from them by `sample`'s rule, with the step's uniform) and publishes the token: to
// the other blocks (the next step's embedding row) and to pinned host memory, where the host reads it while the kernel
// goes on. The last step also leaves the state for the next launch. Rounding follows the layered engine (and HF): every
// projection output, norm output, SwiGLU output and residual sum is rounded to bf16 once.
//
// Every wait (flagged words, the token, mbarriers) is bounded by `timeout_ns`: a block that times out records an
// error code (also in the host error word) and an abort flag that the other blocks see, and the kernel returns; JS
// gets an error, never a hung process.
//
// DESIGN.md, beside this file, gives what bounds a step, the measurements behind these choices, and what was tried and
// dropped.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/mma.cuh"
#include "../common/numeric.cuh"
#include "../common/sampling_rule.cuh"
#include "../common/weight_div.cuh"
#include "qwen3_decode.h"

namespace qk {
namespace {

using bf16 = __nv_bfloat16;

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
// Device primitives

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void consumer_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory"); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

/** Adds `bytes` to the transactions the barrier's current phase waits for, without arriving. */
__device__ __forceinline__ void mbar_expect_tx_only(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, unsigned parity) {
  unsigned ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
      : "=r"(ok)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return ok != 0;
}

/** One TMA bulk copy global → shared, completing `bytes` on `bar`, with an L2 eviction policy (createpolicy). */
__device__ __forceinline__ void bulk_copy_hint(void* dst, const void* src, unsigned bytes, uint64_t* bar,
                                               uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

// The kernel's own sync and flagged words are loaded and stored relaxed at GPU scope: every block that reads or writes
// them runs on this GPU. (As ld/st.volatile, relaxed at system scope, they measured 3-4 µs per token slower at
// positions 1-512, with the same bits.) The host-mapped words stay at system scope.
__device__ __forceinline__ unsigned ld_relaxed_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Loads issued where they stand, to overlap a wait that follows. ptxas may otherwise sink a plain load to its first
// use to relieve register pressure (the kernel runs near 255 registers), and the load then starts after the wait it was
// meant to hide under (as volatile asm: 10-30 µs per token faster at positions 128-1024). `nc`: read-only data
// (weights); `cg`: data this kernel writes (the KV cache), read coherently from L2, and the screen's candidate LM-head
// rows (read once: not kept in L1).
__device__ __forceinline__ uint4 ld_early_nc128(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 ld_early_cg128(const void* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 ld_early_cg64(const void* p) {
  uint2 v;
  asm volatile("ld.global.cg.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned short ld_early_nc16(const void* p) {
  unsigned short v;
  asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ float ld_early_nc32f(const float* p) {
  float v;
  asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}

__device__ __forceinline__ float bf(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ bf16 to_bf(float v) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ float round_bf(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

/**
 * 16 bytes of shared memory in one 128-bit load. (Through a `uint4` reference the compiler splits the access into
 * four 32-bit loads, four times the instructions, and with 16-byte lane strides each of them meets a 4-way bank
 * conflict.)
 */
__device__ __forceinline__ uint4 lds128(const void* p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(smem_addr(p)));
  return v;
}

/** A 16-byte copy global → shared that completes in the background (L2 only); waited for by cp_async_wait_all. */
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// The two bf16 of a 32-bit word as floats (exact: a bf16 is the top half of its float). One instruction each: the
// toolkit's __bfloat1622float2 takes two for the high half (a byte permute, then a shift), and in the GEMV's dot loop,
// which issues an instruction every cycle it can, conversions were 2.2 instructions per FMA; one each saved 10-20 µs
// per token at positions 1-128.
__device__ __forceinline__ float bf2_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf2_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ void unpack8(const uint4 u, float (&f)[8]) {
  const unsigned h[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    f[2 * i] = bf2_lo(h[i]);
    f[2 * i + 1] = bf2_hi(h[i]);
  }
}

/** Dot of 8 bf16 weights with 8 bf16 inputs, accumulated into `acc` (in element order). */
__device__ __forceinline__ float dot8(const uint4 w, const uint4 x, float acc) {
  const unsigned a[4] = {w.x, w.y, w.z, w.w}, b[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    acc = fmaf(bf2_lo(a[i]), bf2_lo(b[i]), acc);
    acc = fmaf(bf2_hi(a[i]), bf2_hi(b[i]), acc);
  }
  return acc;
}

// ---------------------------------------------------------------------------------------------------------------
// Flagged words: [two bf16 | epoch] per 8 bytes. A value pair is published with one 64-bit store, so a reader that
// sees the epoch in a word also sees the pair written with it.

__device__ __forceinline__ unsigned pack_bf2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&v);
}

/**
 * Publishes values (2·pair, 2·pair + 1) of a flagged buffer: one scalar 64-bit store, which is single-copy atomic
 * (a vector store of two 32-bit words is not: its halves may land separately, and a reader could pair this epoch
 * with the previous launch's values).
 */
__device__ __forceinline__ void flag_store(void* buf, int64_t pair, unsigned packed, unsigned epoch) {
  const unsigned long long word = (static_cast<unsigned long long>(epoch) << 32) | packed;
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(static_cast<unsigned long long*>(buf) + pair), "l"(word)
               : "memory");
}

/** Publishes word `i` of a flagged fp32 buffer: the value's bits and the epoch, in one single-copy-atomic store. */
__device__ __forceinline__ void flag_store_f32(void* buf, int64_t i, float v, unsigned epoch) {
  flag_store(buf, i, __float_as_uint(v), epoch);
}

/**
 * Two flagged words (four values) as they are in L2 now: a vector of two 64-bit elements, each element read as
 * one single-copy-atomic access. x, z: the value pairs; y, w: their epochs.
 */
__device__ __forceinline__ uint4 flag_load(const void* p) {
  unsigned long long lo, hi;
  asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(lo), "=l"(hi) : "l"(p) : "memory");
  return make_uint4(static_cast<unsigned>(lo), static_cast<unsigned>(lo >> 32), static_cast<unsigned>(hi),
                    static_cast<unsigned>(hi >> 32));
}

__device__ __forceinline__ bool flag_ready(const uint4& v, unsigned epoch) { return v.y == epoch && v.w == epoch; }

// ---------------------------------------------------------------------------------------------------------------
// The block's share of a stage: units [u0, u1) of `units`, cut into tiles that fit one slot. Shares and tiles are
// whole pairs of units, so that each output pair has one writer.

struct StageShape {
  const bf16* w;      // weight rows (gate/up: the gate rows; the up rows follow `up_offset` rows later)
  int64_t units;      // outputs (gate/up: SwiGLU outputs, two weight rows each)
  int64_t k;          // columns
  int64_t up_offset;  // gate/up only: rows between a gate row and its up row
  int rows_per_unit;  // 1, or 2 for gate/up
};

__host__ __device__ __forceinline__ int tile_units_for(int64_t k, int rows_per_unit, int64_t slot_bytes) {
  // 32-bit (a 64-bit division is a long subroutine on the GPU): a slot is at most 227 KB, and a unit's rows (at most
  // 2 · 65535 · 128 columns of bf16) stay below 2^32 bytes.
  return static_cast<int>(static_cast<unsigned>(slot_bytes) / static_cast<unsigned>(k * 2 * rows_per_unit)) & ~1;
}

__device__ __forceinline__ int tile_units(const MegakernelArgs& a, const StageShape& s) {
  return tile_units_for(s.k, s.rows_per_unit, a.slot_bytes);
}

/**
 * The block's units of a stage: whole pairs (only the LM head can have an odd count, and then its last block ends
 * on a single row; its outputs are plain logits, not flagged words).
 */
__device__ __forceinline__ void stage_range(int64_t units, int64_t& u0, int64_t& u1, int skip = 0) {
  if (static_cast<int>(blockIdx.x) < skip) {
    u0 = u1 = 0;
    return;
  }
  // 32-bit arithmetic (a 64-bit division is a long subroutine on the GPU): the plan caps units at 2^24, so
  // pairs · (at + 1) < 2^23 · 2^9 fits.
  const unsigned n_units = static_cast<unsigned>(units), pairs = (n_units + 1) / 2;
  const unsigned at = blockIdx.x - skip, n = gridDim.x - skip;
  u0 = min(n_units, pairs * at / n * 2);
  u1 = min(n_units, pairs * (at + 1) / n * 2);
}

/**
 * Attention chunks per KV head for a step at `pos` (pos + 1 keys): at least one pass (kMinChunk keys) each, or
 * `a.chunk_keys` where that is more (QK_MEGAKERNEL_CHUNK_KEYS, a knob: 84, one pass and a staged second pass, lost
 * 10-15 µs per token at positions 128-767), and at most grid / KV heads chunks.
 */
__device__ __forceinline__ int attention_chunks(const MegakernelArgs& a, int pos) {
  if (staged_step(a, pos)) return 1;  // the staged attention: one block per KV head
  const int max_chunks = static_cast<int>(gridDim.x) / static_cast<int>(a.dims.kv_heads);
  const int keys = a.chunk_keys > kMinChunk ? a.chunk_keys : kMinChunk;
  return max(1, min((pos + 1 + keys - 1) / keys, max_chunks));
}

/**
 * Which rows the attending blocks of a step skip: blocks [0, result & 0xffff) take no rows of the GEMV stages whose
 * bit (1 << (16 + stage)) is set. When at most `a.skip_items` blocks attend (short contexts), and not all of them,
 * they skip QKV and O, so that attention starts the moment its q/k/v land; otherwise 0: every block takes rows of every
 * stage. In a step of the staged attention they skip gate/up too (their ring is short while the staged rows hold the
 * rest of it, and their gate/up share delayed the stage by 0.5-0.8 µs per layer), and down as well where the staged
 * rows take the whole ring.
 */
__device__ __forceinline__ int attention_skip(const MegakernelArgs& a, int pos) {
  const int items = static_cast<int>(a.dims.kv_heads) * attention_chunks(a, pos);
  const int skip = items <= a.skip_items && items < static_cast<int>(gridDim.x) ? items : 0;  // (some block must
                                                                                              // take rows)
  int stages = 1 << kQkv | 1 << kO;
  if (staged_step(a, pos)) {
    if (a.staged_slots == 0) stages |= 1 << kGateUp | 1 << kDown;  // (the launch checks that skip is then nonzero)
    else if (a.staged_gate_up == 0) stages |= 1 << kGateUp;
  }
  return skip | stages << 16;
}

/** The blocks that skip a stage's rows in a step whose attention_skip() is `attn_skip` (the first ones). */
__device__ __forceinline__ int stage_skip(int stage, int attn_skip) {
  return (attn_skip >> (16 + stage) & 1) != 0 ? (attn_skip & 0xffff) : 0;
}

/** Whether this block takes no rows of `stage` in a step whose attention_skip() is `attn_skip`. */
__device__ __forceinline__ bool skips_stage(int stage, int attn_skip) {
  return static_cast<int>(blockIdx.x) < stage_skip(stage, attn_skip);
}

__device__ __forceinline__ StageShape stage_shape(const MegakernelArgs& a, int layer, int stage) {
  const MegakernelDims& d = a.dims;
  const MegakernelLayer& L = a.layers[layer < 0 ? 0 : layer];
  switch (stage) {
    case kQkv:
      return {static_cast<const bf16*>(L.qkv), (d.q_heads + 2 * d.kv_heads) * kD, d.hidden, 0, 1};
    case kO:
      return {static_cast<const bf16*>(L.o), d.hidden, d.q_heads * kD, 0, 1};
    case kGateUp:
      return {static_cast<const bf16*>(L.gate_up), d.ffn, d.hidden, d.ffn, 2};
    case kDown:
      return {static_cast<const bf16*>(L.down), d.hidden, d.ffn, 0, 1};
    default:  // the LM head, or its int8 screen (rows of hidden + 16 bytes, streamed as if bf16 of half the width)
      if (a.lm_screen != nullptr)
        return {static_cast<const bf16*>(a.lm_screen), d.vocab, megakernel_screen_row_bytes(d.hidden) / 2, 0, 1};
      return {static_cast<const bf16*>(a.lm_head), d.vocab, d.hidden, 0, 1};
  }
}

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

/**
 * A place in the weight ring: the slot, and the parity of its current round (the phase its "full" barrier completes
 * next). Stepped by ring_next, never divided out of a tile count: a division by the run-time slot count is a chain of
 * some 20 dependent instructions, paid per tile by the producer and by every consumer warp (removing it took the
 * kernel's loops alone from 288 to 245 µs per token).
 */
struct RingPos {
  int slot = 0;
  unsigned phase = 0;
};

__device__ __forceinline__ void ring_next(RingPos& p, int slots) {
  if (++p.slot == slots) {
    p.slot = 0;
    p.phase ^= 1u;
  }
}

/** A 64-bit store to host-mapped memory, visible to the host while the kernel runs. */
__device__ __forceinline__ void host_store(uint64_t* p, unsigned long long v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/**
 * Records `code` as the launch's error (first writer wins; the host sees it in host[0], tagged with the launch's
 * epoch) and raises the abort flag every block polls.
 */
__device__ __forceinline__ void fail(unsigned* sync, int32_t* result, uint64_t* host, unsigned launch_epoch,
                                     MegakernelError code) {
  if (atomicCAS(reinterpret_cast<int*>(result + 1), 0, static_cast<int>(code)) == 0)
    host_store(host, (static_cast<unsigned long long>(launch_epoch) << 32) | static_cast<unsigned>(code));
  atomicExch(sync + kAbortWord, 1u);
}

// The slow paths of the waits take scalars only: a reference to a local (the Block, a register array) passed to a
// function that is not inlined would move that local to memory, and local memory here lives in L2 (shared memory
// leaves almost no L1), so every access to it would cost a loaded L2 round trip.

/**
 * Whether a spin that began at `start` must give up: another block aborted, or this one outlasted `timeout_ns` (then
 * recorded as the launch's error). Checked every `mask + 1` spins (`i` counts them).
 */
__device__ __forceinline__ bool spin_must_stop(unsigned i, unsigned mask, uint64_t start, unsigned* sync,
                                               int32_t* result, uint64_t* host, unsigned launch_epoch,
                                               uint64_t timeout_ns) {
  if ((i & mask) != 0) return false;
  if (ld_relaxed_gpu(sync + kAbortWord) != 0) return true;
  if (now_ns() - start <= timeout_ns) return false;
  fail(sync, result, host, launch_epoch, MegakernelError::Timeout);
  return true;
}

/** Spins on an mbarrier phase; false on timeout or when another block aborted. */
__device__ __noinline__ bool mbar_wait_slow(uint64_t* bar, unsigned parity, unsigned* sync, int32_t* result,
                                            uint64_t* host, unsigned launch_epoch, uint64_t timeout_ns) {
  const uint64_t start = now_ns();
  for (unsigned i = 1;; i++) {
    if (mbar_try_wait(bar, parity)) return true;
    if (spin_must_stop(i, 63, start, sync, result, host, launch_epoch, timeout_ns)) return false;
  }
}

/** Waits for an mbarrier phase; false on timeout or when another block aborted. */
__device__ __forceinline__ bool mbar_wait(const Block& b, uint64_t* bar, unsigned parity) {
  return mbar_try_wait(bar, parity) ||
         mbar_wait_slow(bar, parity, b.sync, b.result, b.host, b.launch_epoch, b.timeout_ns);
}

/**
 * Spins until the flagged words at `p` carry `epoch` and returns them; on timeout or abort it returns what it read
 * last (not ready: the caller checks again).
 */
__device__ __noinline__ uint4 flag_wait_slow(const void* p, unsigned epoch, unsigned* sync, int32_t* result,
                                             uint64_t* host, unsigned launch_epoch, uint64_t timeout_ns) {
  const uint64_t start = now_ns();
  for (unsigned i = 1;; i++) {
    const uint4 v = flag_load(p);
    if (flag_ready(v, epoch) || spin_must_stop(i, 31, start, sync, result, host, launch_epoch, timeout_ns)) return v;
  }
}

/** The flagged words at `p` once they carry this step's epoch, given a first read `v`; `ok` false on abort. */
__device__ __forceinline__ uint4 flag_wait(const MegakernelArgs& a, const Block& b, const void* p, uint4 v, bool& ok) {
  if (flag_ready(v, b.epoch) || (a.debug & 1) != 0) return v;
  v = flag_wait_slow(p, b.epoch, b.sync, b.result, b.host, b.launch_epoch, b.timeout_ns);
  ok = ok && flag_ready(v, b.epoch);
  return v;
}

/**
 * The token of the step tagged `epoch` (the previous step of this launch), once the block that reduced its argmax
 * has published it; -1 on timeout or abort.
 */
__device__ __noinline__ int token_wait(unsigned* sync, int32_t* result, uint64_t* host, unsigned launch_epoch,
                                       unsigned epoch, uint64_t timeout_ns) {
  const unsigned long long* p = reinterpret_cast<const unsigned long long*>(sync + kTokenWord);
  const uint64_t start = now_ns();
  for (unsigned i = 1;; i++) {
    unsigned long long w;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
    if (static_cast<unsigned>(w >> 32) == epoch) return static_cast<int>(static_cast<unsigned>(w));
    if (spin_must_stop(i, 31, start, sync, result, host, launch_epoch, timeout_ns)) return -1;
  }
}

/** Whether every consumer thread of the block is still fine (`ok` is this thread's view); a consumer barrier. */
__device__ __forceinline__ bool block_ok(const Block& b, bool ok) {
  if (!ok) b.flag[0] = 1;
  consumer_sync();
  return b.flag[0] == 0;
}

/**
 * Loads the flagged word pairs at addr(j), j < count ≤ kBatch, into `v`: every load issued together, then, while any
 * is not ready, every pending one issued again together, so the batch costs one L2 round trip after its last word
 * lands. (Spinning on one word at a time costs a round trip for each word still pending behind it: 4.5 against
 * 2.1 µs for a 3,072-value gather on 132 blocks under a weight stream.) False on timeout or abort.
 */
template <int kBatch, typename Addr>
__device__ __forceinline__ bool flag_wait_batch(const MegakernelArgs& a, const Block& b, uint4 (&v)[kBatch], int count,
                                                Addr addr) {
  static_assert(kBatch <= 32, "the pending set is a 32-bit mask");
  const unsigned active = count >= 32 ? ~0u : (1u << count) - 1u;  // (count ≥ 0; loads past kBatch are not issued)
#pragma unroll
  for (int j = 0; j < kBatch; j++)
    if ((active >> j) & 1u) v[j] = flag_load(addr(j));
  if ((a.debug & 1) != 0) return true;
  unsigned pending = 0;
#pragma unroll
  for (int j = 0; j < kBatch; j++)
    if (((active >> j) & 1u) && !flag_ready(v[j], b.epoch)) pending |= 1u << j;
  if (pending == 0) return true;
  const uint64_t start = now_ns();
  for (unsigned spin = 1;; spin++) {
#pragma unroll
    for (int j = 0; j < kBatch; j++)
      if ((pending >> j) & 1u) v[j] = flag_load(addr(j));
#pragma unroll
    for (int j = 0; j < kBatch; j++)
      if (((pending >> j) & 1u) && flag_ready(v[j], b.epoch)) pending &= ~(1u << j);
    if (pending == 0) return true;
    if (spin_must_stop(spin, 31, start, b.sync, b.result, b.host, b.launch_epoch, b.timeout_ns)) return false;
  }
}

/**
 * Copies `n` values (a multiple of 4) of a flagged buffer into shared memory, waiting for each word of this step, in
 * batches of kBatch loads per thread (flag_wait_batch). This thread's verdict; the caller combines them with block_ok.
 */
template <int kBatch>
__device__ __forceinline__ bool flag_gather(const MegakernelArgs& a, const Block& b, const void* src, int64_t n,
                                            bf16* dst) {
  const uint4* s = static_cast<const uint4*>(src);
  const int64_t words = n / 4;
  for (int64_t base = threadIdx.x; base < words; base += static_cast<int64_t>(kConsumers) * kBatch) {
    auto at = [&](int j) { return base + static_cast<int64_t>(j) * kConsumers; };
    int count = 0;
    while (count < kBatch && at(count) < words) count++;
    uint4 v[kBatch];
    if (!flag_wait_batch<kBatch>(a, b, v, count, [&](int j) { return s + at(j); })) return false;
#pragma unroll
    for (int j = 0; j < kBatch; j++)
      if (j < count) *reinterpret_cast<uint2*>(dst + at(j) * 4) = make_uint2(v[j].x, v[j].z);
  }
  return true;
}

/** Sum (or max) over the consumer threads of G values at once; every consumer gets the results in `out`. */
template <bool kMax>
__device__ __forceinline__ void consumer_reduce(const Block& b, float (&v)[kMaxG], int groups, float (&out)[kMaxG]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int h = 0; h < kMaxG; h++) {
    if (h < groups) {
      float x = v[h];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float y = __shfl_xor_sync(0xffffffffu, x, o);
        x = kMax ? fmaxf(x, y) : x + y;
      }
      if (lane == 0) b.red[h * kConsumerWarps + warp] = x;
    }
  }
  consumer_sync();
#pragma unroll
  for (int h = 0; h < kMaxG; h++) {
    if (h < groups) {
      float x = kMax ? -INFINITY : 0.f;
      for (int w = 0; w < kConsumerWarps; w++) {
        const float y = b.red[h * kConsumerWarps + w];
        x = kMax ? fmaxf(x, y) : x + y;
      }
      out[h] = x;
    }
  }
  consumer_sync();  // red may be reused at once
}

/**
 * The stage input x = bf16(rmsnorm(residual) · weight), every block computing it for itself. The residual is the
 * flagged buffer `src` (or, for layer 0, the embedding row); its raw values stay in `res` for the epilogue that adds
 * the residual. False when the launch aborts.
 */
__device__ __forceinline__ bool stage_norm_input(const MegakernelArgs& a, const Block& b, const void* src,
                                                 const bf16* weight, int64_t n, float eps) {
  consumer_sync();  // the previous stage's readers of x and res are done
  // The norm weights do not depend on the step: their loads overlap the wait for the residual (hidden sizes up to
  // 2 · 8 · 256 = 4096 are held in registers).
  constexpr int kHeld = 2;
  uint4 wv[kHeld];
#pragma unroll
  for (int r = 0; r < kHeld; r++) {
    const int64_t i = (static_cast<int64_t>(threadIdx.x) + r * kConsumers) * 8;
    if (i < n) wv[r] = ld_early_nc128(weight + i);
  }
  bool ok = true;
  if ((a.debug & 8) != 0) {
  } else if (src != nullptr) {
    ok = flag_gather<kGatherBatch>(a, b, src, n, b.res);
  } else {
    for (int64_t i = static_cast<int64_t>(threadIdx.x) * 8; i < n; i += kConsumers * 8)
      *reinterpret_cast<uint4*>(b.res + i) = *reinterpret_cast<const uint4*>(b.embed_row + i);
  }
  if (!block_ok(b, ok)) return false;
  float ss = 0.f;
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * 8; i < n; i += kConsumers * 8) {
    float f[8];
    unpack8(lds128(b.res + i), f);
#pragma unroll
    for (int j = 0; j < 8; j++) ss = fmaf(f[j], f[j], ss);
  }
  float v[kMaxG] = {ss}, total[kMaxG];
  consumer_reduce<false>(b, v, 1, total);
  const float inv = rsqrtf(total[0] / static_cast<float>(n) + eps);
  auto scale = [&](int64_t i, const uint4& wq) {
    float f[8], w[8];
    unpack8(lds128(b.res + i), f);
    unpack8(wq, w);
    Vec<bf16> out;
#pragma unroll
    for (int j = 0; j < 8; j++) out.v[j] = to_bf(f[j] * inv * w[j]);
    *reinterpret_cast<Vec<bf16>*>(b.x + i) = out;
  };
#pragma unroll
  for (int r = 0; r < kHeld; r++) {
    const int64_t i = (static_cast<int64_t>(threadIdx.x) + r * kConsumers) * 8;
    if (i < n) scale(i, wv[r]);
  }
  for (int64_t i = (static_cast<int64_t>(threadIdx.x) + kHeld * kConsumers) * 8; i < n; i += kConsumers * 8)
    scale(i, __ldg(reinterpret_cast<const uint4*>(weight + i)));
  consumer_sync();
  return true;
}

/** x = the flagged buffer `src` (n values). False when the launch aborts. */
__device__ __forceinline__ bool stage_copy_input(const MegakernelArgs& a, const Block& b, const void* src, int64_t n) {
  consumer_sync();  // the previous stage's readers of x are done
  return block_ok(b, (a.debug & 8) != 0 || flag_gather<kGatherBatch>(a, b, src, n, b.x));
}

/**
 * The O stage's input where the attention left a head's 2…o_merge chunks unmerged (MegakernelArgs::o_merge, query
 * groups of 2): x = every q head's output, merged here from the chunks' records `rec` (the layer's; chunk c's at
 * c · omerge_record_words), so that the merge costs no hop of its own, only a larger gather. The records' 16-byte
 * units lie end to end, and thread t loads units t, t + 224, … in one batch of at most kOMergeBatch (as the
 * attention's spread merge does), their values going to shared memory after x. After a barrier each 4-value unit of
 * x is merged in chunk order: w_c = sum_c · 2^(max_c − max), x = bf16(Σ_c w_c · out_c / Σ_c w_c). False when the
 * launch aborts.
 */
__device__ __forceinline__ bool stage_merge_input(const MegakernelArgs& a, const Block& b, const void* rec, int n,
                                                  int heads) {
  consumer_sync();  // the previous stage's readers of x are done
  const int tid = threadIdx.x;
  const int units = heads * kD / 4;                // of a chunk's outputs, 4 values each
  const int per = omerge_record_words(heads) / 2;  // units of a record: the outputs, then (max, sum) per head
  const int total = n * per;
  uint2* staged = reinterpret_cast<uint2*>(b.x + heads * kD);  // [chunk][per] each unit's two values, after x
  // (A fixed count of loads per thread, those past the thread's last unit reading that one again: a count known only
  // at run time spilled registers, as in the attention's spread merge.)
  const int last = tid + (total - 1 - tid) / kConsumers * kConsumers;
  uint4 v[kOMergeBatch];
  const bool ok = (a.debug & 8) != 0 || flag_wait_batch<kOMergeBatch>(a, b, v, kOMergeBatch, [&](int j) {
                    return static_cast<const uint4*>(rec) + min(tid + j * kConsumers, last);
                  });
  if (ok && (a.debug & 8) == 0) {
#pragma unroll
    for (int j = 0; j < kOMergeBatch; j++)
      if (tid + j * kConsumers < total) staged[tid + j * kConsumers] = make_uint2(v[j].x, v[j].z);
  }
  if (!block_ok(b, ok)) return false;
  if ((a.debug & 8) != 0) return true;
  for (int u = tid; u < units; u += kConsumers) {
    const uint2* ml = staged + units + u * 4 / kD;  // this unit's head: chunk c's (max, sum) at ml[c · per]
    float mx = -INFINITY;
    for (int c = 0; c < n; c++) mx = fmaxf(mx, __uint_as_float(ml[c * per].x));
    float o[4] = {0.f, 0.f, 0.f, 0.f}, den = 0.f;
    for (int c = 0; c < n; c++) {
      const float l = __uint_as_float(ml[c * per].y);
      if (!(l > 0.f)) continue;  // a chunk with no keys weighs nothing (its outputs are 0)
      const float w = l * exp2f(__uint_as_float(ml[c * per].x) - mx);
      const uint2 x = staged[c * per + u];
      o[0] = fmaf(w, bf2_lo(x.x), o[0]);
      o[1] = fmaf(w, bf2_hi(x.x), o[1]);
      o[2] = fmaf(w, bf2_lo(x.y), o[2]);
      o[3] = fmaf(w, bf2_hi(x.y), o[3]);
      den += w;
    }
    *reinterpret_cast<uint2*>(b.x + u * 4) =
        make_uint2(pack_bf2(o[0] / den, o[1] / den), pack_bf2(o[2] / den, o[3] / den));
  }
  consumer_sync();
  return true;
}

/** Records trace stamp `event` of this block (consumer thread 0; only when tracing). */
__device__ __forceinline__ void stamp(const MegakernelArgs& a, int event) {
  if (a.trace != nullptr && threadIdx.x == 0)
    a.trace[static_cast<int64_t>(blockIdx.x) * megakernel_trace_events(a.dims.layers) + event] = now_ns();
}

/** Asks L2 for the cache rows [p0, p1) of KV head `g` (K and V, 256 bytes each) that attention will read. */
__device__ __forceinline__ void prefetch_chunk(const MegakernelLayer& L, int kv_heads, int g, int p0, int p1) {
  for (int p = p0 + static_cast<int>(threadIdx.x); p < p1; p += kConsumers) {
    const int64_t at = (static_cast<int64_t>(p) * kv_heads + g) * kD;
    prefetch_l2(static_cast<const bf16*>(L.k_cache) + at, kD * 2);
    prefetch_l2(static_cast<const bf16*>(L.v_cache) + at, kD * 2);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Producer: the block's weight tiles of every step, in consumption order.

/** Index of a GEMV stage among a layer's four (QKV, O, gate/up, down), for the claim counters. */
__device__ __forceinline__ int gemv_index(int stage) { return stage == kQkv ? 0 : stage - 1; }

/** The claim counter of a GEMV stage (layer −1: the LM head) in the counter set of `epoch`. */
__device__ __forceinline__ unsigned* claim_counter(unsigned* sync, unsigned epoch, int layer, int stage) {
  return sync + kClaimCounters + (epoch & 1) * kClaimsPerSet +
         (layer < 0 ? kMegakernelMaxLayers * 4 : layer * 4 + gemv_index(stage));
}

/**
 * Issues the block's tiles of one stage into the ring, each slot described (first unit, units, last tile of the
 * stage) for the consumers; a stage with no tile for this block gets one empty descriptor. Static shares: the
 * block's slice of stage_range() among the blocks not `skip`ped. Claimed (`counter`): tiles taken from the stage's
 * counter, the next claim always in flight.
 */
__device__ __forceinline__ bool produce_stage(const MegakernelArgs& a, const Block& b, const StageShape& s,
                                              int skip, unsigned* counter, RingPos& at, unsigned& issued,
                                              uint64_t l2_policy, int cap) {
  const int64_t per = tile_units(a, s);
  int64_t t0 = 0, lim = 0;
  unsigned pending = 0;
  if (counter != nullptr) {
    lim = s.units;
    t0 = static_cast<int64_t>(atomicAdd(counter, 1u)) * per;
    pending = atomicAdd(counter, 1u);  // the tile after it, claimed while this one streams
  } else {
    stage_range(s.units, t0, lim, skip);
  }
  const bool none = t0 >= lim;
  // A cap of a whole ring or more caps nothing: the ring itself holds at most `slots` copies.
  const int inflight = cap < b.nslots ? cap : 0;
  for (;;) {
    const int slot = at.slot;
    if (!mbar_wait(b, &b.empty[slot], at.phase ^ 1u)) return false;
    if (none) {
      b.desc[slot] = make_uint2(0, 0);
      mbar_arrive(&b.full[slot]);
      ring_next(at, b.nslots);
      issued++;
      return true;
    }
    // Everything but the copy itself is done before waiting for the copy in flight, so that this one leaves the
    // moment that one lands, with none of the single producer thread's bookkeeping in between (measured neutral on
    // its own; the producer waits for landed copies some 300 µs of a 600 µs step, and for free slots some 100).
    // The consumers' reads of this slot (generic proxy, ordered before us by the mbarrier) must also be ordered
    // before the TMA's writes (async proxy).
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const int64_t n = lim - t0 < per ? lim - t0 : per;
    const unsigned bytes = static_cast<unsigned>(n * s.k * 2);
    const int64_t next = counter != nullptr ? static_cast<int64_t>(pending) * per : t0 + per;
    const bool last = next >= lim;
    const bool copy = (a.debug & 32) == 0;
    uint8_t* dst = b.slots + static_cast<size_t>(slot) * a.slot_bytes;
    const bf16* src = s.w + t0 * s.k;
    b.desc[slot] = make_uint2(static_cast<unsigned>(t0), static_cast<unsigned>(n) | (last ? 0x80000000u : 0u));
    // The slot's one arrival, before its copy is issued: the phase completes once the bytes it expects have landed.
    if (copy) mbar_expect_tx_only(&b.full[slot], bytes * s.rows_per_unit);
    mbar_arrive(&b.full[slot]);
    // At most `inflight` copies outstanding: wait for the copy `inflight` tiles back to land (its slot cannot have
    // been refilled since: that needs this copy's slot round to come first).
    if (inflight > 0 && issued >= static_cast<unsigned>(inflight)) {
      int back = slot - inflight;
      unsigned phase = at.phase;
      if (back < 0) {  // the previous round
        back += b.nslots;
        phase ^= 1u;
      }
      if (!mbar_wait(b, &b.full[back], phase)) return false;
    }
    if (copy) {
      bulk_copy_hint(dst, src, bytes, &b.full[slot], l2_policy);
      if (s.rows_per_unit == 2) bulk_copy_hint(dst + bytes, src + s.up_offset * s.k, bytes, &b.full[slot], l2_policy);
    }
    ring_next(at, b.nslots);
    issued++;
    if (last) return true;
    t0 = next;
    if (counter != nullptr) pending = atomicAdd(counter, 1u);
  }
}

__device__ __forceinline__ void produce(const MegakernelArgs& a, const Block& b, int pos0) {
  // (Asking L2 for 1-5 tiles beyond the ring was measured 4-30% slower per token: the requests compete with the ring's
  // own copies.) Weights do not depend on the token, so the ring runs on into the next step's first layer while this
  // step's LM head and argmax finish.
  RingPos at;
  unsigned issued = 0;  // tiles so far (a stage with no tile counts its empty descriptor)
  // Every weight is read once per step: its lines go first when L2 needs room, so that what a step reads again (the
  // KV cache above all, whole in L2 up to about 256 positions of Qwen3-0.6B) stays: 15-20 µs per token at position 1,
  // none from 512 on, where the cache no longer fits.
  // (QK_MEGAKERNEL_L2_STREAM=0: the normal policy, as a copy without a hint.)
  uint64_t l2_policy;
  if (a.l2_stream != 0)
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(l2_policy));
  else
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(l2_policy));
  for (int step = 0; step < a.steps; step++) {
    const int skip = attention_skip(a, pos0 + step);
    const unsigned epoch = a.epoch + static_cast<unsigned>(step);
    for (int layer = 0; layer < a.dims.layers; layer++) {
      // The GEMV stages of a layer in order (the attention stage streams no weights).
      for (int stage = kQkv; stage <= kDown; stage = stage == kQkv ? kO : stage + 1) {
        if (skips_stage(stage, skip)) continue;
        unsigned* counter = a.claim ? claim_counter(b.sync, epoch, layer, stage) : nullptr;
        if (!produce_stage(a, b, stage_shape(a, layer, stage), stage_skip(stage, skip), counter, at, issued,
                           l2_policy, a.inflight))
          return;
      }
    }
    unsigned* counter = a.claim ? claim_counter(b.sync, epoch, -1, -1) : nullptr;
    // The staged attention over the whole ring: its rows hold the ring until the last layer's attention is done.
    if (skips_stage(kDown, skip) &&
        !mbar_wait(b, misc_barrier(b, kStagedFreeBarrier),
                   static_cast<unsigned>(staged_steps_before(a, pos0, step)) & 1u))
      return;
    // The LM head (its own bound on copies in flight: no hop of this step waits behind its stream).
    if (!produce_stage(a, b, stage_shape(a, -1, -1), 0, counter, at, issued, l2_policy, a.lm_inflight)) return;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Consumers: GEMV stages over the tiles the producer delivers.

/** Argmax state of a warp (lane 0) over LM-head rows. */
struct Best {
  float v;
  int i;
};

__device__ __forceinline__ bool better(float v, int i, const Best& b) { return v > b.v || (v == b.v && i < b.i); }

// ---------------------------------------------------------------------------------------------------------------
// Sampling: a warp's best candidates

/**
 * A warp's `k` best sampling candidates so far, best first, held across its lanes: position p is `e0` of lane p
 * (p < 32) or `e1` of lane p − 32. A candidate is the key (order key of its logit << 32 | ~id): keys order
 * candidates as `sample` does (logit descending, then id ascending) and never tie. 0 marks an empty place (every
 * logit's key is above it, −inf's too). `thr` is the key at position k − 1 (0 while fewer than k are held); `bad`:
 * a NaN or +inf logit was seen.
 */
struct TopK {
  unsigned long long e0, e1, thr;
  int bad;
};
constexpr int kMaxTopK = kMegakernelMaxTopK;
static_assert(kMaxTopK == 64, "a warp's candidates are two keys per lane");

__device__ __forceinline__ unsigned long long candidate_key(float v, unsigned id) {
  return (static_cast<unsigned long long>(sample_order_key(v)) << 32) | (0xffffffffu - id);
}

/** Inserts the (warp-uniform) key `c` where it ranks among the warp's `k` best; nothing when it ranks below them. */
__device__ __forceinline__ void top_insert(TopK& t, unsigned long long c, int k) {
  if (c <= t.thr) return;
  const int lane = threadIdx.x & 31;
  // c beats the k-th key, so it lands at a position < k, and the keys from that position on move down one place.
  const int at = __popc(__ballot_sync(0xffffffffu, t.e0 > c)) + __popc(__ballot_sync(0xffffffffu, t.e1 > c));
  const unsigned long long up0 = __shfl_up_sync(0xffffffffu, t.e0, 1);
  const unsigned long long up1 = __shfl_up_sync(0xffffffffu, t.e1, 1);
  const unsigned long long last0 = __shfl_sync(0xffffffffu, t.e0, 31);
  if (32 + lane > at) t.e1 = lane == 0 ? last0 : up1;
  else if (32 + lane == at) t.e1 = c;
  if (lane > at) t.e0 = up0;
  else if (lane == at) t.e0 = c;
  t.thr = k <= 32 ? __shfl_sync(0xffffffffu, t.e0, k - 1) : __shfl_sync(0xffffffffu, t.e1, k - 33);
}

/** Offers logit `v` of id `id` (warp-uniform) to the warp's candidates. */
__device__ __forceinline__ void top_consider(TopK& t, float v, unsigned id, int k) {
  if (isnan(v) || v == INFINITY) {
    t.bad = 1;
    return;
  }
  top_insert(t, candidate_key(v, id), k);
}

/**
 * Merges a list of up to `k` keys, best first (key `key_at(p)` at position p, warp-uniform), into the warp's k best
 * candidates, stopping at the first key that ranks below them (the rest rank lower still; an empty place, 0, always
 * does).
 */
template <typename KeyAt>
__device__ __forceinline__ void top_merge_sorted(TopK& t, int k, KeyAt key_at) {
  for (int p = 0; p < k; p++) {
    const unsigned long long c = key_at(p);
    if (c <= t.thr) break;
    top_insert(t, c, k);
  }
}

/** top_merge_sorted over a list in shared memory. */
__device__ __forceinline__ void top_merge_list(TopK& t, const unsigned long long* list, int k) {
  top_merge_sorted(t, k, [list](int p) { return list[p]; });
}

/** Where a stage's outputs go: the flagged buffer of the layer (nullptr for the LM head). */
__device__ __forceinline__ void* stage_output(const MegakernelArgs& a, const Layout& lay, int layer, int stage) {
  if (layer < 0) return nullptr;
  uint8_t* base = static_cast<uint8_t*>(a.workspace) + lay.layers_at + lay.ll.bytes * static_cast<size_t>(layer);
  switch (stage) {
    case kQkv: return base + lay.ll.qkv;
    case kAttention: return base + lay.ll.attn;
    case kO: return base + lay.ll.mid;
    case kGateUp: return base + lay.ll.act;
    default: return base + lay.ll.out;
  }
}

/**
 * What a warp takes of a GEMV tile per turn: a row pair (O, down, the LM head); a pair of SwiGLU units, two gate rows
 * and their two up rows (gate/up); or two adjacent row pairs (QKV, Qwen3-0.6B: QK_MEGAKERNEL_QKV_QUADS). Four rows per
 * turn read the input once for all four, and where a block's stage has up to twice as many pairs as it has warps (QKV:
 * 11-14 pairs, 7 warps), no warp runs two turns one after the other (5-13 µs per token on Qwen3-0.6B). A row's sum
 * is the same chain of FMAs whichever way it is taken, so the outputs are the same bits.
 */
enum class Take : int { kPair, kGateUp, kQuad };

/**
 * Runs one GEMV stage: for every tile of the block, waits for it, dots each warp's turn of rows (`Take`) with the staged
 * input, applies the stage's epilogue (publishing each output pair as one flagged word) and frees the slot. `at` is
 * the ring position, which follows the producer's order.
 */
template <Take kTake, bool kSample>
__device__ __forceinline__ bool consume_gemv(const MegakernelArgs& a, const Block& b, const Layout& lay, int stage,
                                          RingPos& at, int layer, Best& best, TopK& top, int first_event) {
  constexpr bool kGateUp = kTake == Take::kGateUp;
  constexpr bool kFour = kTake != Take::kPair;         // four rows per turn
  constexpr int kStep = kTake == Take::kQuad ? 4 : 2;  // the tile's units per turn (gate/up units are two rows each)
  if (layer >= 0 && skips_stage(stage, b.attn_skip)) {
    if (first_event >= 0) stamp(a, first_event);
    return true;  // the producer issues nothing for this stage either
  }
  const StageShape s = stage_shape(a, layer, stage);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  void* out = stage_output(a, lay, layer, stage);
  // 32-bit row offsets within a slot (a slot is at most 227 KB).
  const int k = static_cast<int>(s.k);
  const int k_dot = (a.debug & 4) != 0 ? 0 : k;  // (diagnostic: no dot products)
  // Turns are dealt to the warps round-robin across the stage's tiles, not per tile: a tile of one or two pairs
  // (Qwen3-8B's gate/up) would otherwise keep one warp busy while the others wait for the next tile. `mine` is this
  // warp's next turn (its stage-wide index), `turns` the stage's turns before the current tile.
  int turns = 0, mine = warp;
  for (bool last = false; !last; ring_next(at, b.nslots)) {
    const int slot = at.slot;
    if (!mbar_wait(b, &b.full[slot], at.phase)) return false;
    if (first_event >= 0 && turns == 0) stamp(a, first_event);
    const uint2 desc = b.desc[slot];
    const int64_t t0 = desc.x;
    const int n = static_cast<int>(desc.y & 0x7fffffffu);
    last = n == 0 || (desc.y >> 31) != 0;
    const bf16* tile =
        reinterpret_cast<const bf16*>(b.slots + static_cast<unsigned>(slot) * static_cast<unsigned>(a.slot_bytes));
    const int first = mine - turns;
    turns += (n + kStep - 1) / kStep;
    for (int r = kStep * first; r < n; r += kStep * kConsumerWarps) {
      mine += kConsumerWarps;
      const bf16* row = tile + r * k;
      // The other two rows of a four-row turn: gate/up, the up rows of the tile's units; QKV, the next pair of the
      // tile, or this pair again where the tile ends first (its sums are then not published: a tile is whole pairs).
      const bool second = kTake == Take::kQuad && r + 2 < n;
      const bf16* up = kGateUp ? row + n * k : second ? row + 2 * k : row;
      float acc0 = 0.f, acc1 = 0.f, up0 = 0.f, up1 = 0.f;
#pragma unroll 4
      for (int c = lane * 8; c < k_dot; c += 256) {
        const uint4 xv = lds128(b.x + c);
        acc0 = dot8(lds128(row + c), xv, acc0);
        acc1 = dot8(lds128(row + k + c), xv, acc1);
        if constexpr (kFour) {
          up0 = dot8(lds128(up + c), xv, up0);
          up1 = dot8(lds128(up + k + c), xv, up1);
        }
      }
      acc0 = warp_sum(acc0);
      acc1 = warp_sum(acc1);
      if constexpr (kFour) {
        up0 = warp_sum(up0);
        up1 = warp_sum(up1);
      }
      const int64_t u = t0 + r;
      if constexpr (kTake == Take::kQuad) {  // QKV
        if (lane == 0) {
          flag_store(out, u / 2, pack_bf2(acc0, acc1), b.epoch);
          if (second) flag_store(out, u / 2 + 1, pack_bf2(up0, up1), b.epoch);
        }
      } else if (stage < 0) {  // LM head (an odd vocabulary's last row has no partner: row r + 1 is then slot garbage)
        if (lane == 0) {  // the logits, and the argmax
          bf16* logits = static_cast<bf16*>(a.logits);
          const float v0 = round_bf(acc0), v1 = round_bf(acc1);
          logits[u] = to_bf(v0);
          if (u < a.vocab_limit && better(v0, static_cast<int>(u), best)) best = {v0, static_cast<int>(u)};
          if (r + 1 < n) {
            logits[u + 1] = to_bf(v1);
            if (u + 1 < a.vocab_limit && better(v1, static_cast<int>(u + 1), best))
              best = {v1, static_cast<int>(u + 1)};
          }
        }
        if constexpr (kSample) {
          // Every lane holds the same sums (an xor-butterfly reduction): the warp offers them to its candidates
          // together.
          if (u < a.vocab_limit) top_consider(top, round_bf(acc0), static_cast<unsigned>(u), a.top_k);
          if (r + 1 < n && u + 1 < a.vocab_limit)
            top_consider(top, round_bf(acc1), static_cast<unsigned>(u + 1), a.top_k);
        }
      } else if (lane == 0) {
        if constexpr (kGateUp) {
          const float s0 = acc0 / (1.f + __expf(-acc0)), s1 = acc1 / (1.f + __expf(-acc1));
          flag_store(out, u / 2, pack_bf2(s0 * up0, s1 * up1), b.epoch);
        } else if (stage == kQkv) {
          flag_store(out, u / 2, pack_bf2(acc0, acc1), b.epoch);
        } else {  // O and down
          const float r0 = round_bf(acc0) + bf(b.res[u]);
          const float r1 = round_bf(acc1) + bf(b.res[u + 1]);
          flag_store(out, u / 2, pack_bf2(r0, r1), b.epoch);
        }
      }
    }
    // Every consumer thread releases the slot itself after its own reads (the producer's wait on the empty barrier
    // acquires them all before its TMA copy overwrites the slot). One arrival per warp after __syncwarp measured no
    // faster, and compute-sanitizer's racecheck does not follow that ordering (it reported the copies racing the
    // reads).
    mbar_arrive(&b.empty[slot]);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// The LM head screened in int8 (launches with MegakernelArgs::lm_screen)
//
// Every block quantises its copy of the final-normed x to integers of up to screen_levels(hidden) (one scale for the
// vector), streams the screen's rows (int8 weights w8 on a per-row scale s, and bounds e ≥ |w − s·w8| and
// n ≥ |w| + e in the 2-norm) instead of the bf16 rows, and takes each row's dot exactly in integers. For
// x = sx·x16 + dx, the row's logit before rounding lies within
//   B = e·|x| + n·|dx| + 2^-10·n·|x|
// of s·sx·(w8 · x16): the first two terms bound (w − s·w8)·x + s·w8·dx, the last covers the float rounding of both
// that value and the unscreened fp32 dot (per lane hidden / 256 FMAs, then 5 adds: below 2^-12 relative to n·|x| for
// every hidden size the plan serves). The block keeps each row's upper bound and, over its rows below vocab_limit,
// the best lower bound T (argmax steps) or the k-th best (sampling steps with top-k k). k rows then have bf16 logits
// of at least bf16(T), and a row whose upper bound lies below T − (one bf16 step at T), which is at least
// T − 2^-6·|T|, has a bf16 logit below that: it ranks below those k rows, in the block and so in the step. Only the
// other rows are recomputed, from the bf16 LM head with the unscreened code's arithmetic, and they go to the block's
// argmax or top-k as before. So the argmax, or the top-k and their logits (what a draw reads), are the unscreened
// ones, id for id, and the step reads about half the bytes.

constexpr int kScreenMeta = kMegakernelScreenMeta;  // bytes of floats after a screen row's weights

/** The integer range of the screened x: |w8 · x16| stays below 2^31 (|w8| ≤ 127), at most 16383 levels. */
__device__ __forceinline__ int screen_levels(int hidden) {
  const int cap = static_cast<int>(2147483647u / (127u * static_cast<unsigned>(hidden)));
  return cap < 16383 ? cap : 16383;
}

/** Dot of 16 int8 weights (w) with 16 int16 inputs (xa: the first 8, xb: the next 8), accumulated exactly. */
__device__ __forceinline__ int dot16_i8(const uint4 w, const uint4 xa, const uint4 xb, int acc) {
  acc = __dp2a_lo(static_cast<int>(xa.x), static_cast<int>(w.x), acc);
  acc = __dp2a_hi(static_cast<int>(xa.y), static_cast<int>(w.x), acc);
  acc = __dp2a_lo(static_cast<int>(xa.z), static_cast<int>(w.y), acc);
  acc = __dp2a_hi(static_cast<int>(xa.w), static_cast<int>(w.y), acc);
  acc = __dp2a_lo(static_cast<int>(xb.x), static_cast<int>(w.z), acc);
  acc = __dp2a_hi(static_cast<int>(xb.y), static_cast<int>(w.z), acc);
  acc = __dp2a_lo(static_cast<int>(xb.z), static_cast<int>(w.w), acc);
  acc = __dp2a_hi(static_cast<int>(xb.w), static_cast<int>(w.w), acc);
  return acc;
}

/**
 * The LM-head stage of a screened step (fixed shares: the block's rows are [u0, u1)): the screen's tiles from the
 * ring, then the candidates' bf16 rows from the LM head. Leaves the warp's best (lane 0) in `best`, or with kSample
 * its k best in `top`, as consume_gemv does for the unscreened stage. Uses the union after x: x16 (hidden int16), one
 * float per row, then (kSample) the warps' lists of lower bounds.
 */
template <bool kSample>
__device__ __forceinline__ bool consume_screen(const MegakernelArgs& a, const Block& b, RingPos& at, Best& best,
                                               TopK& top) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int hidden = static_cast<int>(a.dims.hidden);
  const int rowb = hidden + kScreenMeta;
  int16_t* x16 = reinterpret_cast<int16_t*>(b.x + hidden);
  float* upper = reinterpret_cast<float*>(x16 + hidden);
  float* red = b.red;  // [0, 7): max |x|, [7, 14): Σ x², [14, 21): Σ dx², [21, 28): the warps' best lower bounds
  // 1. x: its largest magnitude and its norm, then x16 and the norm of what it leaves out. (A NaN or infinity in x
  // makes every row a candidate: the unscreened arithmetic then decides, as it would have.)
  float m = 0.f, xx = 0.f;
  bool bad = false;
  for (int i = threadIdx.x; i < hidden; i += kConsumers) {
    const float v = bf(b.x[i]);
    bad |= !isfinite(v);
    m = fmaxf(m, fabsf(v));
    xx = fmaf(v, v, xx);
  }
  m = warp_max(m);
  xx = warp_sum(xx);
  bad = __any_sync(0xffffffffu, bad);
  consumer_sync();  // red was last read by the final norm
  if (lane == 0) {
    red[warp] = bad ? INFINITY : m;
    red[kConsumerWarps + warp] = xx;
  }
  consumer_sync();
  m = 0.f;
  xx = 0.f;
  for (int w = 0; w < kConsumerWarps; w++) {
    m = fmaxf(m, red[w]);
    xx += red[kConsumerWarps + w];
  }
  bad = !(m < INFINITY);
  const float levels = static_cast<float>(screen_levels(hidden));
  const float inv = m > 0.f && !bad ? levels / m : 0.f;
  const float sx = m > 0.f && !bad ? m / levels : 0.f;
  float dd = 0.f;
  for (int i = threadIdx.x; i < hidden; i += kConsumers) {
    const float v = bf(b.x[i]);
    const float q = fminf(fmaxf(rintf(v * inv), -levels), levels);
    x16[i] = static_cast<int16_t>(q);
    const float dx = fmaf(-q, sx, v);
    dd = fmaf(dx, dx, dd);
  }
  dd = warp_sum(dd);
  if (lane == 0) red[2 * kConsumerWarps + warp] = dd;
  consumer_sync();  // x16 and the sums
  dd = 0.f;
  for (int w = 0; w < kConsumerWarps; w++) dd += red[2 * kConsumerWarps + w];
  // The norms, rounded up generously (their own float sums are off by far less than 2^-10).
  const float nx = sqrtf(xx) * (1.f + 0x1p-10f), ndx = sqrtf(dd) * (1.f + 0x1p-10f) + 0x1p-100f;

  // 2. The screen's rows: a row pair per warp turn, as consume_gemv's pairs.
  const StageShape s = stage_shape(a, -1, -1);
  int64_t u0 = 0, u1 = 0;
  stage_range(s.units, u0, u1);
  const int chunks = hidden / 16;
  float lower = -INFINITY;        // argmax: the warp's best lower bound so far (every lane holds it)
  TopK low{0ull, 0ull, 0ull, 0};  // sampling: the warp's k best lower bounds so far (as candidate keys)
  int turns = 0, mine = warp;
  for (bool last = false; !last; ring_next(at, b.nslots)) {
    const int slot = at.slot;
    if (!mbar_wait(b, &b.full[slot], at.phase)) return false;
    const uint2 desc = b.desc[slot];
    const int64_t t0 = desc.x;
    const int n = static_cast<int>(desc.y & 0x7fffffffu);
    last = n == 0 || (desc.y >> 31) != 0;
    const uint8_t* tile = b.slots + static_cast<unsigned>(slot) * static_cast<unsigned>(a.slot_bytes);
    const int first = mine - turns;
    turns += (n + 1) / 2;
    for (int r = 2 * first; r < n; r += 2 * kConsumerWarps) {
      mine += kConsumerWarps;
      const uint8_t* row = tile + r * rowb;
      int acc0 = 0, acc1 = 0;
      for (int c = lane; c < chunks; c += 32) {
        const uint4 xa = lds128(x16 + c * 16), xb = lds128(x16 + c * 16 + 8);
        acc0 = dot16_i8(lds128(row + c * 16), xa, xb, acc0);
        acc1 = dot16_i8(lds128(row + rowb + c * 16), xa, xb, acc1);
      }
      acc0 = __reduce_add_sync(0xffffffffu, acc0);
      acc1 = __reduce_add_sync(0xffffffffu, acc1);
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int64_t u = t0 + r + h;
        if (h == 1 && r + 1 >= n) break;  // an odd vocabulary's last row
        const uint4 mr = lds128(row + h * rowb + hidden);
        const float sr = __uint_as_float(mr.x), er = __uint_as_float(mr.y), nr = __uint_as_float(mr.z);
        const float c = static_cast<float>(h == 0 ? acc0 : acc1) * sr * sx;
        const float bound = fmaf(er, nx, fmaf(nr, ndx, nr * nx * 0x1p-10f));
        const bool live = u < a.vocab_limit;
        const float up = live ? c + bound : -INFINITY;
        if constexpr (kSample) {
          // (Warp-uniform: every lane holds the sums and the row's floats. A NaN bound is no bound.)
          if (live && c - bound > -INFINITY)
            top_insert(low, candidate_key(c - bound, static_cast<unsigned>(u)), a.top_k);
        } else if (live) {
          lower = fmaxf(lower, c - bound);
        }
        if (lane == 0) upper[u - u0] = up;
        // (No L2 request for rows that may become candidates: judged by the warp's bound so far, about 80 rows per
        // block qualify, 16 times the candidates, and their lines, kept in L2, slowed the next step's layers: without
        // the requests, 27-33 µs per token faster at position 1.)
      }
    }
    mbar_arrive(&b.empty[slot]);
  }
  // 3. The block's best (argmax) or k-th best (sampling) lower bound T, and the candidates recomputed as the
  // unscreened stage computes them.
  if constexpr (kSample) {
    const int k = a.top_k;
    // The warps' lists after the rows' bounds. T is the key, among the lists' first k places, with exactly k − 1 keys
    // above it (keys never tie; each list is sorted, so a binary search per list). Fewer than k rows with a finite
    // lower bound leave T = −inf, and every row a candidate.
    const int rows = static_cast<int>(u1 - u0);
    unsigned long long* lists = reinterpret_cast<unsigned long long*>(upper + ((rows + 1) & ~1));
    lists[warp * kMaxTopK + lane] = low.e0;
    lists[warp * kMaxTopK + 32 + lane] = low.e1;
    if (threadIdx.x == 0) red[3 * kConsumerWarps] = -INFINITY;
    consumer_sync();  // the lists, T's default and `upper`
    for (int e = threadIdx.x; e < kConsumerWarps * k; e += kConsumers) {
      const unsigned long long key = lists[(e / k) * kMaxTopK + e % k];
      if (key == 0ull) continue;  // an empty place
      int above = 0;
      for (int w = 0; w < kConsumerWarps; w++) {
        int lo = 0, hi = k;
        while (lo < hi) {
          const int mid = (lo + hi) >> 1;
          if (lists[w * kMaxTopK + mid] > key) lo = mid + 1;
          else hi = mid;
        }
        above += lo;
      }
      if (above == k - 1) red[3 * kConsumerWarps] = sample_key_value(static_cast<unsigned>(key >> 32));
    }
    consumer_sync();  // T
    const float t = red[3 * kConsumerWarps];
    const float thr = t - (fabsf(t) * 0x1p-6f + 1e-37f);
    // A NaN upper bound (a row of non-finite weights against x = 0) makes a candidate, so that its logit reaches the
    // draw's non-finite check, as unscreened.
    const auto cand_at = [&](int i) { return i < rows && u0 + i < a.vocab_limit && (bad || !(upper[i] < thr)); };
    const bf16* lm = static_cast<const bf16*>(a.lm_head);
    // A block has tens of candidates here (the k best and those within the bounds of them), several per warp: L2
    // requests for every one of the warp's rows first, then their logits two rows at a time, so that the warp waits
    // for about half as many round trips, mostly to L2.
    const int lines = hidden / 64;  // 128-byte lines per row
    for (int base = warp * 32; base < rows; base += kConsumers) {
      for (unsigned hits = __ballot_sync(0xffffffffu, cand_at(base + lane)); hits != 0; hits &= hits - 1) {
        const bf16* row = lm + (u0 + base + __ffs(hits) - 1) * hidden;
        for (int l = lane; l < lines; l += 32) asm volatile("prefetch.global.L2 [%0];" ::"l"(row + l * 64));
      }
    }
    const int k_dot = (a.debug & 4) != 0 ? 0 : hidden;  // (diagnostic: no dot products)
    const auto pair = [&](int64_t ua, int64_t ub) {  // ub == ua: one row
      const bf16* ra = lm + ua * hidden;
      const bf16* rb = lm + ub * hidden;
      float sa = 0.f, sb = 0.f;
#pragma unroll 4
      for (int c = lane * 8; c < k_dot; c += 256) {
        const uint4 xv = lds128(b.x + c);
        const uint4 wa = ld_early_cg128(ra + c), wb = ld_early_cg128(rb + c);
        sa = dot8(wa, xv, sa);
        sb = dot8(wb, xv, sb);
      }
      sa = warp_sum(sa);
      sb = warp_sum(sb);
      top_consider(top, round_bf(sa), static_cast<unsigned>(ua), k);
      if (ub != ua) top_consider(top, round_bf(sb), static_cast<unsigned>(ub), k);
    };
    int64_t held = -1;  // a candidate waiting for its partner
    for (int base = warp * 32; base < rows; base += kConsumers) {
      for (unsigned hits = __ballot_sync(0xffffffffu, cand_at(base + lane)); hits != 0; hits &= hits - 1) {
        const int64_t u = u0 + base + __ffs(hits) - 1;
        if (held < 0) {
          held = u;
        } else {
          pair(held, u);
          held = -1;
        }
      }
    }
    if (held >= 0) pair(held, held);
  } else {
    if (lane == 0) red[3 * kConsumerWarps + warp] = lower;
    consumer_sync();  // the bounds and `upper`
    float t = -INFINITY;
    for (int w = 0; w < kConsumerWarps; w++) t = fmaxf(t, red[3 * kConsumerWarps + w]);
    const float thr = t - (fabsf(t) * 0x1p-6f + 1e-37f);
    const int rows = static_cast<int>(u1 - u0);
    const int k_dot = (a.debug & 4) != 0 ? 0 : hidden;  // (diagnostic: no dot products)
    for (int base = warp * 32; base < rows; base += kConsumers) {
      const int i = base + lane;
      const bool cand = i < rows && u0 + i < a.vocab_limit && (bad || (upper[i] >= thr && upper[i] > -INFINITY));
      for (unsigned hits = __ballot_sync(0xffffffffu, cand); hits != 0; hits &= hits - 1) {
        const int64_t u = u0 + base + __ffs(hits) - 1;
        const bf16* row = static_cast<const bf16*>(a.lm_head) + u * hidden;
        float acc = 0.f;
#pragma unroll 4
        for (int c = lane * 8; c < k_dot; c += 256) acc = dot8(ld_early_cg128(row + c), lds128(b.x + c), acc);
        acc = warp_sum(acc);
        const float v = round_bf(acc);
        if (lane == 0 && better(v, static_cast<int>(u), best)) best = {v, static_cast<int>(u)};
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// Attention

/**
 * The attention's inputs, for KV head `g`'s query group: waits for the group's queries (and the new key and value where
 * this work item holds position `pos`), QK-norms and ropes them (every item of the head, redundantly), and appends the
 * new key and value to the cache. `early()` runs before the wait, after the loads of the norm weights: the work that
 * overlaps it (it may sync the consumers). kStaged (the staged attention): the queries go to the scratch as bf16
 * (unscaled), and the new key and value also to the staged rows `krow` and `vrow`; otherwise the queries go to the
 * scratch as floats in the log2 domain (pre-scaled). False when the launch aborts.
 */
template <int G, bool kStaged, typename Early>
__device__ __forceinline__ bool attention_inputs(const MegakernelArgs& a, const Block& b, int layer, int g,
                                                 bool holds_new, int pos, int ev, bf16* krow, bf16* vrow,
                                                 Early early) {
  const MegakernelDims& d = a.dims;
  const int KV = static_cast<int>(d.kv_heads);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const MegakernelLayer& L = a.layers[layer];
  const void* qkv = stage_output(a, a.layout, layer, kQkv);
  bf16* kc = static_cast<bf16*>(L.k_cache);
  bf16* vc = static_cast<bf16*>(L.v_cache);
  float* qs = b.scratch;                                        // [G][128] (floats)
  bf16* qh = reinterpret_cast<bf16*>(b.scratch + kStagedQ);     // [G][128] (bf16, the staged attention)
  const float scale_log2 = rsqrtf(static_cast<float>(kD)) * kLog2e;
  const bf16* norm_w = warp < G ? static_cast<const bf16*>(L.q_norm)
                                : (holds_new && warp == G ? static_cast<const bf16*>(L.k_norm) : nullptr);
  // Raw loads (converted only where used), so that nothing waits for them before the gather is issued.
  bf16 w_lo[2], w_hi[2];
  float freq[2];
  if (norm_w != nullptr) {
#pragma unroll
    for (int j = 0; j < 2; j++) {
      w_lo[j] = __ushort_as_bfloat16(ld_early_nc16(norm_w + lane + 32 * j));
      w_hi[j] = __ushort_as_bfloat16(ld_early_nc16(norm_w + lane + 32 * j + kHalf));
      freq[j] = ld_early_nc32f(a.inv_freq + lane + 32 * j);
    }
  }
  early();
  stamp(a, ev);

  // Wait for the group's queries (and the new key and value where this chunk holds them): one gather, a word per
  // thread.
  bf16* qin = b.qkv_in;
  bf16* kin = qin + kMaxG * kD;
  bf16* vin = kin + kD;
  float rope_sin[2], rope_cos[2];
  {
    constexpr int kWordsPerHead = kD / 4;
    const int words = (G + (holds_new ? 2 : 0)) * kWordsPerHead;
    bool ok = true;
    if (tid < words) {
      const int head = tid / kWordsPerHead, w = tid % kWordsPerHead;
      const int64_t row =
          head < G ? static_cast<int64_t>(g) * G + head : (head == G ? d.q_heads + g : d.q_heads + KV + g);
      bf16* dst = (head < G ? qin + head * kD : head == G ? kin : vin) + w * 4;
      const uint4* src = static_cast<const uint4*>(qkv) + row * kWordsPerHead + w;
      const uint4 first = flag_load(src);
      // The RoPE angles need only the position: computed while the first poll is in flight, not after q lands (the
      // threads that rope are among those that gather: the same bits, 2-7 µs per token at positions 1-128).
      if (norm_w != nullptr) {
#pragma unroll
        for (int j = 0; j < 2; j++) sincosf(__fmul_rn(static_cast<float>(pos), freq[j]), &rope_sin[j], &rope_cos[j]);
      }
      const uint4 v = flag_wait(a, b, src, first, ok);
      if (ok) *reinterpret_cast<uint2*>(dst) = make_uint2(v.x, v.z);
    }
    if (!block_ok(b, ok)) return false;
  }
  stamp(a, ev + 1);

  // QK-norm + RoPE of the group's queries (every chunk's block, redundantly) and of the new key where this chunk
  // holds it; the new key and value are appended to the cache (and the key kept rotated in kin).
  if (norm_w != nullptr) {
    const bool is_q = warp < G;
    const bf16* src = is_q ? qin + warp * kD : kin;
    float lo[2], hi[2], ss = 0.f;
#pragma unroll
    for (int j = 0; j < 2; j++) {
      lo[j] = bf(src[lane + 32 * j]);
      hi[j] = bf(src[lane + 32 * j + kHalf]);
      ss += lo[j] * lo[j] + hi[j] * hi[j];
    }
    const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(kD) + a.eps);
    bf16* kdst = kc + (static_cast<int64_t>(pos) * KV + g) * kD;
#pragma unroll
    for (int j = 0; j < 2; j++) {
      const int i = lane + 32 * j;
      const float sn = rope_sin[j], cs = rope_cos[j];
      const float x0 = lo[j] * inv * bf(w_lo[j]), x1 = hi[j] * inv * bf(w_hi[j]);
      const bf16 r0 = to_bf(x0 * cs - x1 * sn), r1 = to_bf(x1 * cs + x0 * sn);
      if (is_q) {
        if constexpr (kStaged) {
          qh[warp * kD + i] = r0;
          qh[warp * kD + i + kHalf] = r1;
        } else {
          qs[warp * kD + i] = bf(r0) * scale_log2;
          qs[warp * kD + i + kHalf] = bf(r1) * scale_log2;
        }
      } else {
        kdst[i] = r0;
        kdst[i + kHalf] = r1;
        kin[i] = r0;
        kin[i + kHalf] = r1;
        if constexpr (kStaged) {
          krow[i] = r0;
          krow[i + kHalf] = r1;
        }
      }
    }
  } else if (holds_new && warp == G + 1) {
    const uint2 v = *reinterpret_cast<const uint2*>(vin + lane * 4);
    *reinterpret_cast<uint2*>(vc + (static_cast<int64_t>(pos) * KV + g) * kD + lane * 4) = v;
    if constexpr (kStaged) *reinterpret_cast<uint2*>(vrow + lane * 4) = v;
  }
  return true;
}

__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/**
 * The staged attention (DESIGN.md, "The staged attention") of KV head `g`'s query group of 2 over all pos + 1 keys,
 * one block per head, on the tensor cores. Publishes the normalised output. `parity`: the phase of the staged rows'
 * barrier.
 *
 * 1. Before the wait for q/k/v, the block copies the head's cached rows (all but the new one) into shared memory past
 *    its ring: one bulk copy per key row and per value row, completing on one mbarrier.
 * 2. Warp w takes key tiles w, w + 7, w + 14, w + 21 from end to end. Scores: Sᵀ (16 keys × 8 columns) = K (16 keys
 *    × 16 dims, ldmatrix) · qᵀ (16 dims × 8: column c holds query (c >> 1) & 1), all of the warp's tiles at once (two
 *    accumulator chains each), in the log2 domain; each lane keeps one score per tile (the max per query after a
 *    barrier).
 * 3. Weights 2^(s − max) in fp32 (the sum per query after a second barrier), rounded to bf16 into the warp's own
 *    B operands.
 * 4. The warp's part of the output, Vᵀ (16 dims × 16 keys, ldmatrix.trans) · Pᵀ (16 keys × 8) for all eight dim
 *    tiles over its own key tiles: chains of at most four MMAs. After a third barrier the warps' parts are added in
 *    warp order and published.
 * The weights are rounded to bf16 for the MMA; the sum that divides them (or the output) is of the unrounded weights.
 * (Splitting the keys over the warps for the scores only and the output's dims for Vᵀ·Pᵀ, with four or five barriers
 * and warp 0 taking two dim tiles, was 15-30 µs per token slower at positions 128-383.)
 */
__device__ __forceinline__ bool attend_staged(const MegakernelArgs& a, const Block& b, const Layout& lay, int layer,
                                              int g, int pos, int ev, unsigned parity) {
  constexpr int G = 2;
  const MegakernelDims& d = a.dims;
  const int KV = static_cast<int>(d.kv_heads);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, t = lane & 3;
  const MegakernelLayer& L = a.layers[layer];
  const bf16* kc = static_cast<const bf16*>(L.k_cache);
  const bf16* vc = static_cast<const bf16*>(L.v_cache);
  const int n = pos + 1, tiles = (n + 15) >> 4;
  uint8_t* const krows = b.slots + static_cast<size_t>(a.staged_slots) * static_cast<size_t>(a.slot_bytes);
  uint8_t* const vrows = krows + static_cast<size_t>(a.staged_keys) * kStagedRow;
  uint64_t* const bar = misc_barrier(b, kStagedBarrier);
  float* const sc = b.scratch;
  const bf16* const qh = reinterpret_cast<const bf16*>(sc + kStagedQ);
  unsigned* const pw = reinterpret_cast<unsigned*>(sc + kStagedP);  // [tile][2][8] bf16 pairs of weights
  bf16* const pwh = reinterpret_cast<bf16*>(pw);                    // (the same, [tile][2][16])
  float* const wmx = sc + kStagedMax;                               // [warps][2]
  float* const wsum = sc + kStagedSum;                              // [warps][2]
  float* const part = sc + kStagedPart;                             // [warps][2][128] the warps' outputs

  if (!attention_inputs<G, true>(
          a, b, layer, g, true, pos, ev, reinterpret_cast<bf16*>(krows + static_cast<size_t>(pos) * kStagedRow),
          reinterpret_cast<bf16*>(vrows + static_cast<size_t>(pos) * kStagedRow), [&]() {
            // The rows' one arrival carries the bytes of the cached rows; the copies may land before it.
            if (tid == 0) {
              mbar_expect_tx_only(bar, static_cast<unsigned>(pos) * 2u * kD * 2u);
              mbar_arrive(bar);
            }
            // This layer's copies overwrite rows the previous layer's ldmatrix read (generic proxy, ordered before
            // here by the consumer barriers since): order those reads before the copies (async proxy).
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            for (int i = tid; i < 2 * pos; i += kConsumers) {
              const int r = i >> 1;
              const bf16* src = ((i & 1) ? vc : kc) + (static_cast<int64_t>(r) * KV + g) * kD;
              uint8_t* dst = ((i & 1) ? vrows : krows) + static_cast<size_t>(r) * kStagedRow;
              asm volatile(
                  "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                      smem_addr(dst)),
                  "l"(src), "n"(kD * 2), "r"(smem_addr(bar))
                  : "memory");
            }
            // The last tile's rows past the keys are zeros (their weights are 0, and 0 · a stale NaN would not be).
            for (int i = n * 32 + tid; i < tiles * 16 * 32; i += kConsumers) {
              const int r = i >> 5, part = i & 31;
              *reinterpret_cast<uint4*>((part < 16 ? krows : vrows) + static_cast<size_t>(r) * kStagedRow +
                                        (part & 15) * 16) = make_uint4(0, 0, 0, 0);
            }
            consumer_sync();  // the QKV stage's readers of x (the same memory as the scratch) are done
          }))
    return false;
  // Every thread waits for the copies (their bytes are visible to the threads that see the phase complete); the
  // barrier behind it also publishes q, the new row and the zero rows.
  if (!block_ok(b, mbar_wait(b, bar, parity))) return false;
  if ((a.debug & 64) == 0) stamp(a, ev + 2);

  // 2.-4. Warp w owns key tiles w, w + 7, w + 14, w + 21 (fewer where the keys end) from the scores to the weighted
  // sum of their value rows; the block meets only for the max, the sum and the warps' partial outputs.
  // The MMAs' B columns repeat the two queries (column c holds query (c >> 1) & 1), so lane (gq, t) of a tile's D
  // holds query t & 1 of key gq (c0, c1) and of key gq + 8 (c2, c3); lane t keeps one of them up to the weights: key
  // 16·tile + gq + 8·(t >> 1) of query t & 1.
  const int hq = (gq >> 1) & 1, mq = t & 1, mk = gq + 8 * (t >> 1);
  const bool upper = (t & 2) != 0;
  unsigned qb[8][2];
#pragma unroll
  for (int k = 0; k < 8; k++) {
    qb[k][0] = *reinterpret_cast<const unsigned*>(qh + hq * kD + 16 * k + 2 * t);
    qb[k][1] = *reinterpret_cast<const unsigned*>(qh + hq * kD + 16 * k + 8 + 2 * t);
  }
  // The scores in the log2 domain. a.staged_hf: rounded as HF's eager bf16 attention rounds them (q·kᵀ to bf16, then
  // · head_dim^-0.5 to bf16); otherwise the fp32 dot product, scaled.
  // (a.staged_hf 2: HF's roundings with __fdiv_rn itself: the same bits as 1, slower.)
  const bool hf = a.staged_hf != 0, fdiv = a.staged_hf == 2;
  const float inv_sqrt_d = rsqrtf(static_cast<float>(kD)), scale = inv_sqrt_d * kLog2e;
  const int mine = (tiles - warp + kConsumerWarps - 1) / kConsumerWarps;  // this warp's tiles (0-4)
  float s[kStagedTilesPerWarp];
  {
    float c[kStagedTilesPerWarp][2][4] = {};
    const unsigned kbase = smem_addr(krows) + ((lane & 15) * kStagedRow + (lane >> 4) * 16);
#pragma unroll
    for (int k = 0; k < 8; k += 2) {
#pragma unroll
      for (int i = 0; i < kStagedTilesPerWarp; i++) {
        if (i < mine) {
          const unsigned r = kbase + (warp + kConsumerWarps * i) * 16 * kStagedRow + k * 32;
          unsigned f0[4], f1[4];
          ldmatrix_x4(f0, r);
          ldmatrix_x4(f1, r + 32);
          mma16816<bf16>(c[i][0], f0, qb[k][0], qb[k][1]);
          mma16816<bf16>(c[i][1], f1, qb[k + 1][0], qb[k + 1][1]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kStagedTilesPerWarp; i++) {
      const float* x = c[i][0];
      const float* y = c[i][1];
      const float v = upper ? x[2] + y[2] : x[0] + y[0];
      const float sc = hf ? round_bf(round_bf(v) * inv_sqrt_d) * kLog2e : v * scale;
      s[i] = i < mine && 16 * (warp + kConsumerWarps * i) + mk < n ? sc : -INFINITY;
    }
  }
  // The max per query: over this lane's keys, then the lanes of its query (t of the same parity), then the warps.
  float m = s[0];
#pragma unroll
  for (int i = 1; i < kStagedTilesPerWarp; i++) m = fmaxf(m, s[i]);
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 8));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 16));
  if (lane < 2) wmx[warp * 2 + lane] = m;
  consumer_sync();
  m = wmx[mq];
#pragma unroll
  for (int w = 1; w < kConsumerWarps; w++) m = fmaxf(m, wmx[w * 2 + mq]);
  // The weights 2^(s − max) (0 past the keys) and their sum per query, in fp32. With a.staged_hf, as HF's softmax
  // rounds them: divided by the sum after a barrier, then rounded to bf16; otherwise (flash-style) rounded
  // unnormalised, and the output is divided by the sum instead.
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kStagedTilesPerWarp; i++) {
    s[i] = hf ? exp2f(s[i] - m) : ex2_approx(s[i] - m);
    sum += s[i];
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  sum += __shfl_xor_sync(0xffffffffu, sum, 4);
  sum += __shfl_xor_sync(0xffffffffu, sum, 8);
  sum += __shfl_xor_sync(0xffffffffu, sum, 16);
  if (lane < 2) wsum[warp * 2 + lane] = sum;
  // Query q's sum of weights over the block: the warps' sums added in warp order (after a barrier).
  const auto block_sum = [&](int q) {
    float l = wsum[q];
#pragma unroll
    for (int w = 1; w < kConsumerWarps; w++) l += wsum[w * 2 + q];
    return l;
  };
  if (hf) {
    consumer_sync();
    const float l = block_sum(mq);
    const float r = weight_rcp(l);
#pragma unroll
    for (int i = 0; i < kStagedTilesPerWarp; i++)
      if (i < mine) s[i] = fdiv ? __fdiv_rn(s[i], l) : weight_div_by(s[i], l, r);
  }
  // This warp's weights as the B operand of its tiles' MMAs: bf16 [tile][query][16 keys], so that the pair of keys
  // 2t, 2t + 1 of a query is one word.
#pragma unroll
  for (int i = 0; i < kStagedTilesPerWarp; i++)
    if (i < mine) pwh[((warp + kConsumerWarps * i) * 2 + mq) * 16 + mk] = __float2bfloat16_rn(s[i]);
  __syncwarp();

  // Vᵀ·Pᵀ over this warp's tiles, for all eight dim tiles: dim tile u's chain takes one MMA per tile.
  float o[8][4] = {};
  const int vrow = (lane & 7) + ((lane >> 4) << 3), vcol = ((lane >> 3) & 1) * 16;
  const unsigned vbase = smem_addr(vrows) + vrow * kStagedRow + vcol;
#pragma unroll
  for (int i = 0; i < kStagedTilesPerWarp; i++) {
    if (i < mine) {
      const int j = warp + kConsumerWarps * i;
      const unsigned w0 = pw[(j * 2 + hq) * 8 + t], w1 = pw[(j * 2 + hq) * 8 + t + 4];
#pragma unroll
      for (int u = 0; u < 8; u++) {
        unsigned f[4];
        ldmatrix_x4_trans(f, vbase + j * 16 * kStagedRow + u * 32);
        mma16816<bf16>(o[u], f, w0, w1);
      }
    }
  }
  // D of dim tile u: c0 (= c1) = dim 16u + gq of query t & 1, c2 (= c3) = dim + 8; lanes t and t ^ 2 hold the same,
  // so lane t stores the odd or the even dim tiles (t >> 1) of this warp's partial output.
#pragma unroll
  for (int u = 0; u < 8; u++) {
    if ((u & 1) == (t >> 1)) {
      float* p = part + (warp * 2 + mq) * kD + 16 * u + gq;
      p[0] = o[u][0];
      p[8] = o[u][2];
    }
  }
  consumer_sync();
  // The warps' partial outputs added in warp order, normalised (flash-style) and published.
  void* attn = static_cast<uint8_t*>(stage_output(a, lay, layer, kAttention)) + static_cast<size_t>(g) * G * kD * 4;
  for (int o2 = 2 * tid; o2 < G * kD; o2 += 2 * kConsumers) {
    float2 v = *reinterpret_cast<const float2*>(part + o2);
#pragma unroll
    for (int w = 1; w < kConsumerWarps; w++) {
      const float2 y = *reinterpret_cast<const float2*>(part + w * 2 * kD + o2);
      v.x += y.x;
      v.y += y.y;
    }
    if (!hf) {  // (the HF weights are normalised already)
      const float l = block_sum(o2 / kD);
      v.x /= l;
      v.y /= l;
    }
    flag_store(attn, o2 / 2, pack_bf2(v.x, v.y), b.epoch);
  }
  return true;
}

/**
 * Code placement: kInstructions instructions that never run (the binding never passes this debug value), so that the
 * code after them lies where it was measured fastest. Where the attention ends moves everything after it: the same
 * kernel with 336-896 of them after the attention by chunks ran up to 40 µs per token apart at positions 512-1279,
 * and without them up to 70 µs slower (DESIGN.md, "Code placement"). Any change of the code around these points
 * moves what follows: measure the whole sweep.
 */
template <int kInstructions>
__device__ __forceinline__ void placement_pad(const MegakernelArgs& a, const Block& b) {
  if constexpr (kInstructions > 0) {
    if (a.debug == kPlacementPad) {
      unsigned x = threadIdx.x;
#pragma unroll
      for (int i = 0; i < kInstructions; i++) asm volatile("mad.lo.u32 %0, %0, %0, %1;" : "+r"(x) : "r"(i + 3));
      b.flag[0] = static_cast<int>(x);
    }
  }
}

/**
 * Attention of KV head `g`'s query group over cache positions [p0, p1) of layer `layer` (len = pos + 1 keys in
 * all). Publishes the normalised output when the head has one chunk, else the chunk's partial; the last chunk of a
 * head to finish merges them and publishes the output. Returns false when the launch aborts.
 *
 * Work split: passes of kPass keys; warp w takes keys w·8 … w·8 + 7 of a pass, four lanes per key for the scores
 * (lane quarter qd holds the 16-byte pieces qd, qd + 4, qd + 8, qd + 12 of the 128-wide row, so the quarters read q
 * from different banks) and all 32 lanes per value row (4 dims each). Each warp keeps its own running max, sum and
 * output, so a pass needs no block-wide reduction; the warps are merged once at the end, in fixed order.
 * kStage: a short second pass may be staged in shared memory (below). Only the argmax kernels of groups up to 3 take
 * it: in the others (G = 4, sampling) its code made ptxas spill 4-20 bytes.
 */
template <int G, bool kStage, int kPad>
__device__ __forceinline__ bool attend_chunked(const MegakernelArgs& a, const Block& b, const Layout& lay, int layer,
                                              int g, int c, int chunks, int p0, int p1, int pos, int ev) {
  const MegakernelDims& d = a.dims;
  const int KV = static_cast<int>(d.kv_heads);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const MegakernelLayer& L = a.layers[layer];
  uint8_t* ws = static_cast<uint8_t*>(a.workspace);
  const int max_chunks = static_cast<int>(gridDim.x) / static_cast<int>(d.kv_heads);
  bf16* kc = static_cast<bf16*>(L.k_cache);
  bf16* vc = static_cast<bf16*>(L.v_cache);
  float* qs = b.scratch;             // [G][128] roped queries, pre-scaled into the log2 domain
  float* wacc = qs + kMaxG * kD;                    // [warps][G·128] the warps' outputs
  float* wml = wacc + kConsumerWarps * kMaxG * kD;  // [warps][G][2] the warps' max and sum
  const int qd = lane & 3, kq = lane >> 2;
  constexpr int kPerWarp = kKeysPerWarp;

  // Everything that does not depend on this step's q/k/v is started before waiting for them (attention_inputs): the
  // norm weights of the warp's head, and the cached keys and values of the first pass (the new position, if this
  // chunk holds it, comes from the staged k/v instead of the cache).
  const bool holds_new = p0 <= pos && pos < p1;
  uint4 kv[4];
  uint2 vv[kPerWarp];
  auto load_pass = [&](int sp) {
    const int kk = sp + warp * kPerWarp + kq;
    if (kk < p1 && kk != pos) {
      const bf16* krow = kc + (static_cast<int64_t>(kk) * KV + g) * kD;
#pragma unroll
      for (int i = 0; i < 4; i++) kv[i] = ld_early_cg128(krow + (qd + 4 * i) * 8);
    }
#pragma unroll
    for (int j = 0; j < kPerWarp; j++) {
      const int vk = sp + warp * kPerWarp + j;
      if (vk < p1 && vk != pos)
        vv[j] = ld_early_cg64(vc + (static_cast<int64_t>(vk) * KV + g) * kD + lane * 4);
    }
  };
  // A chunk of two passes whose second pass holds at most kStageKeys keys (Qwen3-0.6B at 1,025-1,344 keys: 16 chunks
  // of 65-84) gets its second pass's cached rows copied into shared memory now, in the background, into the warps'
  // output area (written only after a barrier behind the passes): the second pass then does not wait for an L2 round
  // trip. (Measured: 0-4 µs per token at 1024, within the spread: the second pass costs its arithmetic, not its loads.)
  // (staged_keys() is recomputed where used rather than held: the attention runs at the register limit.)
  const auto staged_keys = [&]() {
    const int n = p1 - p0 - kPass;
    return kStage && a.kv_stage != 0 && n > 0 && n <= kStageKeys ? n : 0;
  };
  uint8_t* const stage_k = reinterpret_cast<uint8_t*>(wacc);
  uint8_t* const stage_v = stage_k + kStageKeys * kD * 2;
  if (!attention_inputs<G, false>(a, b, layer, g, holds_new, pos, ev, nullptr, nullptr, [&]() {
        load_pass(p0);
        consumer_sync();  // the QKV stage's readers of x (the same memory as the scratch) are done
        for (int i = tid; i < staged_keys() * 32; i += kConsumers) {
          const int r = i >> 5, part = i & 31, key = p0 + kPass + r;
          if (key == pos) continue;  // the new row is not in the cache yet: the pass takes it from the staged k/v
          const int64_t row = (static_cast<int64_t>(key) * KV + g) * kD;
          if (part < 16)
            cp_async16(stage_k + r * kD * 2 + ((part ^ (r & 7)) * 16), kc + row + part * 8);
          else
            cp_async16(stage_v + r * kD * 2 + (part - 16) * 16, vc + row + (part - 16) * 8);
        }
      }))
    return false;
  bf16* kin = b.qkv_in + kMaxG * kD;
  bf16* vin = kin + kD;
  if (staged_keys() > 0) cp_async_wait_all();  // (each thread its own copies; the barrier below publishes them all)
  consumer_sync();
  if ((a.debug & 64) == 0) stamp(a, ev + 2);

  float m[kMaxG], l[kMaxG], acc[kMaxG][4];
#pragma unroll
  for (int h = 0; h < kMaxG; h++) {
    m[h] = -INFINITY;
    l[h] = 0.f;
#pragma unroll
    for (int e = 0; e < 4; e++) acc[h][e] = 0.f;
  }
  for (int sp = p0; sp < p1; sp += kPass) {
    if (sp != p0 && staged_keys() > 0) {  // the staged second pass (the only pass after the first)
      const unsigned sk = smem_addr(wacc) + (warp * kPerWarp) * (kD * 2);
      const unsigned sv = sk + kStageKeys * kD * 2;
      if (sp + warp * kPerWarp + kq < p1 && sp + warp * kPerWarp + kq != pos) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
          const unsigned at = sk + kq * (kD * 2) + (((qd + 4 * i) ^ kq) * 16);  // (r & 7 = kq: warps start at 8k)
          asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                       : "=r"(kv[i].x), "=r"(kv[i].y), "=r"(kv[i].z), "=r"(kv[i].w)
                       : "r"(at));
        }
      }
#pragma unroll
      for (int j = 0; j < kPerWarp; j++) {
        if (sp + warp * kPerWarp + j < p1 && sp + warp * kPerWarp + j != pos)
          asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];"
                       : "=r"(vv[j].x), "=r"(vv[j].y)
                       : "r"(sv + j * (kD * 2) + lane * 8));
      }
    } else if (sp != p0) {
      load_pass(sp);
    }
    const int base = sp + warp * kPerWarp;
    if (base >= p1) break;  // this warp has no keys left (later passes start further on)
    const int kk = base + kq;
    const bool has_key = kk < p1;
    if (kk == pos) {
#pragma unroll
      for (int i = 0; i < 4; i++) kv[i] = *reinterpret_cast<const uint4*>(kin + (qd + 4 * i) * 8);
    }
#pragma unroll
    for (int j = 0; j < kPerWarp; j++)
      if (base + j == pos) vv[j] = *reinterpret_cast<const uint2*>(vin + lane * 4);
    float s[kMaxG] = {0.f, 0.f, 0.f, 0.f};
    if (has_key) {
#pragma unroll
      for (int i = 0; i < 4; i++) {
        float kf[8];
        unpack8(kv[i], kf);
        const int at = (qd + 4 * i) * 8;
#pragma unroll
        for (int h = 0; h < kMaxG; h++)
          if (h < G)
#pragma unroll
            for (int e = 0; e < 8; e++) s[h] = fmaf(qs[h * kD + at + e], kf[e], s[h]);
      }
    }
#pragma unroll
    for (int h = 0; h < kMaxG; h++) {
      if (h >= G) continue;
      s[h] += __shfl_xor_sync(0xffffffffu, s[h], 1);
      s[h] += __shfl_xor_sync(0xffffffffu, s[h], 2);
      float mx = has_key ? s[h] : -INFINITY;
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
      const float mn = fmaxf(m[h], mx);  // finite: the warp's first key is valid
      const float alpha = exp2f(m[h] - mn);
      m[h] = mn;
      const float p = has_key ? exp2f(s[h] - mn) : 0.f;
      float ps = p;
      ps += __shfl_xor_sync(0xffffffffu, ps, 4);
      ps += __shfl_xor_sync(0xffffffffu, ps, 8);
      ps += __shfl_xor_sync(0xffffffffu, ps, 16);
      l[h] = l[h] * alpha + ps;
#pragma unroll
      for (int e = 0; e < 4; e++) acc[h][e] *= alpha;
#pragma unroll
      for (int j = 0; j < kPerWarp; j++) {
        const float pj = __shfl_sync(0xffffffffu, p, j * 4);
        if (base + j < p1) {
          acc[h][0] = fmaf(pj, bf2_lo(vv[j].x), acc[h][0]);
          acc[h][1] = fmaf(pj, bf2_hi(vv[j].x), acc[h][1]);
          acc[h][2] = fmaf(pj, bf2_lo(vv[j].y), acc[h][2]);
          acc[h][3] = fmaf(pj, bf2_hi(vv[j].y), acc[h][3]);
        }
      }
    }
  }

  if ((a.debug & 64) != 0) stamp(a, ev + 2);  // (diagnostic: the stamp after the passes instead of after RoPE)
  // The staged rows share memory with the warps' outputs: every warp must be done reading them (without this barrier a
  // warp with no second-pass keys wrote its outputs over another's staged keys, and the logits went NaN).
  if (staged_keys() > 0) consumer_sync();
  // Merge the warps in fixed order (a warp without keys has m = −inf and weighs 0).
  const int O = G * kD;
#pragma unroll
  for (int h = 0; h < kMaxG; h++) {
    if (h >= G) continue;
    *reinterpret_cast<float4*>(wacc + warp * O + h * kD + lane * 4) =
        make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
    if (lane == 0) {
      wml[(warp * kMaxG + h) * 2] = m[h];
      wml[(warp * kMaxG + h) * 2 + 1] = l[h];
    }
  }
  consumer_sync();
  void* attn = static_cast<uint8_t*>(stage_output(a, lay, layer, kAttention)) + static_cast<size_t>(g) * O * 4;
  float* part_acc = reinterpret_cast<float*>(ws + lay.part_acc + lay.part_acc_layer * layer) +
                    static_cast<int64_t>(g) * max_chunks * O;
  float* part_ml = reinterpret_cast<float*>(ws + lay.part_ml + lay.part_ml_layer * layer) +
                   static_cast<int64_t>(g) * max_chunks * G * 2;
  const int R = part_record_words(G);  // this head's flagged records: [chunk][R] words
  unsigned long long* recs = reinterpret_cast<unsigned long long*>(ws + lay.part_rec + lay.part_rec_layer * layer) +
                             static_cast<int64_t>(g) * min(max_chunks, kFlagMergeMax) * R;
  for (int o = 2 * tid; o < O; o += 2 * kConsumers) {
    const int oh = o / kD, od = o % kD;
    float mh = -INFINITY;
    for (int w = 0; w < kConsumerWarps; w++) mh = fmaxf(mh, wml[(w * kMaxG + oh) * 2]);
    float t0 = 0.f, t1 = 0.f, lh = 0.f;
    for (int w = 0; w < kConsumerWarps; w++) {
      const float mw = wml[(w * kMaxG + oh) * 2];
      if (mw == -INFINITY) continue;
      const float f = exp2f(mw - mh);
      t0 = fmaf(f, wacc[w * O + o], t0);
      t1 = fmaf(f, wacc[w * O + o + 1], t1);
      lh = fmaf(f, wml[(w * kMaxG + oh) * 2 + 1], lh);
    }
    if (chunks == 1) {
      flag_store(attn, o / 2, pack_bf2(t0 / lh, t1 / lh), b.epoch);
    } else if (G == 2 && chunks <= a.o_merge) {  // the O blocks merge (stage_merge_input): this chunk's record
      void* rec = ws + lay.omerge + lay.omerge_layer * layer +
                  static_cast<size_t>(c) * omerge_record_words(static_cast<int>(d.q_heads)) * 8;
      const bool keys = lh > 0.f;  // (a chunk with no keys publishes zeros, and weighs nothing)
      flag_store(rec, (g * O + o) / 2, pack_bf2(keys ? t0 / lh : 0.f, keys ? t1 / lh : 0.f), b.epoch);
      if (od == 0) {
        const int at = d.q_heads * kD / 2 + 2 * (g * G + oh);
        flag_store_f32(rec, at, mh, b.epoch);
        flag_store_f32(rec, at + 1, lh, b.epoch);
      }
    } else if (G <= 2 && c == 0 && chunks <= kFlagMergeMax) {  // the spread merge (below): chunk 0's record stays in
                                                               // shared memory, where the queries were (the passes
                                                               // are done)
      qs[o] = t0;
      qs[o + 1] = t1;
      if (od == 0) {
        qs[O + 2 * oh] = mh;
        qs[O + 2 * oh + 1] = lh;
      }
    } else if (chunks <= kFlagMergeMax) {
      flag_store_f32(recs + c * R, o, t0, b.epoch);
      flag_store_f32(recs + c * R, o + 1, t1, b.epoch);
      if (od == 0) {
        flag_store_f32(recs + c * R, O + 2 * oh, mh, b.epoch);
        flag_store_f32(recs + c * R, O + 2 * oh + 1, lh, b.epoch);
      }
    } else {
      *reinterpret_cast<float2*>(part_acc + c * O + o) = make_float2(t0, t1);
      if (od == 0) *reinterpret_cast<float2*>(part_ml + (c * G + oh) * 2) = make_float2(mh, lh);
    }
  }
  if (chunks == 1 || (G == 2 && chunks <= a.o_merge)) return true;
  if (chunks <= kFlagMergeMax) {
    if (c != 0) return true;
    // Heads of up to 16 chunks and G ≤ 2: the records of chunks 1, 2, … lie end to end, and thread t
    // loads their word pairs t, t + 224, … in one batch, so that past 8 chunks the merge costs one L2 round trip after
    // the last record lands, not two. The values go to shared memory after chunk 0's own record, in the records'
    // layout, and after a barrier each output pair is merged from there in chunk order: the arithmetic of the merges
    // below, the same bits.
    if constexpr (G <= 2) {
      static_assert((kFlagMergeMax - 1) * G * (kD + 2) / 2 <= kConsumers * kSpreadBatch, "one batch holds 15 records");
      static_assert(G * (kD + 2) <= kMaxG * kD, "chunk 0's record fits where the queries were");
      const int total = (chunks - 1) * (R / 2);  // word pairs (16-byte loads)
      // (Loads past the last record read its last word pair again: a batch of fixed size spills no registers.)
      uint4 v[kSpreadBatch];
      const bool ok = flag_wait_batch<kSpreadBatch>(a, b, v, kSpreadBatch, [&](int j) {
        return recs + R + 2 * min(tid + j * kConsumers, total - 1);
      });
      consumer_sync();  // every thread is done reading the warps' outputs (the same memory)
      float* sm = qs;   // [chunk][R]
      if (ok) {
#pragma unroll
        for (int j = 0; j < kSpreadBatch; j++)
          if (tid + j * kConsumers < total)
            *reinterpret_cast<float2*>(sm + R + 2 * (tid + j * kConsumers)) =
                make_float2(__uint_as_float(v[j].x), __uint_as_float(v[j].z));
      }
      if (!block_ok(b, ok)) return false;
      for (int o = 2 * tid; o < O; o += 2 * kConsumers) {
        const float* mh = sm + O + 2 * (o / kD);  // chunk q's (max, sum) of this head: mh[q·R], mh[q·R + 1]
        float mx = -INFINITY;
        for (int q = 0; q < chunks; q++) mx = fmaxf(mx, mh[q * R]);
        float n0 = 0.f, n1 = 0.f, den = 0.f;
        for (int q = 0; q < chunks; q++) {
          const float w = exp2f(mh[q * R] - mx);
          n0 = fmaf(w, sm[q * R + o], n0);
          n1 = fmaf(w, sm[q * R + o + 1], n1);
          den = fmaf(w, mh[q * R + 1], den);
        }
        flag_store(attn, o / 2, pack_bf2(n0 / den, n1 / den), b.epoch);
      }
      return true;
    } else {
      // Chunk 0's block merges the head's chunks (its own included) from their flagged records as they land: no fence,
      // no arrival counter. One batch of loads per thread (one L2 round trip once the last word has landed): the output
      // pair it merges, of chunks 0-7, and (threads q·G + h of the first round) chunk q's (max, sum) of head h, which
      // goes to shared memory for every thread of the head; chunks 8-15, where there are more, in a second batch. Then
      // the merge in chunk order: the same arithmetic as the counter merge below, so either gives the same bits.
      float* mlb = qs;  // [chunk][G] (max, sum) (the queries are no longer read: the passes are done)
      bool ok = true;
      for (int o = 2 * tid, round = 0;; o += 2 * kConsumers, round++) {
        if (round > 0 && o >= O) break;  // (every thread takes the first round: it holds the barrier)
        const bool has_o = o < O, has_ml = round == 0 && tid < chunks * G;
        const int64_t at_o = has_o ? o : 0;  // (a thread with no outputs waits for output 0 of each chunk)
        // v[q]: chunk q's outputs (slots past the last chunk repeat it: register slots fixed at compile time, since an
        // index known only at run time would put the array in local memory); v[kFlagMergeChunks]: the (max, sum) pair.
        uint4 v[kFlagMergeChunks + 1];
        ok = ok && flag_wait_batch<kFlagMergeChunks + 1>(a, b, v, kFlagMergeChunks + 1, [&](int j) {
               return recs + (j < kFlagMergeChunks ? static_cast<int64_t>(min(j, chunks - 1)) * R + at_o
                              : has_ml ? static_cast<int64_t>(tid / G) * R + O + 2 * (tid % G)
                                       : at_o);
             });
        if (round == 0) {
          if (has_ml && ok) {
            mlb[2 * tid] = __uint_as_float(v[kFlagMergeChunks].x);
            mlb[2 * tid + 1] = __uint_as_float(v[kFlagMergeChunks].z);
          }
          if (!block_ok(b, ok)) return false;
        }
        if (!ok || !has_o) break;
        const float* mh = mlb + 2 * (o / kD);  // chunk q's (max, sum) of this head: mh[2·G·q], mh[2·G·q + 1]
        float mx = -INFINITY;
#pragma unroll
        for (int q = 0; q < kFlagMergeMax; q++)
          if (q < chunks) mx = fmaxf(mx, mh[2 * G * q]);
        float n0 = 0.f, n1 = 0.f, den = 0.f;
        // Chunks 0-7 from the batch above; chunks 8-15 (more than 8 chunks) from a second batch, in the same order.
        for (int q0 = 0;; q0 += kFlagMergeChunks) {
#pragma unroll
          for (int q = 0; q < kFlagMergeChunks; q++) {
            if (q0 + q < chunks) {
              const float w = exp2f(mh[2 * G * (q0 + q)] - mx);
              n0 = fmaf(w, __uint_as_float(v[q].x), n0);
              n1 = fmaf(w, __uint_as_float(v[q].z), n1);
              den = fmaf(w, mh[2 * G * (q0 + q) + 1], den);
            }
          }
          if (q0 + kFlagMergeChunks >= chunks) break;
          ok = flag_wait_batch<kFlagMergeChunks + 1>(a, b, v, kFlagMergeChunks, [&](int j) {
            return recs + static_cast<int64_t>(min(q0 + kFlagMergeChunks + j, chunks - 1)) * R + o;
          });
          if (!ok) break;
        }
        if (!ok) break;
        flag_store(attn, o / 2, pack_bf2(n0 / den, n1 / den), b.epoch);
      }
      return block_ok(b, ok);
    }
  }
  __threadfence();
  consumer_sync();
  if (tid == 0) {
    unsigned* counter = b.sync + kMergeCounters + layer * kMaxKvHeads + g;
    const unsigned arrived = atomicAdd(counter, 1u);
    const bool last = arrived == static_cast<unsigned>(chunks - 1);
    if (last) atomicExch(counter, 0u);  // every chunk of this head has arrived: ready for the next launch
    __threadfence();
    b.flag[1] = last ? 1 : 0;
  }
  consumer_sync();
  if (b.flag[1] == 0) return true;
  // The last chunk to finish merges all of them, in chunk order: the (max, sum) pairs to shared memory, one per
  // thread (the warps' outputs there are no longer read: every thread has passed the barrier above), then each
  // thread's output pair of every chunk, in batches of loads issued together (explicit: how a loop of loads is
  // unrolled is the compiler's choice, and each batch costs an L2 round trip).
  constexpr int kMergeBatch = 8;
  float* mlb = wacc;  // [chunk][G] (max, sum)
  for (int i = tid; i < chunks * G; i += kConsumers) {
    const float2 v = __ldcg(reinterpret_cast<const float2*>(part_ml) + i);
    mlb[2 * i] = v.x;
    mlb[2 * i + 1] = v.y;
  }
  consumer_sync();
  for (int o = 2 * tid; o < O; o += 2 * kConsumers) {
    const float* mh = mlb + 2 * (o / kD);  // chunk q's (max, sum) of this head: mh[2·G·q], mh[2·G·q + 1]
    float mx = -INFINITY;
    for (int q = 0; q < chunks; q++) mx = fmaxf(mx, mh[2 * G * q]);
    float n0 = 0.f, n1 = 0.f, den = 0.f;
    for (int q0 = 0; q0 < chunks; q0 += kMergeBatch) {
      float2 pa[kMergeBatch];
#pragma unroll
      for (int j = 0; j < kMergeBatch; j++)
        if (q0 + j < chunks) pa[j] = __ldcg(reinterpret_cast<const float2*>(part_acc + (q0 + j) * O + o));
#pragma unroll
      for (int j = 0; j < kMergeBatch; j++) {
        if (q0 + j < chunks) {
          const float w = exp2f(mh[2 * G * (q0 + j)] - mx);
          n0 = fmaf(w, pa[j].x, n0);
          n1 = fmaf(w, pa[j].y, n1);
          den = fmaf(w, mh[2 * G * (q0 + j) + 1], den);
        }
      }
    }
    flag_store(attn, o / 2, pack_bf2(n0 / den, n1 / den), b.epoch);
  }
  placement_pad<kPad>(a, b);  // (placement_of: 1,280 or 736 in the kernels with both paths)
  return true;
}

/**
 * The attention paths a kernel is compiled with (MegakernelArgs::path_kernels): both, decided per step, or the staged
 * attention alone, without the attention by chunks and the O blocks' merge: a third less code, 70 fewer registers,
 * and 5-8 µs per token faster at positions 128-383 (DESIGN.md, "The staged attention"). (A kernel of the chunks alone
 * measured 10-11 µs slower than the one with both at positions 512-1279, and slower at every placement tried.)
 */
enum AttnPath : int { kPathBoth = 0, kPathStaged = 1 };

/**
 * The placement padding (placement_pad: instructions after the attention) of a kernel of query groups of G, path
 * `kPath` and `kPad`: kPad where it is not -1 (the default), else in the kernels with both paths 1,280 after the
 * attention by chunks for query groups of 2 (a search over 0-1,920 at positions 512 and 1024 of Qwen3-0.6B:
 * 621-622 µs per token at 1024, 617-644 across the paddings; 736 before the staged attention's rewrite) and 736 for
 * the others, and none in the staged kernel (paddings of 0-1,920 instructions measured within the machines' spread
 * there). DESIGN.md, "Code placement".
 */
template <int G, int kPath, int kPad>
constexpr int placement_of() {
  return kPad >= 0 ? kPad : kPath == kPathBoth ? (G == 2 ? 1280 : 736) : 0;
}

/** The attention of a step at `pos`: staged (query groups of 2, staged_step) or by chunks (attend_chunked). */
template <int G, bool kStage, int kPath, int kPad>
__device__ __forceinline__ bool attend(const MegakernelArgs& a, const Block& b, const Layout& lay, int layer, int g,
                                      int c, int chunks, int p0, int p1, int pos, int ev, unsigned staged_parity) {
  constexpr int kInstructions = placement_of<G, kPath, kPad>();
  if constexpr (G == 2 && kPath == kPathStaged) {
    const bool ok = attend_staged(a, b, lay, layer, g, pos, ev, staged_parity);
    placement_pad<kInstructions>(a, b);
    return ok;
  } else {
    if constexpr (G == 2 && kPath == kPathBoth) {
      if (staged_step(a, pos)) return attend_staged(a, b, lay, layer, g, pos, ev, staged_parity);
    }
    return attend_chunked<G, kStage, kInstructions>(a, b, lay, layer, g, c, chunks, p0, p1, pos, ev);
  }
}

/**
 * Whether a kernel of path `kPath` can run every step of a launch of `steps` from `pos0`: the staged kernel where all
 * of them are staged steps (one run of positions, so the first and the last decide), the kernel with both always.
 */
template <int kPath>
__host__ __device__ inline bool path_serves(const MegakernelArgs& a, int64_t pos0, int steps) {
  return kPath == kPathBoth ||
         (staged_step(a, static_cast<int>(pos0)) && staged_step(a, static_cast<int>(pos0 + steps - 1)));
}

// ---------------------------------------------------------------------------------------------------------------

/**
 * The arrival of this block (thread 0) at the end of a step; whether it is the last. The last one resets the counter
 * and clears the step's claim counters; its fence orders the other blocks' writes before its reads.
 */
__device__ __forceinline__ bool step_arrive(const MegakernelArgs& a, const Block& b) {
  __threadfence();
  const unsigned arrived = atomicAdd(b.sync + kArgmaxCounter, 1u);
  if (arrived != gridDim.x - 1) return false;
  atomicExch(b.sync + kArgmaxCounter, 0u);
  if (a.claim != 0) {
    // Every tile of this step has been claimed and consumed: its claim counters are free for the step two ahead.
    unsigned* claims = b.sync + kClaimCounters + (b.epoch & 1) * kClaimsPerSet;
    for (int i = 0; i < kClaimsPerSet; i++) claims[i] = 0;
  }
  __threadfence();
  return true;
}

/**
 * Publishes the step's token (one thread): to the host, and to the other blocks for the next step (or, on the
 * launch's last step, as the state the next launch starts from).
 */
__device__ __forceinline__ void publish_token(const MegakernelArgs& a, const Block& b, int token, int step, int pos) {
  stamp(a, static_cast<int>(a.dims.layers) * kMegakernelTraceEventsPerLayer + 2);
  const unsigned long long tagged = (static_cast<unsigned long long>(b.epoch) << 32) | static_cast<unsigned>(token);
  host_store(b.host + 1 + step, tagged);
  if (step + 1 < a.steps) {
    // The other blocks wait for this word before the next step's embedding row: everything they read of this step
    // (the cache rows, the flagged words) was written before their arrivals.
    flag_store(b.sync + kTokenWord, 0, static_cast<unsigned>(token), b.epoch);
  } else {
    a.result[0] = token;
    a.state[0] = token;
    a.state[1] = pos + 1;
  }
}

/**
 * One step's argmax: the block's best over its LM-head rows, then an arrival; in the last block to arrive, warp 0
 * reduces the blocks' bests (each lane a strided share of them, loads in flight together, then a butterfly) and
 * publishes the token. This thread's verdict (false: no finite logit, the launch aborts); the caller combines them
 * with block_ok.
 */
__device__ __forceinline__ bool step_argmax(const MegakernelArgs& a, const Block& b, const Layout& lay, Best best,
                                            int step, int pos) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint8_t* ws = static_cast<uint8_t*>(a.workspace);
  float* bv = b.red;
  int* bi = reinterpret_cast<int*>(b.red + kConsumerWarps);
  float* arg_v = reinterpret_cast<float*>(ws + lay.arg);
  int* arg_i = reinterpret_cast<int*>(arg_v + gridDim.x);
  consumer_sync();  // red was last used by the final norm's reduction
  if (lane == 0) {
    bv[warp] = best.v;
    bi[warp] = best.i;
  }
  consumer_sync();
  if (threadIdx.x == 0) {
    Best blk{-INFINITY, INT32_MAX};
    for (int w = 0; w < kConsumerWarps; w++)
      if (better(bv[w], bi[w], blk)) blk = {bv[w], bi[w]};
    arg_v[blockIdx.x] = blk.v;
    arg_i[blockIdx.x] = blk.i;
    b.flag[3] = step_arrive(a, b) ? 1 : 0;
  }
  consumer_sync();
  if (b.flag[3] == 0 || warp != 0) return true;
  // `better` is a total order (value descending, then index ascending), so the result does not depend on the order
  // in which the bests are combined.
  Best all{-INFINITY, INT32_MAX};
#pragma unroll 4
  for (unsigned q = lane; q < gridDim.x; q += 32) {
    const float v = __ldcg(arg_v + q);
    const int i = __ldcg(arg_i + q);
    if (better(v, i, all)) all = {v, i};
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, all.v, o);
    const int i = __shfl_xor_sync(0xffffffffu, all.i, o);
    if (better(v, i, all)) all = {v, i};
  }
  if (all.i == INT32_MAX) {
    if (lane == 0) fail(b.sync, b.result, b.host, b.launch_epoch, MegakernelError::NonFinite);
    return false;
  }
  if (lane == 0) publish_token(a, b, all.i, step, pos);
  return true;
}

/** consumer_sync() that also returns whether `v` is true on any consumer thread. */
__device__ __forceinline__ bool consumer_sync_or(bool v) {
  unsigned r;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, 1, %2, p;\n selp.u32 %0, 1, 0, q;\n}"
      : "=r"(r)
      : "r"(static_cast<unsigned>(v)), "n"(kConsumers)
      : "memory");
  return r != 0;
}

/** The first position p < 64 where the warp-wide predicate holds (p0: position lane, p1: 32 + lane), or `none`. */
__device__ __forceinline__ int first_position(bool p0, bool p1, int none) {
  const unsigned h0 = __ballot_sync(0xffffffffu, p0), h1 = __ballot_sync(0xffffffffu, p1);
  return h0 != 0 ? __ffs(h0) - 1 : h1 != 0 ? 32 + __ffs(h1) - 1 : none;
}

/** Lists of other blocks a warp of the last block loads together (their L2 round trips overlap). */
constexpr int kListBatch = 10;
static_assert(kConsumerWarps * kMaxTopK * 8 <= kAttnScratchFloats * 4, "the warps' lists fit the scratch");

/**
 * One step's sample (a.top_k = k > 0), by `sample`'s rule (MegakernelArgs), over the ids below vocab_limit:
 *   1. Each warp has kept its k best logits of the LM head (top_consider); warp 0 merges the block's warps' lists
 *      and publishes the block's k best, then the block arrives.
 *   2. The last block to arrive merges every block's list into the step's k best (the global top-k: each of them is
 *      among its own block's k best), warp w taking blocks w, w + 7, …, then warp 0 the warps' lists.
 *   3. Warp 0 draws: integer weights and their prefix sums across the lanes, the nucleus and the drawn position by
 *      ballots, the same comparisons in float64 as the sampling kernels make.
 * This thread's verdict (false: a NaN or +inf logit, or all −inf; the launch aborts); combined by block_ok.
 */
__device__ __forceinline__ bool step_sample(const MegakernelArgs& a, const Block& b, const Layout& lay, TopK top,
                                            int step, int pos) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int k = a.top_k;
  uint8_t* ws = static_cast<uint8_t*>(a.workspace);
  unsigned long long* cand = reinterpret_cast<unsigned long long*>(ws + lay.cand);
  unsigned* cand_bad = reinterpret_cast<unsigned*>(ws + lay.cand_bad);
  // The warps' lists, in the attention scratch (the LM head's input there is read by no one past the first sync).
  unsigned long long* lists = reinterpret_cast<unsigned long long*>(b.scratch);
  const bool block_bad = consumer_sync_or(top.bad != 0);
  lists[warp * kMaxTopK + lane] = top.e0;
  lists[warp * kMaxTopK + 32 + lane] = top.e1;
  consumer_sync();
  if (warp == 0) {
    for (int w = 1; w < kConsumerWarps; w++) top_merge_list(top, lists + w * kMaxTopK, k);
    unsigned long long* mine = cand + static_cast<size_t>(blockIdx.x) * kMaxTopK;
    mine[lane] = top.e0;
    mine[32 + lane] = top.e1;
    if (lane == 0) cand_bad[blockIdx.x] = block_bad ? 1u : 0u;
    __threadfence();
    __syncwarp();
    if (lane == 0) b.flag[3] = step_arrive(a, b) ? 1 : 0;
  }
  consumer_sync();
  if (b.flag[3] == 0) return true;

  TopK all{0ull, 0ull, 0ull, 0};
  bool bad = false;
  for (unsigned q0 = warp; q0 < gridDim.x; q0 += kConsumerWarps * kListBatch) {
    unsigned long long r0[kListBatch], r1[kListBatch];
#pragma unroll
    for (int j = 0; j < kListBatch; j++) {
      const unsigned q = q0 + j * kConsumerWarps;
      r0[j] = r1[j] = 0ull;
      if (q < gridDim.x) {
        const unsigned long long* list = cand + static_cast<size_t>(q) * kMaxTopK;
        r0[j] = __ldcg(list + lane);
        if (k > 32) r1[j] = __ldcg(list + 32 + lane);
        if (lane == 0) bad = bad || __ldcg(cand_bad + q) != 0;
      }
    }
#pragma unroll
    for (int j = 0; j < kListBatch; j++) {  // list j: position p in lane p of r0[j] or lane p − 32 of r1[j]
      const unsigned long long e0 = r0[j], e1 = r1[j];
      top_merge_sorted(all, k, [e0, e1](int p) {
        return p < 32 ? __shfl_sync(0xffffffffu, e0, p) : __shfl_sync(0xffffffffu, e1, p - 32);
      });
    }
  }
  consumer_sync();  // warp 0 has read the block's lists above
  lists[warp * kMaxTopK + lane] = all.e0;
  lists[warp * kMaxTopK + 32 + lane] = all.e1;
  bad = consumer_sync_or(bad);
  if (warp != 0) return true;
  for (int w = 1; w < kConsumerWarps; w++) top_merge_list(all, lists + w * kMaxTopK, k);

  const int kept = static_cast<int>(min(static_cast<int64_t>(k), a.vocab_limit));
  const float maxf = sample_key_value(static_cast<unsigned>(__shfl_sync(0xffffffffu, all.e0, 0) >> 32));
  if (bad || maxf == -INFINITY) {
    if (lane == 0) fail(b.sync, b.result, b.host, b.launch_epoch, MegakernelError::NonFinite);
    return false;
  }
  const double maxv = maxf;
  const auto weight_of = [&](unsigned long long key, int p) {
    return p < kept ? sample_weight(sample_key_value(static_cast<unsigned>(key >> 32)), maxv, a.temperature,
                                    a.sample_scale)
                    : 0ull;
  };
  // Cumulative weights through positions lane (c0) and 32 + lane (c1).
  const unsigned long long c0 = warp_inclusive_scan_u64(weight_of(all.e0, lane));
  const unsigned long long c1 =
      warp_inclusive_scan_u64(weight_of(all.e1, 32 + lane)) + __shfl_sync(0xffffffffu, c0, 31);
  const auto through = [&](int p) {
    return static_cast<double>(p < 32 ? __shfl_sync(0xffffffffu, c0, p) : __shfl_sync(0xffffffffu, c1, p - 32));
  };
  const double w0 = static_cast<double>(c0), w1 = static_cast<double>(c1);
  int nucleus = kept - 1;
  if (a.top_p < 1.0) {  // the first position whose cumulative weight reaches top_p of the kept weight
    const double x = a.top_p * through(kept - 1);
    nucleus = first_position(lane < kept && w0 >= x, 32 + lane < kept && w1 >= x, nucleus);
  }
  // The first position whose cumulative weight exceeds u · (the nucleus weight); the nucleus's last if rounding
  // leaves none.
  const double target = a.uniforms[step] * through(nucleus);
  const int chosen = first_position(lane <= nucleus && w0 > target, 32 + lane <= nucleus && w1 > target, nucleus);
  const unsigned long long key =
      chosen < 32 ? __shfl_sync(0xffffffffu, all.e0, chosen) : __shfl_sync(0xffffffffu, all.e1, chosen - 32);
  if (lane == 0) publish_token(a, b, static_cast<int>(0xffffffffu - static_cast<unsigned>(key)), step, pos);
  return true;
}

/**
 * The kernel; kSample: the steps sample (a.top_k > 0), else they take the argmax; G: query heads per KV head (the
 * model's, checked by the plan); kScreen: the LM head is screened (a.lm_screen, consume_screen). One
 * instantiation per combination, so that each carries only the code it runs: the argmax kernel no sampling code (with
 * it, greedy steps measured 2–3% slower), each kernel one attention (with all four group sizes in one kernel, its
 * code was 333 KB and 231 registers), and the unscreened argmax kernel no screen (with it, 10 µs per token slower at
 * Qwen3-0.6B positions 1-1024). DESIGN.md, "Shape of a launch".
 */
template <bool kSample, int G, bool kScreen, int kPath, int kPad = -1>
__global__ void __launch_bounds__(kThreads, 1) qwen3_decode_kernel(const __grid_constant__ MegakernelArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];
  const MegakernelDims& d = a.dims;
  Block b;
  b.slots = smem;
  const size_t ring = ring_region_bytes(a);
  b.x = reinterpret_cast<bf16*>(smem + ring);
  b.scratch = reinterpret_cast<float*>(b.x);
  b.qkv_in = reinterpret_cast<bf16*>(b.scratch + kAttnScratchFloats);
  b.res = reinterpret_cast<bf16*>(smem + ring + union_bytes(d));
  uint8_t* misc = reinterpret_cast<uint8_t*>(b.res) + residual_bytes(d);
  b.full = reinterpret_cast<uint64_t*>(misc);
  b.empty = b.full + kMaxSlots;
  b.desc = reinterpret_cast<uint2*>(b.empty + kMaxSlots);
  b.red = reinterpret_cast<float*>(b.desc + kMaxSlots);
  b.flag = reinterpret_cast<int*>(b.red + kMaxG * kConsumerWarps);
  b.sync = static_cast<unsigned*>(a.workspace);
  b.result = a.result;
  b.timeout_ns = a.timeout_ns;
  b.host = a.host;
  b.launch_epoch = a.epoch;
  b.epoch = a.epoch;
  b.nslots =
      a.staged_keys > 0 && a.staged_slots > 0 && static_cast<int>(blockIdx.x) < d.kv_heads ? a.staged_slots : a.slots;

  const int token0 = a.state[0];
  const int pos0 = a.state[1];
  // Cleared before any block can fail: failures only come from waits that outlast timeout_ns.
  if (blockIdx.x == 0 && threadIdx.x == 0) a.result[1] = 0;
  if (pos0 < 0 || static_cast<int64_t>(pos0) + a.steps > a.max_context || token0 < 0 || token0 >= d.vocab) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      fail(b.sync, b.result, b.host, b.launch_epoch,
           pos0 < 0 || static_cast<int64_t>(pos0) + a.steps > a.max_context ? MegakernelError::BadPosition
                                                                            : MegakernelError::BadToken);
    }
    return;  // every block reads the same state: all return
  }
  if (!path_serves<kPath>(a, pos0, a.steps)) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      fail(b.sync, b.result, b.host, b.launch_epoch, MegakernelError::WrongPath);
    return;  // (as above)
  }
  if (threadIdx.x == 0) {
    for (int i = 0; i < a.slots; i++) {
      mbar_init(&b.full[i], 1);
      mbar_init(&b.empty[i], kConsumers);
    }
    mbar_init(misc_barrier(b, kStagedBarrier), 1);
    mbar_init(misc_barrier(b, kStagedFreeBarrier), kConsumers);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    b.flag[0] = 0;
    b.flag[1] = 0;
  }
  __syncthreads();

  if (threadIdx.x >= kConsumers) {
    if (threadIdx.x == kConsumers) produce(a, b, pos0);
    return;
  }

  const Layout& lay = a.layout;
  RingPos at;
  int token = token0;
  const bool quads = a.qkv_quads != 0;
  for (int step = 0; step < a.steps; step++) {
    const int pos = pos0 + step;
    b.epoch = a.epoch + static_cast<unsigned>(step);
    b.attn_skip = attention_skip(a, pos);
    if (step > 0) {
      // The previous step's token, for this step's embedding row. Every block waits for it, also those that do
      // not read the row: it is published after every block's arrival, so once it is seen (and fenced), everything
      // the previous step wrote (the new cache rows above all) is visible here.
      if (threadIdx.x == 0) {
        const int t = token_wait(b.sync, b.result, b.host, b.launch_epoch, b.epoch - 1, b.timeout_ns);
        __threadfence();
        b.flag[2] = t;
        if (t < 0 || t >= d.vocab) b.flag[0] = 1;
      }
      consumer_sync();
      if (b.flag[0] != 0) return;
      token = b.flag[2];
    }
    b.embed_row = static_cast<const bf16*>(a.embed) + static_cast<int64_t>(token) * d.hidden;
    Best best{-INFINITY, INT32_MAX};
    TopK top{0ull, 0ull, 0ull, 0};
    const int len = pos + 1;
    const int chunks = kPath == kPathStaged ? 1 : attention_chunks(a, pos);
    const int chunk_len = (len + chunks - 1) / chunks;

    // This block's attention work item, if any (at most one: items ≤ grid).
    const int item = blockIdx.x < d.kv_heads * chunks && (a.debug & 2) == 0 ? static_cast<int>(blockIdx.x) : -1;
    const int item_g = item < 0 ? 0 : item / chunks, item_c = item < 0 ? 0 : item % chunks;
    const int item_p0 = item_c * chunk_len;
    const int item_p1 = max(item_p0, min(len, item_p0 + chunk_len));
    for (int layer = 0; layer < d.layers; layer++) {
      const MegakernelLayer& L = a.layers[layer];
      const int ev = layer * kMegakernelTraceEventsPerLayer;
      stamp(a, ev);
      // QK_MEGAKERNEL_KV_PREFETCH=1: the cached rows this block's attention will read start towards L2 here (the
      // old default). Off by default: the attention issues its first pass's loads (and stages a short second pass)
      // before it waits for q/k/v, and the prefetch's traffic slowed the residual's hop more than it sped the later
      // passes (without it, 4-10 µs per token faster at positions 512-1024, 35 at 4096).
      if (item >= 0 && a.kv_prefetch != 0)
        prefetch_chunk(L, static_cast<int>(d.kv_heads), item_g, item_p0, min(item_p1, pos));
      // 1. QKV (a block without QKV or O rows, an attention block on a short context, needs neither the normalised
      // input nor the residual here: the gate/up stage reads the residual again)
      if (!skips_stage(kQkv, b.attn_skip)) {
        const void* res_in = layer == 0 ? nullptr : stage_output(a, lay, layer - 1, kDown);
        if (!stage_norm_input(a, b, res_in, static_cast<const bf16*>(L.input_norm), d.hidden, a.eps)) return;
      }
      stamp(a, ev + 1);
      if (!(quads ? consume_gemv<Take::kQuad, kSample>(a, b, lay, kQkv, at, layer, best, top, ev + 2)
                  : consume_gemv<Take::kPair, kSample>(a, b, lay, kQkv, at, layer, best, top, ev + 2)))
        return;
      stamp(a, ev + 3);
      // 2. Attention
      if (item >= 0) {
        // (The staged attention's barrier completes once per layer of each step that uses it.)
        const unsigned parity = static_cast<unsigned>(staged_steps_before(a, pos0, step) * d.layers + layer) & 1u;
        if (!attend<G, !kSample && G <= 3, kPath, kPad>(a, b, lay, layer, item_g, item_c, chunks, item_p0, item_p1, pos,
                                                  ev + 4, parity))
          return;
        // The staged attention over the whole ring: the last layer's is done with the staged rows, so the producer
        // may fill the ring again (every consumer thread arrives once its own accesses to them are done).
        if (layer == d.layers - 1 && skips_stage(kDown, b.attn_skip))
          mbar_arrive(misc_barrier(b, kStagedFreeBarrier));
      } else {
        stamp(a, ev + 4);
        stamp(a, ev + 5);
        stamp(a, ev + 6);
      }
      stamp(a, ev + 7);
      // 3.–5. O projection + residual; RMSNorm + gate/up + SwiGLU; down projection + residual. O and down run in one
      // loop that is not unrolled, so that their input copy and their GEMV are in the kernel's code once: 8 KB less
      // code for every layer to fetch again; 5-15 µs per token faster at positions 1 and 128, a few at 512 and 1024,
      // about 5 slower at 4096.
      // (A loop over all four stages, with the attention inside it, runs out of registers and spills: 50-110 µs per
      // token slower.)
      // Heads of 2…o_merge chunks (query groups of 2) are merged by the O blocks as they gather their input, here,
      // outside the loop below: inside it, the gather's batch of loads spilled.
      const bool o_merged =
          G == 2 && kPath != kPathStaged && chunks > 1 && chunks <= a.o_merge && !skips_stage(kO, b.attn_skip);
      if (o_merged && !stage_merge_input(a, b, static_cast<uint8_t*>(a.workspace) + lay.omerge +
                                                   lay.omerge_layer * layer,
                                         chunks, static_cast<int>(d.q_heads)))
        return;
#pragma unroll 1
      for (int h = 0; h < 2; h++) {
        const int stage = h == 0 ? kO : kDown, sev = ev + (h == 0 ? 8 : 14);
        // (A block without O rows, an attention block on a short context, does not need the attention output; nor
        // does one that merged it above.)
        if (!skips_stage(stage, b.attn_skip) && !(h == 0 && o_merged) &&
            !stage_copy_input(a, b, stage_output(a, lay, layer, h == 0 ? kAttention : kGateUp),
                              h == 0 ? d.q_heads * kD : d.ffn))
          return;
        stamp(a, sev);
        if (!consume_gemv<Take::kPair, kSample>(a, b, lay, stage, at, layer, best, top, sev + 1)) return;
        stamp(a, sev + 2);
        if (h == 0) {
          // (A block without gate/up or down rows, the staged attention's over the whole ring, needs neither the
          // normalised input nor the residual that the down epilogue adds.)
          if (!(skips_stage(kGateUp, b.attn_skip) && skips_stage(kDown, b.attn_skip)) &&
              !stage_norm_input(a, b, stage_output(a, lay, layer, kO), static_cast<const bf16*>(L.post_norm),
                                d.hidden, a.eps))
            return;
          stamp(a, ev + 11);
          if (!consume_gemv<Take::kGateUp, kSample>(a, b, lay, kGateUp, at, layer, best, top, ev + 12)) return;
          stamp(a, ev + 13);
        }
      }
    }

    // Final norm, LM head, argmax.
    const int ev_end = static_cast<int>(d.layers) * kMegakernelTraceEventsPerLayer;
    if (!stage_norm_input(a, b, stage_output(a, lay, static_cast<int>(d.layers) - 1, kDown),
                          static_cast<const bf16*>(a.final_norm), d.hidden, a.eps))
      return;
    stamp(a, ev_end);
    if constexpr (kScreen) {
      if (!consume_screen<kSample>(a, b, at, best, top)) return;
    } else if (!consume_gemv<Take::kPair, kSample>(a, b, lay, -1, at, -1, best, top, -1)) {
      return;
    }
    stamp(a, ev_end + 1);
    bool ok;
    if constexpr (kSample) ok = step_sample(a, b, lay, top, step, pos);
    else ok = step_argmax(a, b, lay, best, step, pos);
    if (step + 1 < a.steps && !block_ok(b, ok)) return;
  }
}

using DecodeKernel = void (*)(MegakernelArgs);

/**
 * The kernel for a model's query group (1 to 4: the plan refuses others), the steps' draw, (argmax steps) whether
 * the LM head is screened, and the attention path (groups of 2 only: the others attend by chunks alone).
 */
template <int G, int kPath>
DecodeKernel decode_kernel_of(bool sample, bool screen) {
  if (sample) return screen ? qwen3_decode_kernel<true, G, true, kPath> : qwen3_decode_kernel<true, G, false, kPath>;
  return screen ? qwen3_decode_kernel<false, G, true, kPath> : qwen3_decode_kernel<false, G, false, kPath>;
}

DecodeKernel decode_kernel(const MegakernelDims& d, bool sample, bool screen, int path) {
  switch (d.q_heads / d.kv_heads) {
    case 1: return decode_kernel_of<1, kPathBoth>(sample, screen);
    case 2:
      return path == kPathStaged ? decode_kernel_of<2, kPathStaged>(sample, screen)
                                 : decode_kernel_of<2, kPathBoth>(sample, screen);
    case 3: return decode_kernel_of<3, kPathBoth>(sample, screen);
    default: return decode_kernel_of<4, kPathBoth>(sample, screen);
  }
}

#ifdef QK_MEGAKERNEL_PAD_SEARCH
// A build for the placement search (QK_MEGAKERNEL_PAD_SEARCH=1 in the build's environment; DESIGN.md,
// "Code placement"): the greedy screened kernels of query groups of 2, of each path, with each padding below;
// QK_MEGAKERNEL_PAD=N (read at each launch) runs the staged one with N instructions where a launch runs the staged
// kernel, QK_MEGAKERNEL_PAD_BOTH=N the one with both paths where a launch runs that.
constexpr int kPadSearch[] = {0,   128,  256,  384,  493,  512,  640,  736, 768, 896,
                               1024, 1152, 1280, 1408, 1536, 1664, 1792, 1920};
constexpr int kPadSearchCount = static_cast<int>(sizeof(kPadSearch) / sizeof(kPadSearch[0]));

template <int kPath, int... I>
void pad_kernels_of(DecodeKernel* out, std::integer_sequence<int, I...>) {
  ((out[I] = qwen3_decode_kernel<false, 2, true, kPath, kPadSearch[I]>), ...);
}

/** Every kernel of the search: the staged ones, then those with both paths. */
void pad_kernels(DecodeKernel* out) {
  pad_kernels_of<kPathStaged>(out, std::make_integer_sequence<int, kPadSearchCount>{});
  pad_kernels_of<kPathBoth>(out + kPadSearchCount, std::make_integer_sequence<int, kPadSearchCount>{});
}

/** The search's kernel for QK_MEGAKERNEL_PAD (_BOTH), or nullptr where it is unset or no padding of the search. */
DecodeKernel pad_kernel(int path, bool sample, bool screen) {
  const char* v = std::getenv(path == kPathStaged ? "QK_MEGAKERNEL_PAD" : "QK_MEGAKERNEL_PAD_BOTH");
  if (v == nullptr || sample || !screen) return nullptr;
  const int pad = std::atoi(v);
  DecodeKernel all[2 * kPadSearchCount];
  pad_kernels(all);
  for (int i = 0; i < kPadSearchCount; i++)
    if (kPadSearch[i] == pad) return all[(path == kPathStaged ? 0 : kPadSearchCount) + i];
  return nullptr;
}
#endif

/** The path a launch's kernel is compiled with: the staged attention alone where every step takes it, else both. */
int launch_path(const MegakernelArgs& args) {
  return args.path_kernels != 0 && args.position >= 0 && args.dims.q_heads == 2 * args.dims.kv_heads &&
                 path_serves<kPathStaged>(args, args.position, args.steps)
             ? kPathStaged
             : kPathBoth;
}

}  // namespace

cudaError_t megakernel_plan(const MegakernelDims& d, MegakernelPlan* plan, const char** why, size_t slot_bytes) {
  *why = nullptr;
  auto refuse = [&](const char* reason) {
    *why = reason;
    return cudaErrorNotSupported;
  };
  if (d.hidden <= 0 || d.q_heads <= 0 || d.kv_heads <= 0 || d.ffn <= 0 || d.layers <= 0 || d.vocab <= 0)
    return refuse("every size must be positive");
  if (d.layers > kMegakernelMaxLayers) return refuse("the model has more layers than the megakernel's 40");
  if (d.q_heads % d.kv_heads != 0) return refuse("query heads must be a multiple of KV heads");
  if (d.q_heads / d.kv_heads > kMegakernelMaxGroup)
    return refuse("more than 4 query heads per KV head (Qwen3-14B and larger) are not served");
  if (d.kv_heads > kMaxKvHeads) return refuse("too many KV heads");
  if (d.hidden % 8 != 0 || d.ffn % 8 != 0) return refuse("hidden and FFN sizes must be multiples of 8");
  if (d.vocab > (1 << 24)) return refuse("a vocabulary of more than 2^24 ids is not served");
  if (d.hidden > (1 << 20) || d.ffn > (1 << 20)) return refuse("hidden and FFN sizes above 2^20 are not served");
  // Ring slots: the requested size (KB multiples), at least the widest tile of one pair of outputs (two rows; two
  // gate and two up rows for gate/up), and as many as fit beside the rest of shared memory.
  const int64_t widest = std::max({4 * d.hidden * 2, 2 * d.ffn * 2, 2 * d.q_heads * kD * 2});
  size_t slot = slot_bytes == 0 ? kDefaultSlotBytes : slot_bytes;
  slot = std::max(slot, static_cast<size_t>(widest));
  slot = align_up(slot, 1024);
  const size_t fixed = fixed_smem_bytes(d);
  auto ring_slots = [&](size_t bytes) {
    return fixed < kSmemLimit ? std::min<size_t>(kMaxSlots, (kSmemLimit - fixed) / bytes) : 0;
  };
  const size_t slots = ring_slots(slot);
  if (slots < 2) return refuse("a pair of weight rows is too wide for two shared-memory ring slots");
  // The short-context ring: only with the default slot size (a requested size is a tuning knob, kept for every
  // launch) and where the default was not already widened to the model's rows.
  const size_t short_slots = slot_bytes == 0 && slot == kDefaultSlotBytes ? ring_slots(kShortSlotBytes) : 0;
  plan->short_slots = short_slots >= 2 ? static_cast<int>(short_slots) : 0;
  plan->short_slot_bytes = plan->short_slots > 0 ? kShortSlotBytes : 0;
  plan->short_until = plan->short_slots > 0 ? kShortRingUntil : 0;
  size_t smem = std::max(slots * slot, plan->short_slots * plan->short_slot_bytes) + fixed;
  int sms = 0;
  QK_RETURN_IF_ERROR(sm_count(&sms));
  // The kernels' dynamic shared memory cap is the device's whole opt-in limit, not this plan's size: a kernel
  // function is shared by every instance of its query group (models, rings, QK_MEGAKERNEL_SLOT_KB), and a later,
  // smaller plan must not lower the cap below an earlier instance's launches (cudaErrorInvalidValue).
  int dev = 0, optin = 0;
  QK_RETURN_IF_ERROR(cudaGetDevice(&dev));
  QK_RETURN_IF_ERROR(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  int per_sm = 1;
  // (every kernel of the group: a launch may run any; groups other than 2 have one path, listed twice; then, in a
  // placement-search build, the search's kernels)
#ifdef QK_MEGAKERNEL_PAD_SEARCH
  DecodeKernel kernels[8 + 2 * kPadSearchCount];
  pad_kernels(kernels + 8);
#else
  DecodeKernel kernels[8];
#endif
  for (int k = 0; k < 8; k++) kernels[k] = decode_kernel(d, (k & 1) != 0, (k & 2) != 0, k >> 2);
  int min_cap = optin;
  for (const DecodeKernel kernel : kernels) {
    cudaFuncAttributes attr{};
    QK_RETURN_IF_ERROR(cudaFuncGetAttributes(&attr, kernel));
    // (the kernel's static shared memory counts too)
    min_cap = std::min(min_cap, optin - static_cast<int>(attr.sharedSizeBytes));
  }
  // The staged attention over the whole ring (query groups of 2): as many keys as fit in the ring's place and what
  // the kernels' shared memory leaves beside it.
  plan->staged_ring_keys = 0;
  if (d.q_heads == 2 * d.kv_heads && min_cap > 0 && fixed < static_cast<size_t>(min_cap)) {
    const int64_t room = static_cast<int64_t>(static_cast<size_t>(min_cap) - fixed);
    const int64_t keys = room / megakernel_staged_bytes(1) / 16 * 16;
    plan->staged_ring_keys = static_cast<int>(std::min<int64_t>(keys, kMegakernelStagedMaxKeys));
    smem = std::max(smem, static_cast<size_t>(megakernel_staged_bytes(plan->staged_ring_keys)) + fixed);
  }
  for (const DecodeKernel kernel : kernels) {
    cudaFuncAttributes attr{};
    QK_RETURN_IF_ERROR(cudaFuncGetAttributes(&attr, kernel));
    const int cap = optin - static_cast<int>(attr.sharedSizeBytes);  // (the kernel's static shared memory counts too)
    if (cap <= 0 || smem > static_cast<size_t>(cap)) {
      *why = "the kernel needs more shared memory per block than this GPU offers";
      return cudaErrorInvalidConfiguration;
    }
    QK_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, cap));
    int n = 0;
    QK_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, smem));
    per_sm = std::min(per_sm, n);
  }
  if (per_sm < 1) {
    *why = "one block per SM cannot be resident (shared memory or registers)";
    return cudaErrorInvalidConfiguration;
  }
  plan->grid = sms;
  plan->threads = kThreads;
  plan->smem_bytes = smem;
  plan->slots = static_cast<int>(slots);
  plan->slot_bytes = slot;
  // Claimed tiles balance the blocks when each has many tiles per stage; with few (0.6B: about 2 per QKV stage), the
  // claims' round trips cost more than the balance gains (on an H100: 8B 167.7 → 174.7 tok/s, 0.6B 1,168 → 824).
  const double layer_bytes = 2.0 * static_cast<double>(d.hidden) *
                             static_cast<double>((d.q_heads + 2 * d.kv_heads) * kD + d.q_heads * kD + 3 * d.ffn);
  plan->claim = layer_bytes / sms >= kClaimBytesPerBlock;
  // QKV in four-row turns where every ring's tiles hold at least four pairs (Qwen3-0.6B); with fewer, a turn of four
  // would mostly read a lone pair twice.
  plan->qkv_quads = tile_units_for(d.hidden, 1, static_cast<int64_t>(slot)) >= 8 &&
                    (plan->short_slots == 0 || tile_units_for(d.hidden, 1, static_cast<int64_t>(kShortSlotBytes)) >= 8);
  plan->max_chunks = static_cast<int>(sms / d.kv_heads) > 0 ? static_cast<int>(sms / d.kv_heads) : 1;
  // The O blocks merge heads of up to kMegakernelOMergeMax chunks where the query group is 2 (Qwen3-0.6B, 1.7B; in a
  // group of 1 the gather spilled), the chunks' records fit one batch of loads per consumer thread, and x and the
  // staged records fit the union (stage_merge_input).
  plan->o_merge = 0;
  for (int n = 2; n <= kMegakernelOMergeMax && d.q_heads == 2 * d.kv_heads; n++) {
    const int64_t units = n * static_cast<int64_t>(omerge_record_words(static_cast<int>(d.q_heads))) / 2;
    if (units <= kOMergeBatch * kConsumers && d.q_heads * kD * 2 + units * 8 <= static_cast<int64_t>(union_bytes(d)))
      plan->o_merge = n;
  }
  // Up to half the grid attends without QKV or O rows on models that take fixed shares (0.6B: up to 8 chunks per KV
  // head; a quarter measured 20-35 µs per token slower at positions 224-447); a quarter on models that claim tiles,
  // where the others' bandwidth is the limit.
  plan->skip_items = plan->claim ? sms / 4 : sms / 2;
  // Launches may screen the LM head (MegakernelArgs::lm_screen) where the block's rows are a fixed share
  // (consume_screen keeps a bound per row, after x and its int16 copy in the union, then the warps' lists of lower
  // bounds for sampling) and rows are 16-byte pieces.
  const int64_t share = 2 * (((d.vocab + 1) / 2 + sms - 1) / sms);
  const int64_t screen_union = 4 * d.hidden + 4 * share + static_cast<int64_t>(kConsumerWarps) * kMaxTopK * 8;
  plan->screen_rows = !plan->claim && d.hidden % 16 == 0 && screen_union <= static_cast<int64_t>(union_bytes(d))
                          ? static_cast<int>(share)
                          : 0;
  if (sms < d.kv_heads) return refuse("the GPU has fewer SMs than the model has KV heads");
  plan->workspace_bytes = workspace_layout(d, sms, plan->max_chunks).total;
  return cudaSuccess;
}

int megakernel_launch_path(const MegakernelArgs& args) { return launch_path(args); }

cudaError_t launch_megakernel(const MegakernelArgs& args, const MegakernelPlan& plan, cudaStream_t stream) {
  const bool long_ring = args.slots == plan.slots && args.slot_bytes == static_cast<int64_t>(plan.slot_bytes);
  const bool short_ring = plan.short_until > 0 && args.slots == plan.short_slots &&
                          args.slot_bytes == static_cast<int64_t>(plan.short_slot_bytes);
  if ((!long_ring && !short_ring) || args.steps < 1 || args.steps > kMegakernelMaxSteps || args.inflight < 0 ||
      args.lm_inflight < 0 || args.o_merge < 0 || args.o_merge > plan.o_merge || args.top_k < 0 ||
      args.top_k > kMegakernelMaxTopK ||
      args.dims.kv_heads <= 0 || args.dims.q_heads % args.dims.kv_heads != 0 ||
      args.dims.q_heads / args.dims.kv_heads < 1 || args.dims.q_heads / args.dims.kv_heads > kMegakernelMaxGroup)
    return cudaErrorInvalidValue;
  if (args.lm_screen != nullptr && (args.claim != 0 || plan.screen_rows <= 0))
    return cudaErrorInvalidValue;
  // The staged attention: query groups of 2, fixed shares, whole 16-key tiles, and rows that fit past the ring it keeps
  // or, over the whole ring, in its place (and then its blocks must skip the layers' rows: fewer items than the grid,
  // and no more than skip_items).
  const bool whole_ring = args.staged_slots == 0;
  if (args.staged_keys != 0 &&
      (args.staged_keys < 0 || args.staged_keys > kMegakernelStagedMaxKeys || args.staged_keys % 16 != 0 ||
       args.dims.q_heads != 2 * args.dims.kv_heads || args.claim != 0 || args.staged_from < 1 ||
       (whole_ring ? args.staged_keys > plan.staged_ring_keys || args.dims.kv_heads > args.skip_items ||
                         args.dims.kv_heads >= plan.grid
                   : args.staged_slots < 2 ||
                         args.staged_slots != megakernel_staged_slots(args.slots, args.slot_bytes, args.staged_keys))))
    return cudaErrorInvalidValue;
  if (args.top_k > 0) {
    if (!(args.temperature > 0.0) || !std::isfinite(args.temperature) || !(args.top_p > 0.0 && args.top_p <= 1.0) ||
        !(args.sample_scale > 0.0))
      return cudaErrorInvalidValue;
    for (int s = 0; s < args.steps; s++)
      if (!(args.uniforms[s] >= 0.0 && args.uniforms[s] < 1.0)) return cudaErrorInvalidValue;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(plan.grid);
  config.blockDim = dim3(plan.threads);
  config.dynamicSmemBytes = plan.smem_bytes;
  config.stream = stream;
  MegakernelArgs launch = args;
  launch.layout = workspace_layout(args.dims, plan.grid, plan.max_chunks);
  const int path = launch_path(args);
  DecodeKernel kernel = decode_kernel(args.dims, args.top_k > 0, args.lm_screen != nullptr, path);
#ifdef QK_MEGAKERNEL_PAD_SEARCH
  if (args.dims.q_heads == 2 * args.dims.kv_heads) {
    const DecodeKernel padded = pad_kernel(path, args.top_k > 0, args.lm_screen != nullptr);
    if (padded != nullptr) kernel = padded;
  }
#endif
  const cudaError_t launched = cudaLaunchKernelEx(&config, kernel, launch);
  const cudaError_t last = cudaGetLastError();
  return launched != cudaSuccess ? launched : last;
}

namespace {

/** One warp per row of the LM head: its int8 screen row (consume_screen describes what the floats bound). */
__global__ void screen_build_kernel(const bf16* w, int64_t vocab, int hidden, uint8_t* out) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (row >= vocab) return;
  const bf16* src = w + row * hidden;
  uint8_t* dst = out + row * (hidden + kScreenMeta);
  float m = 0.f;
  bool bad = false;
  for (int i = lane; i < hidden; i += 32) {
    const float v = bf(src[i]);
    bad |= !isfinite(v);
    m = fmaxf(m, fabsf(v));
  }
  m = warp_max(m);
  bad = __any_sync(0xffffffffu, bad);
  const float s = bad ? 0.f : m / 127.f;
  double e2 = 0.0, n2 = 0.0;
  for (int i = lane; i < hidden; i += 32) {
    const float v = bf(src[i]);
    const float q = s > 0.f ? fminf(fmaxf(rintf(v / s), -127.f), 127.f) : 0.f;
    dst[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    const double e = static_cast<double>(v) - static_cast<double>(s) * static_cast<double>(q);  // exact
    e2 += e * e;
    n2 += static_cast<double>(v) * static_cast<double>(v);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    e2 += __shfl_xor_sync(0xffffffffu, e2, o);
    n2 += __shfl_xor_sync(0xffffffffu, n2, o);
  }
  if (lane == 0) {
    const double e = sqrt(e2) * (1.0 + 1e-9), n = sqrt(n2) * (1.0 + 1e-9) + e;
    const float eu = bad ? INFINITY : __double2float_ru(e), nu = bad ? INFINITY : __double2float_ru(n);
    *reinterpret_cast<float4*>(dst + hidden) = make_float4(s, eu, nu, 0.f);
  }
}

}  // namespace

cudaError_t megakernel_screen_build(const void* lm_head, int64_t vocab, int64_t hidden, void* out,
                                    cudaStream_t stream) {
  if (lm_head == nullptr || out == nullptr || vocab <= 0 || vocab > (1 << 24) || hidden <= 0 || hidden % 16 != 0 ||
      hidden > (1 << 20) || (reinterpret_cast<uintptr_t>(out) & 15) != 0)
    return cudaErrorInvalidValue;
  constexpr int kRowsPerBlock = 8;
  const unsigned blocks = static_cast<unsigned>((vocab + kRowsPerBlock - 1) / kRowsPerBlock);
  screen_build_kernel<<<blocks, kRowsPerBlock * 32, 0, stream>>>(static_cast<const bf16*>(lm_head), vocab,
                                                                  static_cast<int>(hidden), static_cast<uint8_t*>(out));
  return cudaGetLastError();
}

}  // namespace qk
