// GEMV engine of the linear family: out[M, N] = x[M, K] · W[N, K]ᵀ for decode-sized M, memory-bound on W.
//
// Layout of the work: a block of 8 warps owns a few consecutive output rows. With split S (1, 2, 4 or 8, chosen on
// the host: see WideShape for one row of x), the 8 warps form 8/S row groups of S warps, each warp streaming one
// contiguous K-slice of its group's R rows; the S partial sums meet in shared memory and are
// added in a fixed order (deterministic, no scratch, no atomics). Each lane keeps U·R independent 16-byte weight
// loads in flight (ld.global.nc, no L1 allocation: W is read once), the first batch issued before x is staged
// so the staging hides under the load latency. x (optionally RMS-normalised first, for rmsnormLinear) is staged
// in shared memory in its dtype when the block's rows fit in 48 KB, else read through L1. fp32 accumulation,
// warp-shuffle reduction, then bias, per-row scale (int8) and the activation epilogue.
//
// Weight formats share the kernel: float (bf16/f16/f32 like x), int8 (16 per vector, scale per row) and int4
// (32 per vector, scale per group of ≥ 32 along K). Shapes the 16-byte path cannot take (K not a whole number of
// vectors, misaligned pointers, int4 groups not a multiple of 32) run a scalar kernel: one warp per row.
#include <type_traits>

#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/numeric.cuh"
#include "gemm.h"
#include "gemm_skinny.h"
#include "gemm_sm90.h"
#include "gemv.h"

namespace qk {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
/**
 * Staged x per block: with the kernel's static shared memory (≤ 800 bytes) it stays below the 48 KB a launch may
 * use without opting in, and leaves room for 4 blocks per SM.
 */
constexpr size_t kXSmemBudget = 46 * 1024;
/** Split-K never cuts a warp's K-slice below this many 16-byte vectors (4 per lane). */
constexpr int kMinSliceVectors = 128;
/** Split-K aims for at least this many warps per SM over the whole grid. */
constexpr int kTargetWarpsPerSm = 16;

enum class Kind { Float, Int8, Int4 };

/** 16 raw bytes of W. */
using Raw = Vec<uint32_t>;

template <Kind K, typename X>
struct Fmt;
template <typename X>
struct Fmt<Kind::Float, X> {
  static constexpr int kEpv = kVec<X>;  // weights per 16-byte vector
};
template <typename X>
struct Fmt<Kind::Int8, X> {
  static constexpr int kEpv = 16;
};
template <typename X>
struct Fmt<Kind::Int4, X> {
  static constexpr int kEpv = 32;
};

template <typename X>
struct GemvParams {
  X* out;
  const X* x;
  const void* w;
  const float* scales;  // int8: [N]; int4: [N, K / group]
  const X* bias;        // nullptr: none
  const X* norm_w;      // rmsnormLinear: [K]
  const X* residual;    // rmsnormLinear: added to x before the norm (nullptr: none)
  X* residual_out;      // rmsnormLinear: receives x + residual (nullptr: not written)
  int m;
  int k;
  int n;
  int group;  // int4 group size
  int split;  // S: warps per row group
  bool early_trigger;  // PDL: release the next kernel at the start (else when each block reaches its last tile)
  float eps;
};

/** The 16 raw bytes of W as floats (int formats: the integer q, scales applied later). */
template <Kind K, typename X>
__device__ __forceinline__ void dequant(const Raw& r, float* f) {
  if constexpr (K == Kind::Int8) {
    // Bias each byte to unsigned (q + 128), splice it into the mantissa of 2^23 and subtract: exact, no I2F.
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const uint32_t u = r.v[i] ^ 0x80808080u;
#pragma unroll
      for (int b = 0; b < 4; b++) f[4 * i + b] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7440 + b)) - 8388736.f;
    }
  } else if constexpr (K == Kind::Int4) {
    // Nibble j of word i is element 8i + j (low nibble = even k); stored q + 8.
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
      for (int j = 0; j < 8; j++) f[8 * i + j] = __uint_as_float(0x4B000000u | ((r.v[i] >> (4 * j)) & 0xFu)) - 8388616.f;
    }
  } else if constexpr (std::is_same_v<X, float>) {
#pragma unroll
    for (int i = 0; i < 4; i++) f[i] = __uint_as_float(r.v[i]);
  } else if constexpr (std::is_same_v<X, __half>) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float2 h = __half22float2(*reinterpret_cast<const __half2*>(&r.v[i]));
      f[2 * i] = h.x;
      f[2 * i + 1] = h.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      f[2 * i] = __uint_as_float(r.v[i] << 16);
      f[2 * i + 1] = __uint_as_float(r.v[i] & 0xFFFF0000u);
    }
  }
}

