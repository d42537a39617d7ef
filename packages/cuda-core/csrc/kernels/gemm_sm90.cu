// Hopper (sm_90a) GEMM for launch_gemm: out[M, N] = act(a[M, K] · b[N, K]ᵀ + bias[N]), bf16/f16, fp32 accumulation;
// with Activation::Swiglu, b is [2N, K] (gate rows, then up rows) and out[M, N] = silu(a · gateᵀ) · (a · upᵀ).
//
// One persistent block per SM (384 threads) walks output tiles of 128 × BN. Warpgroup 0 is the producer: one
// thread streams 64-wide K slices of A and B into a ring of 128-byte-swizzled shared-memory stages with TMA,
// each stage signalled by a "full" mbarrier (transaction bytes) and handed back through an "empty" mbarrier.
// Warpgroups 1 and 2 consume with wgmma straight from the swizzled stages, either sharing each tile (64 rows
// each) or taking alternate tiles (ping-pong) so that one's epilogue runs under the other's main loop. The
// epilogue (bias, activation) runs from registers with masked stores. Up to 64 rows the operands swap (the weight
// on wgmma's M, the tokens on an N of 16/32/64, outputs stored transposed). Launched with PDL; in the swapped form
// each block asks L2 for its first weight boxes before it waits for the previous kernel. GEMM_SM90.md has the
// reasoning and the measurements.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/numeric.cuh"
#include "../common/sm90.cuh"
#include "../common/tensor_map.h"
#include "gemm_sm90.h"
#include "splitk_workspace.h"

// Every target but sm_90a (the 90-virtual PTX, older or newer GPUs) gets a kernel body that traps (sm90.cuh), and
// the host never launches it there.

