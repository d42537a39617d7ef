// Causal (or full) flash-style attention for prefill and chunked prefill. One block per (query tile of kBq
// queries, query head), 128 threads; the block walks the key tiles of kBk keys that its queries can see (fully
// masked tiles past the last query's position are never loaded), staging K and V as float32 in shared memory,
// and keeps an online softmax per query row in float32 (log2 domain). Thread t owns query row t / 8 and, within
// it, the key columns and output dims ≡ t mod 8, so a row's max and sum reduce over 8 lanes of one warp.
// Any head_dim ≤ 256; rows are padded to an odd stride so the 8 key rows a warp reads at once hit 8 banks.
// This CUDA-core kernel now serves f32 and head dims the tensor-core kernels (attention_prefill_sm90.cu) lack.
#include "../common/cuda_check.h"
#include "../common/numeric.cuh"
#include "attention_prefill.h"
#include "attention_prefill_sm90.h"

namespace qk {
namespace {

constexpr int kThreads = 128;
constexpr int kBq = 16;                   // queries per block
constexpr int kBk = 32;                   // keys per tile
constexpr int kLanesPerRow = kThreads / kBq;  // 8
constexpr int kKeysPerLane = kBk / kLanesPerRow;  // 4
constexpr int kMaxDimsPerLane = static_cast<int>(kAttentionPrefillMaxHeadDim) / kLanesPerRow;  // 32
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kLanesPerRow == 8 && kKeysPerLane * kLanesPerRow == kBk, "tile shape");

__device__ __forceinline__ float exp_base(float m) { return m == -INFINITY ? 0.f : m; }

/** Shared-memory row stride (floats) for head_dim: odd, so rows r and r + 1 start in different banks. */
__host__ __device__ constexpr int padded_dim(int d) { return d % 2 == 0 ? d + 1 : d; }

constexpr size_t smem_bytes(int head_dim) {
  return (static_cast<size_t>(kBq + 2 * kBk) * padded_dim(head_dim) + static_cast<size_t>(kBq) * (kBk + 1)) *
         sizeof(float);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    prefill_kernel(T* __restrict__ out, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                   int q_len, int kv_len, int q_heads, int kv_heads, int head_dim, int64_t position_offset,
                   bool causal, float scale_log2) {
  extern __shared__ float smem[];
  const int D = head_dim;
  const int Dp = padded_dim(D);
  float* sq = smem;              // [kBq][Dp], pre-scaled queries
  float* sk = sq + kBq * Dp;     // [kBk][Dp]
  float* sv = sk + kBk * Dp;     // [kBk][Dp]
  float* sp = sv + kBk * Dp;     // [kBq][kBk + 1], probabilities of the current tile

  // Late query tiles see the most keys under a causal mask: schedule them first.
  const int q_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int h = blockIdx.y;
  const int kv_head = h / (q_heads / kv_heads);
  const int q0 = q_tile * kBq;
  const int row = threadIdx.x / kLanesPerRow;
  const int col = threadIdx.x % kLanesPerRow;
  const int q_end = min(q0 + kBq, q_len);
  // Keys any query of the tile can see: up to the last query's position when causal.
  const int64_t visible_end = causal ? position_offset + q_end : kv_len;
  const int kv_end = static_cast<int>(visible_end < kv_len ? visible_end : kv_len);
  const int64_t q_row_stride = static_cast<int64_t>(q_heads) * D;
  const int64_t kv_row_stride = static_cast<int64_t>(kv_heads) * D;

  for (int idx = threadIdx.x; idx < kBq * D; idx += kThreads) {
    const int r = idx / D;
    const int d = idx - r * D;
    const int qi = q0 + r;
    sq[r * Dp + d] = qi < q_len ? to_float(q[qi * q_row_stride + static_cast<int64_t>(h) * D + d]) * scale_log2 : 0.f;
  }

  const int64_t my_pos = position_offset + q0 + row;  // this row's absolute position
  float m = -INFINITY, l = 0.f;
  float acc[kMaxDimsPerLane];
#pragma unroll
  for (int r = 0; r < kMaxDimsPerLane; r++) acc[r] = 0.f;

  for (int kt = 0; kt < kv_end; kt += kBk) {
    __syncthreads();  // the previous tile's K, V and P are no longer read (and the queries are staged)
    const T* kt_base = k + static_cast<int64_t>(kt) * kv_row_stride + static_cast<int64_t>(kv_head) * D;
    const T* vt_base = v + static_cast<int64_t>(kt) * kv_row_stride + static_cast<int64_t>(kv_head) * D;
    for (int idx = threadIdx.x; idx < kBk * D; idx += kThreads) {
      const int key = idx / D;
      const int d = idx - key * D;
      const bool valid = kt + key < kv_end;
      const int64_t off = static_cast<int64_t>(key) * kv_row_stride + d;
      sk[key * Dp + d] = valid ? to_float(kt_base[off]) : 0.f;
      sv[key * Dp + d] = valid ? to_float(vt_base[off]) : 0.f;
    }
    __syncthreads();

    // Scores of this row against keys col, col + 8, col + 16, col + 24 of the tile.
    float s[kKeysPerLane];
#pragma unroll
    for (int i = 0; i < kKeysPerLane; i++) s[i] = 0.f;
    const float* qrow = sq + row * Dp;
    for (int d = 0; d < D; d++) {
      const float qd = qrow[d];
#pragma unroll
      for (int i = 0; i < kKeysPerLane; i++) s[i] = fmaf(qd, sk[(col + i * kLanesPerRow) * Dp + d], s[i]);
    }
    float tmax = -INFINITY;
#pragma unroll
    for (int i = 0; i < kKeysPerLane; i++) {
      const int j = kt + col + i * kLanesPerRow;
      const bool masked = j >= kv_end || (causal && j > my_pos);
      if (masked) s[i] = -INFINITY;
      tmax = fmaxf(tmax, s[i]);
    }
#pragma unroll
    for (int off = kLanesPerRow / 2; off > 0; off >>= 1) tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, off));
    const float mnew = fmaxf(m, tmax);
    const float base = exp_base(mnew);
    const float alpha = exp2f(m - base);
    float psum = 0.f;
#pragma unroll
    for (int i = 0; i < kKeysPerLane; i++) {
      const float p = exp2f(s[i] - base);
      psum += p;
      sp[row * (kBk + 1) + col + i * kLanesPerRow] = p;
    }
#pragma unroll
    for (int off = kLanesPerRow / 2; off > 0; off >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, off);
    l = fmaf(l, alpha, psum);
    m = mnew;
    __syncwarp();  // the row's probabilities come from the 8 lanes of this warp that share it

    const float* prow = sp + row * (kBk + 1);
#pragma unroll
    for (int r = 0; r < kMaxDimsPerLane; r++) acc[r] *= alpha;
    for (int j = 0; j < kBk; j++) {
      const float p = prow[j];
      const float* vrow = sv + j * Dp + col;
#pragma unroll
      for (int r = 0; r < kMaxDimsPerLane; r++) {
        if (col + r * kLanesPerRow < D) acc[r] = fmaf(p, vrow[r * kLanesPerRow], acc[r]);
      }
    }
  }

