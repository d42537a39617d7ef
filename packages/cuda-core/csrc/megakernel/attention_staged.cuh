// The staged attention (DESIGN.md, "The staged attention"): one block per KV head, the head's cached rows copied
// into shared memory before the q/k/v wait, scores and output on the tensor cores (common/mma.cuh).
//
// Part of the one translation unit qwen3_decode.cu: included there inside namespace qk::{anonymous}, in the
// order listed there, after the files it relies on; not a standalone header.
#pragma once

__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/**
 * The staged attention (DESIGN.md, "The staged attention") of KV head `g`'s query group of 2 over all pos + 1 keys,
 * one block per head, on the tensor cores. Publishes the normalised output. `parity`: the phase of the staged rows'
 * barrier.
 *
 * 1. Before the wait for q/k/v, the block copies the head's cached rows (all but the new one) into shared memory past
 *    its ring: one bulk copy per key row and per value row, completing on one mbarrier.
 * 2. Warp w takes key tiles w, w + 7, w + 14, w + 21 from end to end. Scores: Sᵀ (16 keys × 8 columns) = K (16 keys
 *    × 16 dims, ldmatrix) · qᵀ (16 dims × 8: column c holds query (c >> 1) & 1), all of the warp's tiles at once (two
 *    accumulator chains each), in the log2 domain; each lane keeps one score per tile (the max per query after a
 *    barrier).
 * 3. Weights 2^(s − max) in fp32 (the sum per query after a second barrier), rounded to bf16 into the warp's own
 *    B operands.
 * 4. The warp's part of the output, Vᵀ (16 dims × 16 keys, ldmatrix.trans) · Pᵀ (16 keys × 8) for all eight dim
 *    tiles over its own key tiles: chains of at most four MMAs. After a third barrier the warps' parts are added in
 *    warp order and published.
 * The weights are rounded to bf16 for the MMA; the sum that divides them (or the output) is of the unrounded weights.
 * (Splitting the keys over the warps for the scores only and the output's dims for Vᵀ·Pᵀ, with four or five barriers
 * and warp 0 taking two dim tiles, was 15-30 µs per token slower at positions 128-383.)
 */
