// The GEMV consumer (DESIGN.md, "The GEMV consumer"): every GEMV stage (QKV, O, gate/up, down, the unscreened LM
// head) takes the tiles the producer delivers, dots each warp's turn of rows with x and runs the stage's epilogue
// (bf16 rounding, residual add, SwiGLU, or the LM head's argmax / top-k), publishing flagged words.
//
// Part of the one translation unit qwen3_decode.cu: included there inside namespace qk::{anonymous}, in the
// order listed there, after the files it relies on; not a standalone header.
#pragma once

/** Where a stage's outputs go: the flagged buffer of the layer (nullptr for the LM head). */
__device__ __forceinline__ void* stage_output(const MegakernelArgs& a, const Layout& lay, int layer, int stage) {
  if (layer < 0) return nullptr;
  uint8_t* base = static_cast<uint8_t*>(a.workspace) + lay.layers_at + lay.ll.bytes * static_cast<size_t>(layer);
  switch (stage) {
    case kQkv: return base + lay.ll.qkv;
    case kAttention: return base + lay.ll.attn;
    case kO: return base + lay.ll.mid;
    case kGateUp: return base + lay.ll.act;
    default: return base + lay.ll.out;
  }
}

/**
 * What a warp takes of a GEMV tile per turn: a row pair (O, down, the LM head); a pair of SwiGLU units, two gate rows
 * and their two up rows (gate/up); or two adjacent row pairs (QKV, Qwen3-0.6B: tuning qkvQuads). Four rows per
 * turn read the input once for all four, and where a block's stage has up to twice as many pairs as it has warps (QKV:
 * 11-14 pairs, 7 warps), no warp runs two turns one after the other (5-13 µs per token on Qwen3-0.6B). A row's sum
 * is the same chain of FMAs whichever way it is taken, so the outputs are the same bits.
 */
enum class Take : int { kPair, kGateUp, kQuad };

/**
 * The mask bits of LM-head rows u (bit 0) and u + 1 (bit 1) in a masked launch (MegakernelArgs::mask_words, the
 * step's slot; loaded from L2 once the step's tag was seen: lm_mask_ready).
 */
__device__ __forceinline__ uint32_t mask_pair_bits(const MegakernelArgs& a, const Block& b, int64_t u) {
  return pair_bits_l2(a.mask_words + static_cast<int64_t>(b.epoch & 1u) * a.mask_stride, u, a.dims.vocab);
}

/**
 * The unscreened LM head of a masked launch: thread 0 waits for the step's tag (MegakernelArgs::mask_tags), then the
 * block goes on together; false (every consumer thread) when the wait failed.
 */
__device__ __forceinline__ bool lm_mask_ready(const MegakernelArgs& a, const Block& b) {
  consumer_sync();  // (flag[3]: the last step's arrival was read by every thread)
  if (threadIdx.x == 0)
    b.flag[3] = mask_wait(a.mask_tags + (b.epoch & 1u), b.epoch, b.sync, b.result, b.host, b.launch_epoch,
                          b.timeout_ns)
                    ? 1
                    : 0;
  consumer_sync();
  return b.flag[3] != 0;
}

/**
 * The dot products of one warp turn with the staged input `x`, each lane's share (the caller sums the lanes): rows
 * `row` and `row + rb` (bytes) into acc0 / acc1 and, with kFour, rows `up` and `up + rb` into up0 / up1, over k
 * columns, for bf16 rows.
 */
template <bool kFour>
__device__ __forceinline__ void turn_dots(const bf16* x, const uint8_t* row, const uint8_t* up, int rb, int k,
                                          float& acc0, float& acc1, float& up0, float& up1) {
  const int lane = threadIdx.x & 31;
#pragma unroll 4
  for (int c = lane * 8; c < k; c += 256) {
    const uint4 xv = lds128(x + c);
    acc0 = dot8(lds128(row + 2 * c), xv, acc0);
    acc1 = dot8(lds128(row + rb + 2 * c), xv, acc1);
    if constexpr (kFour) {
      up0 = dot8(lds128(up + 2 * c), xv, up0);
      up1 = dot8(lds128(up + rb + 2 * c), xv, up1);
    }
  }
}

