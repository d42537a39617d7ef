// The small-M tensor-core linear (GEMM_SKINNY.md). At M ≤ 64 a linear is bound by reading W, so the kernel is built
// to stream W once at the copy ceiling: each block pulls 64 W rows × a 128- or 256-byte k segment per stage into a
// 4-stage cp.async ring in shared memory (16 consecutive lanes read one row segment: long contiguous bursts),
// together with the matching k columns of its x rows, and feeds mma.sync m16n8k16 from there. int8/int4 weights
// become exact bf16/f16 integers in registers, their scales applied to the fp32 accumulators.
//
// Fragment order. Each lane owns one W row of an n8 tile (n = lane / 4) and 8 (bf16/f16) or 16 (int8, int4)
// consecutive k of every 32- or 64-wide "super block" of k: one 16- or 8-byte shared load. The m16n8k16 operands
// want each lane's k slots at {2q, 2q+1, 2q+8, 2q+9}; a dot product does not care which k sits in which slot as
// long as A and B agree, so every 8 k of a lane feed two MMAs in the order they come out of the load (x is read
// the same way; for int4, whose nibbles unpack as (k, k+4) pairs, x's halves are permuted to match).
//
// Split K. A block covers 64 output columns (4 warps × 2 n8 tiles), one tile of x rows, and a slice of K. When the
// output tiles alone would leave the GPU idle, K is split: every block writes fp32 partials to a workspace and the
// last block of a tile to finish (an atomic ticket) adds them in slice order — deterministic — and writes the output.
#include <algorithm>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <type_traits>

#include "../common/cp_async.cuh"
#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/mma.cuh"
#include "../common/numeric.cuh"
#include "gemm_skinny.h"
#include "splitk_workspace.h"

namespace qk {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kNT = 1;                  // n8 tiles per warp
constexpr int kBN = kWarps * kNT * 8;   // output columns per block
// Shared row padding, in bytes. A 16-byte load phase (8 lanes) reads two rows: 4 lanes × 16 contiguous bytes each
// for W and dense x (rows 64 mod 128 apart never collide), 4 lanes × 16 bytes 32 apart for int8/int4 x (16 mod 128).
constexpr int kRowPad = 64;
constexpr int kRowPadIntX = 16;
constexpr size_t kMaxWorkspaceFloats = kSplitkMaxFloats;

template <typename T>
struct SkinnyParams {
  T* out;
  const T* x;
  const void* w;
  const float* scales;
  const T* bias;
  float* partials;       // split K: [row tile][split][tile][rows][kBN]
  unsigned* tickets;     // split K: one per (row tile, column tile); zero between launches
  int m, n, k;
  int group;             // int4: elements per scale group
  int stages_per_split;  // ring stages per K slice (whole scale groups for int4)
  int splits;
  int groups_per_row;    // int4: K / group
  int row_tile0;         // row tile of blockIdx.z = 0 (large M runs in several launches)
};

/**
 * Per format: a lane's shared load of W per super block (`Piece`, `kUnits` units of 8 k, each a `Unit`), k per
 * super block, and W bytes per k.
 */
template <SkinnyWeight WF>
struct Format;
template <>
struct Format<SkinnyWeight::Dense> {
  using Piece = uint4;
  using Unit = uint4;
  static constexpr int kUnits = 1;
  static constexpr int kSuperK = 32;
  static constexpr int kBytesPerK2 = 4;  // W bytes per 2 k
};
template <>
struct Format<SkinnyWeight::Int8> {
  using Piece = uint4;
  using Unit = uint2;
  static constexpr int kUnits = 2;
  static constexpr int kSuperK = 64;
  static constexpr int kBytesPerK2 = 2;
};
template <>
struct Format<SkinnyWeight::Int4> {
  using Piece = uint2;
  using Unit = uint32_t;
  static constexpr int kUnits = 2;
  static constexpr int kSuperK = 64;
  static constexpr int kBytesPerK2 = 1;
};

/**
 * Super blocks of k per stage, every format: 512-byte W row segments (256 for int4, whose x columns per W byte are
 * twice int8's, so a longer segment would double an already wider x tile).
 */
constexpr int kSuperBlocks = 8;
template <SkinnyWeight WF>
constexpr int stage_k() { return kSuperBlocks * Format<WF>::kSuperK; }
template <SkinnyWeight WF>
constexpr int w_stage_bytes() { return stage_k<WF>() / 2 * Format<WF>::kBytesPerK2; }  // one W row, one stage
template <SkinnyWeight WF>
constexpr int w_row_stride() { return w_stage_bytes<WF>() + kRowPad; }
template <SkinnyWeight WF>
constexpr int x_row_stride() {  // bytes (x is bf16/f16)
  return stage_k<WF>() * 2 + (WF == SkinnyWeight::Dense ? kRowPad : kRowPadIntX);
}
template <SkinnyWeight WF, int MT>
constexpr int ring_slot_bytes() { return kBN * w_row_stride<WF>() + MT * 16 * x_row_stride<WF>(); }
/** Ring depth: as many stages (2 to 4) as fit in about 110 KB, so that two blocks share an SM. */
template <SkinnyWeight WF, int MT>
constexpr int ring_stages() {
  constexpr int fit = 110 * 1024 / ring_slot_bytes<WF, MT>();
  return fit < 2 ? 2 : fit > 4 ? 4 : fit;
}

template <SkinnyWeight WF>
__device__ __forceinline__ typename Format<WF>::Unit unit(const typename Format<WF>::Piece& p, int v) {
  if constexpr (WF == SkinnyWeight::Dense) return p;
  else if constexpr (WF == SkinnyWeight::Int8) return v == 0 ? make_uint2(p.x, p.y) : make_uint2(p.z, p.w);
  else return v == 0 ? p.x : p.y;
}

template <SkinnyWeight WF>
__device__ __forceinline__ typename Format<WF>::Piece load_shared_piece(const unsigned char* p) {
  if constexpr (WF == SkinnyWeight::Int4) {
    uint2 v;
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(shared_address(p)));
    return v;
  } else {
    return lds128(p);
  }
}