__device__ __forceinline__ bool attend_staged(const MegakernelArgs& a, const Block& b, const Layout& lay, int layer,
                                              int g, int pos, int ev, unsigned parity) {
  constexpr int G = 2;
  const MegakernelDims& d = a.dims;
  const int KV = static_cast<int>(d.kv_heads);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, t = lane & 3;
  const MegakernelLayer& L = a.layers[layer];
  const bf16* kc = static_cast<const bf16*>(L.k_cache);
  const bf16* vc = static_cast<const bf16*>(L.v_cache);
  const int n = pos + 1, tiles = (n + 15) >> 4;
  uint8_t* const krows = b.slots + static_cast<size_t>(a.staged_slots) * static_cast<size_t>(a.slot_bytes);
  uint8_t* const vrows = krows + static_cast<size_t>(a.staged_keys) * kStagedRow;
  uint64_t* const bar = misc_barrier(b, kStagedBarrier);
  float* const sc = b.scratch;
  const bf16* const qh = reinterpret_cast<const bf16*>(sc + kStagedQ);
  unsigned* const pw = reinterpret_cast<unsigned*>(sc + kStagedP);  // [tile][2][8] bf16 pairs of weights
  bf16* const pwh = reinterpret_cast<bf16*>(pw);                    // (the same, [tile][2][16])
  float* const wmx = sc + kStagedMax;                               // [warps][2]
  float* const wsum = sc + kStagedSum;                              // [warps][2]
  float* const part = sc + kStagedPart;                             // [warps][2][128] the warps' outputs

  if (!attention_inputs<G, true>(
          a, b, layer, g, true, pos, ev, reinterpret_cast<bf16*>(krows + static_cast<size_t>(pos) * kStagedRow),
          reinterpret_cast<bf16*>(vrows + static_cast<size_t>(pos) * kStagedRow), [&]() {
            // The rows' one arrival carries the bytes of the cached rows; the copies may land before it.
            if (tid == 0) {
              mbar_expect_tx_only(bar, static_cast<unsigned>(pos) * 2u * kD * 2u);
              mbar_arrive(bar);
            }
            // This layer's copies overwrite rows the previous layer's ldmatrix read (generic proxy, ordered before
            // here by the consumer barriers since): order those reads before the copies (async proxy).
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            for (int i = tid; i < 2 * pos; i += kConsumers) {
              const int r = i >> 1;
              const bf16* src = ((i & 1) ? vc : kc) + (static_cast<int64_t>(r) * KV + g) * kD;
              uint8_t* dst = ((i & 1) ? vrows : krows) + static_cast<size_t>(r) * kStagedRow;
              asm volatile(
                  "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                      smem_addr(dst)),
                  "l"(src), "n"(kD * 2), "r"(smem_addr(bar))
                  : "memory");
            }
            // The last tile's rows past the keys are zeros (their weights are 0, and 0 · a stale NaN would not be).
            for (int i = n * 32 + tid; i < tiles * 16 * 32; i += kConsumers) {
              const int r = i >> 5, part = i & 31;
              *reinterpret_cast<uint4*>((part < 16 ? krows : vrows) + static_cast<size_t>(r) * kStagedRow +
                                        (part & 15) * 16) = make_uint4(0, 0, 0, 0);
            }
            consumer_sync();  // the QKV stage's readers of x (the same memory as the scratch) are done
          }))
    return false;
  // Every thread waits for the copies (their bytes are visible to the threads that see the phase complete); the
  // barrier behind it also publishes q, the new row and the zero rows.
  if (!block_ok(b, mbar_wait(b, bar, parity))) return false;
  if ((a.debug & 64) == 0) stamp(a, ev + 2);

  // 2.-4. Warp w owns key tiles w, w + 7, w + 14, w + 21 (fewer where the keys end) from the scores to the weighted
  // sum of their value rows; the block meets only for the max, the sum and the warps' partial outputs.
  // The MMAs' B columns repeat the two queries (column c holds query (c >> 1) & 1), so lane (gq, t) of a tile's D
  // holds query t & 1 of key gq (c0, c1) and of key gq + 8 (c2, c3); lane t keeps one of them up to the weights: key
  // 16·tile + gq + 8·(t >> 1) of query t & 1.
  const int hq = (gq >> 1) & 1, mq = t & 1, mk = gq + 8 * (t >> 1);
  const bool upper = (t & 2) != 0;
  unsigned qb[8][2];
#pragma unroll
  for (int k = 0; k < 8; k++) {
    qb[k][0] = *reinterpret_cast<const unsigned*>(qh + hq * kD + 16 * k + 2 * t);
    qb[k][1] = *reinterpret_cast<const unsigned*>(qh + hq * kD + 16 * k + 8 + 2 * t);
  }
  // The scores in the log2 domain. a.staged_hf: rounded as HF's eager bf16 attention rounds them (q·kᵀ to bf16, then
  // · head_dim^-0.5 to bf16); otherwise the fp32 dot product, scaled.
  // (a.staged_hf 2: HF's roundings with __fdiv_rn itself: the same bits as 1, slower.)
  const bool hf = a.staged_hf != 0, fdiv = a.staged_hf == 2;
  const float inv_sqrt_d = rsqrtf(static_cast<float>(kD)), scale = inv_sqrt_d * kLog2e;
  const int mine = (tiles - warp + kConsumerWarps - 1) / kConsumerWarps;  // this warp's tiles (0-4)
  float s[kStagedTilesPerWarp];
  {
    float c[kStagedTilesPerWarp][2][4] = {};
    const unsigned kbase = smem_addr(krows) + ((lane & 15) * kStagedRow + (lane >> 4) * 16);
#pragma unroll
    for (int k = 0; k < 8; k += 2) {
#pragma unroll
      for (int i = 0; i < kStagedTilesPerWarp; i++) {
        if (i < mine) {
          const unsigned r = kbase + (warp + kConsumerWarps * i) * 16 * kStagedRow + k * 32;
          unsigned f0[4], f1[4];
          ldmatrix_x4(f0, r);
          ldmatrix_x4(f1, r + 32);
          mma16816<bf16>(c[i][0], f0, qb[k][0], qb[k][1]);
          mma16816<bf16>(c[i][1], f1, qb[k + 1][0], qb[k + 1][1]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kStagedTilesPerWarp; i++) {
      const float* x = c[i][0];
      const float* y = c[i][1];
      const float v = upper ? x[2] + y[2] : x[0] + y[0];
      const float sc = hf ? round_bf(round_bf(v) * inv_sqrt_d) * kLog2e : v * scale;
      s[i] = i < mine && 16 * (warp + kConsumerWarps * i) + mk < n ? sc : -INFINITY;
    }
  }
  // The max per query: over this lane's keys, then the lanes of its query (t of the same parity), then the warps.
  float m = s[0];
#pragma unroll
  for (int i = 1; i < kStagedTilesPerWarp; i++) m = fmaxf(m, s[i]);
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 8));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 16));
  if (lane < 2) wmx[warp * 2 + lane] = m;
  consumer_sync();
  m = wmx[mq];