  const int qi = q0 + row;
  if (qi < q_len) {
    T* orow = out + qi * q_row_stride + static_cast<int64_t>(h) * D;
    const float inv = 1.f / l;
#pragma unroll
    for (int r = 0; r < kMaxDimsPerLane; r++) {
      const int d = col + r * kLanesPerRow;
      if (d < D) orow[d] = from_float<T>(acc[r] * inv);
    }
  }
}

template <typename T>
cudaError_t launch_typed(const AttentionPrefillArgs& a, cudaStream_t stream) {
  const int D = static_cast<int>(a.head_dim);
  const size_t smem = smem_bytes(D);
  if (smem > 48 * 1024) {
    // Opt in once per process to the largest size any head_dim needs (head_dim 256: ~84 KB).
    static bool configured = false;
    if (!configured) {
      QK_RETURN_IF_ERROR(cudaFuncSetAttribute(prefill_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(smem_bytes(kAttentionPrefillMaxHeadDim))));
      configured = true;
    }
  }
  const int64_t tiles = (a.q_len + kBq - 1) / kBq;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(a.q_heads));
  prefill_kernel<T><<<grid, kThreads, smem, stream>>>(
      static_cast<T*>(a.out), static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
      static_cast<int>(a.q_len), static_cast<int>(a.kv_len), static_cast<int>(a.q_heads),
      static_cast<int>(a.kv_heads), D, a.position_offset, a.causal, a.scale * kLog2e);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_attention_prefill(const AttentionPrefillArgs& a, cudaStream_t stream) {
  if (a.q_len == 0 || a.q_heads == 0) return cudaSuccess;
  if (a.q_len < 0 || a.q_len > 0x7fffffff || a.kv_len <= 0 || a.kv_len > 0x7fffffff || a.kv_heads <= 0 ||
      a.q_heads < 0 || a.q_heads > 65535 || a.q_heads % a.kv_heads != 0 || a.head_dim <= 0 ||
      a.head_dim > kAttentionPrefillMaxHeadDim || a.position_offset < 0) {
    return cudaErrorInvalidValue;
  }
  if (a.causal && a.position_offset + a.q_len > a.kv_len) return cudaErrorInvalidValue;
  if (attention_prefill_tc_supported(a)) return launch_attention_prefill_tc(a, stream);
  QK_DISPATCH_FLOAT(a.dtype, T, { return launch_typed<T>(a, stream); });
  return cudaSuccess;
}

}  // namespace qk
