// Tensor-core prefill attention for bf16/f16. ATTENTION_SM90.md beside this file has the design and numbers.
//
// Two kernels share one tiling idea: a block owns kBM "rows", where a row is one (query, query head) pair and the
// query heads of one KV head are packed side by side (GQA), so each K/V tile brought into shared memory serves
// every query head that reads it. Rows r of a block map to query q0 + r / pack, head h0 + r % pack; since heads
// are adjacent in memory, such a block of rows is a plain 2-D strided tile of q and out.
//  - mma_kernel: FlashAttention-2 style, mma.sync m16n8k16 (sm_80+), cp.async double buffering, 4 warps.
//  - wg_kernel: FlashAttention-3 style core on sm_90a (wgmma, P kept in registers), head_dim 128; picked at run
//    time only on compute capability 9.0. See the second half of the file.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/mma.cuh"
#include "../common/sm90.cuh"
#include "../common/tensor_map.h"
#include "attention_prefill_sm90.h"

namespace qk {
namespace attn_tc {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

/** 16-byte global→shared copy; when !valid the destination is zero-filled (tail rows must not hold NaN bits:
 * a zero probability times a NaN value is still NaN). */
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

/**
 * The rows a block owns and where they read, shared by both kernels: one flat block index, heaviest (latest) query
 * tiles first across all head groups; row r of the block is query q0 + r / pack of head h0 + r % pack, and the
 * keys it may see end at kv_end.
 */
struct BlockRows {
  int q0, h0, kv_head, q_end, kv_end, first_pos;
  int64_t q_stride, kv_stride;

  __device__ __forceinline__ BlockRows(int bm, int d, int q_len, int kv_len, int q_heads, int kv_heads, int pack,
                                       int n_hgroups, int position_offset, bool causal) {
    const int q_tiles = gridDim.x / n_hgroups;
    const int q_tile = q_tiles - 1 - static_cast<int>(blockIdx.x) / n_hgroups;
    const int hg = static_cast<int>(blockIdx.x) % n_hgroups;
    const int pos_per_tile = bm / pack;
    q0 = q_tile * pos_per_tile;
    h0 = hg * pack;
    kv_head = h0 / (q_heads / kv_heads);
    q_end = min(q0 + pos_per_tile, q_len);
    kv_end = causal ? min(kv_len, position_offset + q_end) : kv_len;
    first_pos = position_offset + q0;
    q_stride = static_cast<int64_t>(q_heads) * d;
    kv_stride = static_cast<int64_t>(kv_heads) * d;
  }

  /** Queues the block's Q rows (16-byte chunks, `chunks` per row) to shared address dst(row, chunk); rows past
   * the queries are zero-filled. */
  template <int kThreads, typename T, typename Dst>
  __device__ __forceinline__ void load_q(const T* q, int bm, int d, int chunks, int q_len, int pack, Dst dst) const {
    for (int i = static_cast<int>(threadIdx.x); i < bm * chunks; i += kThreads) {
      const int r = i / chunks, ch = i % chunks;
      const int t = q0 + r / pack;
      const bool ok = t < q_len;
      const T* src = q + (ok ? t * q_stride + static_cast<int64_t>(h0 + r % pack) * d + ch * 8 : 0);
      cp_async16(dst(r, ch), src, ok);
    }
  }

  /** Queues keys kt … kt + bk − 1 of K and V to dst_k / dst_v(row, chunk); keys past kv_end are zero-filled. */
  template <int kThreads, typename T, typename DstK, typename DstV>
  __device__ __forceinline__ void load_kv(const T* kbase, const T* vbase, int kt, int bk, int chunks, DstK dst_k,
                                          DstV dst_v) const {
    for (int i = static_cast<int>(threadIdx.x); i < bk * chunks; i += kThreads) {
      const int r = i / chunks, ch = i % chunks;
      const int key = kt + r;
      const bool ok = key < kv_end;
      const int64_t off = ok ? key * kv_stride + ch * 8 : 0;
      cp_async16(dst_k(r, ch), kbase + off, ok);
      cp_async16(dst_v(r, ch), vbase + off, ok);
    }
  }
};

// ---------------------------------------------------------------------------------------------------------------
// mma.sync kernel
// ---------------------------------------------------------------------------------------------------------------

/** Shapes per head_dim: kMT m16 tiles per warp (2 where registers allow, for twice the reuse of each K/V
 * fragment read from shared memory), kBK keys per tile. */
template <int D, int BK = (D <= 128 ? 64 : 32)>
struct MmaCfg {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kMT = D <= 128 ? 2 : 1;
  static constexpr int kBK = BK;
  static constexpr int kBM = kWarps * kMT * 16;
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static constexpr size_t kSmem = static_cast<size_t>(kBM + 4 * kBK) * D * 2;
  static_assert(kChunks >= 8, "the XOR swizzle needs 8 chunks per row");
};

/** Element offset of (row, 16-byte chunk) in a [rows][D] tile whose chunks are XOR-swizzled by row % 8, so the
 * 8 rows an ldmatrix phase reads fall in 8 different bank groups. */
template <int D>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

template <typename T, int D, int BK>
__global__ void __launch_bounds__(MmaCfg<D, BK>::kThreads, 2)
    mma_kernel(T* __restrict__ out, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
               int q_len, int kv_len, int q_heads, int kv_heads, int pack, int n_hgroups, int position_offset,
               bool causal, float scale_log2) {
  using C = MmaCfg<D, BK>;
  constexpr int kBM = C::kBM, kBK = C::kBK, kMT = C::kMT, kChunks = C::kChunks;
  constexpr int kNB = kBK / 8;  // n8 blocks of scores per m-tile
  constexpr int kDB = D / 8;    // n8 blocks of output per m-tile
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);
  T* sk = sq + kBM * D;      // [2][kBK][D]
  T* sv = sk + 2 * kBK * D;  // [2][kBK][D]

