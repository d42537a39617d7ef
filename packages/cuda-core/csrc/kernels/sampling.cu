// Argmax and temperature / top-k / top-p sampling over rows of logits.
//
// argmax: one block of 1024 threads per row, 16-byte loads for the aligned body, (value, index, first NaN) kept per
// thread and reduced with the reference's rule (NaN first, then larger value, then lower index).
//
// sample (non-greedy): four kernels per call after zeroing the per-row histograms.
//   1. max:    grid (vocab / 4096, rows): the row maximum as an order-preserving u32 key (atomicMax: exact) and
//              a flag for NaN / +inf.
//   2. hist:   same grid: a histogram over 65536 bins of the order key's top 16 bits (f16/bf16: the whole value,
//              so a bin is one value; f32: sign, exponent and 7 mantissa bits) counting elements and, for f32,
//              summing fixed-point weights. Integer atomics only: sums are exact and independent of order. Warps
//              whose 32 elements share a bin (masked runs) add once.
//   2b. slices: the count and weight totals of each run of 64 bins (1024 slices, one warp each).
//   3. select: one block of 1024 threads per row. Thread t owns slice t (64 consecutive bins in candidate order,
//              descending key); a block scan of the slice totals finds the slice where a cumulative count or
//              weight crosses a threshold, and that thread's warp finds the bin (2 bins a lane, warp scan). An f32
//              bin is refined to one exact value through its gathered elements (two 256-bin levels, one warp).
//              Within a value, candidates go by index and have equal weights, so the crossing's rank is
//              arithmetic. The top-k boundary, the nucleus boundary and the drawn position are found in turn, and
//              a last pass over the row (a contiguous segment per thread, block scan of match counts) finds the
//              index of the drawn (value, rank).
// Weights are w = exp((x − max)/T) in float64 stored as round(w · 2^S), S = 62 − ⌈log2 vocab⌉ (sum ≤ 2^62).
#include <climits>

#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/numeric.cuh"
#include "../common/sampling_rule.cuh"
#include "sampling.h"

namespace qk {
namespace {

using u32 = unsigned int;
using u64 = unsigned long long;

constexpr int kArgmaxThreads = 1024;
constexpr int kPreThreads = 256;
constexpr int kPreItems = 16;
constexpr int kPreElems = kPreThreads * kPreItems;  // elements per block of the max and hist kernels
constexpr int kSelectThreads = 1024;
constexpr int kBins = 1 << 16;
constexpr int kSliceBins = 64;                    // bins per slice; one slice per select thread
constexpr int kSlices = kBins / kSliceBins;       // 1024
constexpr int kSliceWarps = 8;                    // slices per block of the slice kernel
static_assert(kSlices == kSelectThreads, "one slice per select thread");
constexpr size_t kHeaderBytes = 256;
// Per row: header | counts u32[kBins] | weights u64[kBins] | slice counts u64[kSlices] | slice weights u64[kSlices].
// The histograms are stored in candidate order (position p = bin 0xffff − p), so reads index with plain sums: an
// earlier `counts[0xffff − (64 s + i)]` was miscompiled by nvcc 13.0 (the constant folded into the address and
// the rest zero-extended as a negative u32) and faulted on an H100.
constexpr size_t kCountsOffset = kHeaderBytes;
constexpr size_t kWeightsOffset = kCountsOffset + kBins * sizeof(u32);
constexpr size_t kSliceCountsOffset = kWeightsOffset + kBins * sizeof(u64);
constexpr size_t kSliceWeightsOffset = kSliceCountsOffset + kSlices * sizeof(u64);
constexpr size_t kHistStride = kSliceWeightsOffset + kSlices * sizeof(u64);
static_assert(kHistStride % 256 == 0, "rows of the workspace stay 256-byte aligned");

struct RowHeader {
  u32 max_key;  // order key of the row maximum (0 before kernel 1)
  u32 flags;    // 1: NaN or +inf seen
};

// ---------------------------------------------------------------------------------------------------------
// Order keys (sample_order_key, common/sampling_rule.cuh): u32 keys whose unsigned order is the float order (−0
// counts as +0, as the reference's comparator makes them tie). NaN never reaches them.
// ---------------------------------------------------------------------------------------------------------

constexpr u32 kNegInfKey = ~0xff800000u;  // sample_order_key(-inf)

template <typename T> struct Bits16;
template <> struct Bits16<__half> {
  static __device__ __forceinline__ u32 raw(__half h) { return __half_as_ushort(h); }
  static __device__ __forceinline__ float value(u32 bits) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
  }
};
template <> struct Bits16<__nv_bfloat16> {
  static __device__ __forceinline__ u32 raw(__nv_bfloat16 h) { return __bfloat16_as_ushort(h); }
  static __device__ __forceinline__ float value(u32 bits) {
    return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(bits)));
  }
};

