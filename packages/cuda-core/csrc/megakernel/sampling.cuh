// Sampling in the kernel (DESIGN.md, "The LM head: screen, argmax, sampling"): each warp's k best candidates over its
// LM-head rows (TopK), and the end of a sampled step: the blocks' lists merged and the token drawn by `sample`'s
// rule (common/sampling_rule.cuh).
//
// Part of the one translation unit qwen3_decode.cu: included there inside namespace qk::{anonymous}, in the
// order listed there, after the files it relies on; not a standalone header.
#pragma once

// ---------------------------------------------------------------------------------------------------------------
// Sampling: a warp's best candidates

/**
 * A warp's `k` best sampling candidates so far, best first, held across its lanes: position p is `e0` of lane p
 * (p < 32) or `e1` of lane p − 32. A candidate is the key (order key of its logit << 32 | ~id): keys order
 * candidates as `sample` does (logit descending, then id ascending) and never tie. 0 marks an empty place (every
 * logit's key is above it, −inf's too). `thr` is the key at position k − 1 (0 while fewer than k are held); `bad`:
 * a NaN or +inf logit was seen.
 */
struct TopK {
  unsigned long long e0, e1, thr;
  int bad;
};
constexpr int kMaxTopK = kMegakernelMaxTopK;
static_assert(kMaxTopK == 64, "a warp's candidates are two keys per lane");

__device__ __forceinline__ unsigned long long candidate_key(float v, unsigned id) {
  return (static_cast<unsigned long long>(sample_order_key(v)) << 32) | (0xffffffffu - id);
}

/** Inserts the (warp-uniform) key `c` where it ranks among the warp's `k` best; nothing when it ranks below them. */
__device__ __forceinline__ void top_insert(TopK& t, unsigned long long c, int k) {
  if (c <= t.thr) return;
  const int lane = threadIdx.x & 31;
  // c beats the k-th key, so it lands at a position < k, and the keys from that position on move down one place.
  const int at = __popc(__ballot_sync(0xffffffffu, t.e0 > c)) + __popc(__ballot_sync(0xffffffffu, t.e1 > c));
  const unsigned long long up0 = __shfl_up_sync(0xffffffffu, t.e0, 1);
  const unsigned long long up1 = __shfl_up_sync(0xffffffffu, t.e1, 1);
  const unsigned long long last0 = __shfl_sync(0xffffffffu, t.e0, 31);
  if (32 + lane > at) t.e1 = lane == 0 ? last0 : up1;
  else if (32 + lane == at) t.e1 = c;
  if (lane > at) t.e0 = up0;
  else if (lane == at) t.e0 = c;
  t.thr = k <= 32 ? __shfl_sync(0xffffffffu, t.e0, k - 1) : __shfl_sync(0xffffffffu, t.e1, k - 33);
}

/** Offers logit `v` of id `id` (warp-uniform) to the warp's candidates. */
__device__ __forceinline__ void top_consider(TopK& t, float v, unsigned id, int k) {
  if (isnan(v) || v == INFINITY) {
    t.bad = 1;
    return;
  }
  top_insert(t, candidate_key(v, id), k);
}

/**
 * Merges a list of up to `k` keys, best first (key `key_at(p)` at position p, warp-uniform), into the warp's k best
 * candidates, stopping at the first key that ranks below them (the rest rank lower still; an empty place, 0, always
 * does).
 */
template <typename KeyAt>
__device__ __forceinline__ void top_merge_sorted(TopK& t, int k, KeyAt key_at) {
  for (int p = 0; p < k; p++) {
    const unsigned long long c = key_at(p);
    if (c <= t.thr) break;
    top_insert(t, c, k);
  }
}

/**
 * Keys above `key` among the first `k` places of the consumer warps' lists in shared memory (warp w's at
 * lists + w · kMaxTopK, each sorted best first): a binary search per list. Keys never tie, so over the lists' keys
 * this is each key's place in their merged order.
 */
__device__ __forceinline__ int keys_above(const unsigned long long* lists, unsigned long long key, int k) {
  int above = 0;
  for (int w = 0; w < kConsumerWarps; w++) {
    int lo = 0, hi = k;
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (lists[w * kMaxTopK + mid] > key) lo = mid + 1;
      else hi = mid;
    }
    above += lo;
  }
  return above;
}