/** One weight as a float, for the scalar path (int4 includes its group scale, int8 not). */
template <Kind K, typename X>
__device__ __forceinline__ float weight_at(const GemvParams<X>& p, int64_t row, int k) {
  if constexpr (K == Kind::Int8) {
    return static_cast<float>(static_cast<const int8_t*>(p.w)[row * p.k + k]);
  } else if constexpr (K == Kind::Int4) {
    const uint8_t byte = static_cast<const uint8_t*>(p.w)[row * (p.k / 2) + (k >> 1)];
    const int q = static_cast<int>((k & 1) ? (byte >> 4) : (byte & 0xF)) - 8;
    return static_cast<float>(q) * p.scales[row * (p.k / p.group) + k / p.group];
  } else {
    return to_float(static_cast<const X*>(p.w)[row * p.k + k]);
  }
}

/** x[m_abs, k .. k+V) plus the residual when there is one, rounded to X as the fused add+RMSNorm kernel does. */
template <typename X>
__device__ __forceinline__ Vec<X> x_sum_vec(const GemvParams<X>& p, size_t at) {
  Vec<X> v = load_vec(p.x + at);
  if (p.residual != nullptr) {
    const Vec<X> r = load_vec(p.residual + at);
#pragma unroll
    for (int j = 0; j < kVec<X>; j++) v.v[j] = from_float<X>(to_float(v.v[j]) + to_float(r.v[j]));
  }
  return v;
}

/** The scalar form of x_sum_vec. */
template <typename X>
__device__ __forceinline__ float x_sum_at(const GemvParams<X>& p, size_t at) {
  const float f = to_float(p.x[at]);
  return p.residual == nullptr ? f : to_float(from_float<X>(f + to_float(p.residual[at])));
}

/** x[m_abs, k .. k+V) from global memory, RMS-normalised and rounded to X when kNorm (as the rmsnorm kernel). */
template <typename X, bool kNorm>
__device__ __forceinline__ Vec<X> x_vec_global(const GemvParams<X>& p, int m_abs, int k, float inv) {
  if constexpr (!kNorm) return load_vec(p.x + static_cast<size_t>(m_abs) * p.k + k);
  Vec<X> v = x_sum_vec(p, static_cast<size_t>(m_abs) * p.k + k);
  if constexpr (kNorm) {
    const Vec<X> w = load_vec(p.norm_w + k);
#pragma unroll
    for (int j = 0; j < kVec<X>; j++) v.v[j] = from_float<X>(to_float(v.v[j]) * inv * to_float(w.v[j]));
  }
  return v;
}

/**
 * inv_s[m] = rsqrt(mean(h[m0 + m]²) + eps) for the block's rows, h = x (+ residual), fp32 sums as the rmsnorm
 * kernel. The blocks of grid column 0 also write h to residual_out.
 */
template <typename X, int MT, bool kVecX>
__device__ __forceinline__ void block_inv_rms(const GemvParams<X>& p, int m0, int mc, float (*ss_s)[MT],
                                              float* inv_s) {
  float ss[MT];
#pragma unroll
  for (int m = 0; m < MT; m++) ss[m] = 0.f;
  const size_t base = static_cast<size_t>(m0) * p.k;
  const bool write_h = p.residual_out != nullptr && blockIdx.x == 0;
  if constexpr (kVecX) {
    constexpr int V = kVec<X>;
    const int nv = p.k / V;
    for (int i = threadIdx.x; i < nv; i += kThreads) {
#pragma unroll
      for (int m = 0; m < MT; m++) {
        if (m < mc) {
          const size_t at = base + static_cast<size_t>(m) * p.k + i * V;
          const Vec<X> v = x_sum_vec(p, at);
          if (write_h) store_vec(p.residual_out + at, v);
#pragma unroll
          for (int j = 0; j < V; j++) {
            const float f = to_float(v.v[j]);
            ss[m] += f * f;
          }
        }
      }
    }
  } else {
    for (int i = threadIdx.x; i < p.k; i += kThreads) {
#pragma unroll
      for (int m = 0; m < MT; m++) {
        if (m < mc) {
          const size_t at = base + static_cast<size_t>(m) * p.k + i;
          const float f = x_sum_at(p, at);
          if (write_h) p.residual_out[at] = from_float<X>(f);
          ss[m] += f * f;
        }
      }
    }
  }
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int m = 0; m < MT; m++) ss[m] = warp_sum(ss[m]);
  if (lane == 0) {
#pragma unroll
    for (int m = 0; m < MT; m++) ss_s[warp][m] = ss[m];
  }
  __syncthreads();
  if (threadIdx.x < MT) {
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; w++) total += ss_s[w][threadIdx.x];
    inv_s[threadIdx.x] = rsqrtf(total / static_cast<float>(p.k) + p.eps);
  }
  __syncthreads();
}