/** The histogram bin of an element: f32 → top 16 bits of its order key; f16/bf16 → its 16-bit order key. */
template <typename T> __device__ __forceinline__ u32 bin_of(T x) {
  if constexpr (sizeof(T) == 4) {
    return sample_order_key(to_float(x)) >> 16;
  } else {
    u32 b = Bits16<T>::raw(x);
    if (b == 0x8000u) b = 0;  // −0 → +0
    return (b & 0x8000u) ? (~b & 0xffffu) : (b | 0x8000u);
  }
}
/** f16/bf16: the value of a bin. */
template <typename T> __device__ __forceinline__ float bin_value(u32 bin) {
  const u32 b = (bin & 0x8000u) ? (bin & 0x7fffu) : (~bin & 0xffffu);
  return Bits16<T>::value(b);
}

__device__ __forceinline__ u64 warp_sum_u64(u64 v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// ---------------------------------------------------------------------------------------------------------
// argmax
// ---------------------------------------------------------------------------------------------------------

struct ArgBest {
  float value;
  int index;  // INT_MAX: none yet
  int nan_index;
  bool bad;  // NaN or +inf seen (checked mode)
};

__device__ __forceinline__ void consider(ArgBest& b, float x, int i) {
  if (isnan(x)) {
    if (i < b.nan_index) b.nan_index = i;
    b.bad = true;
    return;
  }
  if (x == INFINITY) b.bad = true;
  if (x > b.value || (x == b.value && i < b.index)) {
    b.value = x;
    b.index = i;
  }
}

__device__ __forceinline__ void merge(ArgBest& a, const ArgBest& o) {
  a.nan_index = min(a.nan_index, o.nan_index);
  a.bad = a.bad || o.bad;
  if (o.value > a.value || (o.value == a.value && o.index < a.index)) {
    a.value = o.value;
    a.index = o.index;
  }
}

__device__ __forceinline__ ArgBest shfl_best(const ArgBest& b, int off) {
  ArgBest o;
  o.value = __shfl_xor_sync(0xffffffffu, b.value, off);
  o.index = __shfl_xor_sync(0xffffffffu, b.index, off);
  o.nan_index = __shfl_xor_sync(0xffffffffu, b.nan_index, off);
  o.bad = __shfl_xor_sync(0xffffffffu, static_cast<int>(b.bad), off) != 0;
  return o;
}

/**
 * One row per block. kChecked (sampling's greedy path): −1 for a row holding NaN or +inf or whose maximum is
 * −inf; otherwise torch.argmax semantics (the first NaN wins).
 */
template <typename T, bool kChecked>
__global__ void __launch_bounds__(kArgmaxThreads) argmax_kernel(int32_t* __restrict__ out, const T* __restrict__ x,
                                                                 int64_t n) {
  __shared__ ArgBest warp_best[kArgmaxThreads / 32];
  constexpr int V = kVec<T>;
  const T* row = x + static_cast<int64_t>(blockIdx.x) * n;
  const int count = static_cast<int>(n);
  grid_dependency_wait();
  allow_dependents_launch();
  ArgBest b{-INFINITY, INT_MAX, INT_MAX, false};
  // Scalar head up to 16-byte alignment, vector body, scalar tail: each thread sees its indices in order.
  const int misalign = static_cast<int>((reinterpret_cast<uintptr_t>(row) & 15) / sizeof(T));
  const int head = min(count, misalign == 0 ? 0 : V - misalign);
  for (int i = threadIdx.x; i < head; i += blockDim.x) consider(b, to_float(row[i]), i);
  const int vectors = (count - head) / V;
  const T* body = row + head;
  for (int vi = threadIdx.x; vi < vectors; vi += blockDim.x) {
    const Vec<T> vals = load_vec_stream(body + static_cast<int64_t>(vi) * V);
#pragma unroll
    for (int e = 0; e < V; e++) consider(b, to_float(vals.v[e]), head + vi * V + e);
  }
  for (int i = head + vectors * V + threadIdx.x; i < count; i += blockDim.x) consider(b, to_float(row[i]), i);

#pragma unroll
  for (int off = 16; off > 0; off >>= 1) merge(b, shfl_best(b, off));
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) warp_best[warp] = b;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x >> 5;
    b = lane < warps ? warp_best[lane] : ArgBest{-INFINITY, INT_MAX, INT_MAX, false};
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) merge(b, shfl_best(b, off));
    if (lane == 0) {
      int id;
      if (kChecked) id = (b.bad || b.index == INT_MAX || b.value == -INFINITY) ? -1 : b.index;
      else id = b.nan_index != INT_MAX ? b.nan_index : b.index;
      out[blockIdx.x] = id;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// sample: kernels 1 and 2
// ---------------------------------------------------------------------------------------------------------

__device__ __forceinline__ RowHeader* row_header(unsigned char* ws, int row) {
  return reinterpret_cast<RowHeader*>(ws + static_cast<size_t>(row) * kHistStride);
}
template <typename P> __device__ __forceinline__ P* row_part(unsigned char* ws, int row, size_t offset) {
  return reinterpret_cast<P*>(ws + static_cast<size_t>(row) * kHistStride + offset);
}

template <typename T>
__global__ void __launch_bounds__(kPreThreads) sample_max_kernel(const T* __restrict__ logits, int64_t vocab,
                                                                 unsigned char* __restrict__ ws) {
  __shared__ u32 warp_max[kPreThreads / 32];
  __shared__ int warp_bad[kPreThreads / 32];
  const int row = blockIdx.y;
  const T* p = logits + static_cast<int64_t>(row) * vocab;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * kPreElems;
  u32 mk = 0;
  int bad = 0;
#pragma unroll
  for (int i = 0; i < kPreItems; i++) {
    const int64_t e = start + i * kPreThreads + threadIdx.x;
    if (e < vocab) {
      const float x = to_float(p[e]);
      if (isnan(x) || x == INFINITY) bad = 1;
      else mk = max(mk, sample_order_key(x));
    }
  }
  mk = __reduce_max_sync(0xffffffffu, mk);
  bad = __any_sync(0xffffffffu, bad);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) {
    warp_max[warp] = mk;
    warp_bad[warp] = bad;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kPreThreads / 32; w++) {
      mk = max(mk, warp_max[w]);
      bad |= warp_bad[w];
    }
    RowHeader* h = row_header(ws, row);
    atomicMax(&h->max_key, mk);
    if (bad) atomicOr(&h->flags, 1u);
  }
}

