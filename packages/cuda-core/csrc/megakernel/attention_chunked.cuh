// Attention by chunks (DESIGN.md, "Attention by chunks"): work items (KV head, chunk of keys), passes of 56 keys on
// the CUDA cores, the chunks' merge; the placement padding after it (DESIGN.md, "Code placement"); and the
// optional L2 prefetch of a chunk's cache rows (MegakernelArgs::kv_prefetch).
//
// Part of the one translation unit qwen3_decode.cu: included there inside namespace qk::{anonymous}, in the
// order listed there, after the files it relies on; not a standalone header.
#pragma once

/** Asks L2 for the cache rows [p0, p1) of KV head `g` (K and V, 256 bytes each) that attention will read. */
__device__ __forceinline__ void prefetch_chunk(const MegakernelLayer& L, int kv_heads, int g, int p0, int p1) {
  for (int p = p0 + static_cast<int>(threadIdx.x); p < p1; p += kConsumers) {
    const int64_t at = (static_cast<int64_t>(p) * kv_heads + g) * kD;
    prefetch_l2(static_cast<const bf16*>(L.k_cache) + at, kD * 2);
    prefetch_l2(static_cast<const bf16*>(L.v_cache) + at, kD * 2);
  }
}

/**
 * Code placement: kInstructions instructions that never run (the binding never passes this debug value), so that the
 * code after them lies where it was measured fastest. Where the attention ends moves everything after it: the same
 * kernel with 336-896 of them after the attention by chunks ran up to 40 µs per token apart at positions 512-1279,
 * and without them up to 70 µs slower (DESIGN.md, "Code placement"). Any change of the code around these points
 * moves what follows: measure the whole sweep.
 */
template <int kInstructions>
__device__ __forceinline__ void placement_pad(const MegakernelArgs& a, const Block& b) {
  if constexpr (kInstructions > 0) {
    if (a.debug == kPlacementPad) {
      unsigned x = threadIdx.x;
#pragma unroll
      for (int i = 0; i < kInstructions; i++) asm volatile("mad.lo.u32 %0, %0, %0, %1;" : "+r"(x) : "r"(i + 3));
      b.flag[0] = static_cast<int>(x);
    }
  }
}

/**
 * Attention of KV head `g`'s query group over cache positions [p0, p1) of layer `layer` (len = pos + 1 keys in
 * all). Publishes the normalised output when the head has one chunk, else the chunk's partial; the last chunk of a
 * head to finish merges them and publishes the output. Returns false when the launch aborts.
 *
 * Work split: passes of kPass keys; warp w takes keys w·8 … w·8 + 7 of a pass, four lanes per key for the scores
 * (lane quarter qd holds the 16-byte pieces qd, qd + 4, qd + 8, qd + 12 of the 128-wide row, so the quarters read q
 * from different banks) and all 32 lanes per value row (4 dims each). Each warp keeps its own running max, sum and
 * output, so a pass needs no block-wide reduction; the warps are merged once at the end, in fixed order.
 * kStage: a short second pass may be staged in shared memory (below). Only the argmax kernels of groups up to 3 take
 * it: in the others (G = 4, sampling) its code made ptxas spill 4-20 bytes.
 */
