// Sampling controls applied to rows of logits before `sample`, the token counts they read, and log-probabilities.
//
// controls: grid (⌈vocab / 4096⌉, rows) × 256 threads, 16 elements a thread. Each element is read once, processed
// in float64 with explicit round-to-nearest intrinsics (nvcc would otherwise contract x − f·c into an fma and the
// result would differ from the TypeScript reference in the last bit, changing drawn ids), written as f32, and
// folded into the row maximum (an order-preserving u32 key, atomicMax: exact and order-independent). Min-p needs
// that maximum, so it is a second pass over the f32 output, launched only when min-p is on. The extra bytes per
// step are the f32 row and whichever of counts / bias / mask are given: a few MB at Qwen3's 151,936 tokens, small
// beside the ~1.2 GB of weights a 0.6B decode step reads.
//
// logprobs: one block of 256 threads per row. Pass 1 reads the row once: the maximum, a NaN / +∞ flag and, per
// thread, its own top-n list (in shared memory, insertion by (value desc, index asc); a thread visits its indices
// in increasing order, so an equal value never displaces an earlier one). Pass 2 sums exp(x − max) in float64. The
// 256 lists are merged pairwise in 8 rounds. Only steps that ask for log-probabilities pay for it.
#include <cfloat>
#include <cmath>

#include "../common/cuda_check.h"
#include "../common/numeric.cuh"
#include "../common/sampling_rule.cuh"
#include "logit_controls.h"

namespace qk {
namespace {

using u32 = unsigned int;

constexpr int kThreads = 256;
constexpr int kItems = 16;
constexpr int kBlockElems = kThreads * kItems;
constexpr u32 kNegInfKey = ~0xff800000u;  // sample_order_key(-inf)

__device__ __forceinline__ bool bit_set(const uint32_t* words, int64_t t) {
  return ((words[t >> 5] >> (t & 31)) & 1u) != 0;
}

/** One element through the controls (steps 1–5 of the reference); NaN and +∞ come back unchanged. */
__device__ __forceinline__ float controlled(float x, int64_t row, int64_t t, int64_t vocab, int64_t words,
                                            const LogitControlsArgs& a) {
  if (isnan(x) || x == INFINITY) return x;
  const int32_t c = a.counts != nullptr ? a.counts[row * vocab + t] : 0;
  const bool seen = c > 0 || (a.prompt_tokens != nullptr && bit_set(a.prompt_tokens + row * words, t));
  double v = static_cast<double>(x);
  if (a.repetition_penalty != 1.0 && seen) {
    v = v > 0.0 ? __ddiv_rn(v, a.repetition_penalty) : __dmul_rn(v, a.repetition_penalty);
  }
  v = __dsub_rn(v, __dmul_rn(a.frequency_penalty, static_cast<double>(c)));
  if (c > 0) v = __dsub_rn(v, a.presence_penalty);
  if (a.bias != nullptr) v = __dadd_rn(v, static_cast<double>(a.bias[row * vocab + t]));
  float y = __double2float_rn(v);
  if (a.mask != nullptr && !bit_set(a.mask + row * words, t)) y = -INFINITY;
  return y;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) controls_kernel(const T* __restrict__ logits, LogitControlsArgs a) {
  __shared__ u32 warp_max[kThreads / 32];
  const int64_t row = blockIdx.y;
  const int64_t words = (a.vocab + 31) / 32;
  const T* in = logits + row * a.vocab;
  float* out = a.out + row * a.vocab;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * kBlockElems;
  u32 key = 0;
#pragma unroll 4
  for (int i = 0; i < kItems; i++) {
    const int64_t t = start + i * kThreads + threadIdx.x;
    if (t < a.vocab) {
      const float y = controlled(to_float(in[t]), row, t, a.vocab, words, a);
      out[t] = y;
      if (!isnan(y) && y != INFINITY) key = max(key, sample_order_key(y));
    }
  }
  if (a.scratch == nullptr) return;
  key = __reduce_max_sync(0xffffffffu, key);
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = key;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; w++) key = max(key, warp_max[w]);
    atomicMax(&a.scratch[row], key);
  }
}