namespace qk {
namespace sm90 {
namespace {

constexpr int kBM = 128;          // two consumer warpgroups × wgmma's M of 64
constexpr int kBK = 64;           // one 128-byte swizzle row of 16-bit elements
constexpr int kThreads = 384;     // producer warpgroup + 2 consumer warpgroups
constexpr int kSmemBudget = 196608;  // stage ring; the rest of the 227 KB is alignment slack and barriers

template <int BN>
constexpr int stage_bytes() {
  return (kBM + BN) * kBK * 2;
}
// The swapped form's stages are small (16 KB of weight and BN token rows): a deeper ring keeps more of the weight
// in flight.
template <int BN, bool SW = false>
constexpr int stages() {
  return std::min(SW ? 12 : 8, kSmemBudget / stage_bytes<BN>());
}
template <int BN, bool SW = false>
constexpr int smem_bytes() {
  return stages<BN, SW>() * stage_bytes<BN>() + 1024 + (2 * stages<BN, SW>() + 2) * 8 + 2 * 2 * BN * 4;
}

/** `splits` of a stream-K launch (see block_span). */
constexpr int kStreamK = -1;

#ifdef QK_SM90A

constexpr int kConsumerWarps = 8;  // each arrives once on a stage's empty barrier

/**
 * wgmma shared-memory descriptor of a K-major tile written by TMA with 128-byte swizzle: rows of 128 bytes in
 * 8-row (1024-byte) swizzle atoms, so the stride between atoms is 1024; the leading offset is unused for
 * K-major swizzled layouts. Stepping 16 elements along K inside the atom is a plain 32-byte address offset.
 */
__device__ __forceinline__ uint64_t smem_desc(const void* p) { return wgmma_desc_sw128(smem_u32(p), 16, 1024); }

/** Grouped rasterisation: walk `group_m` row blocks down before stepping right, so resident tiles share A and B in L2. */
__device__ __forceinline__ void tile_coords(int tile, int m_blocks, int n_blocks, int group_m, int* mb, int* nb) {
  const int per_group = group_m * n_blocks;
  const int group = tile / per_group;
  const int first_m = group * group_m;
  const int rows = min(m_blocks - first_m, group_m);
  const int r = tile - group * per_group;
  *mb = first_m + r % rows;
  *nb = r / rows;
}

/**
 * One stretch of a block's work: K blocks [kb0, kb1) of `tile`, which is slice `split` of the `slices` that make up
 * that tile's K. The producer, the consumers and the L2 prefetch all read a block's work through block_span.
 */
struct UnitSpan {
  int tile, split, slices, kb0, kb1;
};

/**
 * Stretch `seq` (0, 1, …) of this block's work, or false past its last.
 * - `splits` ≥ 1: units of equal K slices, slice-major (unit = split · tiles + tile), block b taking units
 *   b, b + grid, …; each unit is one stretch.
 * - `splits` == kStreamK: the tiles' K blocks laid end to end (tile by tile) and cut into `gridDim.x` runs as equal
 *   as whole K blocks allow; block b's run crosses one or more tiles, a stretch per tile. The slices of a tile are
 *   the blocks whose runs meet it, in block order (the host sees to it that every run holds a K block at least).
 */
__device__ __forceinline__ bool block_span(int seq, int tiles, int splits, int kb_per_split, int k_blocks,
                                           UnitSpan* out) {
  if (splits != kStreamK) {
    const int unit = static_cast<int>(blockIdx.x) + seq * static_cast<int>(gridDim.x);
    if (unit >= tiles * splits) return false;
    const int split = unit / tiles;
    const int kb0 = split * kb_per_split;
    *out = {unit - split * tiles, split, splits, kb0, min(kb0 + kb_per_split, k_blocks)};
    return true;
  }
  const int64_t total = static_cast<int64_t>(tiles) * k_blocks;
  const int64_t grid = gridDim.x;
  const int64_t lo = static_cast<int64_t>(blockIdx.x) * total / grid;
  const int64_t hi = (static_cast<int64_t>(blockIdx.x) + 1) * total / grid;
  const int64_t tile = lo / k_blocks + seq;
  const int64_t start = tile * k_blocks;
  const int64_t kb0 = max(lo - start, int64_t{0});
  const int64_t kb1 = min(hi - start, static_cast<int64_t>(k_blocks));
  if (tile >= tiles || kb0 >= kb1) return false;
  // The block whose run holds K block x (counted over all tiles) is ceil((x + 1) · grid / total) − 1.
  const int64_t first = ((start + 1) * grid + total - 1) / total - 1;
  const int64_t last = ((start + k_blocks) * grid + total - 1) / total - 1;
  *out = {static_cast<int>(tile), static_cast<int>(blockIdx.x - first), static_cast<int>(last - first + 1),
          static_cast<int>(kb0), static_cast<int>(kb1)};
  return true;
}

/**
 * activate<A> (gemv.h) with the hardware's fast exp / reciprocal / tanh: the epilogue sits on the critical path
 * of every tile, and these differ from the exact forms by a few float ulps (tanh.approx by ~2^-11 relative),
 * far under the one bf16/f16 rounding that follows.
 */
template <Activation A>
__device__ __forceinline__ float fast_activate(float v) {
  if constexpr (A == Activation::Silu) {
    return __fdividef(v, 1.f + __expf(-v));
  } else if constexpr (A == Activation::GeluTanh) {
    const float u = 0.79788456080286536f * (v + 0.044715f * v * v * v);
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
    return 0.5f * v * (1.f + t);
  } else {
    return activate<A>(v);
  }
}

template <typename T>
using Pair = typename std::conditional<std::is_same_v<T, __nv_bfloat16>, __nv_bfloat162, __half2>::type;
#endif

/**
 * PP = false ("cooperative"): both consumer warpgroups work on one 128 × BN tile, 64 rows each, and every stage
 * is read by both. PP = true ("ping-pong"): each consumer warpgroup owns whole 128 × BN tiles (two m64 halves),
 * taking alternate tiles of the block's sequence. The producer fills the ring in tile order, so one
 * warpgroup's main loop runs while the other stores its previous tile: the epilogue leaves the critical path.
 */
/**
 * A = Swiglu: each tile's B stage holds TN = BN / 2 gate rows and the TN up rows of the same outputs (two TMA boxes
 * from two maps, so each half zero-fills past N on its own). In wgmma's accumulator layout a thread then holds gate
 * column c in 8-column group j and up column c in group j + BN / 16, so the epilogue pairs them in registers and
 * the [M, 2N] projection is never written.
 */
/**
 * Split K (`splits` > 1, for grids that output tiles alone would leave idle): the work units are (tile, K slice)
 * pairs, slice-major; each unit runs `kb_per_split` K blocks (the last slice fewer), writes its fp32 accumulators
 * to its slot of `partials` in fragment order and takes the tile's ticket; the unit that takes the last ticket adds
 * the slices in slice order (deterministic whichever arrives last), resets the ticket and runs the epilogue.
 * Stream K (`splits` == kStreamK, swapped form): the same slots, tickets and sums, but a tile's slices are the runs
 * of the blocks that meet it (block_span), as many as that tile has.
 */
/**
 * SW (swapped operands, small M): the weight is the wgmma A operand and the activations the B operand, so a tile
 * is kBM weight rows (output columns) × BN tokens, with BN as small as 16; wgmma's fixed M of 64 then falls on the
 * weight instead of on a mostly zero-filled block of token rows, and a stage carries 16 KB of weight and only BN
 * rows of activations. Always ping-pong. With SwiGLU the A stage holds 64 gate rows and the 64 up rows of the same
 * outputs (two boxes), so each thread holds a gate value in half 0 and its up value at the same place in half 1.
 * The epilogue stores the transposed fragments: out[token][column].
 */
template <typename T, int BN, bool PP, Activation A, bool SW>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                     const __grid_constant__ CUtensorMap map_up, T* __restrict__ out, const T* __restrict__ bias,
                     int M, int N, int K, int group_m, int paired_stores, float* __restrict__ partials,
                     unsigned* __restrict__ tickets, int splits, int kb_per_split, int prefetch,
                     int issue_group) {
#ifdef QK_SM90A
  constexpr bool kGlu = A == Activation::Swiglu;
  static_assert(!SW || PP, "the swapped form is ping-pong");
  constexpr int TM = SW && kGlu ? kBM / 2 : kBM;  // A rows per tile: token rows, or weight rows (outputs) when SW
  constexpr int TN = !SW && kGlu ? BN / 2 : BN;   // B rows per tile: output columns, or tokens when SW
  constexpr int S = stages<BN, SW>();
  constexpr int kTileA = kBM * kBK;  // elements
  constexpr int kTileB = BN * kBK;
  constexpr int kHalves = PP ? 2 : 1;  // m64 slices per consumer warpgroup
  constexpr uint32_t kStageTx = static_cast<uint32_t>(stage_bytes<BN>());
  extern __shared__ unsigned char smem_raw[];
  // 128-byte swizzle atoms must start on 1024-byte boundaries; the dynamic base is only 16-byte aligned.
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  T* sa = reinterpret_cast<T*>(smem);
  T* sb = sa + S * kTileA;
  uint64_t* full = reinterpret_cast<uint64_t*>(sb + S * kTileB);
  uint64_t* empty = full + S;
  uint64_t* turn = empty + S;  // ping-pong: turn[c] passes the main loop to consumer c
  float* bias_smem = reinterpret_cast<float*>(turn + 2);  // [consumer][2 tiles in flight][BN]

  const int m_blocks = ((SW ? N : M) + TM - 1) / TM;
  const int n_blocks = ((SW ? M : N) + TN - 1) / TN;
  const int tiles = m_blocks * n_blocks;
  const int k_blocks = (K + kBK - 1) / kBK;
  const int wg = static_cast<int>(threadIdx.x) / 128;
  __shared__ unsigned last_unit[2];  // split K: whether this unit took its tile's last ticket (per owner)

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; s++) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], PP ? kConsumerWarps / 2 : kConsumerWarps);
    }
    mbar_init(&turn[0], kConsumerWarps / 2);
    mbar_init(&turn[1], kConsumerWarps / 2);
    // Make the initialised barriers visible to the copy engine before any TMA names them.
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_b)) : "memory");
    if constexpr (kGlu) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_up)) : "memory");
    }
    // Launched with PDL (launch.cuh): until the previous kernel completes, only L2 prefetches. The weight's first
    // boxes for this block's first unit start streaming under that kernel's tail.
    UnitSpan u;
    if (block_span(0, tiles, splits, kb_per_split, k_blocks, &u)) {
      int mb, nb;
      tile_coords(u.tile, m_blocks, n_blocks, group_m, &mb, &nb);
      for (int kb = u.kb0; kb < min(u.kb1, u.kb0 + prefetch); kb++) {
        if constexpr (SW) {
          tma_prefetch_2d(&map_a, kb * kBK, mb * TM);
          if constexpr (kGlu) tma_prefetch_2d(&map_up, kb * kBK, mb * TM);
        } else {
          tma_prefetch_2d(&map_b, kb * kBK, nb * TN);
          if constexpr (kGlu) tma_prefetch_2d(&map_up, kb * kBK, nb * TN);
        }
      }
    }
  }
  __syncthreads();
  grid_dependency_wait();

  if (wg == 0) {
    // The producer needs few registers; giving them up lets each consumer hold 128 fp32 accumulators.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      UnitSpan u;
      for (int seq = 0; block_span(seq, tiles, splits, kb_per_split, k_blocks, &u); seq++) {
        const int kb0 = u.kb0, kb1 = u.kb1;
        int mb, nb;
        tile_coords(u.tile, m_blocks, n_blocks, group_m, &mb, &nb);
        for (int kb = kb0; kb < kb1; kb++) {
          // Loads go out in groups of `issue_group` consecutive K blocks: wait for the group's stages to be free,
          // then issue them back to back, so each weight row is read in one longer run. A consumer holds one stage
          // until its next lands, so a group of more than S - 2 stages could wait forever (the host caps it).
          // A fresh barrier counts as having completed the phase before its first, so the first lap never waits.
          if ((kb - kb0) % issue_group == 0) {
            int st = stage;
            uint32_t ph = phase;
            for (int g = 0; g < issue_group && kb + g < kb1; g++) {
              mbar_wait(&empty[st], ph ^ 1);
              if (++st == S) {
                st = 0;
                ph ^= 1;
              }
            }
          }
          mbar_expect_tx(&full[stage], kStageTx);
          if constexpr (SW && kGlu) {
            tma_load_2d(sa + stage * kTileA, &map_a, kb * kBK, mb * TM, &full[stage]);
            tma_load_2d(sa + stage * kTileA + TM * kBK, &map_up, kb * kBK, mb * TM, &full[stage]);
          } else {
            tma_load_2d(sa + stage * kTileA, &map_a, kb * kBK, mb * kBM, &full[stage]);
          }
          if constexpr (kGlu && !SW) {
            tma_load_2d(sb + stage * kTileB, &map_b, kb * kBK, nb * TN, &full[stage]);
            tma_load_2d(sb + stage * kTileB + TN * kBK, &map_up, kb * kBK, nb * TN, &full[stage]);
          } else {
            tma_load_2d(sb + stage * kTileB, &map_b, kb * kBK, nb * BN, &full[stage]);
          }
          if (++stage == S) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
    allow_dependents_launch();
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int consumer = wg - 1;
    const int t = static_cast<int>(threadIdx.x) - 128 * wg;
    const int warp = t >> 5;
    const int lane = t & 31;
    float acc[kHalves][BN / 2];
#pragma unroll
    for (int h = 0; h < kHalves; h++)
#pragma unroll
      for (int i = 0; i < BN / 2; i++) acc[h][i] = 0.f;
    // Units of this block are numbered 0, 1, 2, … in the producer's order; ping-pong takes every other one. `pos`
    // is the ring position of the unit's first K block: the K blocks of every earlier unit of the block.
    uint32_t pos = 0;
    for (int seq = 0;; seq++) {
      UnitSpan u;
      if (!block_span(seq, tiles, splits, kb_per_split, k_blocks, &u)) break;
      const int split = u.split;
      const int slices = u.slices;
      const int tile = u.tile;
      const int k_count = u.kb1 - u.kb0;
      if (PP && (seq & 1) != consumer) {
        pos += static_cast<uint32_t>(k_count);
        continue;
      }
      int mb, nb;
      tile_coords(tile, m_blocks, n_blocks, group_m, &mb, &nb);
      const int col_base = nb * TN + 2 * (lane & 3);

      // This tile's bias, one or two values per thread, fetched now so that the load hides behind the main
      // loop; after it they go through shared memory to the threads whose fragments need them.
      constexpr int kBiasPerThread = (BN + 127) / 128;
      T bias_raw[kBiasPerThread];
      // SW: this thread's output columns are sw_col0 + 64 h + 8 r (fragment rows lane / 4 and lane / 4 + 8 of its
      // warp's 16, in half h); with SwiGLU only h = 0 is an output (half 1 holds the up rows).
      const int sw_col0 = mb * TM + warp * 16 + (lane >> 2);
      T bias_sw[2][2];  // SW: the bias of those four columns
      if (SW && !kGlu && bias != nullptr) {
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
          for (int r = 0; r < 2; r++) {
            const int col = sw_col0 + h * 64 + 8 * r;
            bias_sw[h][r] = col < N ? bias[col] : from_float<T>(0.f);
          }
      } else if (!SW && bias != nullptr) {
#pragma unroll
        for (int i = 0; i < kBiasPerThread; i++) {
          const int col = nb * BN + t + 128 * i;
          bias_raw[i] = (t + 128 * i < BN && col < N) ? bias[col] : from_float<T>(0.f);
        }
      }

      // Ping-pong: a consumer starts its main loop only after the other has seen all of its previous tile's
      // stages land. Skipping the other's ring positions is then safe: the stage's previous use has completed,
      // so the parity wait cannot mistake an older phase for the one it wants.
      const int round = seq >> 1;
      if (PP && seq > 0) mbar_wait(&turn[consumer], (consumer == 0 ? round - 1 : round) & 1);
      int prev_stage = -1;
      for (int kb = 0; kb < k_count; kb++, pos++) {
        const int stage = static_cast<int>(pos % S);
        mbar_wait(&full[stage], (pos / S) & 1);
        if (PP && kb == k_count - 1) {
          __syncwarp();
          if (lane == 0) mbar_arrive(&turn[consumer ^ 1]);
        }
        const T* a_tile = sa + stage * kTileA + (PP ? 0 : consumer * 64 * kBK);
        const T* b_tile = sb + stage * kTileB;
#pragma unroll
        for (int h = 0; h < kHalves; h++) fence_regs(acc[h]);
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < kBK / 16; k++)
#pragma unroll
          for (int h = 0; h < kHalves; h++)
            wgmma_ss<T, BN>(acc[h], smem_desc(a_tile + h * 64 * kBK + k * 16), smem_desc(b_tile + k * 16),
                              kb > 0 || k > 0);
        wgmma_commit();
        // Keep this slice's wgmma in flight; the previous slice's are done, so its stage can be refilled.
        wgmma_wait<1>();
#pragma unroll
        for (int h = 0; h < kHalves; h++) fence_regs(acc[h]);
        if (prev_stage >= 0) {
          __syncwarp();
          if (lane == 0) mbar_arrive(&empty[prev_stage]);
        }
        prev_stage = stage;
      }
      wgmma_wait<0>();
#pragma unroll
      for (int h = 0; h < kHalves; h++) fence_regs(acc[h]);
      if (prev_stage >= 0) {
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[prev_stage]);
      }

      if (slices > 1) {
        // The tile's owners: this warpgroup (ping-pong) or both consumers (cooperative), on named barrier 1 + c or 3.
        const int owner = PP ? consumer : 0;
        const int owner_t = PP ? t : 128 * consumer + t;
        const int bar_id = PP ? 1 + consumer : 3;
        const int bar_threads = PP ? 128 : 256;
        // Slot [split][tile] of kBM × BN floats in fragment order: [half][4 accumulators][thread], float4 each, so a
        // warp's stores and loads are 512 contiguous bytes.
        constexpr size_t kSlot = static_cast<size_t>(kBM) * BN;
        auto at = [&](int s, int half, int i) {
          return partials + (static_cast<size_t>(s) * tiles + tile) * kSlot +
                 ((static_cast<size_t>(half) * (BN / 8) + i / 4) * 128 + t) * 4;
        };
#pragma unroll
        for (int h = 0; h < kHalves; h++)
#pragma unroll
          for (int i = 0; i < BN / 2; i += 4)
            __stcg(reinterpret_cast<float4*>(at(split, PP ? h : consumer, i)),
                   make_float4(acc[h][i], acc[h][i + 1], acc[h][i + 2], acc[h][i + 3]));
        __threadfence();
        asm volatile("bar.sync %0, %1;" ::"r"(bar_id), "r"(bar_threads) : "memory");
        if (owner_t == 0) last_unit[owner] = atomicAdd(&tickets[tile], 1u) == static_cast<unsigned>(slices - 1);
        asm volatile("bar.sync %0, %1;" ::"r"(bar_id), "r"(bar_threads) : "memory");
        const bool last = last_unit[owner] != 0;
        if (!last) continue;  // (the next unit's first wgmma overwrites the accumulators)
        __threadfence();  // the other slices' partials, published before their tickets, are visible from here on
        if (owner_t == 0) tickets[tile] = 0;  // ready for the next launch (stream order keeps launches apart)
        // Every slice from memory, this unit's own too, so that the order of the sum is the same whichever unit
        // arrives last. Slice 0 lands straight in the accumulators (all its loads in flight at once); the others
        // follow in batches of 8 loads per thread, added in slice order.
#pragma unroll
        for (int h = 0; h < kHalves; h++)
#pragma unroll
          for (int i = 0; i < BN / 2; i += 4) {
            const float4 v = __ldcg(reinterpret_cast<const float4*>(at(0, PP ? h : consumer, i)));
            acc[h][i] = v.x;
            acc[h][i + 1] = v.y;
            acc[h][i + 2] = v.z;
            acc[h][i + 3] = v.w;
          }
        for (int s2 = 1; s2 < slices; s2++) {
#pragma unroll
          for (int h = 0; h < kHalves; h++)
#pragma unroll
            for (int i0 = 0; i0 < BN / 2; i0 += 32) {
              float4 v[8];
#pragma unroll
              for (int j = 0; j < 8; j++)
                if (i0 + 4 * j < BN / 2)
                  v[j] = __ldcg(reinterpret_cast<const float4*>(at(s2, PP ? h : consumer, i0 + 4 * j)));
#pragma unroll
              for (int j = 0; j < 8; j++)
                if (i0 + 4 * j < BN / 2) {
                  acc[h][i0 + 4 * j] += v[j].x;
                  acc[h][i0 + 4 * j + 1] += v[j].y;
                  acc[h][i0 + 4 * j + 2] += v[j].z;
                  acc[h][i0 + 4 * j + 3] += v[j].w;
                }
            }
        }
      }

      if constexpr (SW) {
        // Fragment rows are output columns and fragment columns tokens: per 8-column group j, this thread holds
        // tokens 8j + 2 (lane % 4) + {0, 1} of output columns (lane / 4) and (lane / 4 + 8) of its warp's 16.
        const int tok0 = nb * BN + 2 * (lane & 3);
#pragma unroll
        for (int h = 0; h < (kGlu ? 1 : 2); h++)
#pragma unroll
          for (int r = 0; r < 2; r++) {
            const int col = sw_col0 + h * 64 + 8 * r;
            if (col >= N) continue;
            float b = 0.f;
            if constexpr (!kGlu) {
              if (bias != nullptr) b = to_float(bias_sw[h][r]);
            }
#pragma unroll
            for (int j = 0; j < BN / 8; j++)
#pragma unroll
              for (int e = 0; e < 2; e++) {
                const int tok = tok0 + 8 * j + e;
                if (tok >= M) continue;
                const int i = 4 * j + 2 * r + e;
                float v;
                if constexpr (kGlu) {
                  v = fast_activate<Activation::Silu>(acc[0][i]) * acc[1][i];
                } else {
                  v = fast_activate<A>(acc[h][i] + b);
                }
                out[static_cast<int64_t>(tok) * N + col] = from_float<T>(v);
              }
          }
      } else {
        float* tile_bias = bias_smem + (consumer * 2 + (seq & 1)) * BN;
        if (bias != nullptr) {
          // Double-buffered by tile parity: one barrier per tile then keeps a fast warp's writes for the next
          // tile away from a slow warp's reads of this one.
#pragma unroll
          for (int i = 0; i < kBiasPerThread; i++)
            if (t + 128 * i < BN) tile_bias[t + 128 * i] = to_float(bias_raw[i]);
          asm volatile("bar.sync %0, 128;" ::"r"(1 + consumer) : "memory");
        }

        // Accumulator fragment of wgmma m64nBN: per 8-column group j, rows (lane / 4) and (lane / 4 + 8) of this
        // warp's 16, two adjacent columns each.
#pragma unroll
        for (int h = 0; h < kHalves; h++) {
          const int64_t row0 =
              static_cast<int64_t>(mb) * kBM + (PP ? h : consumer) * 64 + warp * 16 + (lane >> 2);
          if constexpr (kGlu) {
            constexpr int kUp = BN / 16;  // 8-column groups of gate columns; the up columns follow
#pragma unroll
            for (int j = 0; j < kUp; j++) {
              const int col = col_base + 8 * j;
#pragma unroll
              for (int r = 0; r < 2; r++) {
                const int64_t row = row0 + 8 * r;
                if (row >= M || col >= N) continue;
                Pair<T> v;
                v.x = from_float<T>(fast_activate<Activation::Silu>(acc[h][4 * j + 2 * r]) *
                                    acc[h][4 * (j + kUp) + 2 * r]);
                v.y = from_float<T>(fast_activate<Activation::Silu>(acc[h][4 * j + 2 * r + 1]) *
                                    acc[h][4 * (j + kUp) + 2 * r + 1]);
                T* dst = out + row * N + col;
                if (paired_stores && col + 1 < N) {
                  *reinterpret_cast<Pair<T>*>(dst) = v;
                } else {
                  dst[0] = v.x;
                  if (col + 1 < N) dst[1] = v.y;
                }
              }
            }
          } else {
#pragma unroll
            for (int j = 0; j < BN / 8; j++) {
              const int col = col_base + 8 * j;
              float2 bv = make_float2(0.f, 0.f);
              if (bias != nullptr) bv = *reinterpret_cast<const float2*>(tile_bias + 8 * j + 2 * (lane & 3));
              const float b0 = bv.x, b1 = bv.y;
#pragma unroll
              for (int r = 0; r < 2; r++) {
                const int64_t row = row0 + 8 * r;
                if (row >= M || col >= N) continue;
                Pair<T> v;
                v.x = from_float<T>(fast_activate<A>(acc[h][4 * j + 2 * r] + b0));
                v.y = from_float<T>(fast_activate<A>(acc[h][4 * j + 2 * r + 1] + b1));
                T* dst = out + row * N + col;
                if (paired_stores && col + 1 < N) {
                  *reinterpret_cast<Pair<T>*>(dst) = v;
                } else {
                  dst[0] = v.x;
                  if (col + 1 < N) dst[1] = v.y;
                }
              }
            }
          }
        }
      }
    }
    allow_dependents_launch();
  }
