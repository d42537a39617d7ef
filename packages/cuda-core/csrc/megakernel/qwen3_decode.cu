// The Qwen3 decode megakernel: a whole batch-1 decode step (embedding row, every layer, final norm, LM head,
// argmax) in one persistent, non-cooperative kernel.
//
// Shape of a launch: one block per SM, all resident (checked with the occupancy API before the first launch).
// Each block has 16 consumer warps that compute and one producer warp that streams weights. Every weight matrix is
// cut by rows into one contiguous slice per block, and each slice into tiles of at most one 48 KB shared-memory
// slot. The producer walks the block's slices of the whole step in order (QKV, O, gate/up, down of each layer, then
// the LM head) and copies each tile into a ring of four slots with one TMA bulk copy (16-byte aligned, L1
// bypassed), completing on the slot's "full" mbarrier. Weights do not depend on activations, so the producer runs
// up to four tiles ahead of the consumers, across the grid barriers and the attention stage: while the blocks
// wait for each other, HBM keeps streaming the next weights. That is what makes the barriers cheap.
//
// Stages of a layer, each followed by a grid barrier (an arrival counter per barrier, spun on by one thread):
//   1. QKV: RMSNorm of the residual recomputed by every block (no barrier for it), then the block's QKV rows.
//   2. Attention: work items (KV head, chunk of positions). The block of an item QK-norms and RoPEs the group's
//      query heads itself (redundantly across chunks: 2–4 heads of 128); the block whose chunk holds the new
//      position also normalises/rotates the new key and appends key and value to the cache. Chunks of one head
//      are merged by whichever block finishes last (an arrival counter per KV head, in fixed chunk order, so the
//      result is the same bits every run).
//   3. O projection, residual add in the epilogue (each residual row has one owner block).
//   4. RMSNorm (recomputed per block) + gate/up rows of the block's FFN units, SwiGLU in the epilogue.
//   5. Down projection, residual add in the epilogue.
// Then the final RMSNorm and the LM head rows, each block keeping its best logit; the last block to arrive reduces
// the blocks' bests and writes the token and the next step's state. Rounding follows the layered engine (and HF):
// every projection output, norm output, SwiGLU output and residual sum is rounded to bf16 once.
//
// Every wait (grid barriers, mbarriers) is bounded by `timeout_ns`: a block that times out records an error code
// and an abort flag that the other blocks see, and the kernel returns; JS gets an error, never a hung process.
#include <cuda_bf16.h>

#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/numeric.cuh"
#include "qwen3_decode.h"

