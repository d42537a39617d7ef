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
// logprobs: two passes. Pass 1, a block per 4,096 logits of a row (16 per thread, loaded together, so a row's loads
// are in flight at once across ~37 blocks instead of one block waiting for each of its loads in turn): the chunk's
// maximum, Σ exp(x − that maximum) (float terms, float64 sum) and its top-n keys (n rounds of a block-wide maximum).
// Pass 2, a block per row: the chunks merged (sums rescaled to the row maximum in float64), the log-probability of
// the row's id and the top n by merging the chunks' sorted lists. (One block per row, each thread keeping its own top
// list in shared memory, took ~90 µs per Qwen3 row with no alternatives and ~650 µs with 20 on an H200.) Only steps
// that ask for log-probabilities pay for it.
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

constexpr int kLpItems = 16;
constexpr int kLpChunk = kThreads * kLpItems;  // logits per block of the partial pass
/** u64 words per (row, chunk) record: the chunk's sum (f64 bits), its max (f32 bits) and bad flag, its top keys. */
constexpr int kLpRecord = 2 + kMaxTopLogprobs;

using u64 = unsigned long long;

/** Candidate order: the larger value first, then the lower index; 0 is below every key (an empty place). */
__device__ __forceinline__ u64 lp_key(float v, int64_t index) {
  return (static_cast<u64>(sample_order_key(v)) << 32) | (0xffffffffu - static_cast<u32>(index));
}

__device__ __forceinline__ u64 warp_max_u64(u64 k) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const u64 o = __shfl_xor_sync(0xffffffffu, k, off);
    k = o > k ? o : k;
  }
  return k;
}

/** The block's largest `k` (every thread gets it); `scratch` holds one u64 per warp. Two barriers. */
__device__ __forceinline__ u64 block_max_u64(u64 k, u64* scratch) {
  k = warp_max_u64(k);
  __syncthreads();  // (the scratch's last readers are done)
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = k;
  __syncthreads();
  k = scratch[0];
  for (int w = 1; w < kThreads / 32; w++) k = scratch[w] > k ? scratch[w] : k;
  return k;
}

/**
 * Pass 1, grid (chunks, rows): a block's 4,096 logits of a row (16 per thread, loaded together): their maximum, a
 * NaN / +∞ flag, Σ exp(x − that maximum) (float terms, float64 sum) and their `top_n` keys, best first (n rounds of
 * a block-wide maximum; keys never tie, so each round removes one element), into the block's record.
 */
template <typename T>
__global__ void __launch_bounds__(kThreads) logprobs_partial_kernel(const T* __restrict__ logits, TokenLogprobsArgs a,
                                                                     u64* __restrict__ records, int64_t chunks) {
  __shared__ u64 keys[kThreads / 32];
  __shared__ double sums[kThreads / 32];
  const int64_t row = blockIdx.y;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * kLpChunk;
  const T* x = logits + row * a.vocab;
  float v[kLpItems];
#pragma unroll
  for (int i = 0; i < kLpItems; i++) {
    const int64_t t = start + i * kThreads + threadIdx.x;
    v[i] = t < a.vocab ? to_float(x[t]) : -INFINITY;
  }
  float m = -INFINITY;
  bool bad = false;
#pragma unroll
  for (int i = 0; i < kLpItems; i++) {
    if (isnan(v[i]) || v[i] == INFINITY) bad = true;
    else m = fmaxf(m, v[i]);
  }
  // The maximum and the flag through one key max: bad ranks above every value.
  const u64 mk = block_max_u64(bad ? ~0ull : static_cast<u64>(sample_order_key(m)), keys);
  const bool block_bad = mk == ~0ull;
  const float bm = block_bad ? -INFINITY : sample_key_value(static_cast<u32>(mk));
  double sum = 0.0;
  if (bm > -INFINITY) {
#pragma unroll
    for (int i = 0; i < kLpItems; i++) {
      if (!isnan(v[i]) && v[i] != INFINITY) sum += static_cast<double>(expf(v[i] - bm));
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if ((threadIdx.x & 31) == 0) sums[threadIdx.x >> 5] = sum;
  u64* rec = records + (row * chunks + blockIdx.x) * kLpRecord;
  // Top keys: this thread's elements' keys (0 for padding past the vocabulary and for NaN / +∞).
  u64 k[kLpItems];
  u64 best = 0;
#pragma unroll
  for (int i = 0; i < kLpItems; i++) {
    const int64_t t = start + i * kThreads + threadIdx.x;
    k[i] = t < a.vocab && !isnan(v[i]) && v[i] != INFINITY ? lp_key(v[i], t) : 0ull;
    best = k[i] > best ? k[i] : best;
  }
  for (int r = 0; r < a.top_n; r++) {
    const u64 top = block_max_u64(best, keys);
    if (threadIdx.x == 0) rec[2 + r] = top;
    if (top != 0ull && best == top) {  // this thread's element: removed
      u64 next = 0;
#pragma unroll
      for (int i = 0; i < kLpItems; i++) {
        if (k[i] == top) k[i] = 0ull;
        next = k[i] > next ? k[i] : next;
      }
      best = next;
    }
  }
  __syncthreads();  // sums
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; w++) sum += sums[w];
    rec[0] = static_cast<u64>(__double_as_longlong(sum));
    rec[1] = (static_cast<u64>(block_bad ? 1u : 0u) << 32) | __float_as_uint(bm);
  }
}