template <int G, bool kStage, int kPad>
__device__ __forceinline__ bool attend_chunked(const MegakernelArgs& a, const Block& b, const Layout& lay, int layer,
                                              int g, int c, int chunks, int p0, int p1, int pos, int ev) {
  const MegakernelDims& d = a.dims;
  const int KV = static_cast<int>(d.kv_heads);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const MegakernelLayer& L = a.layers[layer];
  uint8_t* ws = static_cast<uint8_t*>(a.workspace);
  const int max_chunks = static_cast<int>(gridDim.x) / static_cast<int>(d.kv_heads);
  bf16* kc = static_cast<bf16*>(L.k_cache);
  bf16* vc = static_cast<bf16*>(L.v_cache);
  float* qs = b.scratch;             // [G][128] roped queries, pre-scaled into the log2 domain
  float* wacc = qs + kMaxG * kD;                    // [warps][G·128] the warps' outputs
  float* wml = wacc + kConsumerWarps * kMaxG * kD;  // [warps][G][2] the warps' max and sum
  const int qd = lane & 3, kq = lane >> 2;
  constexpr int kPerWarp = kKeysPerWarp;

  // Everything that does not depend on this step's q/k/v is started before waiting for them (attention_inputs): the
  // norm weights of the warp's head, and the cached keys and values of the first pass (the new position, if this
  // chunk holds it, comes from the staged k/v instead of the cache).
  const bool holds_new = p0 <= pos && pos < p1;
  uint4 kv[4];
  uint2 vv[kPerWarp];
  auto load_pass = [&](int sp) {
    const int kk = sp + warp * kPerWarp + kq;
    if (kk < p1 && kk != pos) {
      const bf16* krow = kc + (static_cast<int64_t>(kk) * KV + g) * kD;
#pragma unroll
      for (int i = 0; i < 4; i++) kv[i] = ld_early_cg128(krow + (qd + 4 * i) * 8);
    }
#pragma unroll
    for (int j = 0; j < kPerWarp; j++) {
      const int vk = sp + warp * kPerWarp + j;
      if (vk < p1 && vk != pos)
        vv[j] = ld_early_cg64(vc + (static_cast<int64_t>(vk) * KV + g) * kD + lane * 4);
    }
  };
  // A chunk of two passes whose second pass holds at most kStageKeys keys (Qwen3-0.6B at 1,025-1,344 keys: 16 chunks
  // of 65-84) gets its second pass's cached rows copied into shared memory now, in the background, into the warps'
  // output area (written only after a barrier behind the passes): the second pass then does not wait for an L2 round
  // trip. (Measured: 0-4 µs per token at 1024, within the spread: the second pass costs its arithmetic, not its loads.)
  // (staged_keys() is recomputed where used rather than held: the attention runs at the register limit.)
  const auto staged_keys = [&]() {
    const int n = p1 - p0 - kPass;
    return kStage && a.kv_stage != 0 && n > 0 && n <= kStageKeys ? n : 0;
  };
  uint8_t* const stage_k = reinterpret_cast<uint8_t*>(wacc);
  uint8_t* const stage_v = stage_k + kStageKeys * kD * 2;
  if (!attention_inputs<G, false>(a, b, layer, g, holds_new, pos, ev, nullptr, nullptr, [&]() {
        load_pass(p0);
        consumer_sync();  // the QKV stage's readers of x (the same memory as the scratch) are done
        for (int i = tid; i < staged_keys() * 32; i += kConsumers) {
          const int r = i >> 5, part = i & 31, key = p0 + kPass + r;
          if (key == pos) continue;  // the new row is not in the cache yet: the pass takes it from the staged k/v
          const int64_t row = (static_cast<int64_t>(key) * KV + g) * kD;
          if (part < 16)
            cp_async16(stage_k + r * kD * 2 + ((part ^ (r & 7)) * 16), kc + row + part * 8);
          else
            cp_async16(stage_v + r * kD * 2 + (part - 16) * 16, vc + row + (part - 16) * 8);
        }
      }))
    return false;
  bf16* kin = b.qkv_in + kMaxG * kD;
  bf16* vin = kin + kD;
  if (staged_keys() > 0) cp_async_wait_all();  // (each thread its own copies; the barrier below publishes them all)
  consumer_sync();
  if ((a.debug & 64) == 0) stamp(a, ev + 2);

  float m[kMaxG], l[kMaxG], acc[kMaxG][4];
#pragma unroll
  for (int h = 0; h < kMaxG; h++) {
    m[h] = -INFINITY;
    l[h] = 0.f;
#pragma unroll
    for (int e = 0; e < 4; e++) acc[h][e] = 0.f;
  }
  for (int sp = p0; sp < p1; sp += kPass) {
    if (sp != p0 && staged_keys() > 0) {  // the staged second pass (the only pass after the first)
      const unsigned sk = smem_addr(wacc) + (warp * kPerWarp) * (kD * 2);
      const unsigned sv = sk + kStageKeys * kD * 2;
      if (sp + warp * kPerWarp + kq < p1 && sp + warp * kPerWarp + kq != pos) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
          const unsigned at = sk + kq * (kD * 2) + (((qd + 4 * i) ^ kq) * 16);  // (r & 7 = kq: warps start at 8k)
          asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                       : "=r"(kv[i].x), "=r"(kv[i].y), "=r"(kv[i].z), "=r"(kv[i].w)
                       : "r"(at));
        }
      }
