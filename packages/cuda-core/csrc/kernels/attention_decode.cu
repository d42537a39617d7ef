// Split-KV flash-decoding: one query token per head against a KV cache of kv_len keys.
//
// Chunking: chunks of ≥ 64 keys (multiples of 64), as many as give ≈ 264 blocks (2 per H100 SM), at most 256.
// Kernel 1 (fast path, head_dim 64/128/256 with 16-byte aligned K/V): grid (kv_head × head tiles, chunk), 128
// threads. The block streams its chunk of K and V through a 3-stage cp.async ring of 16 KB tiles (16-byte loads)
// and serves a tile of up to G = 2 query heads of the GQA group from it; the tiles of a larger group read the same
// rows, the second time mostly from L2.
// A key is handled by D/V lanes (V = elements per 16 bytes), so a warp covers 32·V/D keys per step; scores are
// reduced across those lanes with shuffles, and every lane keeps the running max, sum and its V-slice of the
// accumulator in float32 (log2 domain: q is pre-multiplied by scale·log2(e), so exp2f gives the weights).
// The block's key groups are merged through shared memory and the block writes (max, sum, acc[D]) per head.
// Kernel 1 (generic path, any head_dim ≤ 256, any alignment): grid (q_head, chunk), one key per warp at a time.
// Kernel 2 merges the chunks of each head in chunk order (fixed-order reduction: bit-identical repeated runs); it
// is a programmatic dependent launch, so its launch overlaps kernel 1's tail. (Merging in the last block of each
// head tile instead, behind an arrival counter, was measured slower on an H100: 19.6 vs 17.3 µs at 8k keys, as
// one block then reads every chunk's partials on the critical path.) With a single chunk kernel 1 normalises and
// writes `out` itself.
// The key count may live in device memory (`kv_len_dev`): a CUDA graph captured once then serves every decode
// step. The chunk count is fixed at launch from the capacity, and each block derives the chunk length from the
// actual count, so every block has work at every length.
#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "../common/numeric.cuh"
#include "attention_decode.h"