/**
 * The k best keys of the consumer warps' lists in shared memory (see keys_above; 0 marks an empty place), best first,
 * into `out` (kMaxTopK places in shared memory, empty past the last key): every key lands at its place in the merged
 * order, all at once, where one warp inserting the lists' keys one by one took a few µs per list. Every consumer
 * thread; the lists must be complete (after a barrier); ends with a barrier.
 */
__device__ __forceinline__ void merge_warp_lists(const unsigned long long* lists, unsigned long long* out, int k) {
  for (int i = threadIdx.x; i < kMaxTopK; i += kConsumers) out[i] = 0ull;
  consumer_sync();  // (the places are empty before any key lands)
  for (int e = threadIdx.x; e < kConsumerWarps * k; e += kConsumers) {
    const unsigned long long key = lists[(e / k) * kMaxTopK + e % k];
    if (key == 0ull) continue;  // an empty place
    const int at = keys_above(lists, key, k);
    if (at < k) out[at] = key;
  }
  consumer_sync();
}

// ---------------------------------------------------------------------------------------------------------------
// Sampling controls: the penalties (MegakernelArgs::pen_counts) and the counts they read

/**
 * A logit `x` of an id seen (its bit set in pen_seen) through the penalties, with `c` its count, operation for
 * operation as the logit-controls kernel applies them (kernels/logit_controls.cu, `controlled`). Not inlined: the
 * float64 arithmetic is off the LM head's hot path, which runs it for the few ids seen only.
 */
__device__ __noinline__ float penalized_seen(float x, int32_t c, double repetition, double presence, double frequency) {
  if (isnan(x) || x == INFINITY) return x;
  double v = static_cast<double>(x);
  if (repetition != 1.0) v = v > 0.0 ? __ddiv_rn(v, repetition) : __dmul_rn(v, repetition);
  v = __dsub_rn(v, __dmul_rn(frequency, static_cast<double>(c)));
  if (c > 0) v = __dsub_rn(v, presence);
  return __double2float_rn(v);
}

/**
 * Logit `x` of id `u` as a launch with pen_counts draws from it (`seen`: u's bit in pen_seen). An unseen id keeps x,
 * save a zero, which the reference's x − frequency · 0 leaves +0 when the frequency penalty's sign is negative. For
 * fixed counts the map is non-decreasing in x, so bounds of a logit map to bounds of its penalised value.
 */
__device__ __forceinline__ float penalized(const MegakernelArgs& a, float x, int64_t u, bool seen) {
  if (!seen) return x == 0.f && signbit(a.frequency_penalty) ? 0.f : x;
  return penalized_seen(x, __ldcg(a.pen_counts + u), a.repetition_penalty, a.presence_penalty, a.frequency_penalty);
}

/**
 * The bits of ids u (bit 0) and u + 1 (bit 1) in `words` (device memory the kernel or the host writes during the
 * launch: loaded from L2). Past `vocab` a bit is clear.
 */
__device__ __forceinline__ uint32_t pair_bits_l2(const uint32_t* words, int64_t u, int64_t vocab) {
  const uint32_t w0 = __ldcg(words + (u >> 5));
  const uint32_t w1 = ((u + 1) & 31) != 0 ? w0 : u + 1 < vocab ? __ldcg(words + ((u + 1) >> 5)) : 0u;
  return ((w0 >> (u & 31)) & 1u) | (((w1 >> ((u + 1) & 31)) & 1u) << 1);
}

/**
 * The step's token counted (one thread, before publish_token): its count in pen_counts gains 1 and its bit in
 * pen_seen is set, before the token is published, so every block reads them at the next step's LM head.
 */
__device__ __forceinline__ void count_token(const MegakernelArgs& a, int token) {
  if (a.pen_counts == nullptr) return;
  atomicAdd(a.pen_counts + token, 1);
  atomicOr(a.pen_seen + (token >> 5), 1u << (token & 31));
  __threadfence();
}

// ---------------------------------------------------------------------------------------------------------------
// The end of a sampled step

