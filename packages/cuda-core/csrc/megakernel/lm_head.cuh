// The LM head's own parts (its unscreened rows are a GEMV stage: gemv.cuh): the argmax (each warp's best, the end of
// an argmax step) and the int8 screen streamed in place of the bf16 rows (consume_screen; the screen is built by
// screen_build.cuh).
//
// Part of the one translation unit qwen3_decode.cu: included there inside namespace qk::{anonymous}, in the
// order listed there, after the files it relies on; not a standalone header.
#pragma once

// ---------------------------------------------------------------------------------------------------------------
// Argmax

/** Argmax state of a warp (lane 0) over LM-head rows. */
struct Best {
  float v;
  int i;
};

__device__ __forceinline__ bool better(float v, int i, const Best& b) { return v > b.v || (v == b.v && i < b.i); }

/**
 * Offers row i's logit v to an argmax state. A NaN or +inf logit refuses the step's logits, as `sample`'s greedy path
 * refuses the row: it becomes the sentinel {+inf, −1}, which `better` ranks above every other state, so it survives
 * every reduction whatever their order and step_argmax fails the step. Finite rows pay one compare.
 */
__device__ __forceinline__ void offer(Best& best, float v, int i) {
  if (isnan(v) || v == INFINITY) best = {INFINITY, -1};
  else if (better(v, i, best)) best = {v, i};
}

/**
 * One step's argmax: the block's best over its LM-head rows, then an arrival; in the last block to arrive, warp 0
 * reduces the blocks' bests (each lane a strided share of them, loads in flight together, then a butterfly) and
 * publishes the token. This thread's verdict (false: no finite logit, the launch aborts); the caller combines them
 * with block_ok.
 */
__device__ __forceinline__ bool step_argmax(const MegakernelArgs& a, const Block& b, const Layout& lay, Best best,
                                            int step, int pos) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint8_t* ws = static_cast<uint8_t*>(a.workspace);
  float* bv = b.red;
  int* bi = reinterpret_cast<int*>(b.red + kConsumerWarps);
  float* arg_v = reinterpret_cast<float*>(ws + lay.arg);
  int* arg_i = reinterpret_cast<int*>(arg_v + gridDim.x);
  consumer_sync();  // red was last used by the final norm's reduction
  if (lane == 0) {
    bv[warp] = best.v;
    bi[warp] = best.i;
  }
  consumer_sync();
  if (threadIdx.x == 0) {
    Best blk{-INFINITY, INT32_MAX};
    for (int w = 0; w < kConsumerWarps; w++)
      if (better(bv[w], bi[w], blk)) blk = {bv[w], bi[w]};
    arg_v[blockIdx.x] = blk.v;
    arg_i[blockIdx.x] = blk.i;
    b.flag[3] = step_arrive(a, b) ? 1 : 0;
  }
  consumer_sync();
  if (b.flag[3] == 0 || warp != 0) return true;
  // `better` is a total order (value descending, then index ascending), so the result does not depend on the order
  // in which the bests are combined.
  Best all{-INFINITY, INT32_MAX};