/** Two floats holding exact small integers as one packed pair of T. */
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

/**
 * B fragments of the two MMAs of one unit (8 consecutive k of a W row): b[0..1] for the first MMA, b[2..3] for the
 * second. Dense and int8 pair the lane's k as (0,1), (2,3), (4,5), (6,7); int4 as (0,4), (1,5), (2,6), (3,7).
 */
template <typename T, SkinnyWeight WF>
__device__ __forceinline__ void b_fragments(const typename Format<WF>::Unit& piece, uint32_t (&b)[4]) {
  if constexpr (WF == SkinnyWeight::Dense) {
    b[0] = piece.x;
    b[1] = piece.y;
    b[2] = piece.z;
    b[3] = piece.w;
  } else if constexpr (WF == SkinnyWeight::Int8) {
    // q + 128 spliced into the mantissa of 2^23, minus 2^23 + 128: the exact integer, then packed (|q| ≤ 128 is exact
    // in bf16 and f16).
    const uint32_t words[2] = {piece.x ^ 0x80808080u, piece.y ^ 0x80808080u};
#pragma unroll
    for (int h = 0; h < 2; h++) {
      float f[4];
#pragma unroll
      for (int i = 0; i < 4; i++) f[i] = __uint_as_float(__byte_perm(words[h], 0x4B000000u, 0x7440 + i)) - 8388736.f;
      b[2 * h] = pack2<T>(f[0], f[1]);
      b[2 * h + 1] = pack2<T>(f[2], f[3]);
    }
  } else {
    // Nibble j of the word is k = j. (word >> 4s) & 0x000F000F holds nibbles s and s + 4; OR-ing the exponent of
    // 128 (bf16) or 1024 (f16) makes 128 + v or 1024 + v exactly, and one packed subtraction of 136 or 1032 leaves
    // the signed q (stored q + 8).
    constexpr uint32_t kMagic = std::is_same_v<T, __nv_bfloat16> ? 0x43004300u : 0x64006400u;
#pragma unroll
    for (int s = 0; s < 4; s++) {
      const uint32_t v = ((piece >> (4 * s)) & 0x000F000Fu) | kMagic;
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        const __nv_bfloat162 r = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&v), __floats2bfloat162_rn(136.f, 136.f));
        b[s] = *reinterpret_cast<const uint32_t*>(&r);
      } else {
        const __half2 r = __hsub2(*reinterpret_cast<const __half2*>(&v), __floats2half2_rn(1032.f, 1032.f));
        b[s] = *reinterpret_cast<const uint32_t*>(&r);
      }
    }
  }
}