/**
 * turn_dots for quantized rows (a stage of MegakernelDims::weight_bits 8 or 4): the four rows' lane shares (acc0,
 * acc1, up0, up1 as x, y, z, w; the last two 0 without kFour), each scaled. INT8: by its row's scale, read from global
 * memory at `g0` (two rows) and `g2` (the other two). INT4 (`groups` > 0): each chunk of 8 by its group's scale, from
 * the slot (the tile's scales follow its `codes` bytes of codes: row `i` at `4 · groups · i`, the up rows from index
 * `ui`) and, with `zero` points, plus its group's offset times the chunk's Σ x (the offsets follow the scales, as many
 * rows of them). Compiled into the quantized kernels only (consume_gemv's kQuant).
 */
template <bool kFour>
__device__ __forceinline__ float4 quant_turn_dots(const bf16* x, const uint8_t* tile, int codes, int rb, int r, int ui,
                                                  int k, int groups, bool zero, int gshift, const float* g0,
                                                  const float* g2) {
  const int lane = threadIdx.x & 31;
  const uint8_t* row = tile + r * rb;
  const uint8_t* up = tile + ui * rb;
  float acc0 = 0.f, acc1 = 0.f, up0 = 0.f, up1 = 0.f;
  if (groups == 0) {  // INT8: a chunk's Σ q·x = 2^15 · dot8_i8 − (2^15 + 128) · Σ x
    const float s0 = __ldg(g0), s1 = __ldg(g0 + 1);
    const float s2 = kFour ? __ldg(g2) : 0.f, s3 = kFour ? __ldg(g2 + 1) : 0.f;
#pragma unroll 2
    for (int c = lane * 8; c < k; c += 256) {
      const uint4 xv = lds128(x + c);
      const float off = -32896.f * sum8(xv);
      acc0 += fmaf(32768.f, dot8_i8(lds64(row + c), xv), off);
      acc1 += fmaf(32768.f, dot8_i8(lds64(row + rb + c), xv), off);
      if constexpr (kFour) {
        up0 += fmaf(32768.f, dot8_i8(lds64(up + c), xv), off);
        up1 += fmaf(32768.f, dot8_i8(lds64(up + rb + c), xv), off);
      }
    }
    return make_float4(acc0 * s0, acc1 * s1, up0 * s2, up1 * s3);
  }
  // INT4: a chunk's Σ q·x = 2^8 · dot8_i4 − 136 · Σ x, times its group's scale; with zero points, + offset · Σ x.
  const int sb = 4 * groups;
  const uint8_t* sc = tile + codes;  // the tile's scales
  // (its offsets, with zero points: a row's offset of a group at half its scale's byte offset)
  const uint8_t* of = sc + codes / rb * sb;
  const int at0 = r * sb, at2 = ui * sb;
#pragma unroll 2
  for (int c = lane * 8; c < k; c += 256) {
    const uint4 xv = lds128(x + c);
    const int g = 4 * (c >> gshift);
    const float xs = sum8(xv), off = -136.f * xs;
    acc0 = fmaf(fmaf(256.f, dot8_i4(lds32(row + c / 2), xv), off), ldsf(sc + at0 + g), acc0);
    acc1 = fmaf(fmaf(256.f, dot8_i4(lds32(row + rb + c / 2), xv), off), ldsf(sc + at0 + sb + g), acc1);
    if constexpr (kFour) {
      up0 = fmaf(fmaf(256.f, dot8_i4(lds32(up + c / 2), xv), off), ldsf(sc + at2 + g), up0);
      up1 = fmaf(fmaf(256.f, dot8_i4(lds32(up + rb + c / 2), xv), off), ldsf(sc + at2 + sb + g), up1);
    }
    if (zero) {
      acc0 = fmaf(lds_bf(of + (at0 + g) / 2), xs, acc0);
      acc1 = fmaf(lds_bf(of + (at0 + sb + g) / 2), xs, acc1);
      if constexpr (kFour) {
        up0 = fmaf(lds_bf(of + (at2 + g) / 2), xs, up0);
        up1 = fmaf(lds_bf(of + (at2 + sb + g) / 2), xs, up1);
      }
    }
  }
  return make_float4(acc0, acc1, up0, up1);
}

