// A stage's input vector x in shared memory: block-wide reductions, the RMSNorm input (every block normalises the
// residual for itself and keeps it for the epilogue), the copied input (O, down) and the O input merged from the
// attention's chunks (MegakernelArgs::o_merge).
//
// Part of the one translation unit qwen3_decode.cu: included there inside namespace qk::{anonymous}, in the
// order listed there, after the files it relies on; not a standalone header.
#pragma once

/** Sum (or max) over the consumer threads of G values at once; every consumer gets the results in `out`. */
template <bool kMax>
__device__ __forceinline__ void consumer_reduce(const Block& b, float (&v)[kMaxG], int groups, float (&out)[kMaxG]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int h = 0; h < kMaxG; h++) {
    if (h < groups) {
      float x = v[h];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float y = __shfl_xor_sync(0xffffffffu, x, o);
        x = kMax ? fmaxf(x, y) : x + y;
      }
      if (lane == 0) b.red[h * kConsumerWarps + warp] = x;
    }
  }
  consumer_sync();
#pragma unroll
  for (int h = 0; h < kMaxG; h++) {
    if (h < groups) {
      float x = kMax ? -INFINITY : 0.f;
      for (int w = 0; w < kConsumerWarps; w++) {
        const float y = b.red[h * kConsumerWarps + w];
        x = kMax ? fmaxf(x, y) : x + y;
      }
      out[h] = x;
    }
  }
  consumer_sync();  // red may be reused at once
}

/**
 * The stage input x = bf16(rmsnorm(residual) · weight), every block computing it for itself. The residual is the
 * flagged buffer `src` (or, for layer 0, the embedding row); its raw values stay in `res` for the epilogue that adds
 * the residual. False when the launch aborts.
 */
__device__ __forceinline__ bool stage_norm_input(const MegakernelArgs& a, const Block& b, const void* src,
                                                 const bf16* weight, int64_t n, float eps) {
  consumer_sync();  // the previous stage's readers of x and res are done
  // The norm weights do not depend on the step: their loads overlap the wait for the residual (hidden sizes up to
  // 2 · 8 · 256 = 4096 are held in registers).
  constexpr int kHeld = 2;
  uint4 wv[kHeld];
#pragma unroll
  for (int r = 0; r < kHeld; r++) {
    const int64_t i = (static_cast<int64_t>(threadIdx.x) + r * kConsumers) * 8;
    if (i < n) wv[r] = ld_early_nc128(weight + i);
  }
  bool ok = true;
  if ((a.debug & 8) != 0) {
  } else if (src != nullptr) {
    ok = flag_gather<kGatherBatch>(a, b, src, n, b.res);
  } else {
    for (int64_t i = static_cast<int64_t>(threadIdx.x) * 8; i < n; i += kConsumers * 8)
      *reinterpret_cast<uint4*>(b.res + i) = *reinterpret_cast<const uint4*>(b.embed_row + i);
  }
  if (!block_ok(b, ok)) return false;
  float ss = 0.f;
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * 8; i < n; i += kConsumers * 8) {
    float f[8];
    unpack8(lds128(b.res + i), f);
#pragma unroll
    for (int j = 0; j < 8; j++) ss = fmaf(f[j], f[j], ss);
  }
  float v[kMaxG] = {ss}, total[kMaxG];
  consumer_reduce<false>(b, v, 1, total);
  const float inv = rsqrtf(total[0] / static_cast<float>(n) + eps);
  auto scale = [&](int64_t i, const uint4& wq) {
    float f[8], w[8];
    unpack8(lds128(b.res + i), f);
    unpack8(wq, w);
    Vec<bf16> out;
#pragma unroll
    for (int j = 0; j < 8; j++) out.v[j] = to_bf(f[j] * inv * w[j]);
    *reinterpret_cast<Vec<bf16>*>(b.x + i) = out;
  };
#pragma unroll
  for (int r = 0; r < kHeld; r++) {
    const int64_t i = (static_cast<int64_t>(threadIdx.x) + r * kConsumers) * 8;
    if (i < n) scale(i, wv[r]);
  }
  for (int64_t i = (static_cast<int64_t>(threadIdx.x) + kHeld * kConsumers) * 8; i < n; i += kConsumers * 8)
    scale(i, __ldg(reinterpret_cast<const uint4*>(weight + i)));
  consumer_sync();
  return true;
}