#pragma unroll
      for (int j = 0; j < kPerWarp; j++) {
        if (sp + warp * kPerWarp + j < p1 && sp + warp * kPerWarp + j != pos)
          asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];"
                       : "=r"(vv[j].x), "=r"(vv[j].y)
                       : "r"(sv + j * (kD * 2) + lane * 8));
      }
    } else if (sp != p0) {
      load_pass(sp);
    }
    const int base = sp + warp * kPerWarp;
    if (base >= p1) break;  // this warp has no keys left (later passes start further on)
    const int kk = base + kq;
    const bool has_key = kk < p1;
    if (kk == pos) {
#pragma unroll
      for (int i = 0; i < 4; i++) kv[i] = *reinterpret_cast<const uint4*>(kin + (qd + 4 * i) * 8);
    }
#pragma unroll
    for (int j = 0; j < kPerWarp; j++)
      if (base + j == pos) vv[j] = *reinterpret_cast<const uint2*>(vin + lane * 4);
    float s[kMaxG] = {0.f, 0.f, 0.f, 0.f};
    if (has_key) {
#pragma unroll
      for (int i = 0; i < 4; i++) {
        float kf[8];
        unpack8(kv[i], kf);
        const int at = (qd + 4 * i) * 8;
#pragma unroll
        for (int h = 0; h < kMaxG; h++)
          if (h < G)
#pragma unroll
            for (int e = 0; e < 8; e++) s[h] = fmaf(qs[h * kD + at + e], kf[e], s[h]);
      }
    }
#pragma unroll
    for (int h = 0; h < kMaxG; h++) {
      if (h >= G) continue;
      s[h] += __shfl_xor_sync(0xffffffffu, s[h], 1);
      s[h] += __shfl_xor_sync(0xffffffffu, s[h], 2);
      float mx = has_key ? s[h] : -INFINITY;
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
      const float mn = fmaxf(m[h], mx);  // finite: the warp's first key is valid
      const float alpha = exp2f(m[h] - mn);
      m[h] = mn;
      const float p = has_key ? exp2f(s[h] - mn) : 0.f;
      float ps = p;
      ps += __shfl_xor_sync(0xffffffffu, ps, 4);
      ps += __shfl_xor_sync(0xffffffffu, ps, 8);
      ps += __shfl_xor_sync(0xffffffffu, ps, 16);
      l[h] = l[h] * alpha + ps;
#pragma unroll
      for (int e = 0; e < 4; e++) acc[h][e] *= alpha;
#pragma unroll
      for (int j = 0; j < kPerWarp; j++) {
        const float pj = __shfl_sync(0xffffffffu, p, j * 4);
        if (base + j < p1) {
          acc[h][0] = fmaf(pj, bf2_lo(vv[j].x), acc[h][0]);
          acc[h][1] = fmaf(pj, bf2_hi(vv[j].x), acc[h][1]);
          acc[h][2] = fmaf(pj, bf2_lo(vv[j].y), acc[h][2]);
          acc[h][3] = fmaf(pj, bf2_hi(vv[j].y), acc[h][3]);
        }
      }
    }
  }

  if ((a.debug & 64) != 0) stamp(a, ev + 2);  // (diagnostic: the stamp after the passes instead of after RoPE)
  // The staged rows share memory with the warps' outputs: every warp must be done reading them (without this barrier a
  // warp with no second-pass keys wrote its outputs over another's staged keys, and the logits went NaN).
  if (staged_keys() > 0) consumer_sync();
  // Merge the warps in fixed order (a warp without keys has m = −inf and weighs 0).
  const int O = G * kD;