/** Epilogue of a SwiGLU pair: silu(gate) · up from the two fp32 sums, one rounding. */
template <typename X>
__device__ __forceinline__ void store_glu(const GemvParams<X>& p, int m0, int mc, int m, int64_t row, float gate,
                                          float up) {
  if (m >= mc || row >= p.n) return;
  p.out[static_cast<size_t>(m0 + m) * p.n + row] = from_float<X>(activate<Activation::Swiglu>(gate) * up);
}

/** Epilogue of one output: per-row scale (int8), bias, activation, one rounding. */
template <Kind K, typename X, Activation A>
__device__ __forceinline__ void store_out(const GemvParams<X>& p, int m0, int mc, int m, int64_t row, float v) {
  if (m >= mc || row >= p.n) return;
  if constexpr (K == Kind::Int8) v *= p.scales[row];
  if (p.bias != nullptr) v += to_float(p.bias[row]);
  p.out[static_cast<size_t>(m0 + m) * p.n + row] = from_float<X>(activate<A>(v));
}

/**
 * Blocks per SM the register allocation must allow: 3 (≤ 85 registers) for the plain M = 1 kernel, 2 (≤ 128) with
 * an activation or M > 1; 2 and 1 where x is read through L1 (more live addresses), 1 for int4 weights with f32
 * x at M > 4 (32 dequantised weights against 8 rows of fp32 x). Pinned so that ptxas does not trade spills for
 * occupancy.
 */
template <Kind K, typename X, int MT, bool kXSmem, Activation A>
constexpr int kMinBlocks = (K == Kind::Int4 && MT == 8 && sizeof(X) == 4) ? 1
                           : kXSmem ? (MT == 1 && A == Activation::None ? 3 : 2)
                                    : (MT == 1 ? 2 : 1);

/**
 * The 16-byte path. Block: 8 warps = (8 / S) row groups × S K-slices; a group owns R consecutive rows; blockIdx.z
 * picks the chunk of MT x rows. Requires K % kEpv == 0 and 16-byte aligned x, W (and norm_w).
 */