#pragma unroll 4
  for (unsigned q = lane; q < gridDim.x; q += 32) {
    const float v = __ldcg(arg_v + q);
    const int i = __ldcg(arg_i + q);
    if (better(v, i, all)) all = {v, i};
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, all.v, o);
    const int i = __shfl_xor_sync(0xffffffffu, all.i, o);
    if (better(v, i, all)) all = {v, i};
  }
  // Refused as `sample`'s greedy path refuses a row: a NaN or +inf logit (the sentinel), or no logit above −inf.
  if (all.i == INT32_MAX || all.i < 0 || all.v == -INFINITY) {
    if (lane == 0) fail(b.sync, b.result, b.host, b.launch_epoch, MegakernelError::NonFinite);
    return false;
  }
  if (lane == 0) {
    count_token(a, all.i);
    publish_token(a, b, all.i, step, pos);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// The LM head screened in int8 (launches with MegakernelArgs::lm_screen)
//
// Every block quantises its copy of the final-normed x to integers of up to screen_levels(hidden) (one scale for the
// vector), streams the screen's rows (int8 weights w8 on a per-row scale s, and bounds e ≥ |w − s·w8| and
// n ≥ |w| + e in the 2-norm) instead of the bf16 rows, and takes each row's dot exactly in integers. For
// x = sx·x16 + dx, the row's logit before rounding lies within
//   B = e·|x| + n·|dx| + 2^-10·n·|x|
// of s·sx·(w8 · x16): the first two terms bound (w − s·w8)·x + s·w8·dx, the last covers the float rounding of both
// that value and the unscreened fp32 dot (per lane hidden / 256 FMAs, then 5 adds: below 2^-12 relative to n·|x| for
// every hidden size the plan serves). The block keeps each row's upper bound and, over its rows below vocab_limit,
// the best lower bound T (argmax steps) or the k-th best (sampling steps with top-k k). k rows then have bf16 logits
// of at least bf16(T), and a row whose upper bound lies below T − (one bf16 step at T), which is at least
// T − 2^-6·|T|, has a bf16 logit below that: it ranks below those k rows, in the block and so in the step. Only the
// other rows are recomputed, from the bf16 LM head with the unscreened code's arithmetic, and they go to the block's
// argmax or top-k as before. So the argmax, or the top-k and their logits (what a draw reads), are the unscreened
// ones, id for id, and the step reads about half the bytes.
//
// A launch with a mask (MegakernelArgs::mask_tags: a constraint's allowed ids, published by the host while the step
// runs) treats every id whose bit is clear as an id past vocab_limit: no bound, no candidate, no logit offered. The
// block's thread 0 waits for the step's tag while the others quantise x, and the block's words (its rows' bits, a few
// dozen) are copied into shared memory after the warps' lists before the rows are read.
//
// With penalties (MegakernelArgs::pen_counts), a row whose id was seen keeps as bounds g(bf16(L)) and g(bf16(U)),
// g its penalty map: its value the draw compares, g(bf16(dot)), lies between them (both maps non-decreasing). The
// other rows keep L and U, and their values are bf16(dot). T, the best (k-th best) of the lower bounds so kept, then
// has k rows whose values are at least min(T, bf16(T)); a row under the same threshold T − 2^-6·|T| has a value below
// that (an id seen: below T − half a bf16 step, which is at most bf16(T); the others as above). So the candidates stay
// exact, and the rows not seen, nearly all of them, pay one shared-memory bit per row. (Rounding every row's bounds
// to bf16 instead cost ~35 µs per Qwen3-0.6B step on an H200.)

/** Mask words of a block's LM-head rows [u0, u1) at most: (u1 − u0) / 32 + 2. */
__host__ __device__ constexpr int64_t screen_mask_words(int64_t rows) { return rows / 32 + 2; }

constexpr int kScreenMeta = kMegakernelScreenMeta;  // bytes of floats after a screen row's weights

/** The integer range of the screened x: |w8 · x16| stays below 2^31 (|w8| ≤ 127), at most 16383 levels. */
__device__ __forceinline__ int screen_levels(int hidden) {
  const int cap = static_cast<int>(2147483647u / (127u * static_cast<unsigned>(hidden)));
  return cap < 16383 ? cap : 16383;
}

/** Dot of 16 int8 weights (w) with 16 int16 inputs (xa: the first 8, xb: the next 8), accumulated exactly. */
__device__ __forceinline__ int dot16_i8(const uint4 w, const uint4 xa, const uint4 xb, int acc) {
  acc = __dp2a_lo(static_cast<int>(xa.x), static_cast<int>(w.x), acc);
  acc = __dp2a_hi(static_cast<int>(xa.y), static_cast<int>(w.x), acc);
  acc = __dp2a_lo(static_cast<int>(xa.z), static_cast<int>(w.y), acc);
  acc = __dp2a_hi(static_cast<int>(xa.w), static_cast<int>(w.y), acc);
  acc = __dp2a_lo(static_cast<int>(xb.x), static_cast<int>(w.z), acc);
  acc = __dp2a_hi(static_cast<int>(xb.y), static_cast<int>(w.z), acc);
  acc = __dp2a_lo(static_cast<int>(xb.z), static_cast<int>(w.w), acc);
  acc = __dp2a_hi(static_cast<int>(xb.w), static_cast<int>(w.w), acc);
  return acc;
}

/**
 * The LM-head stage of a screened step (fixed shares: the block's rows are [u0, u1)): the screen's tiles from the
 * ring, then the candidates' bf16 rows from the LM head. Leaves the warp's best (lane 0) in `best`, or with kSample
 * its k best in `top`, as consume_gemv does for the unscreened stage. Uses the union after x: x16 (hidden int16), one
 * float per row, then (kSample) the warps' lists of lower bounds.
 */
template <bool kSample>
__device__ __forceinline__ bool consume_screen(const MegakernelArgs& a, const Block& b, RingPos& at, Best& best,
                                               TopK& top) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int hidden = static_cast<int>(a.dims.hidden);
  const int rowb = hidden + kScreenMeta;
  int16_t* x16 = reinterpret_cast<int16_t*>(b.x + hidden);
  float* upper = reinterpret_cast<float*>(x16 + hidden);
  float* red = b.red;  // [0, 7): max |x|, [7, 14): Σ x², [14, 21): Σ dx², [21, 28): the warps' best lower bounds
  const StageShape s = stage_shape(a, -1, -1);
  int64_t u0 = 0, u1 = 0;
  stage_range(s.units, u0, u1);
  const int rows = static_cast<int>(u1 - u0);
  // The mask's words of rows [u0, u1) (launches with a mask), after the warps' lists of lower bounds.
  const bool masked = a.mask_tags != nullptr;
  uint32_t* mask = reinterpret_cast<uint32_t*>(upper + ((rows + 1) & ~1) + 2 * kConsumerWarps * kMaxTopK);
  const int64_t w0 = u0 >> 5;
  const int words = rows > 0 ? static_cast<int>(((u1 - 1) >> 5) - w0 + 1) : 0;
  // With penalties (MegakernelArgs::pen_counts), the words of pen_seen over the same rows, after the mask's.
  const bool pen = a.pen_counts != nullptr;
  uint32_t* seen = mask + screen_mask_words(rows);
  if (masked && threadIdx.x == 0) {
    const unsigned slot = b.epoch & 1u;
    b.flag[3] = mask_wait(a.mask_tags + slot, b.epoch, b.sync, b.result, b.host, b.launch_epoch, b.timeout_ns) ? 1 : 0;
  }
  const auto allowed = [&](int64_t u) { return !masked || ((mask[(u >> 5) - w0] >> (u & 31)) & 1u) != 0; };
  const auto seen_at = [&](int64_t u) { return pen && ((seen[(u >> 5) - w0] >> (u & 31)) & 1u) != 0; };
  // A candidate's logit as the draw compares it: through the penalties when the launch has them.
  const auto controlled = [&](float v, int64_t u) { return pen ? penalized(a, v, u, seen_at(u)) : v; };
  // 1. x: its largest magnitude and its norm, then x16 and the norm of what it leaves out. (A NaN or infinity in x
  // makes every row a candidate: the unscreened arithmetic then decides, as it would have.)
  float m = 0.f, xx = 0.f;
  bool bad = false;
  for (int i = threadIdx.x; i < hidden; i += kConsumers) {
    const float v = bf(b.x[i]);
    bad |= !isfinite(v);
    m = fmaxf(m, fabsf(v));
    xx = fmaf(v, v, xx);
  }
  m = warp_max(m);
  xx = warp_sum(xx);
  bad = __any_sync(0xffffffffu, bad);
  consumer_sync();  // red was last read by the final norm; (masked) thread 0 has seen the step's tag, or failed
  if (masked) {
    if (b.flag[3] == 0) return false;  // (every consumer thread: the launch aborts)
    const uint32_t* src = a.mask_words + static_cast<int64_t>(b.epoch & 1u) * a.mask_stride + w0;
    for (int i = threadIdx.x; i < words; i += kConsumers) mask[i] = l2_load_u32(src + i);
  }
  if (pen) {  // (the last step's token set its bit before it was published)
    for (int i = threadIdx.x; i < words; i += kConsumers) seen[i] = l2_load_u32(a.pen_seen + w0 + i);
  }
  if (lane == 0) {
    red[warp] = bad ? INFINITY : m;
    red[kConsumerWarps + warp] = xx;
  }
  consumer_sync();
  m = 0.f;
  xx = 0.f;
  for (int w = 0; w < kConsumerWarps; w++) {
    m = fmaxf(m, red[w]);
    xx += red[kConsumerWarps + w];
  }
  bad = !(m < INFINITY);
  const float levels = static_cast<float>(screen_levels(hidden));
  const float inv = m > 0.f && !bad ? levels / m : 0.f;
  const float sx = m > 0.f && !bad ? m / levels : 0.f;
  float dd = 0.f;
  for (int i = threadIdx.x; i < hidden; i += kConsumers) {
    const float v = bf(b.x[i]);
    const float q = fminf(fmaxf(rintf(v * inv), -levels), levels);
    x16[i] = static_cast<int16_t>(q);
    const float dx = fmaf(-q, sx, v);
    dd = fmaf(dx, dx, dd);
  }
  dd = warp_sum(dd);
  if (lane == 0) red[2 * kConsumerWarps + warp] = dd;
  consumer_sync();  // x16 and the sums
  dd = 0.f;
  for (int w = 0; w < kConsumerWarps; w++) dd += red[2 * kConsumerWarps + w];
  // The norms, rounded up generously (their own float sums are off by far less than 2^-10).
  const float nx = sqrtf(xx) * (1.f + 0x1p-10f), ndx = sqrtf(dd) * (1.f + 0x1p-10f) + 0x1p-100f;

  // 2. The screen's rows: a row pair per warp turn, as consume_gemv's pairs. (The mask's words landed before the
  // barrier above.)
  const int chunks = hidden / 16;
  float lower = -INFINITY;        // argmax: the warp's best lower bound so far (every lane holds it)
  TopK low{0ull, 0ull, 0ull, 0};  // sampling: the warp's k best lower bounds so far (as candidate keys)
  int turns = 0, mine = warp;
  for (bool last = false; !last; ring_next(at, b.nslots)) {
    const int slot = at.slot;
    if (!mbar_wait(b, &b.full[slot], at.phase)) return false;
    const uint2 desc = b.desc[slot];
    const int64_t t0 = desc.x;
    const int n = static_cast<int>(desc.y & 0x7fffffffu);
    last = n == 0 || (desc.y >> 31) != 0;
    const uint8_t* tile = b.slots + static_cast<unsigned>(slot) * static_cast<unsigned>(a.slot_bytes);
    const int first = mine - turns;
    turns += (n + 1) / 2;
    for (int r = 2 * first; r < n; r += 2 * kConsumerWarps) {
      mine += kConsumerWarps;
      const uint8_t* row = tile + r * rowb;
      int acc0 = 0, acc1 = 0;
      for (int c = lane; c < chunks; c += 32) {
        const uint4 xa = lds128(x16 + c * 16), xb = lds128(x16 + c * 16 + 8);
        acc0 = dot16_i8(lds128(row + c * 16), xa, xb, acc0);
        acc1 = dot16_i8(lds128(row + rowb + c * 16), xa, xb, acc1);
      }
      acc0 = __reduce_add_sync(0xffffffffu, acc0);
      acc1 = __reduce_add_sync(0xffffffffu, acc1);
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int64_t u = t0 + r + h;
        if (h == 1 && r + 1 >= n) break;  // an odd vocabulary's last row
        const uint4 mr = lds128(row + h * rowb + hidden);
        const float sr = __uint_as_float(mr.x), er = __uint_as_float(mr.y), nr = __uint_as_float(mr.z);
        const float c = static_cast<float>(h == 0 ? acc0 : acc1) * sr * sx;
        const float bound = fmaf(er, nx, fmaf(nr, ndx, nr * nx * 0x1p-10f));
        const bool live = u < a.vocab_limit && allowed(u);
        // An id seen in a launch with penalties: the bounds of the value the draw compares, bf16(the fp32 dot) then
        // penalised. Both maps are non-decreasing, so they carry the dot's bounds over (see the threshold below).
        float lo = c - bound, hi = c + bound;
        if (seen_at(u)) {
          lo = controlled(round_bf(lo), u);
          hi = controlled(round_bf(hi), u);
        }
        const float up = live ? hi : -INFINITY;
        if constexpr (kSample) {
          // (Warp-uniform: every lane holds the sums and the row's floats. A NaN bound is no bound.)
          if (live && lo > -INFINITY) top_insert(low, candidate_key(lo, static_cast<unsigned>(u)), a.top_k);
        } else if (live) {
          lower = fmaxf(lower, lo);
        }
        if (lane == 0) upper[u - u0] = up;
        // (No L2 request for rows that may become candidates: judged by the warp's bound so far, about 80 rows per
        // block qualify, 16 times the candidates, and their lines, kept in L2, slowed the next step's layers: without
        // the requests, 27-33 µs per token faster at position 1.)
      }
    }
    mbar_arrive(&b.empty[slot]);
  }
  // 3. The block's best (argmax) or k-th best (sampling) lower bound T, and the candidates recomputed as the
  // unscreened stage computes them.
  if constexpr (kSample) {
    const int k = a.top_k;
    // The warps' lists after the rows' bounds. T is the key, among the lists' first k places, with exactly k − 1 keys
    // above it (keys never tie; each list is sorted, so a binary search per list). Fewer than k rows with a finite
    // lower bound leave T = −inf, and every row a candidate.
    unsigned long long* lists = reinterpret_cast<unsigned long long*>(upper + ((rows + 1) & ~1));
    lists[warp * kMaxTopK + lane] = low.e0;
    lists[warp * kMaxTopK + 32 + lane] = low.e1;
    if (threadIdx.x == 0) red[3 * kConsumerWarps] = -INFINITY;
    consumer_sync();  // the lists, T's default and `upper`
    for (int e = threadIdx.x; e < kConsumerWarps * k; e += kConsumers) {
      const unsigned long long key = lists[(e / k) * kMaxTopK + e % k];
      if (key == 0ull) continue;  // an empty place
      if (keys_above(lists, key, k) == k - 1) red[3 * kConsumerWarps] = sample_key_value(static_cast<unsigned>(key >> 32));
    }
    consumer_sync();  // T
    const float t = red[3 * kConsumerWarps];
    const float thr = t - (fabsf(t) * 0x1p-6f + 1e-37f);
    // A NaN upper bound (a row of non-finite weights against x = 0) makes a candidate, so that its logit reaches the
    // draw's non-finite check, as unscreened.
    const auto cand_at = [&](int i) {
      return i < rows && u0 + i < a.vocab_limit && allowed(u0 + i) && (bad || !(upper[i] < thr));
    };
    const bf16* lm = static_cast<const bf16*>(a.lm_head);
    // A block has tens of candidates here (the k best and those within the bounds of them), several per warp: L2
    // requests for every one of the warp's rows first, then their logits two rows at a time, so that the warp waits
    // for about half as many round trips, mostly to L2.
    const int lines = hidden / 64;  // 128-byte lines per row
    for (int base = warp * 32; base < rows; base += kConsumers) {
      for (unsigned hits = __ballot_sync(0xffffffffu, cand_at(base + lane)); hits != 0; hits &= hits - 1) {
        const bf16* row = lm + (u0 + base + __ffs(hits) - 1) * hidden;
        for (int l = lane; l < lines; l += 32) asm volatile("prefetch.global.L2 [%0];" ::"l"(row + l * 64));
      }
    }
    const int k_dot = (a.debug & 4) != 0 ? 0 : hidden;  // (diagnostic: no dot products)
    const auto pair = [&](int64_t ua, int64_t ub) {  // ub == ua: one row
      const bf16* ra = lm + ua * hidden;
      const bf16* rb = lm + ub * hidden;
      float sa = 0.f, sb = 0.f;
#pragma unroll 4
      for (int c = lane * 8; c < k_dot; c += 256) {
        const uint4 xv = lds128(b.x + c);
        const uint4 wa = ld_early_cg128(ra + c), wb = ld_early_cg128(rb + c);
        sa = dot8(wa, xv, sa);
        sb = dot8(wb, xv, sb);
      }
      sa = warp_sum(sa);
      sb = warp_sum(sb);
      top_consider(top, controlled(round_bf(sa), ua), static_cast<unsigned>(ua), k);
      if (ub != ua) top_consider(top, controlled(round_bf(sb), ub), static_cast<unsigned>(ub), k);
    };
    int64_t held = -1;  // a candidate waiting for its partner
    for (int base = warp * 32; base < rows; base += kConsumers) {
      for (unsigned hits = __ballot_sync(0xffffffffu, cand_at(base + lane)); hits != 0; hits &= hits - 1) {
        const int64_t u = u0 + base + __ffs(hits) - 1;
        if (held < 0) {
          held = u;
        } else {
          pair(held, u);
          held = -1;
        }
      }
    }
    if (held >= 0) pair(held, held);
  } else {
    if (lane == 0) red[3 * kConsumerWarps + warp] = lower;
    consumer_sync();  // the bounds and `upper`
    float t = -INFINITY;
    for (int w = 0; w < kConsumerWarps; w++) t = fmaxf(t, red[3 * kConsumerWarps + w]);
    const float thr = t - (fabsf(t) * 0x1p-6f + 1e-37f);
    const int k_dot = (a.debug & 4) != 0 ? 0 : hidden;  // (diagnostic: no dot products)
    for (int base = warp * 32; base < rows; base += kConsumers) {
      const int i = base + lane;
      // (A NaN upper bound, a row of non-finite weights against x = 0, makes a candidate: its logit reaches `offer`.)
      const bool cand = i < rows && u0 + i < a.vocab_limit && allowed(u0 + i) && (bad || !(upper[i] < thr));
      for (unsigned hits = __ballot_sync(0xffffffffu, cand); hits != 0; hits &= hits - 1) {
        const int64_t u = u0 + base + __ffs(hits) - 1;
        const bf16* row = static_cast<const bf16*>(a.lm_head) + u * hidden;
        float acc = 0.f;
#pragma unroll 4
        for (int c = lane * 8; c < k_dot; c += 256) acc = dot8(ld_early_cg128(row + c), lds128(b.x + c), acc);
        acc = warp_sum(acc);
        const float v = controlled(round_bf(acc), u);
        if (lane == 0) offer(best, v, static_cast<int>(u));
      }
    }
  }
  return true;
}