/** Min-p over the controlled row: (x − max) / T < ln(min-p) → −∞; NaN compares false and stays. */
__global__ void __launch_bounds__(kThreads) min_p_kernel(LogitControlsArgs a) {
  const int64_t row = blockIdx.y;
  const u32 key = a.scratch[row];
  if (key <= kNegInfKey) return;  // nothing finite: the sampler refuses the row
  const double maxv = static_cast<double>(sample_key_value(key));
  float* out = a.out + row * a.vocab;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * kBlockElems;
#pragma unroll 4
  for (int i = 0; i < kItems; i++) {
    const int64_t t = start + i * kThreads + threadIdx.x;
    if (t < a.vocab) {
      const double z = __ddiv_rn(__dsub_rn(static_cast<double>(out[t]), maxv), a.temperature);
      if (z < a.log_min_p) out[t] = -INFINITY;
    }
  }
}

__global__ void add_token_counts_kernel(TokenCountArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= a.rows) return;
  const int32_t id = a.ids[row];
  if (id >= 0 && id < a.vocab) a.counts[row * a.vocab + id] += 1;
}

// ---------------------------------------------------------------------------------------------------------
// logprobs
// ---------------------------------------------------------------------------------------------------------

/** Whether (va, ia) comes before (vb, ib) in candidate order: larger value first, then lower index. */
__device__ __forceinline__ bool before(float va, int ia, float vb, int ib) {
  return va > vb || (va == vb && ia < ib);
}

struct TopShared {
  float value[kThreads][kMaxTopLogprobs];
  int index[kThreads][kMaxTopLogprobs];
  int size[kThreads];
  float warp_max[kThreads / 32];
  int warp_bad[kThreads / 32];
  double warp_sum[kThreads / 32];
  float row_max;
  int row_bad;
  double row_sum;
};

/** Merges list `o` into list `t` (both sorted in candidate order), keeping the first `n`. */
__device__ void merge_lists(TopShared& sh, int t, int o, int n) {
  float v[kMaxTopLogprobs];
  int idx[kMaxTopLogprobs];
  int i = 0, j = 0, k = 0;
  const int si = sh.size[t], sj = sh.size[o];
  while (k < n && (i < si || j < sj)) {
    const bool take_i =
        j >= sj || (i < si && before(sh.value[t][i], sh.index[t][i], sh.value[o][j], sh.index[o][j]));
    if (take_i) {
      v[k] = sh.value[t][i];
      idx[k++] = sh.index[t][i++];
    } else {
      v[k] = sh.value[o][j];
      idx[k++] = sh.index[o][j++];
    }
  }
  for (int m = 0; m < k; m++) {
    sh.value[t][m] = v[m];
    sh.index[t][m] = idx[m];
  }
  sh.size[t] = k;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) logprobs_kernel(const T* __restrict__ logits, TokenLogprobsArgs a) {
  __shared__ TopShared sh;
  const int64_t row = blockIdx.x;
  const T* x = logits + row * a.vocab;
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int n = a.top_n;
  float* list_v = sh.value[tid];
  int* list_i = sh.index[tid];
  int size = 0;
  float m = -INFINITY;
  int bad = 0;
  for (int64_t e = tid; e < a.vocab; e += kThreads) {
    const float v = to_float(x[e]);
    if (isnan(v) || v == INFINITY) {
      bad = 1;
      continue;
    }
    m = fmaxf(m, v);
    if (n == 0 || (size == n && !(v > list_v[n - 1]))) continue;
    int j = size < n ? size++ : n - 1;
    while (j > 0 && list_v[j - 1] < v) {
      list_v[j] = list_v[j - 1];
      list_i[j] = list_i[j - 1];
      j--;
    }
    list_v[j] = v;
    list_i[j] = static_cast<int>(e);
  }
  sh.size[tid] = size;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    bad |= __shfl_xor_sync(0xffffffffu, bad, off);
  }
  if (lane == 0) {
    sh.warp_max[warp] = m;
    sh.warp_bad[warp] = bad;
  }
  __syncthreads();
  if (tid == 0) {
    for (int w = 1; w < kThreads / 32; w++) {
      m = fmaxf(m, sh.warp_max[w]);
      bad |= sh.warp_bad[w];
    }
    sh.row_max = m;
    sh.row_bad = bad || m == -INFINITY;
  }
  __syncthreads();
  const int id = a.ids[row];
  if (sh.row_bad || id < 0 || id >= a.vocab) {
    if (tid == 0) a.logprobs[row] = NAN;
    if (tid < n) a.top_ids[row * n + tid] = -1;
    return;
  }
  const float row_max = sh.row_max;
  const double maxv = row_max;
  // Terms in float (each within a few ulp of the float64 reference's), summed in float64: the log-probabilities stay
  // well inside one f32 rounding of the reference while the pass costs float, not float64, exponentials.
  double sum = 0.0;
  for (int64_t e = tid; e < a.vocab; e += kThreads) sum += static_cast<double>(expf(to_float(x[e]) - row_max));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (lane == 0) sh.warp_sum[warp] = sum;
  for (int stride = 1; stride < kThreads; stride <<= 1) {
    __syncthreads();
    if (n > 0 && tid % (2 * stride) == 0) merge_lists(sh, tid, tid + stride, n);
  }
  __syncthreads();
  if (tid == 0) {
    for (int w = 1; w < kThreads / 32; w++) sum += sh.warp_sum[w];
    sh.row_sum = sum;
  }
  __syncthreads();
  const double lse = maxv + log(sh.row_sum);
  if (tid == 0) a.logprobs[row] = __double2float_rn(static_cast<double>(to_float(x[id])) - lse);
  if (tid < n) {
    a.top_ids[row * n + tid] = sh.index[0][tid];
    a.top_logprobs[row * n + tid] = __double2float_rn(static_cast<double>(sh.value[0][tid]) - lse);
  }
}