template <Kind K, typename X, int MT, int R, int U, Activation A, bool kNorm, bool kXSmem>
__global__ void __launch_bounds__(kThreads, kMinBlocks<K, X, MT, kXSmem, A>) gemv_vec_kernel(const GemvParams<X> p) {
  constexpr int EPV = Fmt<K, X>::kEpv;
  constexpr int XV = kVec<X>;
  constexpr int XPV = EPV / XV;  // x vectors per weight vector
  // SwiGLU: a group's R = 2 weight rows are one output's gate row j and up row n + j; else R consecutive outputs.
  constexpr bool kGlu = A == Activation::Swiglu;
  static_assert(!kGlu || (R == 2 && K == Kind::Float), "SwiGLU pairs two float weight rows");
  constexpr int RO = kGlu ? 1 : R;  // outputs per group
  extern __shared__ __align__(16) unsigned char gemv_smem[];
  X* xs = reinterpret_cast<X*>(gemv_smem);  // [MT][K] when kXSmem
  __shared__ float red[kWarps][MT][R];
  __shared__ float ss_s[kWarps][MT];
  __shared__ float inv_s[MT];

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int S = p.split;
  const int groups = kWarps / S;
  const int group = warp / S;
  const int slice = warp - group * S;
  const int64_t rows_per_tile = static_cast<int64_t>(groups) * RO;
  const int64_t tiles = (static_cast<int64_t>(p.n) + rows_per_tile - 1) / rows_per_tile;
  const int m0 = static_cast<int>(blockIdx.z) * MT;
  const int mc = min(MT, p.m - m0);
  const int KV = p.k / EPV;
  const int chunk = ((KV + S - 1) / S + 31) & ~31;
  const int begin = min(KV, slice * chunk);
  const int end = min(KV, begin + chunk);

  // The block walks tiles of rows_per_tile rows (grid-stride): x is staged once per block, not once per tile.
  int64_t tile = blockIdx.x;
  int64_t row0 = 0;
  const Raw* wrow[R];
  const float* srow[R];
  bool rvalid[R];
  auto set_rows = [&](int64_t t) {
    row0 = t * rows_per_tile + static_cast<int64_t>(group) * RO;
#pragma unroll
    for (int r = 0; r < R; r++) {
      const int64_t row = kGlu ? row0 + r * static_cast<int64_t>(p.n) : row0 + r;
      rvalid[r] = (kGlu ? row0 : row) < p.n;
      const int64_t safe = rvalid[r] ? row : 0;
      wrow[r] = static_cast<const Raw*>(p.w) + safe * KV;
      srow[r] = K == Kind::Int4 ? p.scales + safe * (p.k / p.group) : nullptr;
    }
  };
  set_rows(tile);

  // Launched as a programmatic dependent: the first tile's weights are pulled into L2 while the previous kernel
  // finishes; nothing is read before the wait (x, the output and even W may be written by earlier kernels).
  {
    const int64_t first = tile * rows_per_tile;
    const int64_t count = min(rows_per_tile, static_cast<int64_t>(p.n) - first);
    const int64_t i = threadIdx.x;
    if (i < (kGlu ? 2 : 1) * count) {
      const int64_t row = first + (kGlu && i >= count ? p.n + i - count : i);
      prefetch_l2(static_cast<const Raw*>(p.w) + row * KV, static_cast<unsigned>(KV) * 16u);
    }
  }
  grid_dependency_wait();
  // A dependent released at the start becomes resident while this grid still has blocks to place and can hold
  // their slots (the GEMVs here run more blocks than fit at once); by default it is released as each block
  // starts its last tile, so it prefetches under this kernel's tail only.
  if (p.early_trigger) allow_dependents_launch();

  Raw raw[R][U];
  auto load_batch = [&](int base) {
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int idx = base + u * 32 + lane;
#pragma unroll
      for (int r = 0; r < R; r++) {
        if (idx < end && rvalid[r]) {
          raw[r][u] = load_vec_stream(reinterpret_cast<const uint32_t*>(wrow[r] + idx));
        } else {
          raw[r][u] = Raw{};
        }
      }
    }
  };
  // The first batch of W goes out before x is staged: the staging runs under its latency.
  if (begin < end) load_batch(begin);

  if constexpr (kNorm) block_inv_rms<X, MT, true>(p, m0, mc, ss_s, inv_s);
  if constexpr (kXSmem) {
    const int nv = p.k / XV;
#pragma unroll
    for (int m = 0; m < MT; m++) {
      for (int j = threadIdx.x; j < nv; j += kThreads) {
        Vec<X> v{};
        if (m < mc) v = x_vec_global<X, kNorm>(p, m0 + m, j * XV, kNorm ? inv_s[m] : 0.f);
        store_vec(xs + static_cast<size_t>(m) * p.k + j * XV, v);  // rows past M are zeros
      }
    }
    __syncthreads();
  }
  float inv[MT];