/** A fragments of the two MMAs from the lane's 8 k of rows g (lo) and g + 8 (hi), in the order b_fragments uses. */
template <SkinnyWeight WF>
__device__ __forceinline__ void a_fragments(const uint4& lo, const uint4& hi, uint32_t (&a0)[4], uint32_t (&a1)[4]) {
  if constexpr (WF == SkinnyWeight::Int4) {
    // (k, k+4) pairs: the low halves of words 0 and 2 are k 0 and 4, their high halves k 1 and 5, and so on.
    a0[0] = __byte_perm(lo.x, lo.z, 0x5410);
    a0[1] = __byte_perm(hi.x, hi.z, 0x5410);
    a0[2] = __byte_perm(lo.x, lo.z, 0x7632);
    a0[3] = __byte_perm(hi.x, hi.z, 0x7632);
    a1[0] = __byte_perm(lo.y, lo.w, 0x5410);
    a1[1] = __byte_perm(hi.y, hi.w, 0x5410);
    a1[2] = __byte_perm(lo.y, lo.w, 0x7632);
    a1[3] = __byte_perm(hi.y, hi.w, 0x7632);
  } else {
    a0[0] = lo.x;
    a0[1] = hi.x;
    a0[2] = lo.y;
    a0[3] = hi.y;
    a1[0] = lo.z;
    a1[1] = hi.z;
    a1[2] = lo.w;
    a1[3] = hi.w;
  }
}

/** The output element: bias, activation, one rounding. */
template <typename T, Activation A>
__device__ __forceinline__ T finish(float v, const T* __restrict__ bias, int col) {
  if (bias != nullptr) v += to_float(bias[col]);
  return from_float<T>(activate<A>(v));
}

/** Writes rows r, columns c and c + 1 (c even) of the output, as one pair when both exist and N is even. */
template <typename T, Activation A>
__device__ __forceinline__ void store_pair(const SkinnyParams<T>& p, int r, int c, float v0, float v1) {
  if (r >= p.m || c >= p.n) return;
  T* dst = p.out + static_cast<size_t>(r) * p.n + c;
  const T o0 = finish<T, A>(v0, p.bias, c);
  if (c + 1 < p.n) {
    const T o1 = finish<T, A>(v1, p.bias, c + 1);
    if ((p.n & 1) == 0) {
      T pair[2] = {o0, o1};
      *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(pair);
    } else {
      dst[0] = o0;
      dst[1] = o1;
    }
  } else {
    dst[0] = o0;
  }
}

