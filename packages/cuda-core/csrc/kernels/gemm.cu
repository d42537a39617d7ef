// Tiled GEMM of the linear family for M above the GEMV range: out = act(A · Bᵀ + bias), A [M, K], B [N, K].
//
// bf16/f16: a block of 8 warps (2 × 4) computes a BM × BN tile (128 × 128, or 64 × 64 when the big tiles would
// leave SMs idle); each warp holds (BM/2) × (BN/4) fp32 accumulators and feeds mma.sync m16n8k16 from shared
// memory through ldmatrix. K advances 32 at a time through a 3-stage ring of shared-memory tiles: cp.async with
// zero-fill at the edges when K is a whole number of 16-byte vectors and A, B are aligned; plain guarded loads
// (same ring, synchronous) otherwise. Rows are padded to 40 elements (80 bytes) so the 8 rows an ldmatrix phase
// reads fall in 8 distinct 16-byte bank groups. f32: a 64 × 64 SIMT tile, 4 × 4 outputs per thread.
#include <type_traits>

#include "../common/cp_async.cuh"
#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/mma.cuh"
#include "../common/numeric.cuh"
#include "gemm.h"
#include "gemm_sm90.h"

namespace qk {
namespace {

constexpr int kThreads = 256;
constexpr int kBK = 32;
constexpr int kLds = kBK + 8;  // padded shared row, in elements
constexpr int kStages = 3;

/** Rows [r0, r0 + ROWS) × columns [k0, k0 + kBK) of a K-contiguous operand into a padded shared tile. */
template <typename T, int ROWS, bool kAsync>
__device__ __forceinline__ void load_tile(T* dst, const T* __restrict__ src, int64_t r0, int rows, int K, int k0) {
  constexpr int kChunksPerRow = kBK / 8;  // 16-byte chunks
  static_assert((ROWS * kChunksPerRow) % kThreads == 0, "tile rows must split evenly over the block");
#pragma unroll
  for (int i = 0; i < ROWS * kChunksPerRow / kThreads; i++) {
    const int c = static_cast<int>(threadIdx.x) + i * kThreads;
    const int r = c / kChunksPerRow;
    const int kc = (c % kChunksPerRow) * 8;
    T* d = dst + r * kLds + kc;
    const int64_t gr = r0 + r;
    const int gk = k0 + kc;
    if constexpr (kAsync) {
      // K % 8 == 0 here, so a chunk lies wholly inside or wholly past the edge.
      const bool ok = gr < rows && gk < K;
      cp_async16(d, ok ? src + gr * K + gk : src, ok ? 16 : 0);
    } else {
#pragma unroll
      for (int e = 0; e < 8; e++) d[e] = (gr < rows && gk + e < K) ? src[gr * K + gk + e] : from_float<T>(0.f);
    }
  }
}

template <typename T, int BM, int BN, Activation A, bool kAsync>
__global__ void __launch_bounds__(kThreads)
    gemm_tc_kernel(T* __restrict__ out, const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ bias,
                   int M, int N, int K) {
  constexpr int WM = BM / 2;  // warps: 2 along M × 4 along N
  constexpr int WN = BN / 4;
  constexpr int MI = WM / 16;
  constexpr int NI = WN / 8;
  static_assert(MI >= 1 && NI % 2 == 0, "warp tile must hold whole m16 × (2 × n8) fragments");
  extern __shared__ __align__(16) unsigned char gemm_smem[];
  T* As = reinterpret_cast<T*>(gemm_smem);  // [kStages][BM][kLds]
  T* Bs = As + kStages * BM * kLds;         // [kStages][BN][kLds]

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int wm = warp >> 2;
  const int wn = warp & 3;
  const int64_t bm0 = static_cast<int64_t>(blockIdx.y) * BM;
  const int64_t bn0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int KT = (K + kBK - 1) / kBK;

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NI; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; s++) {
    if (s < KT) {
      load_tile<T, BM, kAsync>(As + s * BM * kLds, a, bm0, M, K, s * kBK);
      load_tile<T, BN, kAsync>(Bs + s * BN * kLds, b, bn0, N, K, s * kBK);
    }
    cp_async_commit();
  }

