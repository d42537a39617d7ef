// The attention's inputs from the QKV stage (whose GEMV is gemv.cuh's): the item's q (and new k, v) gathered from
// flagged words, QK-norm, RoPE, and the new key and value appended to the cache.
//
// Part of the one translation unit qwen3_decode.cu: included there inside namespace qk::{anonymous}, in the
// order listed there, after the files it relies on; not a standalone header.
#pragma once

/**
 * The attention's inputs, for KV head `g`'s query group: waits for the group's queries (and the new key and value where
 * this work item holds position `pos`), QK-norms and ropes them (every item of the head, redundantly), and appends the
 * new key and value to the cache. `early()` runs before the wait, after the loads of the norm weights: the work that
 * overlaps it (it may sync the consumers). kStaged (the staged attention): the queries go to the scratch as bf16
 * (unscaled), and the new key and value also to the staged rows `krow` and `vrow`; otherwise the queries go to the
 * scratch as floats in the log2 domain (pre-scaled). False when the launch aborts.
 */
template <int G, bool kStaged, typename Early>
__device__ __forceinline__ bool attention_inputs(const MegakernelArgs& a, const Block& b, int layer, int g,
                                                 bool holds_new, int pos, int ev, bf16* krow, bf16* vrow,
                                                 Early early) {
  const MegakernelDims& d = a.dims;
  const int KV = static_cast<int>(d.kv_heads);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const MegakernelLayer& L = a.layers[layer];
  const void* qkv = stage_output(a, a.layout, layer, kQkv);
  bf16* kc = static_cast<bf16*>(L.k_cache);
  bf16* vc = static_cast<bf16*>(L.v_cache);
  float* qs = b.scratch;                                        // [G][128] (floats)
  bf16* qh = reinterpret_cast<bf16*>(b.scratch + kStagedQ);     // [G][128] (bf16, the staged attention)
  const float scale_log2 = rsqrtf(static_cast<float>(kD)) * kLog2e;
  const bf16* norm_w = warp < G ? static_cast<const bf16*>(L.q_norm)
                                : (holds_new && warp == G ? static_cast<const bf16*>(L.k_norm) : nullptr);
  // Raw loads (converted only where used), so that nothing waits for them before the gather is issued.
  bf16 w_lo[2], w_hi[2];
  float freq[2];
  if (norm_w != nullptr) {
#pragma unroll
    for (int j = 0; j < 2; j++) {
      w_lo[j] = __ushort_as_bfloat16(ld_early_nc16(norm_w + lane + 32 * j));
      w_hi[j] = __ushort_as_bfloat16(ld_early_nc16(norm_w + lane + 32 * j + kHalf));
      freq[j] = ld_early_nc32f(a.inv_freq + lane + 32 * j);
    }
  }
  early();
  stamp(a, ev);

  // Wait for the group's queries (and the new key and value where this chunk holds them): one gather, a word per
  // thread.
  bf16* qin = b.qkv_in;
  bf16* kin = qin + kMaxG * kD;
  bf16* vin = kin + kD;
  float rope_sin[2], rope_cos[2];
  {
    constexpr int kWordsPerHead = kD / 4;
    const int words = (G + (holds_new ? 2 : 0)) * kWordsPerHead;
    bool ok = true;
    if (tid < words) {
      const int head = tid / kWordsPerHead, w = tid % kWordsPerHead;
      const int64_t row =
          head < G ? static_cast<int64_t>(g) * G + head : (head == G ? d.q_heads + g : d.q_heads + KV + g);
      bf16* dst = (head < G ? qin + head * kD : head == G ? kin : vin) + w * 4;
      const uint4* src = static_cast<const uint4*>(qkv) + row * kWordsPerHead + w;
      const uint4 first = flag_load(src);
      // The RoPE angles need only the position: computed while the first poll is in flight, not after q lands (the
      // threads that rope are among those that gather: the same bits, 2-7 µs per token at positions 1-128).
      if (norm_w != nullptr) {
#pragma unroll
        for (int j = 0; j < 2; j++) sincosf(__fmul_rn(static_cast<float>(pos), freq[j]), &rope_sin[j], &rope_cos[j]);
      }
      const uint4 v = flag_wait(a, b, src, first, ok);
      if (ok) *reinterpret_cast<uint2*>(dst) = make_uint2(v.x, v.z);
    }
    if (!block_ok(b, ok)) return false;
  }
  stamp(a, ev + 1);

  // QK-norm + RoPE of the group's queries (every chunk's block, redundantly) and of the new key where this chunk
  // holds it; the new key and value are appended to the cache (and the key kept rotated in kin).
  if (norm_w != nullptr) {
    const bool is_q = warp < G;
    const bf16* src = is_q ? qin + warp * kD : kin;
    float lo[2], hi[2], ss = 0.f;
#pragma unroll
    for (int j = 0; j < 2; j++) {
      lo[j] = bf(src[lane + 32 * j]);
      hi[j] = bf(src[lane + 32 * j + kHalf]);
      ss += lo[j] * lo[j] + hi[j] * hi[j];
    }
    const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(kD) + a.eps);
    bf16* kdst = kc + (static_cast<int64_t>(pos) * KV + g) * kD;
#pragma unroll
    for (int j = 0; j < 2; j++) {
      const int i = lane + 32 * j;
      const float sn = rope_sin[j], cs = rope_cos[j];
      const float x0 = lo[j] * inv * bf(w_lo[j]), x1 = hi[j] * inv * bf(w_hi[j]);
      const bf16 r0 = to_bf(x0 * cs - x1 * sn), r1 = to_bf(x1 * cs + x0 * sn);
      if (is_q) {
        if constexpr (kStaged) {
          qh[warp * kD + i] = r0;
          qh[warp * kD + i + kHalf] = r1;
        } else {
          qs[warp * kD + i] = bf(r0) * scale_log2;
          qs[warp * kD + i + kHalf] = bf(r1) * scale_log2;
        }
      } else {
        kdst[i] = r0;
        kdst[i + kHalf] = r1;
        kin[i] = r0;
        kin[i + kHalf] = r1;
        if constexpr (kStaged) {
          krow[i] = r0;
          krow[i + kHalf] = r1;
        }
      }
    }
  } else if (holds_new && warp == G + 1) {
    const uint2 v = *reinterpret_cast<const uint2*>(vin + lane * 4);
    *reinterpret_cast<uint2*>(vc + (static_cast<int64_t>(pos) * KV + g) * kD + lane * 4) = v;
    if constexpr (kStaged) *reinterpret_cast<uint2*>(vrow + lane * 4) = v;
  }
  return true;
}