template <typename T>
__global__ void __launch_bounds__(kPreThreads) sample_hist_kernel(const T* __restrict__ logits, int64_t vocab,
                                                                  double temperature, double scale,
                                                                  unsigned char* __restrict__ ws) {
  constexpr bool kWeights = sizeof(T) == 4;  // f16/bf16 bins are single values: weights come from the counts
  const int row = blockIdx.y;
  const RowHeader* h = row_header(ws, row);
  const u32 max_key = h->max_key;
  if (h->flags != 0 || max_key <= kNegInfKey) return;  // refused row: the select kernel writes −1
  const double maxv = sample_key_value(max_key);
  u32* counts = row_part<u32>(ws, row, kCountsOffset);
  u64* weights = row_part<u64>(ws, row, kWeightsOffset);
  const T* p = logits + static_cast<int64_t>(row) * vocab;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * kPreElems;
  const int lane = threadIdx.x & 31;
#pragma unroll 4
  for (int i = 0; i < kPreItems; i++) {
    const int64_t e = start + i * kPreThreads + threadIdx.x;
    const bool valid = e < vocab;
    u32 bin = 0;
    u64 w = 0;
    if (valid) {
      const T x = p[e];
      bin = bin_of(x);
      if constexpr (kWeights) w = sample_weight(to_float(x), maxv, temperature, scale);
    }
    const u32 pos = 0xffffu - bin;  // histograms are stored in candidate order (descending key)
    const u32 lead = __shfl_sync(0xffffffffu, pos, 0);
    if (__all_sync(0xffffffffu, valid && pos == lead)) {
      if constexpr (kWeights) w = warp_sum_u64(w);
      if (lane == 0) {
        atomicAdd(&counts[pos], 32u);
        if (kWeights && w != 0) atomicAdd(&weights[pos], w);
      }
    } else if (valid) {
      atomicAdd(&counts[pos], 1u);
      if (kWeights && w != 0) atomicAdd(&weights[pos], w);
    }
  }
}

/** Weight of a histogram bin: f32 keeps per-element sums; an f16/bf16 bin is one value, count × its weight. */
template <typename T>
__device__ __forceinline__ u64 bin_weight(const u64* weights, u32 pos, u32 c, double maxv,
                                          double temperature, double scale) {
  if constexpr (sizeof(T) == 4) {
    return c == 0 ? 0ull : weights[pos];
  } else {
    return c == 0 ? 0ull : static_cast<u64>(c) * sample_weight(bin_value<T>(0xffffu - pos), maxv, temperature, scale);
  }
}