  for (int kt = 0; kt < KT; kt++) {
    // Tile kt has landed (at most kStages - 2 younger groups pending); the barrier also tells every warp that
    // the stage about to be refilled (consumed at kt - 1) is free.
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int next = kt + kStages - 1;
    if (next < KT) {
      const int st = next % kStages;
      load_tile<T, BM, kAsync>(As + st * BM * kLds, a, bm0, M, K, next * kBK);
      load_tile<T, BN, kAsync>(Bs + st * BN * kLds, b, bn0, N, K, next * kBK);
    }
    cp_async_commit();

    const T* as = As + (kt % kStages) * BM * kLds;
    const T* bs = Bs + (kt % kStages) * BN * kLds;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t af[MI][4];
#pragma unroll
      for (int i = 0; i < MI; i++)
        ldmatrix_x4(af[i], shared_address(as + (wm * WM + i * 16 + (lane & 15)) * kLds + kk + (lane >> 4) * 8));
      uint32_t bfrag[NI][2];
#pragma unroll
      for (int j = 0; j < NI / 2; j++) {
        uint32_t r[4];
        ldmatrix_x4(r, shared_address(bs + (wn * WN + j * 16 + (lane & 7) + ((lane >> 4) << 3)) * kLds + kk +
                                 ((lane >> 3) & 1) * 8));
        bfrag[2 * j][0] = r[0];
        bfrag[2 * j][1] = r[1];
        bfrag[2 * j + 1][0] = r[2];
        bfrag[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++) mma16816<T>(acc[i][j], af[i], bfrag[j][0], bfrag[j][1]);
    }
  }
  cp_async_wait<0>();

#pragma unroll
  for (int i = 0; i < MI; i++) {
#pragma unroll
    for (int j = 0; j < NI; j++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int64_t row = bm0 + wm * WM + i * 16 + (lane >> 2) + ((e >> 1) << 3);
        const int64_t col = bn0 + wn * WN + j * 8 + ((lane & 3) << 1) + (e & 1);
        if (row < M && col < N) {
          float v = acc[i][j][e];
          if (bias != nullptr) v += to_float(bias[col]);
          out[row * N + col] = from_float<T>(activate<A>(v));
        }
      }
    }
  }
}

/** f32: 64 × 64 tile, K steps of 16, each thread 4 × 4 outputs strided by 16 (conflict-free shared reads). */
template <Activation A>
__global__ void __launch_bounds__(kThreads)
    gemm_f32_kernel(float* __restrict__ out, const float* __restrict__ a, const float* __restrict__ b,
                    const float* __restrict__ bias, int M, int N, int K) {
  constexpr int BM = 64;
  constexpr int BN = 64;
  constexpr int BK = 16;
  __shared__ float As[BK][BM + 4];
  __shared__ float Bs[BK][BN + 4];
  const int tid = threadIdx.x;
  const int tx = tid & 15;
  const int ty = tid >> 4;
  const int64_t bm0 = static_cast<int64_t>(blockIdx.y) * BM;
  const int64_t bn0 = static_cast<int64_t>(blockIdx.x) * BN;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = 0.f;

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int i = 0; i < BM * BK / kThreads; i++) {
      const int e = tid + i * kThreads;
      const int r = e / BK;
      const int c = e % BK;
      const bool kin = k0 + c < K;
      As[c][r] = (bm0 + r < M && kin) ? a[(bm0 + r) * K + k0 + c] : 0.f;
      Bs[c][r] = (bn0 + r < N && kin) ? b[(bn0 + r) * K + k0 + c] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; k++) {
      float av[4];
      float bv[4];
#pragma unroll
      for (int i = 0; i < 4; i++) av[i] = As[k][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; j++) bv[j] = Bs[k][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int64_t row = bm0 + ty + 16 * i;
      const int64_t col = bn0 + tx + 16 * j;
      if (row < M && col < N) {
        float v = acc[i][j];
        if (bias != nullptr) v += bias[col];
        out[row * N + col] = activate<A>(v);
      }
    }
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <typename T, int BM, int BN, Activation A, bool kAsync>
cudaError_t go_tc(const GemmArgs& g, cudaStream_t stream) {
  constexpr int smem = kStages * (BM + BN) * kLds * static_cast<int>(sizeof(T));
  auto kernel = gemm_tc_kernel<T, BM, BN, A, kAsync>;
  if constexpr (smem > 48 * 1024) {
    // Opt in to more than 48 KB once per instantiation (a host-side attribute; safe during graph capture).
    static bool opted_in = false;
    if (!opted_in) {
      QK_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      opted_in = true;
    }
  }
  const dim3 grid(static_cast<unsigned>((g.n + BN - 1) / BN), static_cast<unsigned>((g.m + BM - 1) / BM));
  kernel<<<grid, kThreads, smem, stream>>>(static_cast<T*>(g.out), static_cast<const T*>(g.a),
                                           static_cast<const T*>(g.b), static_cast<const T*>(g.bias),
                                           static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k));
  return cudaGetLastError();
}