template <typename T>
cudaError_t launch_controls_typed(const LogitControlsArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((a.vocab + kBlockElems - 1) / kBlockElems), static_cast<unsigned>(a.rows));
  if (a.scratch != nullptr) {
    QK_RETURN_IF_ERROR(cudaMemsetAsync(a.scratch, 0, static_cast<size_t>(a.rows) * sizeof(u32), stream));
  }
  controls_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(a.logits), a);
  QK_RETURN_IF_ERROR(cudaGetLastError());
  if (a.scratch != nullptr) {
    min_p_kernel<<<grid, kThreads, 0, stream>>>(a);
    QK_RETURN_IF_ERROR(cudaGetLastError());
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t launch_logit_controls(const LogitControlsArgs& args, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  LogitControlsArgs a = args;
  const bool min_p = a.log_min_p > -DBL_MAX;
  if (a.rows < 0 || a.rows > 65535 || a.vocab <= 0 || a.vocab > 0x7fffffff || a.out == nullptr ||
      a.logits == nullptr || !(a.repetition_penalty > 0.0) || !std::isfinite(a.repetition_penalty) ||
      !std::isfinite(a.presence_penalty) || !std::isfinite(a.frequency_penalty) || a.log_min_p > 0.0 ||
      (min_p && (a.scratch == nullptr || !(a.temperature > 0.0) || !std::isfinite(a.temperature)))) {
    return cudaErrorInvalidValue;
  }
  if (!min_p) a.scratch = nullptr;  // no maxima to keep: the second pass is skipped
  QK_DISPATCH_FLOAT(a.dtype, T, { return launch_controls_typed<T>(a, stream); });
  return cudaSuccess;
}

cudaError_t launch_add_token_counts(const TokenCountArgs& a, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  if (a.rows < 0 || a.vocab <= 0 || a.counts == nullptr || a.ids == nullptr) return cudaErrorInvalidValue;
  constexpr int kCountThreads = 128;
  const unsigned blocks = static_cast<unsigned>((a.rows + kCountThreads - 1) / kCountThreads);
  add_token_counts_kernel<<<blocks, kCountThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_token_logprobs(const TokenLogprobsArgs& a, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  if (a.rows < 0 || a.rows > 0x7fffffff || a.vocab <= 0 || a.vocab > 0x7fffffff || a.top_n < 0 ||
      a.top_n > kMaxTopLogprobs || a.top_n > a.vocab || a.logprobs == nullptr || a.logits == nullptr ||
      a.ids == nullptr || (a.top_n > 0 && (a.top_ids == nullptr || a.top_logprobs == nullptr))) {
    return cudaErrorInvalidValue;
  }
  QK_DISPATCH_FLOAT(a.dtype, T, {
    logprobs_kernel<T><<<static_cast<unsigned>(a.rows), kThreads, 0, stream>>>(static_cast<const T*>(a.logits), a);
    return cudaGetLastError();
  });
  return cudaSuccess;
}

}  // namespace qk