template <typename T, SkinnyWeight WF, int MT, Activation A>
__global__ void __launch_bounds__(kThreads) skinny_kernel(const SkinnyParams<T> p) {
  using F = Format<WF>;
  constexpr int kRows = MT * 16;
  constexpr int kStageK = stage_k<WF>();
  constexpr int kWBytes = w_stage_bytes<WF>();
  constexpr int kWStride = w_row_stride<WF>();
  constexpr int kXStride = x_row_stride<WF>();
  constexpr int kSlot = ring_slot_bytes<WF, MT>();
  constexpr int kPieceBytes = static_cast<int>(sizeof(typename F::Piece));
  constexpr int kStages = ring_stages<WF, MT>();
  extern __shared__ __align__(128) unsigned char ring[];  // kStages × [kBN W rows][kRows x rows]

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const int q = lane & 3;
  const int tile = blockIdx.x;
  const int split = blockIdx.y;
  const int row0 = (p.row_tile0 + static_cast<int>(blockIdx.z)) * kRows;
  const int stages_total = (p.k + kStageK - 1) / kStageK;
  const int st0 = split * p.stages_per_split;
  const int count = min(st0 + p.stages_per_split, stages_total) - st0;
  const size_t w_row_bytes = static_cast<size_t>(p.k) / 2 * F::kBytesPerK2;

  // One stage into a ring slot: 16-byte chunks, consecutive threads along a row (rows past N repeat row N − 1 and
  // are never stored; k past K and rows past M are zeros, so they add nothing).
  auto load_stage = [&](int stage, int slot) {
    unsigned char* base = ring + slot * kSlot;
    constexpr int kWChunks = kWBytes / 16;
    const size_t wk = static_cast<size_t>(stage) * kWBytes;
    for (int i = threadIdx.x; i < kBN * kWChunks; i += kThreads) {
      const int r = i / kWChunks;
      const int c = i - r * kWChunks;
      const int n = min(tile * kBN + r, p.n - 1);
      const size_t at = wk + c * 16;
      const bool live = at < w_row_bytes;
      cp_async16(base + r * kWStride + c * 16,
                 static_cast<const unsigned char*>(p.w) + (live ? static_cast<size_t>(n) * w_row_bytes + at : 0),
                 live ? 16 : 0);
    }
    constexpr int kXChunks = kStageK * 2 / 16;
    unsigned char* xbase = base + kBN * kWStride;
    for (int i = threadIdx.x; i < kRows * kXChunks; i += kThreads) {
      const int r = i / kXChunks;
      const int c = i - r * kXChunks;
      const int kk = stage * kStageK + c * 8;
      const bool live = row0 + r < p.m && kk < p.k;
      cp_async16(xbase + r * kXStride + c * 16, p.x + (live ? static_cast<size_t>(row0 + r) * p.k + kk : 0),
                 live ? 16 : 0);
    }
  };

  float acc[MT][kNT][4];
  float group_acc[MT][kNT][4];
#pragma unroll
  for (int i = 0; i < MT; i++)
#pragma unroll
    for (int j = 0; j < kNT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[i][j][e] = group_acc[i][j][e] = 0.f;

  grid_dependency_wait();
#pragma unroll
  for (int s = 0; s < kStages - 1; s++) {
    if (s < count) load_stage(st0 + s, s);
    cp_async_commit();
  }

  for (int it = 0; it < count; it++) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // this stage is in; every warp is past the slot the next load overwrites
    if (it + kStages - 1 < count) load_stage(st0 + it + kStages - 1, (it + kStages - 1) % kStages);
    cp_async_commit();

    const unsigned char* wbase = ring + (it % kStages) * kSlot;
    const unsigned char* xbase = wbase + kBN * kWStride;
#pragma unroll
    for (int sb = 0; sb < kSuperBlocks; sb++) {
      typename F::Piece piece[kNT];
#pragma unroll
      for (int j = 0; j < kNT; j++) {
        const int r = warp * kNT * 8 + j * 8 + g;
        piece[j] = load_shared_piece<WF>(wbase + r * kWStride + sb * (F::kSuperK / 2 * F::kBytesPerK2) +
                                         q * kPieceBytes);
      }
#pragma unroll
      for (int v = 0; v < F::kUnits; v++) {
        const int kx = sb * F::kSuperK + q * (F::kUnits * 8) + v * 8;  // this lane's 8 k of x, matching the unit
        uint32_t a[MT][2][4];
#pragma unroll
        for (int i = 0; i < MT; i++) {
          const uint4 lo = lds128(xbase + (i * 16 + g) * kXStride + kx * 2);
          const uint4 hi = lds128(xbase + (i * 16 + g + 8) * kXStride + kx * 2);
          a_fragments<WF>(lo, hi, a[i][0], a[i][1]);
        }
#pragma unroll
        for (int j = 0; j < kNT; j++) {
          uint32_t b[4];
          b_fragments<T, WF>(unit<WF>(piece[j], v), b);
#pragma unroll
          for (int i = 0; i < MT; i++) {
            float(&c)[4] = WF == SkinnyWeight::Int4 ? group_acc[i][j] : acc[i][j];
            mma16816<T>(c, a[i][0], b[0], b[1]);
            mma16816<T>(c, a[i][1], b[2], b[3]);
          }
        }
      }
      if constexpr (WF == SkinnyWeight::Int4) {
        // The end of a scale group: fold its sums into the accumulators with the group's scales. Zero k past K may
        // end a "group" past the row; its sums are zero, and the scale index is clamped.
        const int k_end = (st0 + it) * kStageK + (sb + 1) * F::kSuperK;
        if (k_end % p.group == 0) {
          const int grp = min(k_end / p.group - 1, p.groups_per_row - 1);
#pragma unroll
          for (int j = 0; j < kNT; j++) {
            const int c0 = min(tile * kBN + warp * kNT * 8 + j * 8 + 2 * q, p.n - 1);
            const int c1 = min(c0 + 1, p.n - 1);
            const float s0 = __ldg(p.scales + static_cast<size_t>(c0) * p.groups_per_row + grp);
            const float s1 = __ldg(p.scales + static_cast<size_t>(c1) * p.groups_per_row + grp);
#pragma unroll
            for (int i = 0; i < MT; i++) {
              acc[i][j][0] += group_acc[i][j][0] * s0;
              acc[i][j][1] += group_acc[i][j][1] * s1;
              acc[i][j][2] += group_acc[i][j][2] * s0;
              acc[i][j][3] += group_acc[i][j][3] * s1;
#pragma unroll
              for (int e = 0; e < 4; e++) group_acc[i][j][e] = 0.f;
            }
          }
        }
      }
    }
  }
  cp_async_wait<0>();

  const int col_warp = tile * kBN + warp * kNT * 8;
  if constexpr (WF == SkinnyWeight::Int8) {
#pragma unroll
    for (int j = 0; j < kNT; j++) {
      const int c0 = min(col_warp + j * 8 + 2 * q, p.n - 1);
      const float s0 = __ldg(p.scales + c0);
      const float s1 = __ldg(p.scales + min(c0 + 1, p.n - 1));
#pragma unroll
      for (int i = 0; i < MT; i++) {
        acc[i][j][0] *= s0;
        acc[i][j][1] *= s1;
        acc[i][j][2] *= s0;
        acc[i][j][3] *= s1;
      }
    }
  }

  if (p.splits == 1) {
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
      for (int j = 0; j < kNT; j++) {
        const int r = row0 + i * 16 + g;
        const int c = col_warp + j * 8 + 2 * q;
        store_pair<T, A>(p, r, c, acc[i][j][0], acc[i][j][1]);
        store_pair<T, A>(p, r + 8, c, acc[i][j][2], acc[i][j][3]);
      }
    return;
  }

  // Split K: this slice's partial tile, then a ticket; the last slice of the tile to arrive reduces.
  const int tiles = gridDim.x;
  const size_t tile_floats = static_cast<size_t>(kRows) * kBN;
  float* mine = p.partials + ((static_cast<size_t>(blockIdx.z) * p.splits + split) * tiles + tile) * tile_floats;
#pragma unroll
  for (int i = 0; i < MT; i++)
#pragma unroll
    for (int j = 0; j < kNT; j++) {
      const int r = i * 16 + g;
      const int c = warp * kNT * 8 + j * 8 + 2 * q;
      __stcg(reinterpret_cast<float2*>(mine + r * kBN + c), make_float2(acc[i][j][0], acc[i][j][1]));
      __stcg(reinterpret_cast<float2*>(mine + (r + 8) * kBN + c), make_float2(acc[i][j][2], acc[i][j][3]));
    }
  __threadfence();
  __syncthreads();
  __shared__ unsigned is_last;
  unsigned* ticket = p.tickets + static_cast<size_t>(blockIdx.z) * tiles + tile;
  if (threadIdx.x == 0) is_last = atomicAdd(ticket, 1u) == static_cast<unsigned>(p.splits - 1);
  __syncthreads();
  if (!is_last) return;
  __threadfence();  // the other slices' partials, published before their tickets, are visible from here on

  const float* first = p.partials + (static_cast<size_t>(blockIdx.z) * p.splits * tiles + tile) * tile_floats;
  const size_t split_stride = static_cast<size_t>(tiles) * tile_floats;
  for (int e = threadIdx.x * 2; e < kRows * kBN; e += kThreads * 2) {
    float2 sum = make_float2(0.f, 0.f);
    for (int s = 0; s < p.splits; s++) {
      const float2 v = __ldcg(reinterpret_cast<const float2*>(first + s * split_stride + e));
      sum.x += v.x;
      sum.y += v.y;
    }
    const int r = e / kBN;
    const int c = e - r * kBN;
    store_pair<T, A>(p, row0 + r, tile * kBN + c, sum.x, sum.y);
  }
  if (threadIdx.x == 0) *ticket = 0;  // ready for the next launch (stream order keeps launches apart)
}