#pragma unroll
  for (int m = 0; m < MT; m++) inv[m] = (kNorm && !kXSmem) ? inv_s[m < mc ? m : 0] : 0.f;

  for (; tile < tiles; tile += gridDim.x) {
    if (!p.early_trigger && tile + gridDim.x >= tiles) allow_dependents_launch();
    // raw holds this tile's first batch (loaded before the staging, or under the previous tile's reduction).
    float acc[MT][R];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
      for (int r = 0; r < R; r++) acc[m][r] = 0.f;

    for (int base = begin; base < end; base += 32 * U) {
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int idx = base + u * 32 + lane;
        if (idx < end) {
          const int k0 = idx * EPV;
          float wf[R][EPV];
#pragma unroll
          for (int r = 0; r < R; r++) dequant<K, X>(raw[r][u], wf[r]);
          float gscale[R];
          if constexpr (K == Kind::Int4) {
#pragma unroll
            for (int r = 0; r < R; r++) gscale[r] = __ldg(srow[r] + k0 / p.group);
          }
#pragma unroll
          for (int m = 0; m < MT; m++) {
            if (kXSmem || m < mc) {
              float part[R];
#pragma unroll
              for (int r = 0; r < R; r++) part[r] = 0.f;
#pragma unroll
              for (int c = 0; c < XPV; c++) {
                Vec<X> xv;
                if constexpr (kXSmem) {
                  xv = load_vec(xs + static_cast<size_t>(m) * p.k + k0 + c * XV);
                } else {
                  xv = x_vec_global<X, kNorm>(p, m0 + m, k0 + c * XV, inv[m]);
                }
#pragma unroll
                for (int j = 0; j < XV; j++) {
                  const float xf = to_float(xv.v[j]);
#pragma unroll
                  for (int r = 0; r < R; r++) part[r] = fmaf(wf[r][c * XV + j], xf, part[r]);
                }
              }
#pragma unroll
              for (int r = 0; r < R; r++) {
                if constexpr (K == Kind::Int4) {
                  acc[m][r] = fmaf(part[r], gscale[r], acc[m][r]);
                } else {
                  acc[m][r] += part[r];
                }
              }
            }
          }
        }
      }
      if (base + 32 * U < end) load_batch(base + 32 * U);
    }

    // The next tile's first batch goes out before this tile's reduction and stores.
    const int64_t tile_row0 = row0;
    if (tile + gridDim.x < tiles) {
      set_rows(tile + gridDim.x);
      if (begin < end) load_batch(begin);
    }
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
      for (int r = 0; r < R; r++) acc[m][r] = warp_sum(acc[m][r]);

    if (S == 1) {
      if constexpr (kGlu) {
#pragma unroll
        for (int m = 0; m < MT; m++)
          if (lane == m) store_glu(p, m0, mc, m, tile_row0, acc[m][0], acc[m][1]);
      } else {
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
          for (int r = 0; r < R; r++)
            if (lane == m * R + r) store_out<K, X, A>(p, m0, mc, m, tile_row0 + r, acc[m][r]);
      }
    } else {
      if (lane == 0) {
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
          for (int r = 0; r < R; r++) red[warp][m][r] = acc[m][r];
      }
      __syncthreads();
      // Slices are added in slice order: the result does not depend on which warp finished first.
      if constexpr (kGlu) {
        for (int i = threadIdx.x; i < groups * MT; i += kThreads) {
          const int g = i / MT;
          const int m = i - g * MT;
          float gate = 0.f, up = 0.f;
          for (int s = 0; s < S; s++) {
            gate += red[g * S + s][m][0];
            up += red[g * S + s][m][1];
          }
          store_glu(p, m0, mc, m, tile * rows_per_tile + g, gate, up);
        }
      } else {
        for (int i = threadIdx.x; i < groups * MT * R; i += kThreads) {
          const int g = i / (MT * R);
          const int mr = i - g * MT * R;
          const int m = mr / R;
          const int r = mr - m * R;
          float v = 0.f;
          for (int s = 0; s < S; s++) v += red[g * S + s][m][r];
          store_out<K, X, A>(p, m0, mc, m, tile * rows_per_tile + static_cast<int64_t>(g) * R + r, v);
        }
      }
      __syncthreads();  // red is rewritten by the next tile
    }
  }
}