/**
 * Histogram position i of slice s. Positions run in candidate order: position p holds bin 0xffff − p (descending
 * key), so slice s covers positions [64 s, 64 s + 64) and every index is a plain non-negative sum.
 */
__device__ __forceinline__ u32 slice_pos(int s, int i) { return static_cast<u32>(s) * kSliceBins + static_cast<u32>(i); }

/** Kernel 2b: count and weight totals of each 64-bin slice (one warp per slice). */
template <typename T>
__global__ void __launch_bounds__(kSliceWarps * 32) sample_slices_kernel(double temperature, double scale,
                                                                         unsigned char* __restrict__ ws) {
  const int row = blockIdx.y;
  const RowHeader* h = row_header(ws, row);
  const u32 max_key = h->max_key;
  if (h->flags != 0 || max_key <= kNegInfKey) return;
  const double maxv = sample_key_value(max_key);
  const u32* counts = row_part<u32>(ws, row, kCountsOffset);
  const u64* weights = row_part<u64>(ws, row, kWeightsOffset);
  const int lane = threadIdx.x & 31;
  const int slice = blockIdx.x * kSliceWarps + (threadIdx.x >> 5);
  u64 c = 0, w = 0;
#pragma unroll
  for (int k = 0; k < kSliceBins / 32; k++) {
    const u32 pos = slice_pos(slice, lane + 32 * k);
    const u32 bc = counts[pos];
    c += bc;
    w += bin_weight<T>(weights, pos, bc, maxv, temperature, scale);
  }
  c = warp_sum_u64(c);
  w = warp_sum_u64(w);
  if (lane == 0) {
    row_part<u64>(ws, row, kSliceCountsOffset)[slice] = c;
    row_part<u64>(ws, row, kSliceWeightsOffset)[slice] = w;
  }
}

// ---------------------------------------------------------------------------------------------------------
// sample: kernel 3 (select)
// ---------------------------------------------------------------------------------------------------------

enum SearchMode : int { kCount = 0, kWeightGe = 1, kWeightGt = 2 };

/** A candidate position: the `rank`-th (by index) element of the value with order key `key`. */
struct Pos {
  u32 key;
  u64 rank;
  u64 weight_after;  // cumulative weight through this position
};
constexpr u32 kEndKey = 0;  // below every real key: "past the last candidate"

__device__ __forceinline__ bool after(const Pos& a, const Pos& b) {
  return a.key < b.key || (a.key == b.key && a.rank > b.rank);
}

/** Whether the cumulative (count c_after / weight w_after) has reached the threshold. */
__device__ __forceinline__ bool reached(int mode, u64 c_after, u64 w_after, u64 xc, double x) {
  if (mode == kCount) return c_after >= xc;
  if (mode == kWeightGe) return static_cast<double>(w_after) >= x;
  return static_cast<double>(w_after) > x;
}

struct Crossing {
  int index;
  u64 c_before;
  u64 w_before;
};

/**
 * Run by one whole warp over 32·K items in candidate order (lane l holds items [l·K, (l+1)·K) in c / w), starting
 * from cumulative (c0, w0): the first item at which the cumulative count or weight reaches the threshold. A warp
 * scan finds the lane whose items cross, and that lane walks its K items.
 */
template <int K>
__device__ __forceinline__ bool warp_find(const u64 (&c)[K], const u64 (&w)[K], int mode, u64 c0, u64 w0, u64 xc,
                                          double x, Crossing& out) {
  const int lane = threadIdx.x & 31;
  u64 sc = 0, sw = 0;
#pragma unroll
  for (int k = 0; k < K; k++) {
    sc += c[k];
    sw += w[k];
  }
  const u64 ic = warp_inclusive_scan_u64(sc);
  const u64 iw = warp_inclusive_scan_u64(sw);
  const unsigned hits = __ballot_sync(0xffffffffu, reached(mode, c0 + ic, w0 + iw, xc, x));
  if (hits == 0) return false;
  const int f = __ffs(hits) - 1;
  int idx = 0;
  u64 cb = 0, wb = 0;
  if (lane == f) {
    cb = c0 + ic - sc;
    wb = w0 + iw - sw;
    idx = lane * K + K - 1;
#pragma unroll
    for (int k = 0; k < K; k++) {
      if (reached(mode, cb + c[k], wb + w[k], xc, x)) {
        idx = lane * K + k;
        break;
      }
      cb += c[k];
      wb += w[k];
    }
  }
  out.index = __shfl_sync(0xffffffffu, idx, f);
  out.c_before = __shfl_sync(0xffffffffu, cb, f);
  out.w_before = __shfl_sync(0xffffffffu, wb, f);
  return true;
}