  const int tid = threadIdx.x;
  const int warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, c = lane & 3;

  const BlockRows rows(kBM, D, q_len, kv_len, q_heads, kv_heads, pack, n_hgroups, position_offset, causal);
  const int q0 = rows.q0, h0 = rows.h0, kv_end = rows.kv_end, first_pos = rows.first_pos;
  const int64_t q_stride = rows.q_stride;
  rows.load_q<C::kThreads>(q, kBM, D, kChunks, q_len, pack,
                           [&](int r, int ch) { return smem_addr(sq + swz<D>(r, ch)); });
  const T* kbase = k + static_cast<int64_t>(rows.kv_head) * D;
  const T* vbase = v + static_cast<int64_t>(rows.kv_head) * D;
  auto load_kv = [&](int kt, int buf) {
    T* dk = sk + buf * kBK * D;
    T* dv = sv + buf * kBK * D;
    rows.load_kv<C::kThreads>(
        kbase, vbase, kt, kBK, kChunks, [&](int r, int ch) { return smem_addr(dk + swz<D>(r, ch)); },
        [&](int r, int ch) { return smem_addr(dv + swz<D>(r, ch)); });
  };
  load_kv(0, 0);
  cp_async_commit();

  // Rows this thread holds: m-tile mt, half hf → block row warp*kMT*16 + mt*16 + g + 8*hf.
  int row_pos[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; mt++)
#pragma unroll
    for (int hf = 0; hf < 2; hf++) row_pos[mt][hf] = first_pos + (warp * kMT * 16 + mt * 16 + g + 8 * hf) / pack;

  float o[kMT][kDB][4];
  float m[kMT][2], l[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; mt++) {
#pragma unroll
    for (int db = 0; db < kDB; db++)
#pragma unroll
      for (int e = 0; e < 4; e++) o[mt][db][e] = 0.f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
  }

  const int n_tiles = (kv_end + kBK - 1) / kBK;
  for (int it = 0; it < n_tiles; it++) {
    const int kt = it * kBK;
    cp_async_wait<0>();
    __syncthreads();  // tile it landed for everyone, and nobody still reads the buffer refilled next
    if (it + 1 < n_tiles) load_kv(kt + kBK, (it + 1) & 1);
    cp_async_commit();
    const T* tk = sk + (it & 1) * kBK * D;
    const T* tv = sv + (it & 1) * kBK * D;

    float s[kMT][kNB][4];
#pragma unroll
    for (int mt = 0; mt < kMT; mt++)
#pragma unroll
      for (int nb = 0; nb < kNB; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[mt][nb][e] = 0.f;

#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      uint32_t qa[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; mt++) {
        const int r = warp * kMT * 16 + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldmatrix_x4(qa[mt], smem_addr(sq + swz<D>(r, kk * 2 + (lane >> 4))));
      }
#pragma unroll
      for (int nb2 = 0; nb2 < kBK / 16; nb2++) {
        uint32_t kb[4];
        const int r = nb2 * 16 + (lane & 7) + (lane >> 4) * 8;
        ldmatrix_x4(kb, smem_addr(tk + swz<D>(r, kk * 2 + ((lane >> 3) & 1))));
#pragma unroll
        for (int mt = 0; mt < kMT; mt++) {
          mma16816<T>(s[mt][2 * nb2], qa[mt], kb[0], kb[1]);
          mma16816<T>(s[mt][2 * nb2 + 1], qa[mt], kb[2], kb[3]);
        }
      }
    }