#pragma unroll
  for (int h = 0; h < kMaxG; h++) {
    if (h >= G) continue;
    *reinterpret_cast<float4*>(wacc + warp * O + h * kD + lane * 4) =
        make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
    if (lane == 0) {
      wml[(warp * kMaxG + h) * 2] = m[h];
      wml[(warp * kMaxG + h) * 2 + 1] = l[h];
    }
  }
  consumer_sync();
  void* attn = static_cast<uint8_t*>(stage_output(a, lay, layer, kAttention)) + static_cast<size_t>(g) * O * 4;
  float* part_acc = reinterpret_cast<float*>(ws + lay.part_acc + lay.part_acc_layer * layer) +
                    static_cast<int64_t>(g) * max_chunks * O;
  float* part_ml = reinterpret_cast<float*>(ws + lay.part_ml + lay.part_ml_layer * layer) +
                   static_cast<int64_t>(g) * max_chunks * G * 2;
  const int R = part_record_words(G);  // this head's flagged records: [chunk][R] words
  unsigned long long* recs = reinterpret_cast<unsigned long long*>(ws + lay.part_rec + lay.part_rec_layer * layer) +
                             static_cast<int64_t>(g) * min(max_chunks, kFlagMergeMax) * R;
  for (int o = 2 * tid; o < O; o += 2 * kConsumers) {
    const int oh = o / kD, od = o % kD;
    float mh = -INFINITY;
    for (int w = 0; w < kConsumerWarps; w++) mh = fmaxf(mh, wml[(w * kMaxG + oh) * 2]);
    float t0 = 0.f, t1 = 0.f, lh = 0.f;
    for (int w = 0; w < kConsumerWarps; w++) {
      const float mw = wml[(w * kMaxG + oh) * 2];
      if (mw == -INFINITY) continue;
      const float f = exp2f(mw - mh);
      t0 = fmaf(f, wacc[w * O + o], t0);
      t1 = fmaf(f, wacc[w * O + o + 1], t1);
      lh = fmaf(f, wml[(w * kMaxG + oh) * 2 + 1], lh);
    }
    if (chunks == 1) {
      flag_store(attn, o / 2, pack_bf2(t0 / lh, t1 / lh), b.epoch);
    } else if (G == 2 && chunks <= a.o_merge) {  // the O blocks merge (stage_merge_input): this chunk's record
      void* rec = ws + lay.omerge + lay.omerge_layer * layer +
                  static_cast<size_t>(c) * omerge_record_words(static_cast<int>(d.q_heads)) * 8;
      const bool keys = lh > 0.f;  // (a chunk with no keys publishes zeros, and weighs nothing)
      flag_store(rec, (g * O + o) / 2, pack_bf2(keys ? t0 / lh : 0.f, keys ? t1 / lh : 0.f), b.epoch);
      if (od == 0) {
        const int at = d.q_heads * kD / 2 + 2 * (g * G + oh);
        flag_store_f32(rec, at, mh, b.epoch);
        flag_store_f32(rec, at + 1, lh, b.epoch);
      }
    } else if (G <= 2 && c == 0 && chunks <= kFlagMergeMax) {  // the spread merge (below): chunk 0's record stays in
                                                               // shared memory, where the queries were (the passes
                                                               // are done)
      qs[o] = t0;
      qs[o + 1] = t1;
      if (od == 0) {
        qs[O + 2 * oh] = mh;
        qs[O + 2 * oh + 1] = lh;
      }
    } else if (chunks <= kFlagMergeMax) {
      flag_store_f32(recs + c * R, o, t0, b.epoch);
      flag_store_f32(recs + c * R, o + 1, t1, b.epoch);
      if (od == 0) {
        flag_store_f32(recs + c * R, O + 2 * oh, mh, b.epoch);
        flag_store_f32(recs + c * R, O + 2 * oh + 1, lh, b.epoch);
      }
    } else {
      *reinterpret_cast<float2*>(part_acc + c * O + o) = make_float2(t0, t1);
      if (od == 0) *reinterpret_cast<float2*>(part_ml + (c * G + oh) * 2) = make_float2(mh, lh);
    }
  }
  if (chunks == 1 || (G == 2 && chunks <= a.o_merge)) return true;
  if (chunks <= kFlagMergeMax) {
    if (c != 0) return true;
    // Heads of up to 16 chunks and G ≤ 2: the records of chunks 1, 2, … lie end to end, and thread t
    // loads their word pairs t, t + 224, … in one batch, so that past 8 chunks the merge costs one L2 round trip after
    // the last record lands, not two. The values go to shared memory after chunk 0's own record, in the records'
    // layout, and after a barrier each output pair is merged from there in chunk order: the arithmetic of the merges
    // below, the same bits.
    if constexpr (G <= 2) {
      static_assert((kFlagMergeMax - 1) * G * (kD + 2) / 2 <= kConsumers * kSpreadBatch, "one batch holds 15 records");
      static_assert(G * (kD + 2) <= kMaxG * kD, "chunk 0's record fits where the queries were");
      const int total = (chunks - 1) * (R / 2);  // word pairs (16-byte loads)
      // (Loads past the last record read its last word pair again: a batch of fixed size spills no registers.)
      uint4 v[kSpreadBatch];
      const bool ok = flag_wait_batch<kSpreadBatch>(a, b, v, kSpreadBatch, [&](int j) {
        return recs + R + 2 * min(tid + j * kConsumers, total - 1);
      });
      consumer_sync();  // every thread is done reading the warps' outputs (the same memory)
      float* sm = qs;   // [chunk][R]
      if (ok) {
#pragma unroll
        for (int j = 0; j < kSpreadBatch; j++)
          if (tid + j * kConsumers < total)
            *reinterpret_cast<float2*>(sm + R + 2 * (tid + j * kConsumers)) =
                make_float2(__uint_as_float(v[j].x), __uint_as_float(v[j].z));
      }
      if (!block_ok(b, ok)) return false;
      for (int o = 2 * tid; o < O; o += 2 * kConsumers) {
        const float* mh = sm + O + 2 * (o / kD);  // chunk q's (max, sum) of this head: mh[q·R], mh[q·R + 1]
        float mx = -INFINITY;
        for (int q = 0; q < chunks; q++) mx = fmaxf(mx, mh[q * R]);
        float n0 = 0.f, n1 = 0.f, den = 0.f;
        for (int q = 0; q < chunks; q++) {
          const float w = exp2f(mh[q * R] - mx);
          n0 = fmaf(w, sm[q * R + o], n0);
          n1 = fmaf(w, sm[q * R + o + 1], n1);
          den = fmaf(w, mh[q * R + 1], den);
        }
        flag_store(attn, o / 2, pack_bf2(n0 / den, n1 / den), b.epoch);
      }
      return true;
    } else {
      // Chunk 0's block merges the head's chunks (its own included) from their flagged records as they land: no fence,
      // no arrival counter. One batch of loads per thread (one L2 round trip once the last word has landed): the output
      // pair it merges, of chunks 0-7, and (threads q·G + h of the first round) chunk q's (max, sum) of head h, which
      // goes to shared memory for every thread of the head; chunks 8-15, where there are more, in a second batch. Then
      // the merge in chunk order: the same arithmetic as the counter merge below, so either gives the same bits.
      float* mlb = qs;  // [chunk][G] (max, sum) (the queries are no longer read: the passes are done)
      bool ok = true;
      for (int o = 2 * tid, round = 0;; o += 2 * kConsumers, round++) {
        if (round > 0 && o >= O) break;  // (every thread takes the first round: it holds the barrier)
        const bool has_o = o < O, has_ml = round == 0 && tid < chunks * G;
        const int64_t at_o = has_o ? o : 0;  // (a thread with no outputs waits for output 0 of each chunk)
        // v[q]: chunk q's outputs (slots past the last chunk repeat it: register slots fixed at compile time, since an
        // index known only at run time would put the array in local memory); v[kFlagMergeChunks]: the (max, sum) pair.
        uint4 v[kFlagMergeChunks + 1];
        ok = ok && flag_wait_batch<kFlagMergeChunks + 1>(a, b, v, kFlagMergeChunks + 1, [&](int j) {
               return recs + (j < kFlagMergeChunks ? static_cast<int64_t>(min(j, chunks - 1)) * R + at_o
                              : has_ml ? static_cast<int64_t>(tid / G) * R + O + 2 * (tid % G)
                                       : at_o);
             });
        if (round == 0) {
          if (has_ml && ok) {
            mlb[2 * tid] = __uint_as_float(v[kFlagMergeChunks].x);
            mlb[2 * tid + 1] = __uint_as_float(v[kFlagMergeChunks].z);
          }
          if (!block_ok(b, ok)) return false;
        }
        if (!ok || !has_o) break;
        const float* mh = mlb + 2 * (o / kD);  // chunk q's (max, sum) of this head: mh[2·G·q], mh[2·G·q + 1]
        float mx = -INFINITY;
#pragma unroll
        for (int q = 0; q < kFlagMergeMax; q++)
          if (q < chunks) mx = fmaxf(mx, mh[2 * G * q]);
        float n0 = 0.f, n1 = 0.f, den = 0.f;
        // Chunks 0-7 from the batch above; chunks 8-15 (more than 8 chunks) from a second batch, in the same order.
        for (int q0 = 0;; q0 += kFlagMergeChunks) {
#pragma unroll
          for (int q = 0; q < kFlagMergeChunks; q++) {
            if (q0 + q < chunks) {
              const float w = exp2f(mh[2 * G * (q0 + q)] - mx);
              n0 = fmaf(w, __uint_as_float(v[q].x), n0);
              n1 = fmaf(w, __uint_as_float(v[q].z), n1);
              den = fmaf(w, mh[2 * G * (q0 + q) + 1], den);
            }
          }
          if (q0 + kFlagMergeChunks >= chunks) break;
          ok = flag_wait_batch<kFlagMergeChunks + 1>(a, b, v, kFlagMergeChunks, [&](int j) {
            return recs + static_cast<int64_t>(min(q0 + kFlagMergeChunks + j, chunks - 1)) * R + o;
          });
          if (!ok) break;
        }
        if (!ok) break;
        flag_store(attn, o / 2, pack_bf2(n0 / den, n1 / den), b.epoch);
      }
      return block_ok(b, ok);
    }
  }
  __threadfence();
  consumer_sync();
  if (tid == 0) {
    unsigned* counter = b.sync + kMergeCounters + layer * kMaxKvHeads + g;
    const unsigned arrived = atomicAdd(counter, 1u);
    const bool last = arrived == static_cast<unsigned>(chunks - 1);
    if (last) atomicExch(counter, 0u);  // every chunk of this head has arrived: ready for the next launch
    __threadfence();
    b.flag[1] = last ? 1 : 0;
  }
  consumer_sync();
  if (b.flag[1] == 0) return true;
  // The last chunk to finish merges all of them, in chunk order: the (max, sum) pairs to shared memory, one per
  // thread (the warps' outputs there are no longer read: every thread has passed the barrier above), then each
  // thread's output pair of every chunk, in batches of loads issued together (explicit: how a loop of loads is
  // unrolled is the compiler's choice, and each batch costs an L2 round trip).
  constexpr int kMergeBatch = 8;
  float* mlb = wacc;  // [chunk][G] (max, sum)
  for (int i = tid; i < chunks * G; i += kConsumers) {
    const float2 v = __ldcg(reinterpret_cast<const float2*>(part_ml) + i);
    mlb[2 * i] = v.x;
    mlb[2 * i + 1] = v.y;
  }
  consumer_sync();
  for (int o = 2 * tid; o < O; o += 2 * kConsumers) {
    const float* mh = mlb + 2 * (o / kD);  // chunk q's (max, sum) of this head: mh[2·G·q], mh[2·G·q + 1]
    float mx = -INFINITY;
    for (int q = 0; q < chunks; q++) mx = fmaxf(mx, mh[2 * G * q]);
    float n0 = 0.f, n1 = 0.f, den = 0.f;
    for (int q0 = 0; q0 < chunks; q0 += kMergeBatch) {
      float2 pa[kMergeBatch];
#pragma unroll
      for (int j = 0; j < kMergeBatch; j++)
        if (q0 + j < chunks) pa[j] = __ldcg(reinterpret_cast<const float2*>(part_acc + (q0 + j) * O + o));
#pragma unroll
      for (int j = 0; j < kMergeBatch; j++) {
        if (q0 + j < chunks) {
          const float w = exp2f(mh[2 * G * (q0 + j)] - mx);
          n0 = fmaf(w, pa[j].x, n0);
          n1 = fmaf(w, pa[j].y, n1);
          den = fmaf(w, mh[2 * G * (q0 + j) + 1], den);
        }
      }
    }
    flag_store(attn, o / 2, pack_bf2(n0 / den, n1 / den), b.epoch);
  }
  placement_pad<kPad>(a, b);  // (placement_of: 1,280 or 736 in the kernels with both paths)
  return true;
}
