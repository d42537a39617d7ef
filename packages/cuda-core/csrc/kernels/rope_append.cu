// The attention prologue of a decode step in one kernel: per-head QK-norm + RoPE of the query and key heads of one
// fused q|k|v projection, the query into its buffer, the key and the value straight into their cache rows. Before,
// this was four launches (two qkNormRope, two scatters); in a batch-1 decode step each launch costs more than its
// work. One warp per (token, head): the lanes hold the head's pairs (i, i + half) in registers, reduce the sum of
// squares with shuffles and write the rotated pairs; value heads are copied as raw bits. At prefill sizes each warp
// loads two items before working on either (kItemsPerWarp).
#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/numeric.cuh"
#include "elementwise.h"
#include "rope.h"

namespace qk {
namespace {

constexpr int kThreads = 128;
constexpr int kPairsPerLane = static_cast<int>(kRopeAppendMaxHeadDim / 64);

template <typename T>
struct Params {
  T* q_out;
  T* k_cache;
  T* v_cache;
  const T* qkv;
  const T* q_weight;
  const T* k_weight;
  const int32_t* positions;
  const float* inv_freq;
  int64_t tokens;
  int q_heads;
  int kv_heads;
  int head_dim;
  int64_t cache_rows;
  float eps;
};

/** One (token, head) item of a warp whose lanes already hold the head's pairs: norm + rotate, or copy (value). */
template <typename T>
__device__ __forceinline__ void rope_append_item(const Params<T>& p, int64_t item, const T (&lo)[kPairsPerLane],
                                                 const T (&hi)[kPairsPerLane]) {
  const int lane = threadIdx.x & 31;
  const int heads = p.q_heads + 2 * p.kv_heads;
  const int half = p.head_dim >> 1;
  const int64_t t = item / heads;
  const int h = static_cast<int>(item - t * heads);
  const int32_t pos = __ldg(p.positions + t);
  const bool is_q = h < p.q_heads;
  const bool is_v = h >= p.q_heads + p.kv_heads;
  if (!is_q && (pos < 0 || pos >= p.cache_rows)) return;  // the whole warp skips together
  T* dst;
  if (is_q) {
    dst = p.q_out + (t * p.q_heads + h) * p.head_dim;
  } else {
    const int kv_h = is_v ? h - p.q_heads - p.kv_heads : h - p.q_heads;
    dst = (is_v ? p.v_cache : p.k_cache) + (static_cast<int64_t>(pos) * p.kv_heads + kv_h) * p.head_dim;
  }
  if (is_v) {
#pragma unroll
    for (int j = 0; j < kPairsPerLane; j++) {
      const int i = lane + 32 * j;
      if (i < half) {
        dst[i] = lo[j];
        dst[i + half] = hi[j];
      }
    }
    return;
  }
  float sum_sq = 0.f;
#pragma unroll
  for (int j = 0; j < kPairsPerLane; j++) {
    if (lane + 32 * j < half) {
      const float a = to_float(lo[j]);
      const float b = to_float(hi[j]);
      sum_sq += a * a + b * b;
    }
  }
  const float inv_n = 1.f / static_cast<float>(p.head_dim);
  const float scale = rsqrtf(warp_sum(sum_sq) * inv_n + p.eps);
  const T* w = is_q ? p.q_weight : p.k_weight;
  const float fpos = static_cast<float>(pos);
#pragma unroll
  for (int j = 0; j < kPairsPerLane; j++) {
    const int i = lane + 32 * j;
    if (i < half) {
      const float a = to_float(lo[j]) * scale * to_float(w[i]);
      const float b = to_float(hi[j]) * scale * to_float(w[i + half]);
      float s, c;
      sincosf(__fmul_rn(fpos, __ldg(p.inv_freq + i)), &s, &c);
      dst[i] = from_float<T>(a * c - b * s);
      dst[i + half] = from_float<T>(b * c + a * s);
    }
  }
}

/**
 * Each warp takes kItemsPerWarp items per pass and issues all their loads before any math: with one item at a
 * time a warp had only its head's few hundred bytes in flight, too little to cover memory latency at prefill sizes.
 */
constexpr int kItemsPerWarp = 2;

template <typename T>
__global__ void __launch_bounds__(kThreads) qk_norm_rope_append_kernel(const Params<T> p) {
  grid_dependency_wait();
  allow_dependents_launch();
  const int lane = threadIdx.x & 31;
  const int warps = kThreads / 32;
  const int half = p.head_dim >> 1;
  const int64_t items = p.tokens * (p.q_heads + 2 * p.kv_heads);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * warps;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * warps + (threadIdx.x >> 5); first < items;
       first += kItemsPerWarp * stride) {
    T lo[kItemsPerWarp][kPairsPerLane], hi[kItemsPerWarp][kPairsPerLane];
#pragma unroll
    for (int u = 0; u < kItemsPerWarp; u++) {
      const int64_t item = first + u * stride;
      if (item >= items) break;
      const T* src = p.qkv + item * p.head_dim;
#pragma unroll
      for (int j = 0; j < kPairsPerLane; j++) {
        const int i = lane + 32 * j;
        if (i < half) {
          lo[u][j] = src[i];
          hi[u][j] = src[i + half];
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kItemsPerWarp; u++) {
      const int64_t item = first + u * stride;
      if (item >= items) break;
      rope_append_item(p, item, lo[u], hi[u]);
    }
  }
}

}  // namespace

cudaError_t launch_qk_norm_rope_append(const QkNormRopeAppendArgs& a, cudaStream_t stream) {
  if (a.tokens < 0 || a.q_heads < 0 || a.kv_heads < 0 || a.cache_rows < 0 || a.head_dim <= 0 ||
      a.head_dim % 2 != 0 || a.head_dim > kRopeAppendMaxHeadDim || a.q_heads + 2 * a.kv_heads > INT32_MAX)
    return cudaErrorInvalidValue;
  const int64_t items = a.tokens * (a.q_heads + 2 * a.kv_heads);
  if (items == 0) return cudaSuccess;
  unsigned blocks = 0;
  QK_RETURN_IF_ERROR(grid_stride_blocks((items + kThreads / 32 - 1) / (kThreads / 32), kThreads, &blocks));
  QK_DISPATCH_FLOAT(a.dtype, T, {
    Params<T> p{};
    p.q_out = static_cast<T*>(a.q_out);
    p.k_cache = static_cast<T*>(a.k_cache);
    p.v_cache = static_cast<T*>(a.v_cache);
    p.qkv = static_cast<const T*>(a.qkv);
    p.q_weight = static_cast<const T*>(a.q_weight);
    p.k_weight = static_cast<const T*>(a.k_weight);
    p.positions = a.positions;
    p.inv_freq = a.inv_freq;
    p.tokens = a.tokens;
    p.q_heads = static_cast<int>(a.q_heads);
    p.kv_heads = static_cast<int>(a.kv_heads);
    p.head_dim = static_cast<int>(a.head_dim);
    p.cache_rows = a.cache_rows;
    p.eps = a.eps;
    return launch_kernel(qk_norm_rope_append_kernel<T>, dim3(blocks), dim3(kThreads), 0, stream, p);
  });
  return cudaSuccess;
}

}  // namespace qk