struct SelectShared {
  u64 scan_a[32];
  u64 scan_b[32];
  u32 hist_count[256];
  u64 hist_weight[256];
  // Result of the current search.
  int found;
  u32 bin;
  u32 key;
  u64 c_before;
  u64 w_before;
  u64 group_count;
  u64 group_weight;  // weight of one element of the value
  u64 answer;
  // Gathered elements of one f32 bin.
  u32 list_bin;
  u32 list_count;
};


template <typename T>
struct Selector {
  SelectShared& sh;
  const T* p;
  int64_t vocab;
  const u32* counts;
  const u64* weights;
  u32* list;
  double maxv, temperature, scale;
  // This thread's slice: exclusive prefix and totals of counts and weights in candidate order.
  u64 pc, pw, tc, tw;

  /** Exclusive block scan of a and b; every thread gets its prefixes, totals land in scan_a[31] / scan_b[31]. */
  __device__ void block_scan(u64 a, u64 b, u64& pa, u64& pb) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const u64 ia = warp_inclusive_scan_u64(a);
    const u64 ib = warp_inclusive_scan_u64(b);
    __syncthreads();  // scan_a / scan_b may still be read from a previous scan
    if (lane == 31) {
      sh.scan_a[warp] = ia;
      sh.scan_b[warp] = ib;
    }
    __syncthreads();
    if (warp == 0) {
      const u64 xa = warp_inclusive_scan_u64(sh.scan_a[lane]);
      const u64 xb = warp_inclusive_scan_u64(sh.scan_b[lane]);
      __syncwarp();
      sh.scan_a[lane] = xa;
      sh.scan_b[lane] = xb;
    }
    __syncthreads();
    pa = (warp > 0 ? sh.scan_a[warp - 1] : 0) + ia - a;
    pb = (warp > 0 ? sh.scan_b[warp - 1] : 0) + ib - b;
  }

  __device__ void init(const u64* slice_counts, const u64* slice_weights) {
    tc = slice_counts[threadIdx.x];
    tw = slice_weights[threadIdx.x];
    block_scan(tc, tw, pc, pw);
  }
  __device__ u64 total_count() const { return sh.scan_a[31]; }
  __device__ u64 total_weight() const { return sh.scan_b[31]; }

  /** This thread's contiguous segment of the row (index order). */
  __device__ void segment(int64_t& lo, int64_t& hi) const {
    const int64_t len = (vocab + kSelectThreads - 1) / kSelectThreads;
    lo = min(static_cast<int64_t>(threadIdx.x) * len, vocab);
    hi = min(lo + len, vocab);
  }

  /** Calls f(index, element) for the elements of [lo, hi) in order, loading 16 bytes' worth at a time. */
  template <typename F>
  __device__ void for_each(int64_t lo, int64_t hi, F&& f) const {
    constexpr int kSegUnroll = kVec<T>;
    for (int64_t base = lo; base < hi; base += kSegUnroll) {
      T v[kSegUnroll];
#pragma unroll
      for (int k = 0; k < kSegUnroll; k++) v[k] = base + k < hi ? p[base + k] : T();
#pragma unroll
      for (int k = 0; k < kSegUnroll; k++) {
        if (base + k < hi && !f(base + k, v[k])) return;
      }
    }
  }

  /** Gathers, in index order, the indices of the elements in f32 bin `bin` into `list` (block-wide). */
  __device__ void gather(u32 bin) {
    if (sh.list_bin == bin) return;
    int64_t lo, hi;
    segment(lo, hi);
    u64 cnt = 0;
    for_each(lo, hi, [&](int64_t, T v) {
      cnt += bin_of(v) == bin;
      return true;
    });
    u64 off, unused;
    block_scan(cnt, 0, off, unused);
    for_each(lo, hi, [&](int64_t e, T v) {
      if (bin_of(v) == bin) list[off++] = static_cast<u32>(e);
      return true;
    });
    __syncthreads();
    if (threadIdx.x == 0) {
      sh.list_count = static_cast<u32>(sh.scan_a[31]);
      sh.list_bin = bin;
    }
    __syncthreads();
  }

  /**
   * One 256-bin level of an f32 bin's refinement: histogram of the key byte at `shift` over the gathered elements
   * whose key agrees with `prefix` above it; warp 0 finds the crossing digit and advances c_before / w_before.
   */
  __device__ void refine_level(int shift, u32 prefix, int mode, u64 xc, double x) {
    for (int i = threadIdx.x; i < 256; i += kSelectThreads) {
      sh.hist_count[i] = 0;
      sh.hist_weight[i] = 0;
    }
    __syncthreads();
    const u32 n = sh.list_count;
    const int lane = threadIdx.x & 31;
    for (u32 base = 0; base < n; base += kSelectThreads) {
      const u32 i = base + threadIdx.x;
      bool live = false;
      u32 digit = 0;
      u64 w = 0;
      if (i < n) {
        const float v = to_float(p[list[i]]);
        const u32 k = sample_order_key(v);
        live = (k >> (shift + 8)) == prefix;
        digit = (k >> shift) & 0xffu;
        if (live) w = sample_weight(v, maxv, temperature, scale);
      }
      const u32 lead = __shfl_sync(0xffffffffu, digit, 0);
      if (__all_sync(0xffffffffu, live && digit == lead)) {  // one atomic for a warp of equal digits
        w = warp_sum_u64(w);
        if (lane == 0) {
          atomicAdd(&sh.hist_count[digit], 32u);
          atomicAdd(&sh.hist_weight[digit], w);
        }
      } else if (live) {
        atomicAdd(&sh.hist_count[digit], 1u);
        atomicAdd(&sh.hist_weight[digit], w);
      }
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      u64 c[8], w[8];
#pragma unroll
      for (int k = 0; k < 8; k++) {
        c[k] = sh.hist_count[255 - (lane * 8 + k)];
        w[k] = sh.hist_weight[255 - (lane * 8 + k)];
      }
      Crossing cr{};
      if (!warp_find<8>(c, w, mode, sh.c_before, sh.w_before, xc, x, cr)) {
        // Cannot happen (the bin's totals reach the threshold): take its last value.
        int last = 0;
        while (last < 255 && sh.hist_count[last] == 0) last++;
        cr.index = 255 - last;
        cr.c_before = sh.c_before;
        cr.w_before = sh.w_before;
      }
      __syncwarp();
      if (lane == 0) {
        const u32 digit = static_cast<u32>(255 - cr.index);
        sh.c_before = cr.c_before;
        sh.w_before = cr.w_before;
        sh.key = (prefix << 8) | digit;
        sh.group_count = sh.hist_count[digit];
      }
    }
    __syncthreads();
  }

  /**
   * The first candidate position whose cumulative count (kCount: ≥ xc) or weight (kWeightGe: ≥ x, kWeightGt: > x)
   * reaches the threshold; false when none does (a threshold beyond the total).
   */
  __device__ bool search(int mode, u64 xc, double x, Pos& pos) {
    __syncthreads();
    if (threadIdx.x == 0) sh.found = 0;
    __syncthreads();
    bool hit;
    if (mode == kCount) hit = pc < xc && xc <= pc + tc;
    else if (mode == kWeightGe) hit = static_cast<double>(pw) < x && x <= static_cast<double>(pw + tw);
    else hit = static_cast<double>(pw) <= x && x < static_cast<double>(pw + tw);
    const unsigned hits = __ballot_sync(0xffffffffu, hit);
    if (hits != 0) {  // this warp holds the slice where the threshold is crossed: walk its 64 bins together
      const int owner = __ffs(hits) - 1;
      const int slice = (threadIdx.x & ~31) + owner;
      const u64 c0 = __shfl_sync(0xffffffffu, pc, owner);
      const u64 w0 = __shfl_sync(0xffffffffu, pw, owner);
      constexpr int K = kSliceBins / 32;
      u64 c[K], w[K];
#pragma unroll
      for (int k = 0; k < K; k++) {
        const u32 pos = slice_pos(slice, (threadIdx.x & 31) * K + k);
        const u32 bc = counts[pos];
        c[k] = bc;
        w[k] = bin_weight<T>(weights, pos, bc, maxv, temperature, scale);
      }
      Crossing cr{};
      if (warp_find<K>(c, w, mode, c0, w0, xc, x, cr) && (threadIdx.x & 31) == 0) {
        const u32 pos = slice_pos(slice, cr.index);
        const u32 bin = 0xffffu - pos;
        sh.found = 1;
        sh.bin = bin;
        sh.c_before = cr.c_before;
        sh.w_before = cr.w_before;
        if constexpr (sizeof(T) != 4) {
          const float v = bin_value<T>(bin);
          sh.key = sample_order_key(v);
          sh.group_count = counts[pos];
          sh.group_weight = sample_weight(v, maxv, temperature, scale);
        }
      }
    }
    __syncthreads();
    if (!sh.found) return false;
    if constexpr (sizeof(T) == 4) {
      const u32 bin = sh.bin;
      gather(bin);
      refine_level(8, bin, mode, xc, x);
      refine_level(0, sh.key, mode, xc, x);
      if (threadIdx.x == 0) sh.group_weight = sample_weight(sample_key_value(sh.key), maxv, temperature, scale);
      __syncthreads();
    }
    // Rank within the value: its candidates go by index and share the weight g.
    const u64 cb = sh.c_before, wb = sh.w_before, n = sh.group_count, g = sh.group_weight;
    u64 j = 0;
    if (mode == kCount) {
      j = xc - cb - 1;
    } else if (g != 0) {
      const double r = (x - static_cast<double>(wb)) / static_cast<double>(g);
      double jd = mode == kWeightGe ? ceil(r) - 1.0 : floor(r);
      jd = jd < 0.0 ? 0.0 : (jd > static_cast<double>(n - 1) ? static_cast<double>(n - 1) : jd);
      j = static_cast<u64>(jd);
      // Exact fix-up against double rounding.
      while (j > 0 && reached(mode, 0, wb + j * g, 0, x)) j--;
      while (j + 1 < n && !reached(mode, 0, wb + (j + 1) * g, 0, x)) j++;
    }
    if (j >= n) j = n - 1;
    pos.key = sh.key;
    pos.rank = j;
    pos.weight_after = wb + (j + 1) * g;
    return true;
  }

  /** Index of the `rank`-th element (in index order) whose order key is `key`; every thread gets it. */
  __device__ int64_t index_of(u32 key, u64 rank) {
    int64_t lo, hi;
    segment(lo, hi);
    u64 cnt = 0;
    for_each(lo, hi, [&](int64_t, T v) {
      cnt += sample_order_key(to_float(v)) == key;
      return true;
    });
    u64 before, unused;
    block_scan(cnt, 0, before, unused);
    if (threadIdx.x == 0) sh.answer = ~0ull;
    __syncthreads();
    if (before <= rank && rank < before + cnt) {
      for_each(lo, hi, [&](int64_t e, T v) {
        if (sample_order_key(to_float(v)) != key) return true;
        if (before++ < rank) return true;
        sh.answer = static_cast<u64>(e);
        return false;
      });
    }
    __syncthreads();
    return static_cast<int64_t>(sh.answer);
  }
};