/**
 * Runs one GEMV stage: for every tile of the block, waits for it, dots each warp's turn of rows (`Take`) with the staged
 * input, applies the stage's epilogue (publishing each output pair as one flagged word) and frees the slot. `at` is
 * the ring position, which follows the producer's order. kQuant: the layers' projections are INT8 or INT4
 * (MegakernelDims::weight_bits; the LM head stays bf16).
 */
template <Take kTake, bool kSample, bool kQuant>
__device__ __forceinline__ bool consume_gemv(const MegakernelArgs& a, const Block& b, const Layout& lay, int stage,
                                          RingPos& at, int layer, Best& best, TopK& top, int first_event) {
  constexpr bool kGateUp = kTake == Take::kGateUp;
  constexpr bool kFour = kTake != Take::kPair;         // four rows per turn
  constexpr int kStep = kTake == Take::kQuad ? 4 : 2;  // the tile's units per turn (gate/up units are two rows each)
  if (layer >= 0 && skips_stage(stage, b.attn_skip)) {
    if (first_event >= 0) stamp(a, first_event);
    return true;  // the producer issues nothing for this stage either
  }
  const StageShape s = stage_shape(a, layer, stage);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  void* out = stage_output(a, lay, layer, stage);
  // 32-bit row offsets within a slot (a slot is at most 227 KB).
  const int k = static_cast<int>(s.k);
  const int rb = s.row_bytes;  // bytes of a row's codes
  const int gshift = s.groups > 0 ? __ffs(static_cast<int>(a.dims.group_size)) - 1 : 0;  // (a power of two)
  const int k_dot = (a.debug & 4) != 0 ? 0 : k;  // (diagnostic: no dot products)
  // Turns are dealt to the warps round-robin across the stage's tiles, not per tile: a tile of one or two pairs
  // (Qwen3-8B's gate/up) would otherwise keep one warp busy while the others wait for the next tile. `mine` is this
  // warp's next turn (its stage-wide index), `turns` the stage's turns before the current tile.
  int turns = 0, mine = warp;
  for (bool last = false; !last; ring_next(at, b.nslots)) {
    const int slot = at.slot;
    if (!mbar_wait(b, &b.full[slot], at.phase)) return false;
    if (first_event >= 0 && turns == 0) stamp(a, first_event);
    const uint2 desc = b.desc[slot];
    const int64_t t0 = desc.x;
    const int n = static_cast<int>(desc.y & 0x7fffffffu);
    last = n == 0 || (desc.y >> 31) != 0;
    const uint8_t* tile = b.slots + static_cast<unsigned>(slot) * static_cast<unsigned>(a.slot_bytes);
    const int first = mine - turns;
    turns += (n + kStep - 1) / kStep;
    for (int r = kStep * first; r < n; r += kStep * kConsumerWarps) {
      mine += kConsumerWarps;
      // The other two rows of a four-row turn: gate/up, the up rows of the tile's units; QKV, the next pair of the
      // tile, or this pair again where the tile ends first (its sums are then not published: a tile is whole pairs).
      // As indices among the tile's rows (gate/up: n gate rows, then n up rows).
      const bool second = kTake == Take::kQuad && r + 2 < n;
      const int ui = kGateUp ? n + r : second ? r + 2 : r;
      // (The LM head of a masked launch: the pair's mask bits, loaded before the dot products hide the L2 trip.)
      const uint32_t allowed = stage < 0 && a.mask_tags != nullptr ? mask_pair_bits(a, b, t0 + r) : 3u;
      // (With penalties: the pair's bits in pen_seen, as early.)
      const bool pen = stage < 0 && a.pen_counts != nullptr;
      const uint32_t seen = pen ? pair_bits_l2(a.pen_seen, t0 + r, a.dims.vocab) : 0u;
      float acc0 = 0.f, acc1 = 0.f, up0 = 0.f, up1 = 0.f;
      if (!kQuant || stage < 0) {  // (the LM head is bf16 in every kernel)
        turn_dots<kFour>(b.x, tile + r * rb, tile + ui * rb, rb, k_dot, acc0, acc1, up0, up1);
      } else {
        const float* g0 = s.scales + t0 + r;  // (INT8: the rows' scales in global memory)
        const float4 v = quant_turn_dots<kFour>(b.x, tile, s.rows_per_unit * n * rb, rb, r, ui, k_dot, s.groups,
                                                s.offsets != nullptr, gshift, g0,
                                                kGateUp ? g0 + s.up_offset : g0 + (ui - r));
        acc0 = v.x;
        acc1 = v.y;
        up0 = v.z;
        up1 = v.w;
      }
      acc0 = warp_sum(acc0);
      acc1 = warp_sum(acc1);
      if constexpr (kFour) {
        up0 = warp_sum(up0);
        up1 = warp_sum(up1);
      }
      const int64_t u = t0 + r;
      if constexpr (kTake == Take::kQuad) {  // QKV
        if (lane == 0) {
          flag_store(out, u / 2, pack_bf2(acc0, acc1), b.epoch);
          if (second) flag_store(out, u / 2 + 1, pack_bf2(up0, up1), b.epoch);
        }
      } else if (stage < 0) {  // LM head (an odd vocabulary's last row has no partner: row r + 1 is then slot garbage)
        if (lane == 0) {  // the logits, and the argmax
          bf16* logits = static_cast<bf16*>(a.logits);
          const float v0 = round_bf(acc0), v1 = round_bf(acc1);
          logits[u] = to_bf(v0);
          if (u < a.vocab_limit && (allowed & 1u) != 0)
            offer(best, pen ? penalized(a, v0, u, (seen & 1u) != 0) : v0, static_cast<int>(u));
          if (r + 1 < n) {
            logits[u + 1] = to_bf(v1);
            if (u + 1 < a.vocab_limit && (allowed & 2u) != 0)
              offer(best, pen ? penalized(a, v1, u + 1, (seen & 2u) != 0) : v1, static_cast<int>(u + 1));
          }
        }
        if constexpr (kSample) {
          // Every lane holds the same sums (an xor-butterfly reduction): the warp offers them to its candidates
          // together.
          if (u < a.vocab_limit && (allowed & 1u) != 0) {
            const float v = round_bf(acc0);
            top_consider(top, pen ? penalized(a, v, u, (seen & 1u) != 0) : v, static_cast<unsigned>(u), a.top_k);
          }
          if (r + 1 < n && u + 1 < a.vocab_limit && (allowed & 2u) != 0) {
            const float v = round_bf(acc1);
            top_consider(top, pen ? penalized(a, v, u + 1, (seen & 2u) != 0) : v, static_cast<unsigned>(u + 1),
                         a.top_k);
          }
        }
      } else if (lane == 0) {
        if constexpr (kGateUp) {
          const float s0 = acc0 / (1.f + __expf(-acc0)), s1 = acc1 / (1.f + __expf(-acc1));
          flag_store(out, u / 2, pack_bf2(s0 * up0, s1 * up1), b.epoch);
        } else if (stage == kQkv) {
          flag_store(out, u / 2, pack_bf2(acc0, acc1), b.epoch);
        } else {  // O and down
          const float r0 = round_bf(acc0) + bf(b.res[u]);
          const float r1 = round_bf(acc1) + bf(b.res[u + 1]);
          flag_store(out, u / 2, pack_bf2(r0, r1), b.epoch);
        }
      }
    }
    // Every consumer thread releases the slot itself after its own reads (the producer's wait on the empty barrier
    // acquires them all before its TMA copy overwrites the slot). One arrival per warp after __syncwarp measured no
    // faster, and compute-sanitizer's racecheck does not follow that ordering (it reported the copies racing the
    // reads).
    mbar_arrive(&b.empty[slot]);
  }
  return true;
}