    // Only tiles that cross the diagonal (or the end of the keys) need a mask.
    const bool need_mask = kt + kBK > kv_len || (causal && kt + kBK - 1 > first_pos);
#pragma unroll
    for (int mt = 0; mt < kMT; mt++)
#pragma unroll
      for (int nb = 0; nb < kNB; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          float x = s[mt][nb][e] * scale_log2;
          if (need_mask) {
            const int j = kt + nb * 8 + 2 * c + (e & 1);
            if (j >= kv_len || (causal && j > row_pos[mt][e >> 1])) x = -INFINITY;
          }
          s[mt][nb][e] = x;
        }

#pragma unroll
    for (int mt = 0; mt < kMT; mt++) {
#pragma unroll
      for (int hf = 0; hf < 2; hf++) {
        float mx = -INFINITY;
#pragma unroll
        for (int nb = 0; nb < kNB; nb++) mx = fmaxf(mx, fmaxf(s[mt][nb][2 * hf], s[mt][nb][2 * hf + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mnew = fmaxf(m[mt][hf], mx);
        // A row can see no key of a tile yet (diagonal tiles): keep exp2 away from (-inf) - (-inf).
        const float base = mnew == -INFINITY ? 0.f : mnew;
        const float alpha = fast_exp2(m[mt][hf] - base);
        m[mt][hf] = mnew;
        float sum = 0.f;
#pragma unroll
        for (int nb = 0; nb < kNB; nb++) {
          const float p0 = fast_exp2(s[mt][nb][2 * hf] - base);
          const float p1 = fast_exp2(s[mt][nb][2 * hf + 1] - base);
          s[mt][nb][2 * hf] = p0;
          s[mt][nb][2 * hf + 1] = p1;
          sum += p0 + p1;
        }
        l[mt][hf] = l[mt][hf] * alpha + sum;  // per-thread partial; the quad is summed once at the end
#pragma unroll
        for (int db = 0; db < kDB; db++) {
          o[mt][db][2 * hf] *= alpha;
          o[mt][db][2 * hf + 1] *= alpha;
        }
      }
    }

#pragma unroll
    for (int j = 0; j < kBK / 16; j++) {
      uint32_t pa[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; mt++) {
        pa[mt][0] = pack2<T>(s[mt][2 * j][0], s[mt][2 * j][1]);
        pa[mt][1] = pack2<T>(s[mt][2 * j][2], s[mt][2 * j][3]);
        pa[mt][2] = pack2<T>(s[mt][2 * j + 1][0], s[mt][2 * j + 1][1]);
        pa[mt][3] = pack2<T>(s[mt][2 * j + 1][2], s[mt][2 * j + 1][3]);
      }
#pragma unroll
      for (int db2 = 0; db2 < D / 16; db2++) {
        uint32_t vb[4];
        const int r = j * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldmatrix_x4_trans(vb, smem_addr(tv + swz<D>(r, db2 * 2 + (lane >> 4))));
#pragma unroll
        for (int mt = 0; mt < kMT; mt++) {
          mma16816<T>(o[mt][2 * db2], pa[mt], vb[0], vb[1]);
          mma16816<T>(o[mt][2 * db2 + 1], pa[mt], vb[2], vb[3]);
        }
      }
    }
  }

#pragma unroll
  for (int mt = 0; mt < kMT; mt++) {
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      float sum = l[mt][hf];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = 1.f / sum;
      const int r = warp * kMT * 16 + mt * 16 + g + 8 * hf;
      const int t = q0 + r / pack;
      if (t < q_len) {
        T* dst = out + t * q_stride + static_cast<int64_t>(h0 + r % pack) * D + 2 * c;
#pragma unroll
        for (int db = 0; db < kDB; db++) {
          *reinterpret_cast<uint32_t*>(dst + db * 8) = pack2<T>(o[mt][db][2 * hf] * inv, o[mt][db][2 * hf + 1] * inv);
        }
      }
    }
  }
}

/** Query heads packed per block: the largest power of two ≤ 8 dividing the GQA ratio. */
int gqa_pack(const AttentionPrefillArgs& a) {
  const int64_t ratio = a.q_heads / a.kv_heads;
  int p = 1;
  while (p < 8 && ratio % (2 * p) == 0) p *= 2;
  return p;
}

/**
 * Launches either kernel (they take the same arguments) on its grid: `pack` query heads per block row group, one
 * block per (query tile of bm rows, head group).
 */
struct RowGrid {
  int pack, n_hgroups;
  unsigned blocks;
};

/** One block per (query tile of bm rows, head group); cudaErrorInvalidValue when the grid would not fit. */
cudaError_t row_grid(const AttentionPrefillArgs& a, int bm, RowGrid* grid) {
  grid->pack = gqa_pack(a);
  grid->n_hgroups = static_cast<int>(a.q_heads / grid->pack);
  const int64_t pos_per_tile = bm / grid->pack;
  const int64_t blocks = (a.q_len + pos_per_tile - 1) / pos_per_tile * grid->n_hgroups;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  grid->blocks = static_cast<unsigned>(blocks);
  return cudaSuccess;
}

template <typename T>
cudaError_t launch_rows(void (*kernel)(T*, const T*, const T*, const T*, int, int, int, int, int, int, int, bool,
                                       float),
                        const AttentionPrefillArgs& a, int bm, int threads, size_t smem, cudaStream_t stream) {
  RowGrid grid{};
  QK_RETURN_IF_ERROR(row_grid(a, bm, &grid));
  const int pack = grid.pack, n_hgroups = grid.n_hgroups;
  kernel<<<grid.blocks, threads, smem, stream>>>(
      static_cast<T*>(a.out), static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
      static_cast<int>(a.q_len), static_cast<int>(a.kv_len), static_cast<int>(a.q_heads),
      static_cast<int>(a.kv_heads), pack, n_hgroups, a.causal ? static_cast<int>(a.position_offset) : 0, a.causal,
      a.scale * kLog2e);
  return cudaGetLastError();
}

template <typename T, int D, int BK = MmaCfg<D>::kBK>
cudaError_t launch_mma(const AttentionPrefillArgs& a, cudaStream_t stream) {
  using C = MmaCfg<D, BK>;
  if (C::kSmem > 48 * 1024) {
    static bool configured = false;  // once per instantiation
    if (!configured) {
      QK_RETURN_IF_ERROR(cudaFuncSetAttribute(mma_kernel<T, D, BK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(C::kSmem)));
      configured = true;
    }
  }
  return launch_rows(mma_kernel<T, D, BK>, a, C::kBM, C::kThreads, C::kSmem, stream);
}

template <typename T>
cudaError_t launch_mma_typed(const AttentionPrefillArgs& a, cudaStream_t stream) {
  switch (a.head_dim) {
    case 64: return launch_mma<T, 64>(a, stream);
    case 128: return launch_mma<T, 128>(a, stream);
    case 256: return launch_mma<T, 256>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// wgmma kernel (sm_90a), head_dim 128
// ---------------------------------------------------------------------------------------------------------------
// Two warpgroups of 64 rows each share every K/V tile (128 keys). S = Q·Kᵀ runs as m64n128k16 wgmma with Q and K
// read straight from shared memory; P stays in registers (the fp32 accumulator layout of S is, after rounding, the
// register A-operand layout) for O += P·V, with V read from shared memory as a transposed (MN-major) B operand.
// Tiles are stored in the 128-byte swizzled layout wgmma expects: a [rows][128] tile is two column blocks of 64
// elements, each [rows][128 bytes] with 16-byte chunk c of row r stored at chunk c ^ (r % 8), blocks 1024-aligned.

struct WgCfg {
  static constexpr int kD = 128;
  static constexpr int kBM = 128;
  static constexpr int kBK = 128;
  static constexpr int kThreads = 256;
  static constexpr int kTileBytes = 128 * kD * 2;  // one 128-row tile, 32 KB
  static_assert(kBM == 128 && kBK == 128, "Q and K/V tiles share kTileBytes");
  // Q, then 2 or 3 stages of (K, V); +1 KB to align the base to the swizzle atom.
  static constexpr size_t smem(int stages) { return static_cast<size_t>(kTileBytes) * (1 + 2 * stages) + 1024; }
};

#ifdef QK_SM90A

__device__ __forceinline__ int wg_swz(int row, int chunk) {
  return (chunk >> 3) * (128 * 128) + row * 128 + (((chunk & 7) ^ (row & 7)) << 4);
}

/**
 * One consumer warpgroup's 64 query rows in both wgmma kernels (wg_kernel, ws_kernel): the O accumulator, the
 * running max and sum of each row half (online softmax in the exp2 domain), and the pieces of a step that touch
 * them. Thread (warp, lane) holds rows warp·16 + lane/4 and +8 (its "row halves") and columns 2·(lane%4) + {0, 1}
 * of every 8-column group, the m64nN accumulator layout.
 */
template <typename T>
struct WgRows {
  static constexpr int kD = WgCfg::kD, kBK = WgCfg::kBK;
  float o[64];
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.f, 0.f};  // per-thread partial sums; the quad is summed once, in store()
  int row_pos[2];           // the query position of each row half, for the causal mask
  int row0;                 // this thread's first row in the block tile
  int c;                    // lane % 4

  __device__ __forceinline__ WgRows(int wg, int warp, int lane, int first_pos, int pack)
      : row0(wg * 64 + warp * 16 + (lane >> 2)), c(lane & 3) {
#pragma unroll
    for (int hf = 0; hf < 2; hf++) row_pos[hf] = first_pos + (row0 + 8 * hf) / pack;
#pragma unroll
    for (int i = 0; i < 64; i++) o[i] = 0.f;
  }

  /**
   * Scores of key tile kt (in s) → probabilities packed as the A operand of P·V (pa); alpha receives the factor
   * that rescales O and the running sums, per row half (O itself is rescaled by rescale(), after P·V of the
   * previous tile has landed).
   */
  __device__ __forceinline__ void softmax_tile(float (&s)[64], int kt, int kv_len, bool causal, int first_pos,
                                               float scale_log2, float (&alpha)[2], uint32_t (&pa)[kBK / 16][4]) {
    const bool need_mask = kt + kBK > kv_len || (causal && kt + kBK - 1 > first_pos);
#pragma unroll
    for (int nb = 0; nb < kBK / 8; nb++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        float x = s[nb * 4 + e] * scale_log2;
        if (need_mask) {
          const int j = kt + nb * 8 + 2 * c + (e & 1);
          if (j >= kv_len || (causal && j > row_pos[e >> 1])) x = -INFINITY;
        }
        s[nb * 4 + e] = x;
      }
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      float mx = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < kBK / 8; nb++) mx = fmaxf(mx, fmaxf(s[nb * 4 + 2 * hf], s[nb * 4 + 2 * hf + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mnew = fmaxf(m[hf], mx);
      // A row can see no key of a diagonal tile yet: keep exp2 away from (-inf) - (-inf).
      const float base = mnew == -INFINITY ? 0.f : mnew;
      alpha[hf] = fast_exp2(m[hf] - base);
      m[hf] = mnew;
      float sum = 0.f;
#pragma unroll
      for (int nb = 0; nb < kBK / 8; nb++) {
        const float p0 = fast_exp2(s[nb * 4 + 2 * hf] - base);
        const float p1 = fast_exp2(s[nb * 4 + 2 * hf + 1] - base);
        s[nb * 4 + 2 * hf] = p0;
        s[nb * 4 + 2 * hf + 1] = p1;
        sum += p0 + p1;
      }
      l[hf] = l[hf] * alpha[hf] + sum;
    }
#pragma unroll
    for (int j = 0; j < kBK / 16; j++) {
      pa[j][0] = pack2<T>(s[(2 * j) * 4 + 0], s[(2 * j) * 4 + 1]);
      pa[j][1] = pack2<T>(s[(2 * j) * 4 + 2], s[(2 * j) * 4 + 3]);
      pa[j][2] = pack2<T>(s[(2 * j + 1) * 4 + 0], s[(2 * j + 1) * 4 + 1]);
      pa[j][3] = pack2<T>(s[(2 * j + 1) * 4 + 2], s[(2 * j + 1) * 4 + 3]);
    }
  }

  __device__ __forceinline__ void rescale(const float (&alpha)[2]) {
#pragma unroll
    for (int db = 0; db < kD / 8; db++) {
      o[db * 4 + 0] *= alpha[0];
      o[db * 4 + 1] *= alpha[0];
      o[db * 4 + 2] *= alpha[1];
      o[db * 4 + 3] *= alpha[1];
    }
  }

  /** Queues O += P·V for the V tile at shared address tv (MN-major B operand). */
  __device__ __forceinline__ void issue_pv(const uint32_t (&pa)[kBK / 16][4], unsigned tv) {
#pragma unroll
    for (int j = 0; j < kBK / 16; j++) {
      // 16 keys per step: two 8-row groups (SBO); the two 64-wide halves of d are one V column block apart (LBO).
      wgmma_rs_tb_n128<T>(o, pa[j], wgmma_desc_sw128(tv + j * 16 * 128, 128 * 128, 1024));
    }
  }

  /** O / l into `out` for the rows that hold a query (the quad's partial sums reduced first). */
  __device__ __forceinline__ void store(T* __restrict__ out, const BlockRows& rows, int q_len, int pack) {
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      float sum = l[hf];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = 1.f / sum;
      const int r = row0 + 8 * hf;
      const int t = rows.q0 + r / pack;
      if (t < q_len) {
        T* dst = out + t * rows.q_stride + static_cast<int64_t>(rows.h0 + r % pack) * kD + 2 * c;
#pragma unroll
        for (int db = 0; db < kD / 8; db++) {
          *reinterpret_cast<uint32_t*>(dst + db * 8) =
              pack2<T>(o[db * 4 + 2 * hf] * inv, o[db * 4 + 2 * hf + 1] * inv);
        }
      }
    }
  }
};

/** Queues S = Q·Kᵀ for this warpgroup's 64 rows of the Q tile (shared address sq_rows) and the K tile at tk. */
template <typename T>
__device__ __forceinline__ void issue_s(float (&s)[64], unsigned sq_rows, unsigned tk) {
#pragma unroll
  for (int kk = 0; kk < WgCfg::kD / 16; kk++) {
    const unsigned koff = (kk >> 2) * (128 * 128) + (kk & 3) * 32;
    wgmma_ss<T, 128>(s, wgmma_desc_sw128(sq_rows + koff, 16, 1024), wgmma_desc_sw128(tk + koff, 16, 1024), kk > 0);
  }
}

#endif

template <typename T, bool kPipelined>
__global__ void __launch_bounds__(WgCfg::kThreads, 1)
    wg_kernel(T* __restrict__ out, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
              int q_len, int kv_len, int q_heads, int kv_heads, int pack, int n_hgroups, int position_offset,
              bool causal, float scale_log2) {
#ifdef QK_SM90A
  constexpr int D = WgCfg::kD, kBM = WgCfg::kBM, kBK = WgCfg::kBK, kChunks = D / 8;
  constexpr int kStages = kPipelined ? 3 : 2;
  extern __shared__ unsigned char smem_raw[];
  const unsigned sbase = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const unsigned sq = sbase;
  const unsigned skv = sbase + WgCfg::kTileBytes;  // stage s: K at skv + s * 2 * tile, V one tile later

  const int tid = threadIdx.x;
  const int wg = tid >> 7;
  const int warp = (tid >> 5) & 3, lane = tid & 31;

  const BlockRows rows(kBM, D, q_len, kv_len, q_heads, kv_heads, pack, n_hgroups, position_offset, causal);
  const int kv_end = rows.kv_end, first_pos = rows.first_pos;
  rows.load_q<WgCfg::kThreads>(q, kBM, D, kChunks, q_len, pack, [&](int r, int ch) { return sq + wg_swz(r, ch); });
  const T* kbase = k + static_cast<int64_t>(rows.kv_head) * D;
  const T* vbase = v + static_cast<int64_t>(rows.kv_head) * D;
  auto load_kv = [&](int kt, int buf) {
    const unsigned dk = skv + buf * 2 * WgCfg::kTileBytes;
    const unsigned dv = dk + WgCfg::kTileBytes;
    rows.load_kv<WgCfg::kThreads>(
        kbase, vbase, kt, kBK, kChunks, [&](int r, int ch) { return dk + wg_swz(r, ch); },
        [&](int r, int ch) { return dv + wg_swz(r, ch); });
  };
  load_kv(0, 0);
  cp_async_commit();

  WgRows<T> acc(wg, warp, lane, first_pos, pack);
  auto k_tile = [&](int it) { return skv + (it % kStages) * 2 * WgCfg::kTileBytes; };

  const int n_tiles = (kv_end + kBK - 1) / kBK;
  float s[64];
  float alpha[2];
  uint32_t pa[kBK / 16][4];
  if constexpr (!kPipelined) {
    for (int it = 0; it < n_tiles; it++) {
      cp_async_wait<0>();
      fence_proxy_async();  // cp.async wrote through the generic proxy; wgmma reads through the async proxy
      __syncthreads();      // tile it landed for all, and the buffer refilled next is no longer read
      if (it + 1 < n_tiles) load_kv((it + 1) * kBK, (it + 1) % kStages);
      cp_async_commit();
      wgmma_fence();
      issue_s<T>(s, sq + wg * 64 * 128, k_tile(it));
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(s);
      acc.softmax_tile(s, it * kBK, kv_len, causal, first_pos, scale_log2, alpha, pa);
      acc.rescale(alpha);
      wgmma_fence();
      acc.issue_pv(pa, k_tile(it) + WgCfg::kTileBytes);
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(acc.o);
    }
  } else {
    // P·V of tile it-1 runs on the tensor cores while this warpgroup computes the softmax of tile it (its
    // S GEMM was queued first, so waiting for all but the newest group waits exactly for S). Three K/V stages:
    // V of tile it-1 is still read while tile it+1 streams in.
    uint32_t pa_next[kBK / 16][4];
    for (int it = 0; it < n_tiles; it++) {
      cp_async_wait<0>();
      fence_proxy_async();
      __syncthreads();
      if (it + 1 < n_tiles) load_kv((it + 1) * kBK, (it + 1) % kStages);
      cp_async_commit();
      wgmma_fence();
      issue_s<T>(s, sq + wg * 64 * 128, k_tile(it));
      wgmma_commit();
      if (it > 0) {
        acc.issue_pv(pa, k_tile(it - 1) + WgCfg::kTileBytes);
        wgmma_commit();
        wgmma_wait<1>();
      } else {
        wgmma_wait<0>();
      }
      fence_regs(s);
      acc.softmax_tile(s, it * kBK, kv_len, causal, first_pos, scale_log2, alpha, pa_next);
      wgmma_wait<0>();
      fence_regs(acc.o);
      fence_regs(pa);
      acc.rescale(alpha);
#pragma unroll
      for (int j = 0; j < kBK / 16; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) pa[j][e] = pa_next[j][e];
    }
    if (n_tiles > 0) {
      wgmma_fence();
      acc.issue_pv(pa, k_tile(n_tiles - 1) + WgCfg::kTileBytes);
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(acc.o);
    }
  }

  acc.store(out, rows, q_len, pack);
#else
  __trap();  // built for a target without wgmma; the launcher only picks this kernel on sm_90
#endif
}

template <typename T, bool kPipelined>
cudaError_t launch_wg(const AttentionPrefillArgs& a, cudaStream_t stream) {
  const size_t smem = WgCfg::smem(kPipelined ? 3 : 2);
  static bool configured = false;  // once per instantiation
  if (!configured) {
    QK_RETURN_IF_ERROR(cudaFuncSetAttribute(wg_kernel<T, kPipelined>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(smem)));
    configured = true;
  }
  return launch_rows(wg_kernel<T, kPipelined>, a, WgCfg::kBM, WgCfg::kThreads, smem, stream);
}

// ---------------------------------------------------------------------------------------------------------------
// Warp-specialised wgmma kernel (sm_90a), head_dim 128
// ---------------------------------------------------------------------------------------------------------------
// Warpgroups 0 and 1 consume, 64 rows each (as in wg_kernel); warpgroup 2 produces: one thread streams K and V
// tiles with TMA into a 3-stage ring (full barriers per operand, so S can start before V lands; an empty
// barrier per stage, one arrive per consumer warp once P·V has read it). The consumers never wait for each
// other through __syncthreads; two named barriers make them take turns issuing their wgmma groups (ping-pong),
// so one warpgroup's softmax runs while the other's GEMMs occupy the tensor cores.

struct WsCfg {
  static constexpr int kThreads = 384;
  static constexpr int kConsumers = 256;
  static constexpr int kStages = 3;
  static constexpr uint32_t kTile = WgCfg::kTileBytes;
  // Q, the K/V ring, then 9 mbarriers; +1 KB to align the base to the swizzle atom.
  static constexpr size_t kSmem = static_cast<size_t>(kTile) * (1 + 2 * kStages) + 3 * kStages * 8 + 1024;
};

template <typename T>
__global__ void __launch_bounds__(WsCfg::kThreads, 1)
    ws_kernel(T* __restrict__ out, const T* __restrict__ q, const __grid_constant__ CUtensorMap map_k,
              const __grid_constant__ CUtensorMap map_v, int q_len, int kv_len, int q_heads, int kv_heads, int pack,
              int n_hgroups, int position_offset, bool causal, float scale_log2) {
#ifdef QK_SM90A
  constexpr int D = WgCfg::kD, kBM = WgCfg::kBM, kBK = WgCfg::kBK, kChunks = D / 8;
  constexpr int kStages = WsCfg::kStages;
  constexpr uint32_t kTile = WsCfg::kTile;
  extern __shared__ unsigned char smem_raw[];
  const unsigned sraw = smem_addr(smem_raw);
  const unsigned sbase = (sraw + 1023u) & ~1023u;
  unsigned char* base = smem_raw + (sbase - sraw);  // generic pointer to the aligned base
  const unsigned sq = sbase;
  const unsigned skv = sbase + kTile;  // stage s: K at skv + 2 s tiles, V one tile later
  uint64_t* full_k = reinterpret_cast<uint64_t*>(base + kTile * (1 + 2 * kStages));
  uint64_t* full_v = full_k + kStages;
  uint64_t* empty = full_v + kStages;

  const int tid = threadIdx.x;
  const BlockRows rows(kBM, D, q_len, kv_len, q_heads, kv_heads, pack, n_hgroups, position_offset, causal);
  const int kv_end = rows.kv_end, first_pos = rows.first_pos;
  const int n_tiles = (kv_end + kBK - 1) / kBK;

  if (tid == WsCfg::kConsumers) {
    for (int st = 0; st < kStages; st++) {
      mbar_init(&full_k[st], 1);
      mbar_init(&full_v[st], 1);
      mbar_init(&empty[st], WsCfg::kConsumers / 32);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    fence_proxy_async();
  }
  if (tid < WsCfg::kConsumers) {
    rows.load_q<WsCfg::kConsumers>(q, kBM, D, kChunks, q_len, pack,
                                   [&](int r, int ch) { return sq + wg_swz(r, ch); });
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();  // cp.async wrote Q through the generic proxy; wgmma reads it through the async proxy
  }
  __syncthreads();

  // The warpgroup index read from lane 0, so the compiler knows it is uniform across each warp (wgmma must be
  // issued on a path it can prove convergent).
  const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
  if (wg == 2) {
    // The producer needs a handful of registers; the consumers take the rest (24 × 128 + 240 × 256 ≤ 64 K).
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    if (tid == WsCfg::kConsumers) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_k)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_v)) : "memory");
      for (int it = 0; it < n_tiles; it++) {
        const int st = it % kStages;
        // The stage's previous tile (it − kStages) must have been read by both warpgroups' P·V.
        if (it >= kStages) mbar_wait(&empty[st], ((it / kStages) - 1) & 1);
        unsigned char* dk = base + kTile * (1 + 2 * st);
        // Each operand tile is two 64-column boxes (128-byte swizzle rows); keys past kv_len arrive as zeros.
        mbar_expect_tx(&full_k[st], kTile);
        tma_load_3d(dk, &map_k, 0, rows.kv_head, it * kBK, &full_k[st]);
        tma_load_3d(dk + kTile / 2, &map_k, 64, rows.kv_head, it * kBK, &full_k[st]);
        mbar_expect_tx(&full_v[st], kTile);
        tma_load_3d(dk + kTile, &map_v, 0, rows.kv_head, it * kBK, &full_v[st]);
        tma_load_3d(dk + kTile + kTile / 2, &map_v, 64, rows.kv_head, it * kBK, &full_v[st]);
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");

  const int warp = (tid >> 5) & 3, lane = tid & 31;
  WgRows<T> acc(wg, warp, lane, first_pos, pack);
  auto k_tile = [&](int it) { return skv + (it % kStages) * 2 * kTile; };
  auto issue_pv = [&](const uint32_t (&pa)[kBK / 16][4], int it) { acc.issue_pv(pa, k_tile(it) + kTile); };

  float s[64];
  float alpha[2];
  uint32_t pa0[kBK / 16][4], pa1[kBK / 16][4];
  // Turns: warpgroup w waits on named barrier 1 + w before issuing, then lets the other one go. Warpgroup 1
  // opens warpgroup 0's first turn and skips its own last hand-over, so every arrive meets one sync.
  auto wait_turn = [&] {
    if (wg == 0) {
      named_bar_sync<1, WsCfg::kConsumers>();
    } else {
      named_bar_sync<2, WsCfg::kConsumers>();
    }
  };
  auto pass_turn = [&] {
    if (wg == 0) {
      named_bar_arrive<2, WsCfg::kConsumers>();
    } else {
      named_bar_arrive<1, WsCfg::kConsumers>();
    }
  };
  if (wg == 1 && n_tiles > 0) named_bar_arrive<1, WsCfg::kConsumers>();

  // One step: queue S(it) and P·V(it − 1), hand the tensor cores over, softmax of tile it while P·V runs, then
  // release the stage of tile it − 1 and rescale O for tile it.
  auto step = [&](int it, uint32_t (&pa_prev)[kBK / 16][4], uint32_t (&pa_new)[kBK / 16][4]) {
    const int st = it % kStages;
    mbar_wait(&full_k[st], (it / kStages) & 1);
    if (it > 0) mbar_wait(&full_v[(it - 1) % kStages], ((it - 1) / kStages) & 1);
    wait_turn();
    wgmma_fence();
    issue_s<T>(s, sq + wg * 64 * 128, k_tile(it));
    wgmma_commit();
    if (it > 0) {
      issue_pv(pa_prev, it - 1);
      wgmma_commit();
    }
    if (it > 0) {
      wgmma_wait<1>();
    } else {
      wgmma_wait<0>();
    }
    fence_regs(s);
    // Handing over once S has landed (not right after the issue): a barrier between issue and wait makes ptxas
    // serialise the wgmma pipeline (C7514).
    if (wg == 0 || it + 1 < n_tiles) pass_turn();
    acc.softmax_tile(s, it * kBK, kv_len, causal, first_pos, scale_log2, alpha, pa_new);
    wgmma_wait<0>();
    fence_regs(acc.o);
    fence_regs(pa_prev);
    if (it > 0 && lane == 0) mbar_arrive(&empty[(it - 1) % kStages]);
    acc.rescale(alpha);
  };
  for (int it = 0; it < n_tiles; it += 2) {
    step(it, pa1, pa0);
    if (it + 1 < n_tiles) step(it + 1, pa0, pa1);
  }
  if (n_tiles > 0) {
    const int last = n_tiles - 1;
    mbar_wait(&full_v[last % kStages], (last / kStages) & 1);
    wgmma_fence();
    if (last % 2 == 0) {
      issue_pv(pa0, last);
    } else {
      issue_pv(pa1, last);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(acc.o);
  }

  acc.store(out, rows, q_len, pack);
#else
  __trap();  // built for a target without wgmma; the launcher only picks this kernel on sm_90
#endif
}

/** Tensor map of K or V ([kv_len][kv_heads][128] elements): boxes of 64 columns × 1 head × 128 keys, 128-byte
 * swizzle (the layout wg_swz describes). */
cudaError_t encode_kv_map(CUtensorMap* map, DType dtype, const void* base, int64_t kv_len, int64_t kv_heads) {
  TensorMapEncodeTiled encode = nullptr;
  QK_RETURN_IF_ERROR(tensor_map_encoder(&encode));
  constexpr int D = WgCfg::kD;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(D), static_cast<cuuint64_t>(kv_heads),
                              static_cast<cuuint64_t>(kv_len)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(D) * 2, static_cast<cuuint64_t>(kv_heads) * D * 2};
  const cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(WgCfg::kBK)};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = encode(map, dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                            3, const_cast<void*>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

template <typename T>
cudaError_t launch_ws(const AttentionPrefillArgs& a, cudaStream_t stream) {
  static bool configured = false;  // once per instantiation
  if (!configured) {
    QK_RETURN_IF_ERROR(cudaFuncSetAttribute(ws_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(WsCfg::kSmem)));
    configured = true;
  }
  CUtensorMap map_k{}, map_v{};
  QK_RETURN_IF_ERROR(encode_kv_map(&map_k, a.dtype, a.k, a.kv_len, a.kv_heads));
  QK_RETURN_IF_ERROR(encode_kv_map(&map_v, a.dtype, a.v, a.kv_len, a.kv_heads));
  RowGrid grid{};
  QK_RETURN_IF_ERROR(row_grid(a, WgCfg::kBM, &grid));
  ws_kernel<T><<<grid.blocks, WsCfg::kThreads, WsCfg::kSmem, stream>>>(
      static_cast<T*>(a.out), static_cast<const T*>(a.q), map_k, map_v, static_cast<int>(a.q_len),
      static_cast<int>(a.kv_len), static_cast<int>(a.q_heads), static_cast<int>(a.kv_heads), grid.pack,
      grid.n_hgroups, a.causal ? static_cast<int>(a.position_offset) : 0, a.causal, a.scale * kLog2e);
  return cudaGetLastError();
}

/**
 * Which sm_90a kernel runs: the warp-specialised one unless QK_ATTENTION_SM90=wg picks the single-role kernel (kept
 * for A/B measurements in one process; read once).
 */
inline bool ws_selected() {
  static const bool ws = [] {
    const char* env = std::getenv("QK_ATTENTION_SM90");
    return env == nullptr || std::strcmp(env, "wg") != 0;
  }();
  return ws;
}

template <typename T>
cudaError_t launch_wg_typed(const AttentionPrefillArgs& a, cudaStream_t stream) {
  if (a.head_dim != 128) return cudaErrorInvalidValue;
  // TMA needs 16-byte aligned K and V (rows are 256 bytes, so the base decides).
  if (ws_selected() && aligned16(a.k) && aligned16(a.v)) return launch_ws<T>(a, stream);
  return launch_wg<T, true>(a, stream);
}

}  // namespace
}  // namespace attn_tc

using attn_tc::launch_mma_typed;
using attn_tc::launch_wg_typed;

bool attention_prefill_tc_supported(const AttentionPrefillArgs& a) {
  if (a.dtype != DType::BF16 && a.dtype != DType::F16) return false;
  if (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256) return false;
  return compute_capability() >= 80;  // mma.sync m16n8k16 with bf16 needs sm_80
}

cudaError_t launch_attention_prefill_tc(const AttentionPrefillArgs& a, cudaStream_t stream) {
  // wgmma exists only on sm_90 proper (not on later majors, which run the sm_80 path or JIT-compiled PTX).
  if (compute_capability() == 90 && a.head_dim == 128) {
    if (a.dtype == DType::BF16) return launch_wg_typed<__nv_bfloat16>(a, stream);
    if (a.dtype == DType::F16) return launch_wg_typed<__half>(a, stream);
  }
  if (a.dtype == DType::BF16) return launch_mma_typed<__nv_bfloat16>(a, stream);
  if (a.dtype == DType::F16) return launch_mma_typed<__half>(a, stream);
  return cudaErrorInvalidValue;
}

}  // namespace qk