template <typename T, SkinnyWeight WF, int MT, Activation A>
cudaError_t run(const SkinnyArgs& a, cudaStream_t stream, int forced_splits) {
  constexpr int kRows = MT * 16;
  constexpr int kStageK = stage_k<WF>();
  const int stages_total = static_cast<int>((a.k + kStageK - 1) / kStageK);
  // A slice holds whole scale groups (int4 groups longer than a stage span several).
  const int align = WF == SkinnyWeight::Int4 ? std::max<int>(1, static_cast<int>(a.group / kStageK)) : 1;
  const int tiles = static_cast<int>((a.n + kBN - 1) / kBN);
  const int row_tiles = static_cast<int>((a.m + kRows - 1) / kRows);
  int sms = 0;
  QK_RETURN_IF_ERROR(sm_count(&sms));

  // Slices: about four blocks per SM, none shorter than two stages, partials within the workspace.
  const int units = (stages_total + align - 1) / align;
  const size_t split_floats = static_cast<size_t>(tiles) * kRows * kBN;  // one slice of one row tile
  int splits = forced_splits > 0 ? forced_splits
                                 : std::max(1, (4 * sms + tiles * row_tiles - 1) / (tiles * row_tiles));
  if (forced_splits <= 0) splits = std::min(splits, std::max(1, units * align / 2));
  splits = std::min<int>(splits, static_cast<int>(std::max<size_t>(1, kMaxWorkspaceFloats / split_floats)));
  splits = std::max(1, std::min(splits, units));
  const int stages_per_split = ((units + splits - 1) / splits) * align;
  splits = (stages_total + stages_per_split - 1) / stages_per_split;

  // Row tiles per launch: as many as the workspace holds partials for (one launch unless M is in the hundreds).
  const int per_launch = static_cast<int>(
      std::min<size_t>(row_tiles, std::max<size_t>(1, kMaxWorkspaceFloats / (splits * split_floats))));
  SplitkWorkspace ws;
  int final_splits = splits;
  int final_stages = stages_per_split;
  if (splits > 1 && !reserve_splitk_workspace(static_cast<size_t>(per_launch) * splits * split_floats,
                                       static_cast<size_t>(per_launch) * tiles, stream, &ws)) {
    final_splits = 1;  // no workspace (stream capture, memory): whole K per block
    final_stages = stages_total;
  }

  SkinnyParams<T> p{};
  p.out = static_cast<T*>(a.out);
  p.x = static_cast<const T*>(a.x);
  p.w = a.w;
  p.scales = a.scales;
  p.bias = static_cast<const T*>(a.bias);
  p.partials = ws.partials;
  p.tickets = ws.tickets;
  p.m = static_cast<int>(a.m);
  p.n = static_cast<int>(a.n);
  p.k = static_cast<int>(a.k);
  p.group = WF == SkinnyWeight::Int4 ? static_cast<int>(a.group) : 0;
  p.stages_per_split = final_stages;
  p.splits = final_splits;
  p.groups_per_row = WF == SkinnyWeight::Int4 ? static_cast<int>(a.k / a.group) : 0;

  constexpr size_t kSmem = static_cast<size_t>(ring_stages<WF, MT>()) * ring_slot_bytes<WF, MT>();
  auto kernel = skinny_kernel<T, WF, MT, A>;
  static bool opted_in = false;  // per instantiation
  if (!opted_in) {
    QK_RETURN_IF_ERROR(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)));
    opted_in = true;
  }
  for (int first = 0; first < row_tiles; first += per_launch) {
    p.row_tile0 = first;
    const int n_tiles = std::min(per_launch, row_tiles - first);
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(final_splits), static_cast<unsigned>(n_tiles));
    QK_RETURN_IF_ERROR(launch_kernel(kernel, grid, dim3(kThreads), kSmem, stream, p));
  }
  return cudaSuccess;
}