namespace qk {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kConsumerWarps = 8;  // 16 spilled registers (the attention stage) to local memory
constexpr int kConsumers = kConsumerWarps * 32;
constexpr int kThreads = kConsumers + 32;  // + the producer warp
constexpr int kSlots = 4;
constexpr int kSlotBytes = 48 * 1024;
constexpr int kD = static_cast<int>(kMegakernelHeadDim);
constexpr int kHalf = kD / 2;
constexpr int kMaxG = static_cast<int>(kMegakernelMaxGroup);
constexpr int kSubChunk = kConsumers / 4;  // positions per attention pass: four lanes per key
constexpr int kValueSlots = kConsumers / 16;  // value rows in flight per pass step: sixteen lanes per row
constexpr int kMinChunk = kSubChunk;    // positions per attention work item, at least: one pass
constexpr float kLog2e = 1.4426950408889634f;

// Sync words at the start of the workspace (u32).
constexpr int kAbortWord = 0;
constexpr int kArgmaxCounter = 1;
constexpr int kMergeCounters = 2;       // one per KV head
constexpr int kMaxKvHeads = 62;
constexpr int kBarrierCounters = 64;    // five per layer
constexpr int kBarriersPerLayer = 5;
constexpr size_t kSyncBytes = 2048;
static_assert(kBarrierCounters + kBarriersPerLayer * kMegakernelMaxLayers <= static_cast<int>(kSyncBytes / 4));

enum Stage : int { kQkv = 0, kAttention = 1, kO = 2, kGateUp = 3, kDown = 4 };

/** Where each buffer lives in the workspace. */
struct Layout {
  size_t residual, qkv, attn, act, part_acc, part_ml, arg, total;
};

__host__ __device__ inline size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

__host__ __device__ inline Layout workspace_layout(const MegakernelDims& d, int grid, int max_chunks) {
  const size_t group = static_cast<size_t>(d.q_heads / d.kv_heads);
  Layout l{};
  size_t at = kSyncBytes;
  l.residual = at;
  at = align_up(at + d.hidden * 2, 256);
  l.qkv = at;
  at = align_up(at + (d.q_heads + 2 * d.kv_heads) * kD * 2, 256);
  l.attn = at;
  at = align_up(at + d.q_heads * kD * 2, 256);
  l.act = at;
  at = align_up(at + d.ffn * 2, 256);
  l.part_acc = at;
  at = align_up(at + d.kv_heads * max_chunks * group * kD * 4, 256);
  l.part_ml = at;
  at = align_up(at + d.kv_heads * max_chunks * group * 2 * 4, 256);
  l.arg = at;
  at = align_up(at + static_cast<size_t>(grid) * 8, 256);
  l.total = at;
  return l;
}

/** Elements of the block's input-vector buffer: the widest GEMV input. */
__host__ __device__ inline int64_t x_elems(const MegakernelDims& d) {
  int64_t n = d.hidden > d.ffn ? d.hidden : d.ffn;
  return n > d.q_heads * kD ? n : d.q_heads * kD;
}

/** Attention scratch (floats): roped queries, then the pass's weights, reused for the final [8][G·128] sums. */
constexpr int kAttnScratchFloats = kMaxG * kD + 8 * kMaxG * kD;

__host__ __device__ inline size_t union_bytes(const MegakernelDims& d) {
  const size_t x = static_cast<size_t>(x_elems(d)) * 2;
  const size_t a = static_cast<size_t>(kAttnScratchFloats) * 4;
  return align_up(x > a ? x : a, 128);
}

constexpr size_t kMiscBytes = 1024;  // mbarriers, reduction scratch, flags

size_t smem_bytes(const MegakernelDims& d) {
  return static_cast<size_t>(kSlots) * kSlotBytes + union_bytes(d) + kMiscBytes;
}

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

__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
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

/** One TMA bulk copy global → shared, completing `bytes` on `bar`. */
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned ld_volatile(const unsigned* p) {
  unsigned v;
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ float bf(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ bf16 to_bf(float v) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ float round_bf(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

/** Loads 8 bf16 from global memory at the L2 (written by other blocks during this launch: L1 may be stale). */
__device__ __forceinline__ uint4 ld_cg16(const void* p) { return __ldcg(reinterpret_cast<const uint4*>(p)); }

__device__ __forceinline__ void unpack8(const uint4& u, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 x = __bfloat1622float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

/** Dot of 8 bf16 weights with 8 bf16 inputs, accumulated into `acc`. */
__device__ __forceinline__ float dot8(const uint4& w, const uint4& x, float acc) {
  const __nv_bfloat162* a = reinterpret_cast<const __nv_bfloat162*>(&w);
  const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&x);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 fa = __bfloat1622float2(a[i]);
    const float2 fb = __bfloat1622float2(b[i]);
    acc = fmaf(fa.x, fb.x, acc);
    acc = fmaf(fa.y, fb.y, acc);
  }
  return acc;
}

// ---------------------------------------------------------------------------------------------------------------
// The block's share of a stage: units [u0, u1) of `units`, cut into tiles that fit one slot.

struct StageShape {
  const bf16* w;      // weight rows (gate/up: the gate rows; the up rows follow `up_offset` rows later)
  int64_t units;      // outputs (gate/up: SwiGLU outputs, two weight rows each)
  int64_t k;          // columns
  int64_t up_offset;  // gate/up only: rows between a gate row and its up row
  int rows_per_unit;  // 1, or 2 for gate/up
};

__device__ __forceinline__ int tile_units(const StageShape& s) {
  return static_cast<int>(kSlotBytes / (s.k * 2 * s.rows_per_unit));
}

__device__ __forceinline__ void block_range(int64_t n, int64_t& u0, int64_t& u1) {
  u0 = n * blockIdx.x / gridDim.x;
  u1 = n * (blockIdx.x + 1) / gridDim.x;
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
    default:  // the LM head
      return {static_cast<const bf16*>(a.lm_head), d.vocab, d.hidden, 0, 1};
  }
}

/** Shared state of one block. */
struct Block {
  uint8_t* slots;
  uint64_t* full;   // [kSlots]
  uint64_t* empty;  // [kSlots]
  float* red;       // [64] reduction scratch
  int* flag;        // [0] abort seen by this block, [1] merge winner
  bf16* x;          // the stage's input vector (union with the attention scratch)
  float* scratch;   // attention scratch (same memory as x)
  unsigned* sync;   // the workspace's sync words
  const bf16* embed_row;  // the step's token row: layer 0's residual
  uint64_t timeout_ns;
};

/** Records `code` as the launch's error (first writer wins) and raises the abort flag every block polls. */
__device__ void fail(const MegakernelArgs& a, const Block& b, MegakernelError code) {
  atomicCAS(reinterpret_cast<int*>(a.result + 1), 0, static_cast<int>(code));
  atomicExch(b.sync + kAbortWord, 1u);
}

/** Waits for an mbarrier phase; false on timeout or when another block aborted. */
__device__ bool mbar_wait(const MegakernelArgs& a, const Block& b, uint64_t* bar, unsigned parity) {
  if (mbar_try_wait(bar, parity)) return true;
  const uint64_t start = now_ns();
  for (unsigned i = 1;; i++) {
    if (mbar_try_wait(bar, parity)) return true;
    if ((i & 63) == 0) {
      if (ld_volatile(b.sync + kAbortWord) != 0) return false;
      if (now_ns() - start > b.timeout_ns) {
        fail(a, b, MegakernelError::Timeout);
        return false;
      }
    }
  }
}

/**
 * Grid barrier `index` of this launch (consumers only): every block arrives once; one thread spins until all have.
 * Returns false when the launch is aborting (this block timed out, or another did).
 */
__device__ bool grid_barrier(const MegakernelArgs& a, const Block& b, int index) {
  consumer_sync();
  if (threadIdx.x == 0) {
    unsigned* counter = b.sync + kBarrierCounters + index;
    const unsigned target = a.epoch * gridDim.x;
    // Release: the block's writes (ordered before this by the consumer barrier) are visible to whoever acquires.
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
    bool ok = true;
    const uint64_t start = now_ns();
    for (unsigned i = 1; static_cast<int>(ld_acquire(counter) - target) < 0; i++) {
      if ((i & 255) == 0) {
        if (ld_volatile(b.sync + kAbortWord) != 0) {
          ok = false;
          break;
        }
        if (now_ns() - start > b.timeout_ns) {
          fail(a, b, MegakernelError::Timeout);
          ok = false;
          break;
        }
      }
    }
    b.flag[0] = ok ? 0 : 1;
  }
  consumer_sync();
  return b.flag[0] == 0;
}

/** Sum (or max) over the consumer threads of G values at once; every consumer gets the results in `out`. */
template <bool kMax>
__device__ void consumer_reduce(const Block& b, float (&v)[kMaxG], int groups, float (&out)[kMaxG]) {
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

/** x = bf16(rmsnorm(src) · weight) into the block's input buffer (every block recomputes it: no barrier). */
__device__ void stage_norm_input(const Block& b, const bf16* src, const bf16* weight, int64_t n, float eps) {
  // Hidden sizes up to 2 × 4096 stay in registers between the sum of squares and the scaling (one L2 round trip).
  constexpr int kHeld = 2;
  uint4 held[kHeld];
  float ss = 0.f;
#pragma unroll
  for (int r = 0; r < kHeld; r++) {
    const int64_t i = (static_cast<int64_t>(threadIdx.x) + static_cast<int64_t>(r) * kConsumers) * 8;
    if (i < n) held[r] = ld_cg16(src + i);
  }
#pragma unroll
  for (int r = 0; r < kHeld; r++) {
    const int64_t i = (static_cast<int64_t>(threadIdx.x) + static_cast<int64_t>(r) * kConsumers) * 8;
    if (i < n) {
      float f[8];
      unpack8(held[r], f);
#pragma unroll
      for (int j = 0; j < 8; j++) ss = fmaf(f[j], f[j], ss);
    }
  }
  for (int64_t i = (static_cast<int64_t>(threadIdx.x) + kHeld * kConsumers) * 8; i < n; i += kConsumers * 8) {
    float f[8];
    unpack8(ld_cg16(src + i), f);
#pragma unroll
    for (int j = 0; j < 8; j++) ss = fmaf(f[j], f[j], ss);
  }
  float v[kMaxG] = {ss}, total[kMaxG];
  consumer_reduce<false>(b, v, 1, total);
  const float inv = rsqrtf(total[0] / static_cast<float>(n) + eps);
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * 8, r = 0; i < n; i += kConsumers * 8, r++) {
    float f[8], w[8];
    unpack8(r < kHeld ? held[r < kHeld ? r : 0] : ld_cg16(src + i), f);
    unpack8(*reinterpret_cast<const uint4*>(weight + i), w);
    Vec<bf16> out;
#pragma unroll
    for (int j = 0; j < 8; j++) out.v[j] = to_bf(f[j] * inv * w[j]);
    *reinterpret_cast<Vec<bf16>*>(b.x + i) = out;
  }
  consumer_sync();
}

/** x = src (bf16, written by other blocks this launch). */
__device__ void stage_copy_input(const Block& b, const bf16* src, int64_t n) {
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * 8; i < n; i += kConsumers * 8)
    *reinterpret_cast<uint4*>(b.x + i) = ld_cg16(src + i);
  consumer_sync();
}

/** Records trace stamp `event` of this block (consumer thread 0; only when tracing). */
__device__ __forceinline__ void stamp(const MegakernelArgs& a, int event) {
  if (a.trace != nullptr && threadIdx.x == 0)
    a.trace[static_cast<int64_t>(blockIdx.x) * megakernel_trace_events(a.dims.layers) + event] = now_ns();
}

/** Asks L2 for the cache rows [p0, p1) of KV head `g` (K and V, 256 bytes each) that attention will read. */
__device__ void prefetch_chunk(const MegakernelLayer& L, int kv_heads, int g, int p0, int p1) {
  for (int p = p0 + static_cast<int>(threadIdx.x); p < p1; p += kConsumers) {
    const int64_t at = (static_cast<int64_t>(p) * kv_heads + g) * kD;
    prefetch_l2(static_cast<const bf16*>(L.k_cache) + at, kD * 2);
    prefetch_l2(static_cast<const bf16*>(L.v_cache) + at, kD * 2);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Producer: the block's weight tiles of the whole step, in consumption order.

/** Walks the block's weight tiles of a whole step in consumption order (QKV, O, gate/up, down per layer; LM head). */
struct TileCursor {
  int layer = 0, stage = 0;
  int64_t t0 = 0, u1 = 0;
  int per = 1;
  StageShape s{};
  bool done = false;

  __device__ void open(const MegakernelArgs& a) {
    const bool lm = layer == a.dims.layers;
    s = stage_shape(a, lm ? -1 : layer, lm ? -1 : stage);
    int64_t u0;
    block_range(s.units, u0, u1);
    t0 = u0;
    per = tile_units(s);
  }
  /** Moves to the first tile at or after the current position (skipping stages this block has no rows of). */
  __device__ void settle(const MegakernelArgs& a) {
    while (!done && t0 >= u1) {
      if (layer == a.dims.layers) {
        done = true;
        return;
      }
      stage = stage == kQkv ? kO : stage + 1;  // the attention stage streams no weights
      if (stage > kDown) {
        stage = kQkv;
        layer++;
      }
      open(a);
    }
  }
  __device__ void start(const MegakernelArgs& a) {
    open(a);
    settle(a);
  }
  __device__ void next(const MegakernelArgs& a) {
    t0 += per;
    settle(a);
  }
  __device__ int64_t units() const { return (u1 - t0) < per ? (u1 - t0) : per; }
};

__device__ void produce(const MegakernelArgs& a, const Block& b) {
  // (Asking L2 for tiles further ahead than the ring was measured slower: see NOTES.md.)
  TileCursor cur;
  cur.start(a);
  for (unsigned seq = 0; !cur.done; seq++, cur.next(a)) {
    const int slot = static_cast<int>(seq % kSlots);
    const unsigned round = seq / kSlots;
    if (!mbar_wait(a, b, &b.empty[slot], (round & 1) ^ 1)) return;
    // The consumers' reads of this slot (generic proxy, ordered before us by the mbarrier) must also be ordered
    // before the TMA's writes (async proxy).
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const unsigned bytes = static_cast<unsigned>(cur.units() * cur.s.k * 2);
    mbar_expect_tx(&b.full[slot], bytes * cur.s.rows_per_unit);
    uint8_t* dst = b.slots + static_cast<size_t>(slot) * kSlotBytes;
    bulk_copy(dst, cur.s.w + cur.t0 * cur.s.k, bytes, &b.full[slot]);
    if (cur.s.rows_per_unit == 2) bulk_copy(dst + bytes, cur.s.w + (cur.t0 + cur.s.up_offset) * cur.s.k, bytes, &b.full[slot]);
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

/**
 * Runs one GEMV stage: for every tile of the block, waits for it, dots each row with the staged input, applies
 * the stage's epilogue and frees the slot. `seq` is the tile counter shared with the producer's order.
 */
template <int kStageKind>
__device__ bool consume_gemv(const MegakernelArgs& a, const Block& b, const StageShape& s, unsigned& seq, int layer,
                             Best& best) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const MegakernelDims& d = a.dims;
  uint8_t* ws = static_cast<uint8_t*>(a.workspace);
  const Layout lay = workspace_layout(d, gridDim.x, static_cast<int>(gridDim.x / d.kv_heads));
  bf16* residual = reinterpret_cast<bf16*>(ws + lay.residual);
  int64_t u0, u1;
  block_range(s.units, u0, u1);
  const int per = tile_units(s);
  const int64_t k = s.k;
  for (int64_t t0 = u0; t0 < u1; t0 += per, seq++) {
    const int n = static_cast<int>((u1 - t0) < per ? (u1 - t0) : per);
    const int slot = static_cast<int>(seq % kSlots);
    if (!mbar_wait(a, b, &b.full[slot], (seq / kSlots) & 1)) return false;
    const bf16* tile = reinterpret_cast<const bf16*>(b.slots + static_cast<size_t>(slot) * kSlotBytes);
    for (int r = warp; r < n; r += kConsumerWarps) {
      const bf16* row = tile + static_cast<int64_t>(r) * k;
      const bf16* row2 = row + static_cast<int64_t>(n) * k;  // gate/up: the up row
      float acc = 0.f, acc2 = 0.f;
#pragma unroll 4
      for (int64_t c = lane * 8; c < k; c += 256) {
        const uint4 xv = *reinterpret_cast<const uint4*>(b.x + c);
        acc = dot8(*reinterpret_cast<const uint4*>(row + c), xv, acc);
        if constexpr (kStageKind == kGateUp) acc2 = dot8(*reinterpret_cast<const uint4*>(row2 + c), xv, acc2);
      }
      acc = warp_sum(acc);
      if constexpr (kStageKind == kGateUp) acc2 = warp_sum(acc2);
      if (lane == 0) {
        const int64_t u = t0 + r;
        if constexpr (kStageKind == kQkv) {
          reinterpret_cast<bf16*>(ws + lay.qkv)[u] = to_bf(acc);
        } else if constexpr (kStageKind == kO || kStageKind == kDown) {
          // Layer 0's residual is the embedding row (the O stage is the first to write the residual buffer).
          const bf16* res_in = (kStageKind == kO && layer == 0) ? b.embed_row : residual;
          residual[u] = to_bf(round_bf(acc) + bf(__ldcg(res_in + u)));
        } else if constexpr (kStageKind == kGateUp) {
          const float silu = acc / (1.f + __expf(-acc));
          reinterpret_cast<bf16*>(ws + lay.act)[u] = to_bf(silu * acc2);
        } else {  // LM head
          const float v = round_bf(acc);
          static_cast<bf16*>(a.logits)[u] = to_bf(v);
          if (u < a.vocab_limit && better(v, static_cast<int>(u), best)) best = {v, static_cast<int>(u)};
        }
      }
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&b.empty[slot]);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// Attention

/**
 * Per-head RMSNorm then RoPE of one 128-wide head `src` (bf16) by one warp; the lanes hold pairs (i, i + 64) for
 * i = lane and lane + 32. Writes the rotated head to `dst_bf` (bf16, when given) and, scaled, to `dst_f`.
 */
__device__ void norm_rope_head(const bf16* src, const bf16* w, const float* inv_freq, int pos, float eps,
                               bf16* dst_bf, float* dst_f, float scale) {
  const int lane = threadIdx.x & 31;
  float lo[2], hi[2];
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < 2; j++) {
    const int i = lane + 32 * j;
    lo[j] = bf(__ldcg(src + i));
    hi[j] = bf(__ldcg(src + i + kHalf));
    ss += lo[j] * lo[j] + hi[j] * hi[j];
  }
  const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(kD) + eps);
  const float fpos = static_cast<float>(pos);
#pragma unroll
  for (int j = 0; j < 2; j++) {
    const int i = lane + 32 * j;
    const float x0 = lo[j] * inv * bf(w[i]);
    const float x1 = hi[j] * inv * bf(w[i + kHalf]);
    float sn, cs;
    sincosf(__fmul_rn(fpos, inv_freq[i]), &sn, &cs);
    const bf16 r0 = to_bf(x0 * cs - x1 * sn);
    const bf16 r1 = to_bf(x1 * cs + x0 * sn);
    if (dst_bf != nullptr) {
      dst_bf[i] = r0;
      dst_bf[i + kHalf] = r1;
    }
    if (dst_f != nullptr) {
      dst_f[i] = bf(r0) * scale;
      dst_f[i + kHalf] = bf(r1) * scale;
    }
  }
}

/**
 * Attention of KV head `g`'s query group over cache positions [p0, p1) of layer `layer` (len = pos + 1 keys in
 * all). Writes the normalised output when the head has one chunk, else the chunk's partial; the last chunk of a
 * head to finish merges them. Returns false when the launch aborts.
 */
__device__ void attend(const MegakernelArgs& a, const Block& b, int layer, int g, int c, int chunks, int p0, int p1,
                       int pos) {
  const MegakernelDims& d = a.dims;
  const int G = static_cast<int>(d.q_heads / d.kv_heads);
  const int KV = static_cast<int>(d.kv_heads);
  const int tid = threadIdx.x, warp = tid >> 5;
  const MegakernelLayer& L = a.layers[layer];
  uint8_t* ws = static_cast<uint8_t*>(a.workspace);
  const int max_chunks = static_cast<int>(gridDim.x / d.kv_heads);
  const Layout lay = workspace_layout(d, gridDim.x, max_chunks);
  const bf16* qkv = reinterpret_cast<const bf16*>(ws + lay.qkv);
  bf16* kc = static_cast<bf16*>(L.k_cache);
  bf16* vc = static_cast<bf16*>(L.v_cache);
  float* qs = b.scratch;        // [G][128], pre-scaled into the log2 domain
  float* sc = qs + kMaxG * kD;  // [G][kSubChunk] weights of a pass; then [8][G·128] partial sums
  const float scale_log2 = rsqrtf(static_cast<float>(kD)) * kLog2e;

  // Queries of the group (every chunk's block, redundantly), and the new key/value where this chunk holds them.
  const bool holds_new = p0 <= pos && pos < p1;
  if (warp < G) {
    const int h = g * G + warp;
    norm_rope_head(qkv + static_cast<int64_t>(h) * kD, static_cast<const bf16*>(L.q_norm), a.inv_freq, pos, a.eps,
                   nullptr, qs + warp * kD, scale_log2);
  } else if (holds_new && warp == G) {
    norm_rope_head(qkv + static_cast<int64_t>(d.q_heads + g) * kD, static_cast<const bf16*>(L.k_norm), a.inv_freq,
                   pos, a.eps, kc + (static_cast<int64_t>(pos) * KV + g) * kD, nullptr, 0.f);
  } else if (holds_new && warp == G + 1) {
    const bf16* src = qkv + static_cast<int64_t>(d.q_heads + KV + g) * kD;
    bf16* dst = vc + (static_cast<int64_t>(pos) * KV + g) * kD;
    const int lane = tid & 31;
    for (int i = lane; i < kD; i += 32) dst[i] = __ldcg(src + i);
  }
  consumer_sync();

  // Each pass covers kSubChunk positions. Scores: four lanes per key (lane quarter qd holds the 16-byte pieces
  // qd, qd + 4, qd + 8, qd + 12 of the 128-wide row, so the four quarters read q from different banks). Values:
  // sixteen lanes per row (8 dims each), kValueSlots row slots; a thread keeps G × 8 accumulators across passes. The K and
  // V loads of a pass are all issued before any math, so a pass costs one memory round trip, not one per row.
  const int qd = tid & 3, key = tid >> 2;      // scores
  const int dg = tid & 15, slot = tid >> 4;   // values: kValueSlots row slots, 4 rows each per pass
  float m[kMaxG], l[kMaxG], acc[kMaxG][8];
#pragma unroll
  for (int h = 0; h < kMaxG; h++) {
    m[h] = -INFINITY;
    l[h] = 0.f;
#pragma unroll
    for (int e = 0; e < 8; e++) acc[h][e] = 0.f;
  }
  for (int sp = p0; sp < p1; sp += kSubChunk) {
    const int n = (p1 - sp) < kSubChunk ? (p1 - sp) : kSubChunk;
    uint4 kv[4], vv[kSubChunk / kValueSlots];
    const bool has_key = key < n;
    if (has_key) {
      const bf16* krow = kc + (static_cast<int64_t>(sp + key) * KV + g) * kD;
#pragma unroll
      for (int i = 0; i < 4; i++) kv[i] = *reinterpret_cast<const uint4*>(krow + (qd + 4 * i) * 8);
    }
#pragma unroll
    for (int i = 0; i < kSubChunk / kValueSlots; i++) {
      const int j = slot + kValueSlots * i;
      if (j < n) vv[i] = *reinterpret_cast<const uint4*>(vc + (static_cast<int64_t>(sp + j) * KV + g) * kD + dg * 8);
    }
    float dots[kMaxG] = {0.f, 0.f, 0.f, 0.f};
    if (has_key) {
#pragma unroll
      for (int i = 0; i < 4; i++) {
        float kf[8];
        unpack8(kv[i], kf);
        const int at = (qd + 4 * i) * 8;
#pragma unroll
        for (int h = 0; h < kMaxG; h++) {
          if (h < G) {
#pragma unroll
            for (int e = 0; e < 8; e++) dots[h] = fmaf(qs[h * kD + at + e], kf[e], dots[h]);
          }
        }
      }
    }
    float smax[kMaxG];
#pragma unroll
    for (int h = 0; h < kMaxG; h++) {
      dots[h] += __shfl_xor_sync(0xffffffffu, dots[h], 1);
      dots[h] += __shfl_xor_sync(0xffffffffu, dots[h], 2);
      smax[h] = has_key ? dots[h] : -INFINITY;
    }
    float mx[kMaxG], alpha[kMaxG], psum[kMaxG], tot[kMaxG];
    consumer_reduce<true>(b, smax, G, mx);
#pragma unroll
    for (int h = 0; h < kMaxG; h++) {
      psum[h] = 0.f;
      alpha[h] = 1.f;
      if (h < G) {
        const float mn = fmaxf(m[h], mx[h]);
        alpha[h] = exp2f(m[h] - mn);  // 0 on the first pass (m = −inf, mn finite)
        m[h] = mn;
        if (has_key && qd == 0) {
          const float p = exp2f(dots[h] - mn);
          sc[h * kSubChunk + key] = p;
          psum[h] = p;
        }
      }
    }
    consumer_reduce<false>(b, psum, G, tot);  // its barriers also publish the weights in sc
#pragma unroll
    for (int h = 0; h < kMaxG; h++) {
      if (h < G) {
        l[h] = l[h] * alpha[h] + tot[h];
#pragma unroll
        for (int e = 0; e < 8; e++) acc[h][e] *= alpha[h];
      }
    }
#pragma unroll
    for (int i = 0; i < kSubChunk / kValueSlots; i++) {
      const int j = slot + kValueSlots * i;
      if (j < n) {
        float vf[8];
        unpack8(vv[i], vf);
#pragma unroll
        for (int h = 0; h < kMaxG; h++) {
          if (h < G) {
            const float p = sc[h * kSubChunk + j];
#pragma unroll
            for (int e = 0; e < 8; e++) acc[h][e] = fmaf(p, vf[e], acc[h][e]);
          }
        }
      }
    }
    consumer_sync();  // sc is rewritten by the next pass
  }

  // Sum the row slots in fixed order: lanes l and l + 16 of a warp, then the warps in two rounds through shared
  // memory (half the warps store, the other half add, then thread t < O sums those rows).
  const int O = G * kD;
  float* red = sc;  // [8][O] floats, after the scores are done
#pragma unroll
  for (int h = 0; h < kMaxG; h++)
#pragma unroll
    for (int e = 0; e < 8; e++) acc[h][e] += __shfl_xor_sync(0xffffffffu, acc[h][e], 16);
  const int lane = tid & 31;
  if (warp >= kConsumerWarps / 2 && lane < 16) {
#pragma unroll
    for (int h = 0; h < kMaxG; h++)
      if (h < G)
#pragma unroll
        for (int e = 0; e < 8; e++) red[(warp - kConsumerWarps / 2) * O + h * kD + dg * 8 + e] = acc[h][e];
  }
  consumer_sync();
  if (warp < kConsumerWarps / 2 && lane < 16) {
#pragma unroll
    for (int h = 0; h < kMaxG; h++)
      if (h < G)
#pragma unroll
        for (int e = 0; e < 8; e++) red[warp * O + h * kD + dg * 8 + e] += acc[h][e];
  }
  consumer_sync();
  // Outputs o = tid, tid + kConsumers, … (G · 128 may exceed the consumer count).
  constexpr int kOutPerThread = kMaxG * kD / kConsumers;
  bf16* attn = reinterpret_cast<bf16*>(ws + lay.attn) + static_cast<int64_t>(g) * G * kD;
  float* part_acc = reinterpret_cast<float*>(ws + lay.part_acc) + static_cast<int64_t>(g) * max_chunks * O;
  float* part_ml = reinterpret_cast<float*>(ws + lay.part_ml) + static_cast<int64_t>(g) * max_chunks * G * 2;
#pragma unroll
  for (int r = 0; r < kOutPerThread; r++) {
    const int o = tid + r * kConsumers;
    if (o >= O) break;
    const int oh = o / kD, od = o % kD;
    float total = 0.f;
    for (int w = 0; w < kConsumerWarps / 2; w++) total += red[w * O + o];
    float lh = 0.f, mh = -INFINITY;
#pragma unroll
    for (int h = 0; h < kMaxG; h++)
      if (h == oh) {
        lh = l[h];
        mh = m[h];
      }
    if (chunks == 1) {
      attn[o] = to_bf(total / lh);
    } else {
      part_acc[c * O + o] = total;
      if (od == 0) {
        part_ml[(c * G + oh) * 2] = mh;
        part_ml[(c * G + oh) * 2 + 1] = lh;
      }
    }
  }
  if (chunks == 1) return;
  __threadfence();
  consumer_sync();
  if (tid == 0) {
    unsigned* counter = b.sync + kMergeCounters + g;
    const unsigned arrived = atomicAdd(counter, 1u);
    const bool last = arrived == static_cast<unsigned>(chunks - 1);
    if (last) atomicExch(counter, 0u);  // every chunk of this head has arrived: ready for the next layer
    __threadfence();
    b.flag[1] = last ? 1 : 0;
  }
  consumer_sync();
  if (b.flag[1] == 0) return;
  // The last chunk to finish merges all of them, in chunk order.
#pragma unroll
  for (int r = 0; r < kOutPerThread; r++) {
    const int o = tid + r * kConsumers;
    if (o >= O) break;
    const int oh = o / kD;
    float mx = -INFINITY;
    for (int q = 0; q < chunks; q++) mx = fmaxf(mx, __ldcg(part_ml + (q * G + oh) * 2));
    float num = 0.f, den = 0.f;
    for (int q = 0; q < chunks; q++) {
      const float w = exp2f(__ldcg(part_ml + (q * G + oh) * 2) - mx);
      num = fmaf(w, __ldcg(part_acc + q * O + o), num);
      den = fmaf(w, __ldcg(part_ml + (q * G + oh) * 2 + 1), den);
    }
    attn[o] = to_bf(num / den);
  }
}

// ---------------------------------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads, 1) qwen3_decode_kernel(const __grid_constant__ MegakernelArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];
  const MegakernelDims& d = a.dims;
  Block b;
  b.slots = smem;
  b.x = reinterpret_cast<bf16*>(smem + static_cast<size_t>(kSlots) * kSlotBytes);
  b.scratch = reinterpret_cast<float*>(b.x);
  uint8_t* misc = smem + static_cast<size_t>(kSlots) * kSlotBytes + union_bytes(d);
  b.full = reinterpret_cast<uint64_t*>(misc);
  b.empty = b.full + kSlots;
  b.red = reinterpret_cast<float*>(b.empty + kSlots);
  b.flag = reinterpret_cast<int*>(b.red + kMaxG * kConsumerWarps);
  b.sync = static_cast<unsigned*>(a.workspace);
  b.timeout_ns = a.timeout_ns;

  const int token = a.state[0];
  const int pos = a.state[1];
  b.embed_row = static_cast<const bf16*>(a.embed) + static_cast<int64_t>(token) * d.hidden;
  // Cleared before any block can fail: failures only come from waits that outlast timeout_ns.
  if (blockIdx.x == 0 && threadIdx.x == 0) a.result[1] = 0;
  if (pos < 0 || pos >= a.max_context || token < 0 || token >= d.vocab) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      a.result[1] = static_cast<int>(pos < 0 || pos >= a.max_context ? MegakernelError::BadPosition
                                                                       : MegakernelError::BadToken);
    }
    return;  // every block reads the same state: all return
  }
  if (threadIdx.x == 0) {
    for (int i = 0; i < kSlots; i++) {
      mbar_init(&b.full[i], 1);
      mbar_init(&b.empty[i], kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    b.flag[0] = 0;
    b.flag[1] = 0;
  }
  __syncthreads();

  if (threadIdx.x >= kConsumers) {
    if (threadIdx.x == kConsumers) produce(a, b);
    return;
  }

  uint8_t* ws = static_cast<uint8_t*>(a.workspace);
  const int max_chunks = static_cast<int>(gridDim.x / d.kv_heads);
  const Layout lay = workspace_layout(d, gridDim.x, max_chunks);
  bf16* residual = reinterpret_cast<bf16*>(ws + lay.residual);
  unsigned seq = 0;
  Best best{-INFINITY, INT32_MAX};
  const int len = pos + 1;
  const int chunks = max(1, min((len + kMinChunk - 1) / kMinChunk, max_chunks));
  const int chunk_len = (len + chunks - 1) / chunks;

  // This block's attention work item, if any (at most one: items ≤ grid).
  const int item = blockIdx.x < d.kv_heads * chunks ? static_cast<int>(blockIdx.x) : -1;
  const int item_g = item < 0 ? 0 : item / chunks, item_c = item < 0 ? 0 : item % chunks;
  const int item_p0 = item_c * chunk_len;
  const int item_p1 = max(item_p0, min(len, item_p0 + chunk_len));
  for (int layer = 0; layer < d.layers; layer++) {
    const MegakernelLayer& L = a.layers[layer];
    const int bar0 = layer * kBarriersPerLayer;
    const int ev = layer * kMegakernelTraceEventsPerLayer;
    stamp(a, ev);
    // The cached rows this block's attention will read do not depend on this step: start them towards L2 now.
    if (item >= 0) prefetch_chunk(L, static_cast<int>(d.kv_heads), item_g, item_p0, min(item_p1, pos));
    // 1. QKV
    stage_norm_input(b, layer == 0 ? b.embed_row : residual, static_cast<const bf16*>(L.input_norm), d.hidden, a.eps);
    stamp(a, ev + 1);
    if (!consume_gemv<kQkv>(a, b, stage_shape(a, layer, kQkv), seq, layer, best)) return;
    stamp(a, ev + 2);
    if (!grid_barrier(a, b, bar0 + 0)) return;
    stamp(a, ev + 3);
    // 2. Attention
    if (item >= 0) attend(a, b, layer, item_g, item_c, chunks, item_p0, item_p1, pos);
    stamp(a, ev + 4);
    if (!grid_barrier(a, b, bar0 + 1)) return;
    stamp(a, ev + 5);
    // 3. O projection + residual
    stage_copy_input(b, reinterpret_cast<const bf16*>(ws + lay.attn), d.q_heads * kD);
    stamp(a, ev + 6);
    if (!consume_gemv<kO>(a, b, stage_shape(a, layer, kO), seq, layer, best)) return;
    stamp(a, ev + 7);
    if (!grid_barrier(a, b, bar0 + 2)) return;
    stamp(a, ev + 8);
    // 4. RMSNorm + gate/up + SwiGLU
    stage_norm_input(b, residual, static_cast<const bf16*>(L.post_norm), d.hidden, a.eps);
    stamp(a, ev + 9);
    if (!consume_gemv<kGateUp>(a, b, stage_shape(a, layer, kGateUp), seq, layer, best)) return;
    stamp(a, ev + 10);
    if (!grid_barrier(a, b, bar0 + 3)) return;
    stamp(a, ev + 11);
    // 5. Down projection + residual
    stage_copy_input(b, reinterpret_cast<const bf16*>(ws + lay.act), d.ffn);
    stamp(a, ev + 12);
    if (!consume_gemv<kDown>(a, b, stage_shape(a, layer, kDown), seq, layer, best)) return;
    stamp(a, ev + 13);
    if (!grid_barrier(a, b, bar0 + 4)) return;
    stamp(a, ev + 14);
  }

  // Final norm, LM head, argmax.
  const int ev_end = static_cast<int>(d.layers) * kMegakernelTraceEventsPerLayer;
  stage_norm_input(b, residual, static_cast<const bf16*>(a.final_norm), d.hidden, a.eps);
  stamp(a, ev_end);
  if (!consume_gemv<-1>(a, b, stage_shape(a, -1, -1), seq, -1, best)) return;
  stamp(a, ev_end + 1);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* bv = b.red;
  int* bi = reinterpret_cast<int*>(b.red + kConsumerWarps);
  if (lane == 0) {
    bv[warp] = best.v;
    bi[warp] = best.i;
  }
  consumer_sync();
  if (threadIdx.x != 0) return;
  Best blk{-INFINITY, INT32_MAX};
  for (int w = 0; w < kConsumerWarps; w++)
    if (better(bv[w], bi[w], blk)) blk = {bv[w], bi[w]};
  float* arg_v = reinterpret_cast<float*>(ws + lay.arg);
  int* arg_i = reinterpret_cast<int*>(arg_v + gridDim.x);
  arg_v[blockIdx.x] = blk.v;
  arg_i[blockIdx.x] = blk.i;
  __threadfence();
  const unsigned arrived = atomicAdd(b.sync + kArgmaxCounter, 1u);
  if (arrived != gridDim.x - 1) return;
  atomicExch(b.sync + kArgmaxCounter, 0u);
  __threadfence();
  Best all{-INFINITY, INT32_MAX};
  for (unsigned q = 0; q < gridDim.x; q++) {
    const float v = __ldcg(arg_v + q);
    const int i = __ldcg(arg_i + q);
    if (better(v, i, all)) all = {v, i};
  }
  if (all.i == INT32_MAX) {
    a.result[1] = static_cast<int>(MegakernelError::NonFinite);
    return;
  }
  stamp(a, ev_end + 2);
  a.result[0] = all.i;
  a.state[0] = all.i;
  a.state[1] = pos + 1;
}

}  // namespace

cudaError_t megakernel_plan(const MegakernelDims& d, MegakernelPlan* plan, const char** why) {
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
  if (d.hidden * 2 * 2 > kSlotBytes || d.ffn * 2 > kSlotBytes || d.q_heads * kD * 2 > kSlotBytes)
    return refuse("a weight row is wider than a 48 KB shared-memory tile");
  if (d.vocab > INT32_MAX - 1) return refuse("the vocabulary is too large");
  int sms = 0;
  QK_RETURN_IF_ERROR(sm_count(&sms));
  const size_t smem = smem_bytes(d);
  QK_RETURN_IF_ERROR(
      cudaFuncSetAttribute(qwen3_decode_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  int per_sm = 0;
  QK_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, qwen3_decode_kernel, kThreads, smem));
  if (per_sm < 1) {
    *why = "one block per SM cannot be resident (shared memory or registers)";
    return cudaErrorInvalidConfiguration;
  }
  plan->grid = sms;
  plan->threads = kThreads;
  plan->smem_bytes = smem;
  plan->max_chunks = static_cast<int>(sms / d.kv_heads) > 0 ? static_cast<int>(sms / d.kv_heads) : 1;
  if (sms < d.kv_heads) return refuse("the GPU has fewer SMs than the model has KV heads");
  plan->workspace_bytes = workspace_layout(d, sms, plan->max_chunks).total;
  return cudaSuccess;
}

cudaError_t launch_megakernel(const MegakernelArgs& args, const MegakernelPlan& plan, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(plan.grid);
  config.blockDim = dim3(plan.threads);
  config.dynamicSmemBytes = plan.smem_bytes;
  config.stream = stream;
  const cudaError_t launched = cudaLaunchKernelEx(&config, qwen3_decode_kernel, args);
  const cudaError_t last = cudaGetLastError();
  return launched != cudaSuccess ? launched : last;
}

}  // namespace qk