/** Scalar path for any K and alignment: one warp per output row, lanes stride along K. */
template <Kind K, typename X, int MT, Activation A, bool kNorm>
__global__ void __launch_bounds__(kThreads) gemv_scalar_kernel(const GemvParams<X> p) {
  __shared__ float ss_s[kWarps][MT];
  __shared__ float inv_s[MT];
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int m0 = static_cast<int>(blockIdx.z) * MT;
  const int mc = min(MT, p.m - m0);
  grid_dependency_wait();
  allow_dependents_launch();
  if constexpr (kNorm) block_inv_rms<X, MT, false>(p, m0, mc, ss_s, inv_s);
  // SwiGLU: the warp's output row takes two dot products, gate row `row` and up row n + row.
  constexpr bool kGlu = A == Activation::Swiglu;
  constexpr int NR = kGlu ? 2 : 1;
  float acc[NR][MT];
#pragma unroll
  for (int r = 0; r < NR; r++)
#pragma unroll
    for (int m = 0; m < MT; m++) acc[r][m] = 0.f;
  if (row < p.n) {
#pragma unroll 2
    for (int k = lane; k < p.k; k += 32) {
      float w[NR];
#pragma unroll
      for (int r = 0; r < NR; r++) w[r] = weight_at<K, X>(p, row + r * static_cast<int64_t>(p.n), k);
      const float nw = kNorm ? to_float(p.norm_w[k]) : 1.f;
#pragma unroll
      for (int m = 0; m < MT; m++) {
        if (m < mc) {
          const size_t at = static_cast<size_t>(m0 + m) * p.k + k;
          float xv = kNorm ? x_sum_at(p, at) : to_float(p.x[at]);
          if constexpr (kNorm) xv = to_float(from_float<X>(xv * inv_s[m] * nw));
#pragma unroll
          for (int r = 0; r < NR; r++) acc[r][m] = fmaf(w[r], xv, acc[r][m]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < NR; r++)
#pragma unroll
    for (int m = 0; m < MT; m++) acc[r][m] = warp_sum(acc[r][m]);
#pragma unroll
  for (int m = 0; m < MT; m++) {
    if (lane != m) continue;
    if constexpr (kGlu) {
      store_glu(p, m0, mc, m, row, acc[0][m], acc[NR - 1][m]);
    } else {
      store_out<K, X, A>(p, m0, mc, m, row, acc[0][m]);
    }
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }


/**
 * Launch shape of the one-row float GEMV (plain, with an epilogue, normalised, or SwiGLU pairs): split S and grid.
 * Measured on an H100 over every Qwen3-0.6B and -8B projection (bf16, 2026-11-22; 10 shapes × R ∈ {1, 2, 4} ×
 * S ∈ {1 … 8} × four grid sizes): a resident grid that walks its tiles beat one block per tile on every shape
 * (8B o 14.8 → 12.3 µs, down 43.0 → 33.6 µs, 0.6B gate/up 6.7 → 5.2 µs), because a block stages x once and issues
 * its next tile's loads under the reduction of the current one. Warps work best on K-slices of ~128–192 vectors: S
 * is the largest power of two ≤ 8 that keeps a slice at ≥ 128 vectors, and at least 2 once K has 64 vectors.
 * Two resident waves of blocks only paid off where the tiles outnumber the slots four times over (LM heads, 8B
 * gate/up).
 */
struct WideShape {
  int split;
  int64_t blocks;
};
WideShape wide_shape(int kv, int64_t row_groups, int64_t resident) {
  int s = 1;
  while (s < kWarps && kv / (2 * s) >= kMinSliceVectors) s *= 2;
  if (s == 1 && kv >= 64) s = 2;
  const int64_t tiles = (row_groups + kWarps / s - 1) / (kWarps / s);
  const int64_t slots = tiles >= 4 * resident ? 2 * resident : resident;
  return {s, tiles < slots ? tiles : slots};
}

template <Kind K, typename X, int MT, Activation A, bool kNorm>
cudaError_t run_vec(GemvParams<X> p, int sms, cudaStream_t stream) {
  // Float weights share each staged x vector between two rows once M ≥ 4 (halves shared-memory traffic), and at
  // M = 1 two rows per warp keep the same 8 loads in flight in shorter slices (see WideShape); quantized weights
  // dequantise 16–32 values per vector and keep one row per warp to stay within registers. SwiGLU always pairs the
  // gate and up rows of one output (R = 2).
  constexpr bool kWide = K == Kind::Float && MT == 1;
  constexpr int R = (A == Activation::Swiglu || (K == Kind::Float && (MT >= 4 || kWide))) ? 2 : 1;
  constexpr int RO = A == Activation::Swiglu ? 1 : R;  // outputs per row group
  // 8 loads of 16 bytes in flight per lane; 4 for quantized weights at M > 1, where up to 32 dequantised values
  // and the accumulators leave no room for more within 128 registers.
  constexpr int U = (K != Kind::Float && MT > 1) ? 4 : 8 / R;
  const int KV = p.k / Fmt<K, X>::kEpv;
  const int64_t row_groups = (static_cast<int64_t>(p.n) + RO - 1) / RO;
  const size_t xs_bytes = static_cast<size_t>(MT) * p.k * sizeof(X);
  const bool staged = xs_bytes <= kXSmemBudget;
  const int64_t resident =
      static_cast<int64_t>(sms) * (staged ? kMinBlocks<K, X, MT, true, A> : kMinBlocks<K, X, MT, false, A>);
  int64_t blocks = 0;
  if (kWide) {
    const WideShape shape = wide_shape(KV, row_groups, resident);
    p.split = shape.split;
    blocks = shape.blocks;
  } else {
    // Split K across the warps of a block while N alone leaves the GPU short of warps and slices stay long.
    int S = 1;
    while (S < kWarps && row_groups * S < static_cast<int64_t>(sms) * kTargetWarpsPerSm &&
           KV / (2 * S) >= kMinSliceVectors)
      S *= 2;
    p.split = S;
    const int64_t tiles = (row_groups + kWarps / S - 1) / (kWarps / S);
    // About four blocks' worth of tiles per resident block slot: x staging amortised, tails of one tile.
    blocks = tiles < 4 * resident ? tiles : 4 * resident;
  }
  const dim3 grid(static_cast<unsigned>(blocks), 1, static_cast<unsigned>((p.m + MT - 1) / MT));
  if (staged) return launch_kernel(gemv_vec_kernel<K, X, MT, R, U, A, kNorm, true>, grid, dim3(kThreads), xs_bytes, stream, p);
  return launch_kernel(gemv_vec_kernel<K, X, MT, R, U, A, kNorm, false>, grid, dim3(kThreads), 0, stream, p);
}

template <Kind K, typename X, Activation A, bool kNorm>
cudaError_t run_gemv(const GemvParams<X>& p, cudaStream_t stream) {
  if (p.m == 0 || p.n == 0) return cudaSuccess;
  constexpr int EPV = Fmt<K, X>::kEpv;
  const bool vec = p.k > 0 && p.k % EPV == 0 && aligned16(p.x) && aligned16(p.w) &&
                   (!kNorm || aligned16(p.norm_w)) && aligned16(p.residual) && aligned16(p.residual_out) &&
                   (K != Kind::Int4 || p.group % 32 == 0);
  if (!vec) {
    const unsigned blocks = static_cast<unsigned>((static_cast<int64_t>(p.n) + kWarps - 1) / kWarps);
    if (p.m == 1) return launch_kernel(gemv_scalar_kernel<K, X, 1, A, kNorm>, dim3(blocks, 1, 1), dim3(kThreads), 0, stream, p);
    const dim3 grid(blocks, 1, static_cast<unsigned>((p.m + 7) / 8));
    return launch_kernel(gemv_scalar_kernel<K, X, 8, A, kNorm>, grid, dim3(kThreads), 0, stream, p);
  }
  int sms = 0;
  QK_RETURN_IF_ERROR(sm_count(&sms));
  if (p.m == 1) return run_vec<K, X, 1, A, kNorm>(p, sms, stream);
  if (p.m <= 4) return run_vec<K, X, 4, A, kNorm>(p, sms, stream);
  return run_vec<K, X, 8, A, kNorm>(p, sms, stream);
}

/** The GEMV limits: extents in int, and M in at most 65535 chunks of 8 rows. */
bool gemv_extents_ok(int64_t m, int64_t k, int64_t n) {
  return m >= 0 && k >= 0 && n >= 0 && m <= 65535LL * 8 && k <= INT32_MAX && n <= INT32_MAX;
}

template <typename X>
GemvParams<X> make_params(void* out, const void* x, const void* w, const void* bias, int64_t m, int64_t k,
                          int64_t n) {
  GemvParams<X> p{};
  p.out = static_cast<X*>(out);
  p.x = static_cast<const X*>(x);
  p.w = w;
  p.bias = static_cast<const X*>(bias);
  p.m = static_cast<int>(m);
  p.k = static_cast<int>(k);
  p.n = static_cast<int>(n);
  p.group = 1;
  p.split = 1;
  p.early_trigger = pdl_early_trigger();
  return p;
}

}  // namespace

cudaError_t launch_linear(const LinearArgs& a, cudaStream_t stream) {
  if (a.m == 0 || a.n == 0) return cudaSuccess;
  if (a.m < 0 || a.k < 0 || a.n < 0 || a.m > INT32_MAX || a.k > INT32_MAX || a.n > INT32_MAX)
    return cudaErrorInvalidValue;
  SkinnyArgs s{};
  s.dtype = a.dtype;
  s.weight = SkinnyWeight::Dense;
  s.out = a.out;
  s.x = a.x;
  s.w = a.weight;
  s.bias = a.bias;
  s.m = a.m;
  s.k = a.k;
  s.n = a.n;
  s.act = a.act;
  GemmArgs g{};
  g.dtype = a.dtype;
  g.out = a.out;
  g.a = a.x;
  g.b = a.weight;
  g.bias = a.bias;
  g.m = a.m;
  g.n = a.n;
  g.k = a.k;
  g.act = a.act;
  // On Hopper, wide projections go to the wgmma kernel's swapped form even within the small-M linear's rows.
  if (a.m > 1 && a.m <= skinny_max_dense_m() && gemm_sm90_takes_small_m(g, a.n)) return launch_gemm_sm90(g, stream);
  bool launched = false;
  const cudaError_t skinny = try_gemm_skinny(s, stream, &launched);
  if (launched) return skinny;
  if (a.m > kGemvMaxM) return launch_gemm(g, stream);
  QK_DISPATCH_FLOAT(a.dtype, T, {
    const GemvParams<T> p = make_params<T>(a.out, a.x, a.weight, a.bias, a.m, a.k, a.n);
    switch (a.act) {
      case Activation::None: return run_gemv<Kind::Float, T, Activation::None, false>(p, stream);
      case Activation::Silu: return run_gemv<Kind::Float, T, Activation::Silu, false>(p, stream);
      case Activation::Gelu: return run_gemv<Kind::Float, T, Activation::Gelu, false>(p, stream);
      case Activation::GeluTanh: return run_gemv<Kind::Float, T, Activation::GeluTanh, false>(p, stream);
      default: return cudaErrorInvalidValue;
    }
  });
  return cudaSuccess;
}

cudaError_t launch_linear_swiglu(const LinearArgs& a, cudaStream_t stream, bool* launched) {
  *launched = false;
  if (a.bias != nullptr || a.act != Activation::None) return cudaErrorInvalidValue;
  if (a.m < 0 || a.k < 0 || a.n < 0 || a.m > INT32_MAX || a.k > INT32_MAX || a.n > INT32_MAX / 2)
    return cudaErrorInvalidValue;
  if (a.m == 0 || a.n == 0) {
    *launched = true;
    return cudaSuccess;
  }
  GemmArgs g{};
  g.dtype = a.dtype;
  g.out = a.out;
  g.a = a.x;
  g.b = a.weight;
  g.bias = nullptr;
  g.m = a.m;
  g.n = a.n;
  g.k = a.k;
  g.act = Activation::Swiglu;
  // Up to skinny_max_dense_m() rows the small-M linear (and a SwiGLU kernel) keeps narrow projections: its fixed
  // cost is lower. Wide ones go to the wgmma kernel's swapped form, SwiGLU fused.
  if (a.m <= skinny_max_dense_m() && !(a.m > 1 && gemm_sm90_takes_small_m(g, 2 * a.n))) return cudaSuccess;
  if (!gemm_sm90_applies(g)) return cudaSuccess;
  *launched = true;
  return launch_gemm_sm90(g, stream);
}

cudaError_t launch_rmsnorm_linear(const RmsnormLinearArgs& a, cudaStream_t stream) {
  if (a.m == 0 || a.n == 0) return cudaSuccess;
  if (!gemv_extents_ok(a.m, a.k, a.swiglu ? 2 * a.n : a.n)) return cudaErrorInvalidValue;
  if (a.norm_weight == nullptr && (a.residual != nullptr || a.residual_out != nullptr)) return cudaErrorInvalidValue;
  if (a.residual_out != nullptr && a.residual == nullptr) return cudaErrorInvalidValue;
  QK_DISPATCH_FLOAT(a.dtype, T, {
    GemvParams<T> p = make_params<T>(a.out, a.x, a.weight, nullptr, a.m, a.k, a.n);
    p.norm_w = static_cast<const T*>(a.norm_weight);
    p.residual = static_cast<const T*>(a.residual);
    p.residual_out = static_cast<T*>(a.residual_out);
    p.eps = a.eps;
    const bool norm = a.norm_weight != nullptr;
    if (a.swiglu) {
      return norm ? run_gemv<Kind::Float, T, Activation::Swiglu, true>(p, stream)
                  : run_gemv<Kind::Float, T, Activation::Swiglu, false>(p, stream);
    }
    return norm ? run_gemv<Kind::Float, T, Activation::None, true>(p, stream)
                : run_gemv<Kind::Float, T, Activation::None, false>(p, stream);
  });
}

cudaError_t launch_gemv_quant(const QuantGemvArgs& a, cudaStream_t stream) {
  if (a.m == 0 || a.n == 0) return cudaSuccess;
  if (!gemv_extents_ok(a.m, a.k, a.n)) return cudaErrorInvalidValue;
  if (a.format == QuantFormat::Int4 &&
      (a.group <= 0 || a.group % 2 != 0 || a.k % a.group != 0 || a.group > INT32_MAX))
    return cudaErrorInvalidValue;
  QK_DISPATCH_FLOAT(a.dtype, T, {
    GemvParams<T> p = make_params<T>(a.out, a.x, a.qweight, a.bias, a.m, a.k, a.n);
    p.scales = a.scales;
    if (a.format == QuantFormat::Int8) return run_gemv<Kind::Int8, T, Activation::None, false>(p, stream);
    p.group = static_cast<int>(a.group);
    return run_gemv<Kind::Int4, T, Activation::None, false>(p, stream);
  });
  return cudaSuccess;
}

}  // namespace qk