/** x = the flagged buffer `src` (n values). False when the launch aborts. */
__device__ __forceinline__ bool stage_copy_input(const MegakernelArgs& a, const Block& b, const void* src, int64_t n) {
  consumer_sync();  // the previous stage's readers of x are done
  return block_ok(b, (a.debug & 8) != 0 || flag_gather<kGatherBatch>(a, b, src, n, b.x));
}

/**
 * The O stage's input where the attention left a head's 2…o_merge chunks unmerged (MegakernelArgs::o_merge, query
 * groups of 2): x = every q head's output, merged here from the chunks' records `rec` (the layer's; chunk c's at
 * c · omerge_record_words), so that the merge costs no hop of its own, only a larger gather. The records' 16-byte
 * units lie end to end, and thread t loads units t, t + 224, … in one batch of at most kOMergeBatch (as the
 * attention's spread merge does), their values going to shared memory after x. After a barrier each 4-value unit of
 * x is merged in chunk order: w_c = sum_c · 2^(max_c − max), x = bf16(Σ_c w_c · out_c / Σ_c w_c). False when the
 * launch aborts.
 */
__device__ __forceinline__ bool stage_merge_input(const MegakernelArgs& a, const Block& b, const void* rec, int n,
                                                  int heads) {
  consumer_sync();  // the previous stage's readers of x are done
  const int tid = threadIdx.x;
  const int units = heads * kD / 4;                // of a chunk's outputs, 4 values each
  const int per = omerge_record_words(heads) / 2;  // units of a record: the outputs, then (max, sum) per head
  const int total = n * per;
  uint2* staged = reinterpret_cast<uint2*>(b.x + heads * kD);  // [chunk][per] each unit's two values, after x
  // (A fixed count of loads per thread, those past the thread's last unit reading that one again: a count known only
  // at run time spilled registers, as in the attention's spread merge.)
  const int last = tid + (total - 1 - tid) / kConsumers * kConsumers;
  uint4 v[kOMergeBatch];
  const bool ok = (a.debug & 8) != 0 || flag_wait_batch<kOMergeBatch>(a, b, v, kOMergeBatch, [&](int j) {
                    return static_cast<const uint4*>(rec) + min(tid + j * kConsumers, last);
                  });
  if (ok && (a.debug & 8) == 0) {
#pragma unroll
    for (int j = 0; j < kOMergeBatch; j++)
      if (tid + j * kConsumers < total) staged[tid + j * kConsumers] = make_uint2(v[j].x, v[j].z);
  }
  if (!block_ok(b, ok)) return false;
  if ((a.debug & 8) != 0) return true;
  for (int u = tid; u < units; u += kConsumers) {
    const uint2* ml = staged + units + u * 4 / kD;  // this unit's head: chunk c's (max, sum) at ml[c · per]
    float mx = -INFINITY;
    for (int c = 0; c < n; c++) mx = fmaxf(mx, __uint_as_float(ml[c * per].x));
    float o[4] = {0.f, 0.f, 0.f, 0.f}, den = 0.f;
    for (int c = 0; c < n; c++) {
      const float l = __uint_as_float(ml[c * per].y);
      if (!(l > 0.f)) continue;  // a chunk with no keys weighs nothing (its outputs are 0)
      const float w = l * exp2f(__uint_as_float(ml[c * per].x) - mx);
      const uint2 x = staged[c * per + u];
      o[0] = fmaf(w, bf2_lo(x.x), o[0]);
      o[1] = fmaf(w, bf2_hi(x.x), o[1]);
      o[2] = fmaf(w, bf2_lo(x.y), o[2]);
      o[3] = fmaf(w, bf2_hi(x.y), o[3]);
      den += w;
    }
    *reinterpret_cast<uint2*>(b.x + u * 4) =
        make_uint2(pack_bf2(o[0] / den, o[1] / den), pack_bf2(o[2] / den, o[3] / den));
  }
  consumer_sync();
  return true;
}