template <typename T, SkinnyWeight WF, Activation A>
cudaError_t by_rows(const SkinnyArgs& a, cudaStream_t stream, int splits) {
  if (a.m <= 16) return run<T, WF, 1, A>(a, stream, splits);
  if (a.m <= 32) return run<T, WF, 2, A>(a, stream, splits);
  return run<T, WF, 4, A>(a, stream, splits);
}

template <typename T>
cudaError_t by_format(const SkinnyArgs& a, cudaStream_t stream, int splits) {
  switch (a.weight) {
    case SkinnyWeight::Int8: return by_rows<T, SkinnyWeight::Int8, Activation::None>(a, stream, splits);
    case SkinnyWeight::Int4: return by_rows<T, SkinnyWeight::Int4, Activation::None>(a, stream, splits);
    default: break;
  }
  switch (a.act) {
    case Activation::None: return by_rows<T, SkinnyWeight::Dense, Activation::None>(a, stream, splits);
    case Activation::Silu: return by_rows<T, SkinnyWeight::Dense, Activation::Silu>(a, stream, splits);
    case Activation::Gelu: return by_rows<T, SkinnyWeight::Dense, Activation::Gelu>(a, stream, splits);
    case Activation::GeluTanh: return by_rows<T, SkinnyWeight::Dense, Activation::GeluTanh>(a, stream, splits);
    default: return cudaErrorInvalidValue;
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

bool gemm_skinny_supports(const SkinnyArgs& a) {
  if (a.dtype != DType::BF16 && a.dtype != DType::F16) return false;
  if (a.m <= 0 || a.n <= 0 || a.k <= 0 || a.m > INT32_MAX || a.n > INT32_MAX || a.k > INT32_MAX) return false;
  if (a.k % 32 != 0 || !aligned16(a.x) || !aligned16(a.w)) return false;
  if ((a.m + kSkinnyTileM - 1) / kSkinnyTileM > 65535) return false;
  switch (a.weight) {
    case SkinnyWeight::Dense:
      return a.act == Activation::None || a.act == Activation::Silu || a.act == Activation::Gelu ||
             a.act == Activation::GeluTanh;
    case SkinnyWeight::Int8: return a.act == Activation::None && a.scales != nullptr;
    case SkinnyWeight::Int4: {
      // Groups of whole super blocks (64 k) that tile a stage (256 k) or a whole number of stages.
      constexpr int64_t kStageK = stage_k<SkinnyWeight::Int4>();
      if (a.act != Activation::None || a.scales == nullptr || a.group <= 0 || a.k % a.group != 0) return false;
      return a.group % Format<SkinnyWeight::Int4>::kSuperK == 0 && (kStageK % a.group == 0 || a.group % kStageK == 0);
    }
  }
  return false;
}

cudaError_t launch_gemm_skinny(const SkinnyArgs& a, cudaStream_t stream, int splits) {
  if (!gemm_skinny_supports(a)) return cudaErrorInvalidValue;
  if (a.dtype == DType::BF16) return by_format<__nv_bfloat16>(a, stream, splits);
  return by_format<__half>(a, stream, splits);
}

int64_t skinny_max_dense_m() {
  // On Hopper the wgmma GEMM beats this kernel from 17 rows at every width, and below that on wide projections
  // (launch_linear asks gemm_sm90_takes_small_m); this kernel keeps narrow ones up to 16 rows (GEMM_SM90.md).
  return compute_capability() == 90 ? kSkinnyMaxDenseMHopper : kSkinnyMaxDenseM;
}

cudaError_t try_gemm_skinny(const SkinnyArgs& a, cudaStream_t stream, bool* launched) {
  *launched = false;
  const int64_t max_m = a.weight == SkinnyWeight::Dense ? skinny_max_dense_m() : INT32_MAX;
  if (a.m < kSkinnyMinM || a.m > max_m || !gemm_skinny_supports(a)) return cudaSuccess;
  const cudaError_t e = launch_gemm_skinny(a, stream);
  if (e == cudaErrorMemoryAllocation) return cudaSuccess;  // no workspace: the caller's path needs none
  *launched = true;
  return e;
}

}  // namespace qk