/** consumer_sync() that also returns whether `v` is true on any consumer thread. */
__device__ __forceinline__ bool consumer_sync_or(bool v) {
  unsigned r;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, 1, %2, p;\n selp.u32 %0, 1, 0, q;\n}"
      : "=r"(r)
      : "r"(static_cast<unsigned>(v)), "n"(kConsumers)
      : "memory");
  return r != 0;
}

/** The first position p < 64 where the warp-wide predicate holds (p0: position lane, p1: 32 + lane), or `none`. */
__device__ __forceinline__ int first_position(bool p0, bool p1, int none) {
  const unsigned h0 = __ballot_sync(0xffffffffu, p0), h1 = __ballot_sync(0xffffffffu, p1);
  return h0 != 0 ? __ffs(h0) - 1 : h1 != 0 ? 32 + __ffs(h1) - 1 : none;
}

/** Lists of other blocks a warp of the last block loads together (their L2 round trips overlap). */
constexpr int kListBatch = 10;
static_assert((kConsumerWarps + 1) * kMaxTopK * 8 <= kAttnScratchFloats * 4, "the warps' lists and a merged one fit");

/**
 * One step's sample (a.top_k = k > 0), by `sample`'s rule (MegakernelArgs), over the ids below vocab_limit:
 *   1. Each warp has kept its k best logits of the LM head (top_consider); the block merges its warps' lists
 *      (merge_warp_lists) and publishes its k best, then arrives.
 *   2. The last block to arrive merges every block's list into the step's k best (the global top-k: each of them is
 *      among its own block's k best), warp w taking blocks w, w + 7, …, then the warps' lists merged as in 1.
 *   3. Warp 0 draws: integer weights and their prefix sums across the lanes, the nucleus and the drawn position by
 *      ballots, the same comparisons in float64 as the sampling kernels make.
 * This thread's verdict (false: a NaN or +inf logit, or all −inf; the launch aborts); combined by block_ok.
 */