template <typename T, Activation A>
cudaError_t run_tc(const GemmArgs& g, cudaStream_t stream) {
  int sms = 0;
  QK_RETURN_IF_ERROR(sm_count(&sms));
  const bool async = g.k % 8 == 0 && aligned16(g.a) && aligned16(g.b);
  const int64_t big_tiles = ((g.m + 127) / 128) * ((g.n + 127) / 128);
  if (big_tiles >= sms) {
    if ((g.m + 127) / 128 > 65535) return cudaErrorInvalidValue;
    return async ? go_tc<T, 128, 128, A, true>(g, stream) : go_tc<T, 128, 128, A, false>(g, stream);
  }
  return async ? go_tc<T, 64, 64, A, true>(g, stream) : go_tc<T, 64, 64, A, false>(g, stream);
}

template <Activation A>
cudaError_t run_f32(const GemmArgs& g, cudaStream_t stream) {
  if ((g.m + 63) / 64 > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((g.n + 63) / 64), static_cast<unsigned>((g.m + 63) / 64));
  gemm_f32_kernel<A><<<grid, kThreads, 0, stream>>>(static_cast<float*>(g.out), static_cast<const float*>(g.a),
                                                    static_cast<const float*>(g.b),
                                                    static_cast<const float*>(g.bias), static_cast<int>(g.m),
                                                    static_cast<int>(g.n), static_cast<int>(g.k));
  return cudaGetLastError();
}

template <Activation A>
cudaError_t run_act(const GemmArgs& g, cudaStream_t stream) {
  switch (g.dtype) {
    case DType::F32: return run_f32<A>(g, stream);
    case DType::F16: return run_tc<__half, A>(g, stream);
    case DType::BF16: return run_tc<__nv_bfloat16, A>(g, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_gemm(const GemmArgs& g, cudaStream_t stream) {
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.m > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX)
    return cudaErrorInvalidValue;
  if ((g.n + 63) / 64 > INT32_MAX) return cudaErrorInvalidValue;
  // Hopper with TMA-describable operands: the wgmma kernel; everything else stays on the mma.sync kernel.
  if (gemm_sm90_applies(g)) return launch_gemm_sm90(g, stream);
  switch (g.act) {
    case Activation::None: return run_act<Activation::None>(g, stream);
    case Activation::Silu: return run_act<Activation::Silu>(g, stream);
    case Activation::Gelu: return run_act<Activation::Gelu>(g, stream);
    case Activation::GeluTanh: return run_act<Activation::GeluTanh>(g, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace qk