namespace qk {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kSteps = 4;           // key steps per warp per tile
constexpr int kStages = 3;          // cp.async ring depth (3 × 16 KB: four blocks fit an SM)
constexpr int kMinChunk = 64;       // keys per chunk, at least; chunk lengths are multiples of it
constexpr int kMaxChunks = 256;     // chunks per head, at most (bounds the workspace and the merge)
// Blocks a long context is cut into: ≈ 2 per SM of an H100 (132 SMs). Measured on an H100 at 8k context, 264
// beat 396, 512 and 1024 (longer chunks pipeline better; fewer partials to merge) and 132 (too few blocks).
// The same held for Qwen3-8B's groups of 4 query heads: 528 blocks measured 22.7 µs against 18.7 µs for 264.
constexpr int kTargetBlocks = 264;
// Query heads served by one fast-path block. Larger GQA groups are split into tiles of 2 whose blocks read the
// same K/V rows (the second read is an L2 hit): for Qwen3-8B's groups of 4 on an H100 this took 8k-context decode
// from 19.1–19.3 µs to 17.8–18.0 µs and 2k from 11.5 to 9.0 µs, where tiles of 4 did twice the shuffles per key
// in a block. (Also aiming for twice the blocks when tiles split a group measured slower: 19.0–19.3 µs.)
constexpr int kMaxGroupTile = 2;
constexpr int kGenericMaxR = static_cast<int>(kAttentionDecodeMaxHeadDim / 32);
constexpr float kLog2e = 1.4426950408889634f;
/** Keys of this launch: the device-side count when given (clamped to the capacity the grid was sized for). */
__device__ __forceinline__ int resolve_kv_len(const int* kv_len_dev, int capacity) {
  if (kv_len_dev == nullptr) return capacity;
  const int n = *kv_len_dev;
  return n < 1 ? 1 : (n > capacity ? capacity : n);
}
/** Chunk length for `kv_len` keys over `chunks` chunks: a multiple of kMinChunk (some trailing chunks may be empty). */
__device__ __forceinline__ int chunk_length(int kv_len, int chunks) {
  const int per = (kv_len + chunks - 1) / chunks;
  return (per + kMinChunk - 1) / kMinChunk * kMinChunk;
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 16 : 0;  // 0: zero-fill without reading (keys past the chunk's end)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Grid of the chunk kernels: heads along x (fastest), chunks along y, so the blocks that run together read the
// rows of every head for the same keys (whole DRAM pages) rather than one head's rows across the cache.
__device__ __forceinline__ int grid_chunk() { return blockIdx.y; }
__device__ __forceinline__ int grid_head() { return blockIdx.x; }
inline dim3 chunk_grid(int64_t chunks, int64_t heads) {
  return dim3(static_cast<unsigned>(heads), static_cast<unsigned>(chunks));
}

/** Base of the exponentials for a running max: 0 while nothing finite was seen (keeps exp2f(-inf - base) = 0). */
__device__ __forceinline__ float exp_base(float m) { return m == -INFINITY ? 0.f : m; }

template <typename T, int D>
struct FastShape {
  static constexpr int V = kVec<T>;
  static constexpr int LPK = D / V;    // lanes per key
  static constexpr int KG = 32 / LPK;  // keys per warp step
  static constexpr int TILE = kWarps * kSteps * KG;
  static constexpr int TILE_ELEMS = TILE * D;
  static constexpr int NG = kWarps * KG;  // independent key groups of a block
  static constexpr size_t SMEM = static_cast<size_t>(kStages) * 2 * TILE_ELEMS * sizeof(T);
  static_assert(D % V == 0 && LPK >= 1 && LPK <= 32 && 32 % LPK == 0, "fast path shape");
  static_assert(TILE * LPK % kThreads == 0, "tile copy split");
  static_assert(static_cast<size_t>(NG) * kMaxGroupTile * (D + 2) * sizeof(float) <= SMEM,
                "the merge buffer reuses the pipeline's shared memory");
};

// ≤ 128 registers up to 4 heads per block: 4 resident blocks per SM (the shared-memory limit, 4 × 48 KB).
template <typename T, int D, int G>
__global__ void __launch_bounds__(kThreads, G <= 4 ? 4 : 2)
    decode_chunk_kernel(T* __restrict__ out, const T* __restrict__ q, const T* __restrict__ k,
                        const T* __restrict__ v, float* __restrict__ ws_acc, float* __restrict__ ws_ml,
                        const int* __restrict__ kv_len_dev, int kv_capacity, int kv_heads, int group, int head_tiles,
                        int num_chunks, float scale_log2) {
  using S = FastShape<T, D>;
  constexpr int V = S::V, LPK = S::LPK, KG = S::KG, TILE = S::TILE, TILE_ELEMS = S::TILE_ELEMS, NG = S::NG;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sk = reinterpret_cast<T*>(smem_raw);  // [kStages][TILE][D]
  T* sv = sk + kStages * TILE_ELEMS;       // [kStages][TILE][D]

  const int chunk = grid_chunk();
  const int kv_head = grid_head() / head_tiles;
  const int head0 = (grid_head() % head_tiles) * G;  // first head of this tile, within the group
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int kg = lane / LPK;
  const int part = lane % LPK;

  // With a key count fixed at launch, the rows of the first tiles the prologue loads are known before the wait:
  // ask L2 for them so that their fetch from HBM overlaps the previous kernel's tail (a prefetched line never hides
  // a write: see launch.cuh). One head tile per KV head asks; the others read the same rows. A device-side count
  // may be written by the previous kernel, so that path waits first.
  if (kv_len_dev == nullptr && grid_head() % head_tiles == 0) {
    const int pre_len = chunk_length(kv_capacity, num_chunks);
    const int pre_start = chunk * pre_len;
    const int pre_keys = min(min(pre_len, kv_capacity - pre_start), (kStages - 1) * TILE);
    const int64_t pre_row = static_cast<int64_t>(kv_heads) * D;
    const int64_t head_off = static_cast<int64_t>(grid_head() / head_tiles) * D;
    for (int key = threadIdx.x; key < pre_keys; key += kThreads) {
      const int64_t off = static_cast<int64_t>(pre_start + key) * pre_row + head_off;
      prefetch_l2(k + off, D * sizeof(T));
      prefetch_l2(v + off, D * sizeof(T));
    }
  }
  grid_dependency_wait();  // q, the cache rows and the key count come from earlier kernels
  const int kv_len = resolve_kv_len(kv_len_dev, kv_capacity);
  const int chunk_len = chunk_length(kv_len, num_chunks);
  const int start = chunk * chunk_len;
  const int len = min(chunk_len, kv_len - start);  // ≤ 0: an empty trailing chunk
  const int tiles = len > 0 ? (len + TILE - 1) / TILE : 0;
  const int64_t row_stride = static_cast<int64_t>(kv_heads) * D;
  const T* kbase = k + (static_cast<int64_t>(start) * kv_heads + kv_head) * D;
  const T* vbase = v + (static_cast<int64_t>(start) * kv_heads + kv_head) * D;

  auto load_tile = [&](int tile, int stage) {
    const int t0 = tile * TILE;
    T* dk = sk + stage * TILE_ELEMS;
    T* dv = sv + stage * TILE_ELEMS;
#pragma unroll
    for (int r = 0; r < TILE * LPK / kThreads; r++) {
      const int idx = threadIdx.x + r * kThreads;
      const int key = idx / LPK;
      const int pv = idx % LPK;
      const bool valid = t0 + key < len;
      const int64_t off = valid ? static_cast<int64_t>(t0 + key) * row_stride + pv * V : 0;
      cp_async16(dk + key * D + pv * V, kbase + off, valid);
      cp_async16(dv + key * D + pv * V, vbase + off, valid);
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; s++) {
    if (s < tiles) load_tile(s, s);
    cp_async_commit();
  }
  allow_dependents_launch();  // the merge kernel may be scheduled now; it waits for this grid to finish

  // This lane's V-slice of each served query head, pre-scaled into the log2 domain (scalar loads: q may be
  // unaligned). Heads past the group (a partial tile) get zeros and are never written.
  float qr[G][V];
#pragma unroll
  for (int g = 0; g < G; g++) {
    const bool live = head0 + g < group;
    const T* qrow = q + static_cast<int64_t>(kv_head * group + (live ? head0 + g : 0)) * D + part * V;
#pragma unroll
    for (int e = 0; e < V; e++) qr[g][e] = live ? to_float(qrow[e]) * scale_log2 : 0.f;
  }

  float m[G], l[G], acc[G][V];
#pragma unroll
  for (int g = 0; g < G; g++) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < V; e++) acc[g][e] = 0.f;
  }

  for (int t = 0; t < tiles; t++) {
    cp_async_wait<kStages - 2>();  // tile t has landed (this thread's copies) ...
    __syncthreads();               // ... and everyone's; everyone is also done with tile t - 1
    if (t + kStages - 1 < tiles) load_tile(t + kStages - 1, (t + kStages - 1) % kStages);
    cp_async_commit();

    const T* tk = sk + (t % kStages) * TILE_ELEMS;
    const T* tv = sv + (t % kStages) * TILE_ELEMS;
    const int t0 = t * TILE;
    float s[kSteps][G];
#pragma unroll
    for (int step = 0; step < kSteps; step++) {
      const int key = (warp * kSteps + step) * KG + kg;
      const Vec<T> kv = *reinterpret_cast<const Vec<T>*>(tk + key * D + part * V);
      float kf[V];
#pragma unroll
      for (int e = 0; e < V; e++) kf[e] = to_float(kv.v[e]);
      const bool valid = t0 + key < len;
#pragma unroll
      for (int g = 0; g < G; g++) {
        float dot = 0.f;
#pragma unroll
        for (int e = 0; e < V; e++) dot = fmaf(qr[g][e], kf[e], dot);
#pragma unroll
        for (int off = LPK / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        s[step][g] = valid ? dot : -INFINITY;
      }
    }
    float base[G];
#pragma unroll
    for (int g = 0; g < G; g++) {
      float mt = s[0][g];
#pragma unroll
      for (int step = 1; step < kSteps; step++) mt = fmaxf(mt, s[step][g]);
      const float mnew = fmaxf(m[g], mt);
      base[g] = exp_base(mnew);
      const float alpha = exp2f(m[g] - base[g]);
      m[g] = mnew;
      l[g] *= alpha;
#pragma unroll
      for (int e = 0; e < V; e++) acc[g][e] *= alpha;
    }
#pragma unroll
    for (int step = 0; step < kSteps; step++) {
      const int key = (warp * kSteps + step) * KG + kg;
      const Vec<T> vv = *reinterpret_cast<const Vec<T>*>(tv + key * D + part * V);
      float vf[V];
#pragma unroll
      for (int e = 0; e < V; e++) vf[e] = to_float(vv.v[e]);
#pragma unroll
      for (int g = 0; g < G; g++) {
        const float p = exp2f(s[step][g] - base[g]);
        l[g] += p;
#pragma unroll
        for (int e = 0; e < V; e++) acc[g][e] = fmaf(p, vf[e], acc[g][e]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the ring is idle: reuse it for the merge of the key groups

  float* cm = reinterpret_cast<float*>(smem_raw);  // [NG][G]
  float* cl = cm + NG * G;                          // [NG][G]
  float* ca = cl + NG * G;                          // [NG][G][D]
  const int grp = warp * KG + kg;
#pragma unroll
  for (int g = 0; g < G; g++) {
    if (part == 0) {
      cm[grp * G + g] = m[g];
      cl[grp * G + g] = l[g];
    }
#pragma unroll
    for (int e = 0; e < V; e++) ca[(grp * G + g) * D + part * V + e] = acc[g][e];
  }
  __syncthreads();

  for (int idx = threadIdx.x; idx < G * D; idx += kThreads) {
    const int g = idx / D;
    const int d = idx % D;
    if (head0 + g >= group) continue;
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < NG; i++) mx = fmaxf(mx, cm[i * G + g]);
    const float b = exp_base(mx);
    float sum = 0.f, a = 0.f;
#pragma unroll
    for (int i = 0; i < NG; i++) {
      const float w = exp2f(cm[i * G + g] - b);
      sum = fmaf(w, cl[i * G + g], sum);
      a = fmaf(w, ca[(i * G + g) * D + d], a);
    }
    const int64_t qh = static_cast<int64_t>(kv_head) * group + head0 + g;
    if (num_chunks == 1) {
      out[qh * D + d] = from_float<T>(a / sum);
    } else {
      const int64_t slot = qh * num_chunks + chunk;
      ws_acc[slot * D + d] = a;
      if (d == 0) {
        ws_ml[slot * 2] = mx;
        ws_ml[slot * 2 + 1] = sum;
      }
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    decode_chunk_generic_kernel(T* __restrict__ out, const T* __restrict__ q, const T* __restrict__ k,
                                const T* __restrict__ v, float* __restrict__ ws_acc, float* __restrict__ ws_ml,
                                const int* __restrict__ kv_len_dev, int kv_capacity, int kv_heads, int group,
                                int head_dim, int num_chunks, float scale_log2) {
  __shared__ float sq[kAttentionDecodeMaxHeadDim];
  __shared__ float cm[kWarps], cl[kWarps];
  __shared__ float ca[kWarps][kAttentionDecodeMaxHeadDim];
  const int chunk = grid_chunk();
  const int qh = grid_head();
  const int kv_head = qh / group;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int D = head_dim;
  grid_dependency_wait();
  allow_dependents_launch();
  for (int d = threadIdx.x; d < D; d += kThreads) sq[d] = to_float(q[static_cast<int64_t>(qh) * D + d]) * scale_log2;
  __syncthreads();

  const int kv_len = resolve_kv_len(kv_len_dev, kv_capacity);
  const int chunk_len = chunk_length(kv_len, num_chunks);
  const int start = chunk * chunk_len;
  const int end = min(start + chunk_len, kv_len);
  float m = -INFINITY, l = 0.f;
  float acc[kGenericMaxR];
#pragma unroll
  for (int r = 0; r < kGenericMaxR; r++) acc[r] = 0.f;
  for (int j = start + warp; j < end; j += kWarps) {
    const int64_t row = (static_cast<int64_t>(j) * kv_heads + kv_head) * D;
    float dot = 0.f;
#pragma unroll
    for (int r = 0; r < kGenericMaxR; r++) {
      const int d = lane + 32 * r;
      if (d < D) dot = fmaf(sq[d], to_float(k[row + d]), dot);
    }
    dot = warp_sum(dot);
    const float mnew = fmaxf(m, dot);
    const float b = exp_base(mnew);
    const float alpha = exp2f(m - b);
    const float p = exp2f(dot - b);
    l = fmaf(l, alpha, p);
    m = mnew;
#pragma unroll
    for (int r = 0; r < kGenericMaxR; r++) {
      const int d = lane + 32 * r;
      if (d < D) acc[r] = fmaf(p, to_float(v[row + d]), acc[r] * alpha);
    }
  }
  if (lane == 0) {
    cm[warp] = m;
    cl[warp] = l;
  }
#pragma unroll
  for (int r = 0; r < kGenericMaxR; r++) {
    const int d = lane + 32 * r;
    if (d < D) ca[warp][d] = acc[r];
  }
  __syncthreads();
  for (int d = threadIdx.x; d < D; d += kThreads) {
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kWarps; i++) mx = fmaxf(mx, cm[i]);
    const float b = exp_base(mx);
    float sum = 0.f, a = 0.f;
#pragma unroll
    for (int i = 0; i < kWarps; i++) {
      const float w = exp2f(cm[i] - b);
      sum = fmaf(w, cl[i], sum);
      a = fmaf(w, ca[i][d], a);
    }
    if (num_chunks == 1) {
      out[static_cast<int64_t>(qh) * D + d] = from_float<T>(a / sum);
    } else {
      const int64_t slot = static_cast<int64_t>(qh) * num_chunks + chunk;
      ws_acc[slot * D + d] = a;
      if (d == 0) {
        ws_ml[slot * 2] = mx;
        ws_ml[slot * 2 + 1] = sum;
      }
    }
  }
}

constexpr int kMergeWarps = 8;

/**
 * Merges the chunks of one query head (block): weights w_c = exp2(m_c − max), out = Σ w_c·acc_c / Σ w_c·l_c. Warp w
 * sums chunks w, w + 8, …; the 8 partial sums are added in warp order (fixed order: deterministic).
 */
template <typename T>
__global__ void __launch_bounds__(kMergeWarps * 32)
    decode_merge_kernel(T* __restrict__ out, const float* __restrict__ ws_acc, const float* __restrict__ ws_ml,
                        int num_chunks, int head_dim) {
  __shared__ float w[kMaxChunks];
  __shared__ float red[kMergeWarps];
  __shared__ float part_l[kMergeWarps];
  __shared__ float part_a[kMergeWarps][kAttentionDecodeMaxHeadDim];
  grid_dependency_wait();  // the chunk kernel's partial results
  allow_dependents_launch();
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t qh = blockIdx.x;
  const float* ml = ws_ml + qh * num_chunks * 2;
  float mx = -INFINITY;
  for (int c = threadIdx.x; c < num_chunks; c += kMergeWarps * 32) {
    const float mc = ml[2 * c];
    w[c] = mc;
    mx = fmaxf(mx, mc);
  }
  mx = warp_max(mx);
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  mx = red[0];
#pragma unroll
  for (int i = 1; i < kMergeWarps; i++) mx = fmaxf(mx, red[i]);
  const float b = exp_base(mx);
  for (int c = threadIdx.x; c < num_chunks; c += kMergeWarps * 32) w[c] = exp2f(w[c] - b);
  __syncthreads();

  const float* acc = ws_acc + qh * num_chunks * head_dim;
  float a[kGenericMaxR];
#pragma unroll
  for (int r = 0; r < kGenericMaxR; r++) a[r] = 0.f;
  float lsum = 0.f;
#pragma unroll 4
  for (int c = warp; c < num_chunks; c += kMergeWarps) {
    const float wc = w[c];
    lsum = fmaf(wc, ml[2 * c + 1], lsum);
    const float* row = acc + static_cast<int64_t>(c) * head_dim;
#pragma unroll
    for (int r = 0; r < kGenericMaxR; r++) {
      const int d = lane + 32 * r;
      if (d < head_dim) a[r] = fmaf(wc, row[d], a[r]);
    }
  }
  if (lane == 0) part_l[warp] = lsum;
#pragma unroll
  for (int r = 0; r < kGenericMaxR; r++) {
    const int d = lane + 32 * r;
    if (d < head_dim) part_a[warp][d] = a[r];
  }
  __syncthreads();
  float l = 0.f;
#pragma unroll
  for (int i = 0; i < kMergeWarps; i++) l += part_l[i];
  const float inv = 1.f / l;
  for (int d = threadIdx.x; d < head_dim; d += kMergeWarps * 32) {
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kMergeWarps; i++) sum += part_a[i][d];
    out[qh * head_dim + d] = from_float<T>(sum * inv);
  }
}

struct Chunking {
  int chunks;
  int chunk_len;  // the kernels recompute it from the actual key count (chunk_length)
};

/**
 * Chunks of at least kMinChunk keys, as many as it takes to give ~target_blocks blocks, at most kMaxChunks.
 * With a device-side key count `kv_len` is the capacity: shorter contexts get shorter chunks, same count.
 */
Chunking choose_chunking(int64_t kv_len, int64_t blocks_per_chunk, int64_t target_blocks) {
  const int64_t by_len = (kv_len + kMinChunk - 1) / kMinChunk;
  const int64_t by_target = (target_blocks + blocks_per_chunk - 1) / blocks_per_chunk;
  int64_t chunks = by_len < by_target ? by_len : by_target;
  if (chunks > kMaxChunks) chunks = kMaxChunks;
  if (chunks < 1) chunks = 1;
  int64_t len = (kv_len + chunks - 1) / chunks;
  len = (len + kMinChunk - 1) / kMinChunk * kMinChunk;
  chunks = (kv_len + len - 1) / len;
  return {static_cast<int>(chunks), static_cast<int>(len)};
}

/** The chunk count bound that sizes the workspace: never below choose_chunking's count, for any blocks_per_chunk. */
int64_t max_chunks(int64_t kv_len) {
  int64_t c = (kv_len + kMinChunk - 1) / kMinChunk;
  if (c > kMaxChunks) c = kMaxChunks;
  return c < 1 ? 1 : c;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <typename T, int D, int G>
cudaError_t launch_fast(const AttentionDecodeArgs& a, const Chunking& ch, int head_tiles, float* ws_acc, float* ws_ml,
                        float scale_log2, cudaStream_t stream) {
  constexpr size_t smem = FastShape<T, D>::SMEM;
  // Opt in whatever the size: the kernel's few bytes of static shared memory count toward the 48 KB default too.
  static bool configured = false;
  if (!configured) {
    QK_RETURN_IF_ERROR(cudaFuncSetAttribute(decode_chunk_kernel<T, D, G>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(smem)));
    configured = true;
  }
  const int64_t tiles_per_chunk = a.kv_heads * head_tiles;
  const dim3 grid = chunk_grid(ch.chunks, tiles_per_chunk);
  return launch_kernel(decode_chunk_kernel<T, D, G>, grid, dim3(kThreads), smem, stream, static_cast<T*>(a.out),
                       static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v), ws_acc, ws_ml,
                       a.kv_len_device, static_cast<int>(a.kv_len), static_cast<int>(a.kv_heads),
                       static_cast<int>(a.q_heads / a.kv_heads), head_tiles, ch.chunks, scale_log2);
}

template <typename T, int D>
cudaError_t launch_fast_d(const AttentionDecodeArgs& a, int tile, const Chunking& ch, int head_tiles, float* ws_acc,
                          float* ws_ml, float scale_log2, cudaStream_t stream) {
  static_assert(kMaxGroupTile == 2, "instantiate the tiles up to kMaxGroupTile");
  return tile == 1 ? launch_fast<T, D, 1>(a, ch, head_tiles, ws_acc, ws_ml, scale_log2, stream)
                   : launch_fast<T, D, 2>(a, ch, head_tiles, ws_acc, ws_ml, scale_log2, stream);
}

template <typename T>
cudaError_t launch_typed(const AttentionDecodeArgs& a, cudaStream_t stream) {
  constexpr int V = kVec<T>;
  const int D = static_cast<int>(a.head_dim);
  const float scale_log2 = a.scale * kLog2e;
  const int64_t group = a.q_heads / a.kv_heads;
  // Fast path: one block per (chunk, KV head, tile of ≤ 2 query heads); generic path: one per (chunk, query head).
  const bool fast = aligned16(a.k) && aligned16(a.v) && (D == 64 || D == 128 || (D == 256 && 256 / V <= 32));
  int tile = 1;
  while (tile < group && tile < kMaxGroupTile) tile *= 2;
  const int64_t head_tiles = (group + tile - 1) / tile;
  const int64_t blocks_per_chunk = fast ? a.kv_heads * head_tiles : a.q_heads;
  if (blocks_per_chunk > 65535) return cudaErrorInvalidValue;
  const Chunking ch = choose_chunking(a.kv_len, blocks_per_chunk, kTargetBlocks);
  // Workspace: acc [q_heads][chunks][D] floats, then (max, sum) [q_heads][chunks][2].
  float* ws_acc = static_cast<float*>(a.workspace);
  float* ws_ml = ws_acc + a.q_heads * ch.chunks * a.head_dim;
  if (fast) {
    const int ht = static_cast<int>(head_tiles);
    cudaError_t err = cudaErrorInvalidValue;
    if (D == 64) {
      err = launch_fast_d<T, 64>(a, tile, ch, ht, ws_acc, ws_ml, scale_log2, stream);
    } else if (D == 128) {
      err = launch_fast_d<T, 128>(a, tile, ch, ht, ws_acc, ws_ml, scale_log2, stream);
    } else {
      if constexpr (256 / V <= 32) err = launch_fast_d<T, 256>(a, tile, ch, ht, ws_acc, ws_ml, scale_log2, stream);
    }
    QK_RETURN_IF_ERROR(err);
  } else {
    const dim3 grid = chunk_grid(ch.chunks, a.q_heads);
    QK_RETURN_IF_ERROR(launch_kernel(decode_chunk_generic_kernel<T>, grid, dim3(kThreads), 0, stream,
                                     static_cast<T*>(a.out), static_cast<const T*>(a.q), static_cast<const T*>(a.k),
                                     static_cast<const T*>(a.v), ws_acc, ws_ml, a.kv_len_device,
                                     static_cast<int>(a.kv_len), static_cast<int>(a.kv_heads),
                                     static_cast<int>(group), D, ch.chunks, scale_log2));
  }
  if (ch.chunks == 1) return cudaSuccess;
  // The merge is a programmatic dependent launch like every kernel here: its launch overlaps the chunk kernel's tail.
  return launch_kernel(decode_merge_kernel<T>, dim3(static_cast<unsigned>(a.q_heads)), dim3(kMergeWarps * 32), 0,
                       stream, static_cast<T*>(a.out), static_cast<const float*>(ws_acc),
                       static_cast<const float*>(ws_ml), ch.chunks, D);
}

}  // namespace

size_t attention_decode_workspace_bytes(int64_t q_heads, int64_t head_dim, int64_t kv_len) {
  if (q_heads <= 0 || head_dim <= 0 || kv_len <= 0) return 0;
  return static_cast<size_t>(q_heads) * static_cast<size_t>(max_chunks(kv_len)) *
         static_cast<size_t>(head_dim + 2) * sizeof(float);
}

cudaError_t launch_attention_decode(const AttentionDecodeArgs& a, cudaStream_t stream) {
  if (a.q_heads == 0) return cudaSuccess;
  if (a.kv_len <= 0 || a.kv_len > 0x7fffffff || a.kv_heads <= 0 || a.q_heads < 0 || a.q_heads % a.kv_heads != 0 ||
      a.head_dim <= 0 || a.head_dim > kAttentionDecodeMaxHeadDim || a.q_heads > 0x7fffffff) {
    return cudaErrorInvalidValue;
  }
  if (a.workspace == nullptr || a.workspace_bytes < attention_decode_workspace_bytes(a.q_heads, a.head_dim, a.kv_len) ||
      (reinterpret_cast<uintptr_t>(a.workspace) & 3) != 0) {
    return cudaErrorInvalidValue;
  }
  QK_DISPATCH_FLOAT(a.dtype, T, { return launch_typed<T>(a, stream); });
  return cudaSuccess;
}

}  // namespace qk