__device__ __forceinline__ bool step_sample(const MegakernelArgs& a, const Block& b, const Layout& lay, TopK top,
                                            int step, int pos) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int k = a.top_k;
  uint8_t* ws = static_cast<uint8_t*>(a.workspace);
  unsigned long long* cand = reinterpret_cast<unsigned long long*>(ws + lay.cand);
  unsigned* cand_bad = reinterpret_cast<unsigned*>(ws + lay.cand_bad);
  // The warps' lists, then their merge, in the attention scratch (the LM head's input there is read by no one past the
  // first sync).
  unsigned long long* lists = reinterpret_cast<unsigned long long*>(b.scratch);
  unsigned long long* merged = lists + kConsumerWarps * kMaxTopK;
  const bool block_bad = consumer_sync_or(top.bad != 0);
  lists[warp * kMaxTopK + lane] = top.e0;
  lists[warp * kMaxTopK + 32 + lane] = top.e1;
  consumer_sync();
  merge_warp_lists(lists, merged, k);
  if (warp == 0) {
    unsigned long long* mine = cand + static_cast<size_t>(blockIdx.x) * kMaxTopK;
    mine[lane] = merged[lane];
    mine[32 + lane] = merged[32 + lane];
    if (lane == 0) cand_bad[blockIdx.x] = block_bad ? 1u : 0u;
    __threadfence();
    __syncwarp();
    if (lane == 0) b.flag[3] = step_arrive(a, b) ? 1 : 0;
  }
  consumer_sync();
  if (b.flag[3] == 0) return true;

  TopK all{0ull, 0ull, 0ull, 0};
  bool bad = false;
  for (unsigned q0 = warp; q0 < gridDim.x; q0 += kConsumerWarps * kListBatch) {
    unsigned long long r0[kListBatch], r1[kListBatch];
#pragma unroll
    for (int j = 0; j < kListBatch; j++) {
      const unsigned q = q0 + j * kConsumerWarps;
      r0[j] = r1[j] = 0ull;
      if (q < gridDim.x) {
        const unsigned long long* list = cand + static_cast<size_t>(q) * kMaxTopK;
        r0[j] = __ldcg(list + lane);
        if (k > 32) r1[j] = __ldcg(list + 32 + lane);
        if (lane == 0) bad = bad || __ldcg(cand_bad + q) != 0;
      }
    }
#pragma unroll
    for (int j = 0; j < kListBatch; j++) {  // list j: position p in lane p of r0[j] or lane p − 32 of r1[j]
      const unsigned long long e0 = r0[j], e1 = r1[j];
      top_merge_sorted(all, k, [e0, e1](int p) {
        return p < 32 ? __shfl_sync(0xffffffffu, e0, p) : __shfl_sync(0xffffffffu, e1, p - 32);
      });
    }
  }
  consumer_sync();  // warp 0 has read the block's merged list above
  lists[warp * kMaxTopK + lane] = all.e0;
  lists[warp * kMaxTopK + 32 + lane] = all.e1;
  bad = consumer_sync_or(bad);
  merge_warp_lists(lists, merged, k);
  if (warp != 0) return true;
  all.e0 = merged[lane];
  all.e1 = merged[32 + lane];

  int kept = static_cast<int>(min(static_cast<int64_t>(k), a.vocab_limit));
  // With a mask, fewer ids than k may be allowed: the draw keeps the candidates there are (the places past them are
  // empty keys, 0), as `sample` gives the masked ids a weight of 0.
  if (a.mask_tags != nullptr) {
    const int filled = __popc(__ballot_sync(0xffffffffu, all.e0 != 0ull)) +
                       __popc(__ballot_sync(0xffffffffu, all.e1 != 0ull));
    kept = min(kept, filled);
  }
  const float maxf = sample_key_value(static_cast<unsigned>(__shfl_sync(0xffffffffu, all.e0, 0) >> 32));
  if (bad || kept == 0 || maxf == -INFINITY) {
    if (lane == 0) fail(b.sync, b.result, b.host, b.launch_epoch, MegakernelError::NonFinite);
    return false;
  }
  const double maxv = maxf;
  if (a.log_min_p > -INFINITY) {
    // Min-p: the candidates are in descending order, so those it keeps are a prefix (the first always).
    const auto cut = [&](unsigned long long key, int p) {
      const double z = __ddiv_rn(__dsub_rn(static_cast<double>(sample_key_value(static_cast<unsigned>(key >> 32))), maxv),
                                 a.temperature);
      return p >= kept || z < a.log_min_p;
    };
    kept = first_position(cut(all.e0, lane), cut(all.e1, 32 + lane), kept);
  }
  const auto weight_of = [&](unsigned long long key, int p) {
    return p < kept ? sample_weight(sample_key_value(static_cast<unsigned>(key >> 32)), maxv, a.temperature,
                                    a.sample_scale)
                    : 0ull;
  };
  // Cumulative weights through positions lane (c0) and 32 + lane (c1).
  const unsigned long long c0 = warp_inclusive_scan_u64(weight_of(all.e0, lane));
  const unsigned long long c1 =
      warp_inclusive_scan_u64(weight_of(all.e1, 32 + lane)) + __shfl_sync(0xffffffffu, c0, 31);
  const auto through = [&](int p) {
    return static_cast<double>(p < 32 ? __shfl_sync(0xffffffffu, c0, p) : __shfl_sync(0xffffffffu, c1, p - 32));
  };
  const double w0 = static_cast<double>(c0), w1 = static_cast<double>(c1);
  int nucleus = kept - 1;
  if (a.top_p < 1.0) {  // the first position whose cumulative weight reaches top_p of the kept weight
    const double x = a.top_p * through(kept - 1);
    nucleus = first_position(lane < kept && w0 >= x, 32 + lane < kept && w1 >= x, nucleus);
  }
  // The first position whose cumulative weight exceeds u · (the nucleus weight); the nucleus's last if rounding
  // leaves none.
  const double target = a.uniforms[step] * through(nucleus);
  const int chosen = first_position(lane <= nucleus && w0 > target, 32 + lane <= nucleus && w1 > target, nucleus);
  const unsigned long long key =
      chosen < 32 ? __shfl_sync(0xffffffffu, all.e0, chosen) : __shfl_sync(0xffffffffu, all.e1, chosen - 32);
  if (lane == 0) {
    const int token = static_cast<int>(0xffffffffu - static_cast<unsigned>(key));
    count_token(a, token);
    publish_token(a, b, token, step, pos);
  }
  return true;
}