template <typename T>
__global__ void __launch_bounds__(kSelectThreads)
    sample_select_kernel(int32_t* __restrict__ out, const T* __restrict__ logits, int64_t vocab, double temperature,
                         int64_t top_k, double top_p, const double* __restrict__ uniforms, double scale,
                         unsigned char* __restrict__ ws, u32* __restrict__ lists) {
  __shared__ SelectShared sh;
  const int row = blockIdx.x;
  const RowHeader* h = row_header(ws, row);
  const u32 max_key = h->max_key;
  if (h->flags != 0 || max_key <= kNegInfKey) {
    if (threadIdx.x == 0) out[row] = -1;
    return;
  }
  if (threadIdx.x == 0) sh.list_bin = ~0u;
  Selector<T> s{sh,
                logits + static_cast<int64_t>(row) * vocab,
                vocab,
                row_part<u32>(ws, row, kCountsOffset),
                row_part<u64>(ws, row, kWeightsOffset),
                lists + static_cast<int64_t>(row) * vocab,
                static_cast<double>(sample_key_value(max_key)),
                temperature,
                scale,
                0,
                0,
                0,
                0};
  s.init(row_part<u64>(ws, row, kSliceCountsOffset), row_part<u64>(ws, row, kSliceWeightsOffset));
  const u64 total_weight = s.total_weight();
  const u64 total_count = s.total_count();

  // Top-k boundary (inclusive), or everything.
  const Pos end{kEndKey, ~0ull, total_weight};
  Pos kept = end;
  if (top_k > 0 && static_cast<u64>(top_k) < total_count) {
    Pos p;
    if (s.search(kCount, static_cast<u64>(top_k), 0.0, p)) kept = p;
  }
  // Nucleus: the first position whose cumulative weight reaches top_p of the kept weight.
  Pos nucleus = kept;
  if (top_p < 1.0) {
    Pos p;
    if (s.search(kWeightGe, 0, top_p * static_cast<double>(kept.weight_after), p) && !after(p, kept)) nucleus = p;
  }
  // The draw: the first position whose cumulative weight exceeds u · (nucleus weight).
  const double target = uniforms[row] * static_cast<double>(nucleus.weight_after);
  Pos chosen = nucleus;
  {
    Pos p;
    if (s.search(kWeightGt, 0, target, p) && !after(p, nucleus)) chosen = p;
  }
  if (chosen.key == kEndKey) {  // rounding left the draw past the end: the last candidate, as the reference does
    Pos p;
    s.search(kCount, total_count, 0.0, p);
    chosen = p;
  }
  const int64_t id = s.index_of(chosen.key, chosen.rank);
  if (threadIdx.x == 0) out[row] = static_cast<int32_t>(id);
}