#else
  __trap();
#endif
}

// ---- host side ----

/** Tensor map of a K-contiguous [rows, K] operand, read in (box_rows × 64) boxes with 128-byte swizzle. */
cudaError_t encode_operand(CUtensorMap* map, DType dtype, const void* base, int64_t rows, int64_t k, int box_rows) {
  TensorMapEncodeTiled encode = nullptr;
  QK_RETURN_IF_ERROR(tensor_map_encoder(&encode));
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(k) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kBK), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode(map, dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                            2, const_cast<void*>(base), dims, strides, box, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

/** Whether launches use PDL (launch.cuh); QK_GEMM_PDL=0 turns it off for this kernel alone (read once), to measure. */
bool gemm_pdl() {
  static const bool on = [] {
    const char* env = std::getenv("QK_GEMM_PDL");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return on;
}

/** Output tiles of one launch: 128 × BN, or with SwiGLU 128 × BN / 2; swapped, 128 (SwiGLU: 64) columns × BN tokens. */
int64_t tile_count(int64_t m, int64_t n, int bn, bool glu, bool swapped) {
  if (swapped) return ((n + (glu ? kBM / 2 : kBM) - 1) / (glu ? kBM / 2 : kBM)) * ((m + bn - 1) / bn);
  const int tn = glu ? bn / 2 : bn;
  return ((m + kBM - 1) / kBM) * ((n + tn - 1) / tn);
}

// Split-K cost terms, in units of one K block of one tile: the fixed cost of a split launch (partials written and
// read back, the ticket's round trip, the last unit's reduction on the critical path) and the cost of each further
// slice. Fitted to one H200 sweep of every tile config × 1–16 slices over the Qwen3-0.6B/8B projections at M 2–512
// (GEMM_SM90.md): with the narrow-tile rule of pick_config, the pick is within 2% of the best measured on average
// (worst 90%) and never slower than the unsplit pick.
constexpr double kSplitFixedCost = 16.0;
constexpr double kSplitReadCost = 2.0;
constexpr int kMinSplitBlocks = 4;  // K blocks per slice, at least
constexpr int kMaxSplits = 16;
// Weight boxes each block asks L2 for before its PDL wait, and the swapped form's load groups (K blocks issued back to
// back). H200, Qwen3 projections at M 2–64: 1–3 boxes beat none by 1–4% and the whole ring by ~3%; groups of 2–4
// beat single loads by 2–3%, groups of 8 lose 1–4% to them. The unswapped form prefetches nothing (2 boxes cost
// 0.5–3.5% on the Qwen3 projections at M = 2,048 with the 128-wide tile, nothing measurable at 128) and keeps single
// loads (groups of 4 lost 8% on the 8B gate+up at M = 4,096).
constexpr int kPrefetchBoxes = 2;
constexpr int kSwapIssueGroup = 4;

/**
 * Partial slots per tile of a stream-K launch (block_span): a tile meets at most ceil(k_blocks / shortest run) + 1
 * runs. 0 when the runs would be shorter than kMinSplitBlocks (no stream K then).
 */
int stream_k_slots(int64_t tiles, int k_blocks, int sms) {
  const int64_t total = tiles * k_blocks;
  if (total < static_cast<int64_t>(sms) * kMinSplitBlocks) return 0;
  return static_cast<int>((k_blocks + total / sms - 1) / (total / sms)) + 1;
}

template <typename T, int BN, bool PP, Activation A, bool SW = false>
cudaError_t go(const GemmArgs& g, int group_m, int splits, cudaStream_t stream, int prefetch, int issue_group) {
  auto kernel = gemm_sm90_kernel<T, BN, PP, A, SW>;
  constexpr int smem = smem_bytes<BN, SW>();
  static bool opted_in = false;
  if (!opted_in) {
    QK_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    opted_in = true;
  }
  constexpr bool kGlu = A == Activation::Swiglu;
  constexpr int TN = kGlu ? BN / 2 : BN;
  CUtensorMap map_a, map_b, map_up;
  // Swapped: the weight is operand A (kBM rows per box, or 64 gate and 64 up rows) and the activations operand B.
  const void* a = SW ? g.b : g.a;
  const void* b = SW ? g.a : g.b;
  const int64_t a_rows = SW ? g.n : g.m;
  const int64_t b_rows = SW ? g.m : g.n;
  const int a_box = SW && kGlu ? kBM / 2 : kBM;
  const int b_box = SW ? BN : TN;
  QK_RETURN_IF_ERROR(encode_operand(&map_a, g.dtype, a, a_rows, g.k, a_box));
  QK_RETURN_IF_ERROR(encode_operand(&map_b, g.dtype, b, b_rows, g.k, b_box));
  if (kGlu) {
    // The up rows start N rows into the weight: 16-byte aligned, since K is a multiple of 8 (gemm_sm90_supports).
    const void* up = static_cast<const unsigned char*>(g.b) + g.n * g.k * 2;
    QK_RETURN_IF_ERROR(encode_operand(&map_up, g.dtype, up, g.n, g.k, SW ? a_box : b_box));
  } else {
    map_up = map_b;
  }
  int sms = 0;
  QK_RETURN_IF_ERROR(sm_count(&sms));
  const int64_t tiles = tile_count(g.m, g.n, BN, kGlu, SW);
  const int k_blocks = static_cast<int>((g.k + kBK - 1) / kBK);
  int kb_per_split = k_blocks;
  int slots = splits == kStreamK ? stream_k_slots(tiles, k_blocks, sms) : 0;  // partial slots per tile
  if (slots == 0) {
    // Equal slices of whole K blocks; the count is recomputed so that none is empty.
    splits = std::max(1, std::min(splits, k_blocks));
    kb_per_split = (k_blocks + splits - 1) / splits;
    splits = (k_blocks + kb_per_split - 1) / kb_per_split;
    slots = splits;
  }
  SplitkWorkspace ws;
  if (slots > 1) {
    const size_t floats = static_cast<size_t>(slots) * static_cast<size_t>(tiles) * kBM * BN;
    if (floats > kSplitkMaxFloats ||
        !reserve_splitk_workspace(floats, static_cast<size_t>(tiles), stream, &ws)) {
      splits = 1;  // no workspace (stream capture, memory): whole K per tile
      slots = 1;
    }
  }
  if (slots == 1) {
    splits = 1;
    kb_per_split = k_blocks;
  }
  const unsigned grid =
      static_cast<unsigned>(splits == kStreamK ? sms : std::min<int64_t>(tiles * splits, sms));
  const int paired = g.n % 2 == 0 && (reinterpret_cast<uintptr_t>(g.out) & 3) == 0;
  // Load groups larger than the ring minus 2 stages could wait forever (see the producer).
  const int group = std::max(1, std::min(issue_group, stages<BN, SW>() - 2));
  if (!gemm_pdl()) {
    // Measurement switch: an ordinary launch (griddepcontrol.wait then returns at once).
    kernel<<<grid, kThreads, smem, stream>>>(map_a, map_b, map_up, static_cast<T*>(g.out),
                                             static_cast<const T*>(g.bias), static_cast<int>(g.m),
                                             static_cast<int>(g.n), static_cast<int>(g.k), group_m, paired,
                                             ws.partials, ws.tickets, splits, kb_per_split, prefetch, group);
    return cudaGetLastError();
  }
  return launch_kernel(kernel, dim3(grid), dim3(kThreads), smem, stream, map_a, map_b, map_up, static_cast<T*>(g.out),
                       static_cast<const T*>(g.bias), static_cast<int>(g.m), static_cast<int>(g.n),
                       static_cast<int>(g.k), group_m, paired, ws.partials, ws.tickets, splits, kb_per_split,
                       prefetch, group);
}

struct Config {
  int bn;
  bool pingpong;
  int splits;
};


/** Estimated cost of a tile width with `splits` K slices: rounds of the persistent grid × K blocks per unit. */
double split_cost(int64_t tiles, int k_blocks, int splits, int sms) {
  const int per = (k_blocks + splits - 1) / splits;
  const int s = (k_blocks + per - 1) / per;
  const int64_t rounds = (tiles * s + sms - 1) / sms;
  double cost = static_cast<double>(rounds) * per;
  if (s > 1) cost += kSplitFixedCost + kSplitReadCost * (s - 1);
  return cost;
}

/** K slices for a launch of `tiles` tiles: 1 unless they leave SMs idle and slicing K lowers the estimated cost. */
int pick_splits_tiles(int64_t tiles, int64_t k, int sms) {
  const int k_blocks = static_cast<int>((k + kBK - 1) / kBK);
  if (tiles >= sms) return 1;
  int best = 1;
  double best_cost = split_cost(tiles, k_blocks, 1, sms);
  for (int s = 2; s <= kMaxSplits && (k_blocks + s - 1) / s >= kMinSplitBlocks; s++) {
    const double cost = split_cost(tiles, k_blocks, s, sms);
    if (cost < best_cost * 0.999) {
      best = s;
      best_cost = cost;
    }
  }
  return best;
}

/**
 * Estimated cost of a stream-K launch of `tiles` tiles (see block_span), in split_cost's units: the longest run,
 * plus the split terms for the most slices a tile meets; 0 when the runs would be shorter than kMinSplitBlocks.
 */
double stream_k_cost(int64_t tiles, int k_blocks, int sms) {
  const int slots = stream_k_slots(tiles, k_blocks, sms);
  if (slots == 0) return 0;
  const int64_t longest = (tiles * k_blocks + sms - 1) / sms;
  return static_cast<double>(longest) + kSplitFixedCost + kSplitReadCost * static_cast<double>(slots - 1);
}

/**
 * `splits` for the swapped form: equal slices as pick_splits_tiles picks them, or kStreamK where it is estimated at
 * least 3% cheaper (tile counts that leave SMs idle in the last round, like 48 or 192 tiles on 132 SMs).
 */
int pick_swapped_splits(int64_t tiles, int64_t k, int sms) {
  // QK_GEMM_STREAM_K=0 keeps equal slices everywhere (read once): a measurement switch.
  static const bool stream_k = [] {
    const char* env = std::getenv("QK_GEMM_STREAM_K");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  const int k_blocks = static_cast<int>((k + kBK - 1) / kBK);
  const int splits = pick_splits_tiles(tiles, k, sms);
  if (!stream_k) return splits;
  const double streamed = stream_k_cost(tiles, k_blocks, sms);
  return streamed > 0 && streamed < 0.97 * split_cost(tiles, k_blocks, splits, sms) ? kStreamK : splits;
}

/** K slices for one tile width of the unswapped form (n counts the columns of the [M, 2N] projection with SwiGLU). */
int pick_splits(int64_t m, int64_t n, int64_t k, int bn, int sms) {
  return pick_splits_tiles(((m + kBM - 1) / kBM) * ((n + bn - 1) / bn), k, sms);
}

/**
 * The persistent grid runs ceil(tiles / SMs) rounds, each as long as one tile's main loop; wider tiles cost
 * proportionally more per round but run closer to peak (the efficiencies below were fitted to H200 timings of
 * the Qwen3 projection shapes, GEMM_SM90.md). Short K makes the epilogue a large share of each tile, so there
 * the 128-wide tile runs ping-pong, which hides it; long K prefers the cooperative form's single shared stage
 * ring. Lowest estimated cost wins; ties go to the earlier candidate.
 */
Config pick_config(int64_t m, int64_t n, int64_t k, int sms) {
  struct Candidate {
    Config config;
    double efficiency;
  };
  const bool short_k = k <= 2048;
  const Candidate candidates[] = {
      {{256, false, 1}, 1.0}, {{128, short_k, 1}, short_k ? 1.05 : 0.85}, {{64, true, 1}, 0.6}};
  Config best = candidates[0].config;
  double best_cost = 0;
  const int k_blocks = static_cast<int>((k + kBK - 1) / kBK);
  // At M ≤ 64 the GEMM only streams W, and a 64-wide tile moves a (mostly zero-filled) 128-row A box per 64 W rows:
  // it streams W at a lower rate than the wider tiles (8B `qkv` at M = 52: 35 µs against 27). Skip it where the
  // 128-wide tiles in slices of kMinSplitBlocks can occupy every SM anyway.
  const bool narrow_ok =
      m > 64 || ((n + 127) / 128) * std::min<int64_t>(kMaxSplits, k_blocks / kMinSplitBlocks) < sms;
  for (const Candidate& c : candidates) {
    if (c.config.bn == 64 && !narrow_ok) continue;
    const int64_t tiles = ((m + kBM - 1) / kBM) * ((n + c.config.bn - 1) / c.config.bn);
    const int splits = pick_splits(m, n, k, c.config.bn, sms);
    const double cost = split_cost(tiles, k_blocks, splits, sms) * c.config.bn / c.efficiency;
    if (best_cost == 0 || cost < best_cost * 0.999) {
      best = Config{c.config.bn, c.config.pingpong, splits};
      best_cost = cost;
    }
  }
  return best;
}

template <typename T, Activation A>
cudaError_t run(const GemmArgs& g, const GemmSm90Options& opt, cudaStream_t stream) {
  int sms = 0;
  QK_RETURN_IF_ERROR(sm_count(&sms));
  // SwiGLU tiles are the tiles of the [M, 2N] projection, paired: the same cost model applies.
  const int64_t cols = A == Activation::Swiglu ? 2 * g.n : g.n;
  const int group_m = opt.group_m > 0 ? opt.group_m : 8;
  if (opt.swap > 0 || (opt.swap == 0 && opt.bn == 0 && g.m <= kGemmSm90SwapMaxM)) {
    const int prefetch = opt.prefetch >= 0 ? opt.prefetch : kPrefetchBoxes;
    // Few tokens: the swapped form, with the narrowest token tile that holds them.
    const int bn = opt.bn != 0 ? opt.bn : g.m <= 16 ? 16 : g.m <= 32 ? 32 : 64;
    const bool glu = A == Activation::Swiglu;
    const int64_t tiles = tile_count(g.m, g.n, bn, glu, true);
    const int splits = opt.splits > 0 ? opt.splits : opt.splits == kStreamK ? kStreamK : pick_swapped_splits(tiles, g.k, sms);
    const int issue_group = opt.issue_group > 0 ? opt.issue_group : kSwapIssueGroup;
    if (bn == 16) return go<T, 16, true, A, true>(g, group_m, splits, stream, prefetch, issue_group);
    if (bn == 32) return go<T, 32, true, A, true>(g, group_m, splits, stream, prefetch, issue_group);
    if (bn == 64) return go<T, 64, true, A, true>(g, group_m, splits, stream, prefetch, issue_group);
    return cudaErrorInvalidValue;
  }
  Config c = pick_config(g.m, cols, g.k, sms);
  if (opt.bn != 0) c = Config{opt.bn, opt.pingpong != 0, 1};
  if (opt.bn != 0 || opt.splits > 0) {
    c.splits = opt.splits > 0 ? opt.splits : pick_splits(g.m, cols, g.k, c.bn, sms);
  }
  const int issue_group = opt.issue_group > 0 ? opt.issue_group : 1;
  const int prefetch = opt.prefetch >= 0 ? opt.prefetch : 0;
  if (c.pingpong) {
    if (c.bn == 128) return go<T, 128, true, A>(g, group_m, c.splits, stream, prefetch, issue_group);
    if (c.bn == 64) return go<T, 64, true, A>(g, group_m, c.splits, stream, prefetch, issue_group);
  } else {
    if (c.bn == 256) return go<T, 256, false, A>(g, group_m, c.splits, stream, prefetch, issue_group);
    if (c.bn == 128) return go<T, 128, false, A>(g, group_m, c.splits, stream, prefetch, issue_group);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t run_dtype(const GemmArgs& g, const GemmSm90Options& opt, cudaStream_t stream) {
  switch (g.act) {
    case Activation::None: return run<T, Activation::None>(g, opt, stream);
    case Activation::Silu: return run<T, Activation::Silu>(g, opt, stream);
    case Activation::Gelu: return run<T, Activation::Gelu>(g, opt, stream);
    case Activation::GeluTanh: return run<T, Activation::GeluTanh>(g, opt, stream);
    case Activation::Swiglu:
      return g.bias == nullptr ? run<T, Activation::Swiglu>(g, opt, stream) : cudaErrorInvalidValue;
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace
}  // namespace sm90

bool gemm_sm90_supports(const GemmArgs& g) {
  if (g.dtype != DType::BF16 && g.dtype != DType::F16) return false;
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.k % 8 != 0) return false;
  if (g.m > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX) return false;
  // Tile indices are int on the device (the narrowest tile is 64 columns wide, 32 outputs with SwiGLU).
  const int64_t cols = g.act == Activation::Swiglu ? 2 * g.n : g.n;
  if (cols > INT32_MAX) return false;
  if (((g.m + sm90::kBM - 1) / sm90::kBM) * ((cols + 63) / 64) > INT32_MAX) return false;
  if (!aligned16(g.a) || !aligned16(g.b)) return false;
  return compute_capability() == 90;
}

bool gemm_sm90_applies(const GemmArgs& g) { return g.m >= kGemmSm90MinM && gemm_sm90_supports(g); }

bool gemm_sm90_takes_small_m(const GemmArgs& g, int64_t cols) {
  return cols >= kGemmSm90SmallMinCols && gemm_sm90_applies(g);
}

cudaError_t launch_gemm_sm90(const GemmArgs& g, cudaStream_t stream, const GemmSm90Options& opt) {
  if (!gemm_sm90_supports(g)) return cudaErrorInvalidValue;
  return g.dtype == DType::BF16 ? sm90::run_dtype<__nv_bfloat16>(g, opt, stream)
                                : sm90::run_dtype<__half>(g, opt, stream);
}

}  // namespace qk