/**
 * Pass 2, one block per row: the chunks' records merged: the row maximum M and flag, Σ over chunks of
 * sum · exp(max − M) (float64), log-probability = x[id] − (M + ln Σ), and the top `top_n` keys of all the chunks'
 * lists (each sorted, best first: round r takes the best key below round r − 1's from each list).
 */
template <typename T>
__global__ void __launch_bounds__(kThreads) logprobs_final_kernel(const T* __restrict__ logits, TokenLogprobsArgs a,
                                                                   const u64* __restrict__ records, int64_t chunks) {
  __shared__ u64 keys[kThreads / 32];
  __shared__ double sums[kThreads / 32];
  const int64_t row = blockIdx.x;
  const u64* recs = records + row * chunks * kLpRecord;
  const int n = a.top_n;
  u64 mk = 0;
  for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
    const u64 w = recs[c * kLpRecord + 1];
    const u64 key = (w >> 32) != 0 ? ~0ull : static_cast<u64>(sample_order_key(__uint_as_float(static_cast<u32>(w))));
    mk = key > mk ? key : mk;
  }
  mk = block_max_u64(mk, keys);
  const float row_max = mk == ~0ull ? -INFINITY : sample_key_value(static_cast<u32>(mk));
  const int32_t id = a.ids[row];
  if (mk == ~0ull || row_max == -INFINITY || id < 0 || id >= a.vocab) {
    if (threadIdx.x == 0) a.logprobs[row] = NAN;
    if (threadIdx.x < n) a.top_ids[row * n + threadIdx.x] = -1;
    return;
  }
  double sum = 0.0;
  for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
    const double s = __longlong_as_double(static_cast<long long>(recs[c * kLpRecord]));
    const float cm = __uint_as_float(static_cast<u32>(recs[c * kLpRecord + 1]));
    if (s > 0.0) sum += s * exp(static_cast<double>(cm) - static_cast<double>(row_max));
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sums[threadIdx.x >> 5] = sum;
  __syncthreads();
  sum = 0.0;
  for (int w = 0; w < kThreads / 32; w++) sum += sums[w];
  const double lse = static_cast<double>(row_max) + log(sum);
  if (threadIdx.x == 0) {
    a.logprobs[row] = __double2float_rn(static_cast<double>(to_float(logits[row * a.vocab + id])) - lse);
  }
  u64 prev = ~0ull;  // the key round r − 1 took (keys are unique, so round r's lies below it)
  for (int r = 0; r < n; r++) {
    u64 best = 0;
    for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
      const u64* list = recs + c * kLpRecord + 2;
      for (int j = 0; j < n; j++) {
        const u64 key = list[j];
        if (key < prev) {  // the list's first key below prev (lists are sorted, best first)
          best = key > best ? key : best;
          break;
        }
      }
    }
    const u64 top = block_max_u64(best, keys);
    if (threadIdx.x == 0) {
      a.top_ids[row * n + r] = static_cast<int32_t>(0xffffffffu - static_cast<u32>(top));
      const float value = sample_key_value(static_cast<u32>(top >> 32));
      a.top_logprobs[row * n + r] = __double2float_rn(static_cast<double>(value) - lse);
    }
    prev = top;
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

size_t token_logprobs_scratch_bytes(int64_t rows, int64_t vocab) {
  const int64_t chunks = (vocab + kLpChunk - 1) / kLpChunk;
  return static_cast<size_t>(rows) * static_cast<size_t>(chunks) * kLpRecord * sizeof(u64);
}

cudaError_t launch_token_logprobs(const TokenLogprobsArgs& a, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  if (a.rows < 0 || a.rows > 65535 || a.vocab <= 0 || a.vocab > 0x7fffffff || a.top_n < 0 ||
      a.top_n > kMaxTopLogprobs || a.top_n > a.vocab || a.logprobs == nullptr || a.logits == nullptr ||
      a.ids == nullptr || a.scratch == nullptr || (a.top_n > 0 && (a.top_ids == nullptr || a.top_logprobs == nullptr))) {
    return cudaErrorInvalidValue;
  }
  const int64_t chunks = (a.vocab + kLpChunk - 1) / kLpChunk;
  u64* records = static_cast<u64*>(a.scratch);
  QK_DISPATCH_FLOAT(a.dtype, T, {
    const T* logits = static_cast<const T*>(a.logits);
    logprobs_partial_kernel<T>
        <<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(a.rows)), kThreads, 0, stream>>>(logits, a, records,
                                                                                                      chunks);
    QK_RETURN_IF_ERROR(cudaGetLastError());
    logprobs_final_kernel<T><<<static_cast<unsigned>(a.rows), kThreads, 0, stream>>>(logits, a, records, chunks);
    return cudaGetLastError();
  });
  return cudaSuccess;
}

}  // namespace qk