#pragma unroll
  for (int w = 1; w < kConsumerWarps; w++) m = fmaxf(m, wmx[w * 2 + mq]);
  // The weights 2^(s − max) (0 past the keys) and their sum per query, in fp32. With a.staged_hf, as HF's softmax
  // rounds them: divided by the sum after a barrier, then rounded to bf16; otherwise (flash-style) rounded
  // unnormalised, and the output is divided by the sum instead.
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kStagedTilesPerWarp; i++) {
    s[i] = hf ? exp2f(s[i] - m) : ex2_approx(s[i] - m);
    sum += s[i];
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  sum += __shfl_xor_sync(0xffffffffu, sum, 4);
  sum += __shfl_xor_sync(0xffffffffu, sum, 8);
  sum += __shfl_xor_sync(0xffffffffu, sum, 16);
  if (lane < 2) wsum[warp * 2 + lane] = sum;
  // Query q's sum of weights over the block: the warps' sums added in warp order (after a barrier).
  const auto block_sum = [&](int q) {
    float l = wsum[q];
#pragma unroll
    for (int w = 1; w < kConsumerWarps; w++) l += wsum[w * 2 + q];
    return l;
  };
  if (hf) {
    consumer_sync();
    const float l = block_sum(mq);
    const float r = weight_rcp(l);
#pragma unroll
    for (int i = 0; i < kStagedTilesPerWarp; i++)
      if (i < mine) s[i] = fdiv ? __fdiv_rn(s[i], l) : weight_div_by(s[i], l, r);
  }
  // This warp's weights as the B operand of its tiles' MMAs: bf16 [tile][query][16 keys], so that the pair of keys
  // 2t, 2t + 1 of a query is one word.
#pragma unroll
  for (int i = 0; i < kStagedTilesPerWarp; i++)
    if (i < mine) pwh[((warp + kConsumerWarps * i) * 2 + mq) * 16 + mk] = __float2bfloat16_rn(s[i]);
  __syncwarp();

  // Vᵀ·Pᵀ over this warp's tiles, for all eight dim tiles: dim tile u's chain takes one MMA per tile.
  float o[8][4] = {};
  const int vrow = (lane & 7) + ((lane >> 4) << 3), vcol = ((lane >> 3) & 1) * 16;
  const unsigned vbase = smem_addr(vrows) + vrow * kStagedRow + vcol;
#pragma unroll
  for (int i = 0; i < kStagedTilesPerWarp; i++) {
    if (i < mine) {
      const int j = warp + kConsumerWarps * i;
      const unsigned w0 = pw[(j * 2 + hq) * 8 + t], w1 = pw[(j * 2 + hq) * 8 + t + 4];
#pragma unroll
      for (int u = 0; u < 8; u++) {
        unsigned f[4];
        ldmatrix_x4_trans(f, vbase + j * 16 * kStagedRow + u * 32);
        mma16816<bf16>(o[u], f, w0, w1);
      }
    }
  }
  // D of dim tile u: c0 (= c1) = dim 16u + gq of query t & 1, c2 (= c3) = dim + 8; lanes t and t ^ 2 hold the same,
  // so lane t stores the odd or the even dim tiles (t >> 1) of this warp's partial output.
#pragma unroll
  for (int u = 0; u < 8; u++) {
    if ((u & 1) == (t >> 1)) {
      float* p = part + (warp * 2 + mq) * kD + 16 * u + gq;
      p[0] = o[u][0];
      p[8] = o[u][2];
    }
  }
  consumer_sync();
  // The warps' partial outputs added in warp order, normalised (flash-style) and published.
  void* attn = static_cast<uint8_t*>(stage_output(a, lay, layer, kAttention)) + static_cast<size_t>(g) * G * kD * 4;
  for (int o2 = 2 * tid; o2 < G * kD; o2 += 2 * kConsumers) {
    float2 v = *reinterpret_cast<const float2*>(part + o2);
#pragma unroll
    for (int w = 1; w < kConsumerWarps; w++) {
      const float2 y = *reinterpret_cast<const float2*>(part + w * 2 * kD + o2);
      v.x += y.x;
      v.y += y.y;
    }
    if (!hf) {  // (the HF weights are normalised already)
      const float l = block_sum(o2 / kD);
      v.x /= l;
      v.y /= l;
    }
    flag_store(attn, o2 / 2, pack_bf2(v.x, v.y), b.epoch);
  }
  return true;
}