template <typename T>
cudaError_t launch_argmax_typed(int32_t* out, const void* x, int64_t rows, int64_t n, bool checked,
                                cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>(rows);
  const auto kernel = checked ? argmax_kernel<T, true> : argmax_kernel<T, false>;
  return launch_kernel(kernel, grid, dim3(kArgmaxThreads), 0, stream, out, static_cast<const T*>(x), n);
}

cudaError_t argmax_dispatch(DType dtype, int32_t* out, const void* x, int64_t rows, int64_t n, bool checked,
                            cudaStream_t stream) {
  QK_DISPATCH_FLOAT(dtype, T, { return launch_argmax_typed<T>(out, x, rows, n, checked, stream); });
  return cudaSuccess;
}

template <typename T>
cudaError_t launch_sample_typed(const SampleArgs& a, cudaStream_t stream) {
  unsigned char* ws = static_cast<unsigned char*>(a.workspace);
  u32* lists = reinterpret_cast<u32*>(ws + static_cast<size_t>(a.rows) * kHistStride);
  const double scale = sample_weight_scale(a.vocab);
  QK_RETURN_IF_ERROR(cudaMemsetAsync(ws, 0, static_cast<size_t>(a.rows) * kHistStride, stream));
  const dim3 pre_grid(static_cast<unsigned>((a.vocab + kPreElems - 1) / kPreElems), static_cast<unsigned>(a.rows));
  const T* logits = static_cast<const T*>(a.logits);
  sample_max_kernel<T><<<pre_grid, kPreThreads, 0, stream>>>(logits, a.vocab, ws);
  QK_RETURN_IF_ERROR(cudaGetLastError());
  sample_hist_kernel<T><<<pre_grid, kPreThreads, 0, stream>>>(logits, a.vocab, a.temperature, scale, ws);
  QK_RETURN_IF_ERROR(cudaGetLastError());
  const dim3 slice_grid(kSlices / kSliceWarps, static_cast<unsigned>(a.rows));
  sample_slices_kernel<T><<<slice_grid, kSliceWarps * 32, 0, stream>>>(a.temperature, scale, ws);
  QK_RETURN_IF_ERROR(cudaGetLastError());
  sample_select_kernel<T><<<static_cast<unsigned>(a.rows), kSelectThreads, 0, stream>>>(
      a.out, logits, a.vocab, a.temperature, a.top_k, a.top_p, a.uniforms, scale, ws, lists);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_argmax(const ArgmaxArgs& a, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  if (a.rows < 0 || a.rows > 0x7fffffff || a.n <= 0 || a.n > 0x7fffffff) return cudaErrorInvalidValue;
  return argmax_dispatch(a.dtype, a.out, a.x, a.rows, a.n, false, stream);
}

size_t sample_workspace_bytes(int64_t rows, int64_t vocab) {
  if (rows <= 0 || vocab <= 0) return 0;
  const size_t lists = static_cast<size_t>(rows) * static_cast<size_t>(vocab) * sizeof(u32);
  return static_cast<size_t>(rows) * kHistStride + (lists + 255) / 256 * 256;
}

cudaError_t launch_sample(const SampleArgs& a, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  if (a.rows < 0 || a.rows > 65535 || a.vocab <= 0 || a.vocab > 0x7fffffff || !(a.temperature >= 0.0) ||
      a.top_k < 0 || !(a.top_p > 0.0 && a.top_p <= 1.0)) {
    return cudaErrorInvalidValue;
  }
  if (sample_is_greedy(a.temperature, a.top_k)) {
    return argmax_dispatch(a.dtype, a.out, a.logits, a.rows, a.vocab, true, stream);
  }
  if (a.uniforms == nullptr || a.workspace == nullptr || a.workspace_bytes < sample_workspace_bytes(a.rows, a.vocab) ||
      (reinterpret_cast<uintptr_t>(a.workspace) & 7) != 0) {
    return cudaErrorInvalidValue;
  }
  QK_DISPATCH_FLOAT(a.dtype, T, { return launch_sample_typed<T>(a, stream); });
  return cudaSuccess;
}

}  // namespace qk
