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
 * Runs one GEMV stage: for every tile of the block, waits for it, dots each warp's turn of rows (`Take`) with the staged
 * input, applies the stage's epilogue (publishing each output pair as one flagged word) and frees the slot. `at` is
 * the ring position, which follows the producer's order.
 */
template <Take kTake, bool kSample>
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
    const bf16* tile =
        reinterpret_cast<const bf16*>(b.slots + static_cast<unsigned>(slot) * static_cast<unsigned>(a.slot_bytes));
    const int first = mine - turns;
    turns += (n + kStep - 1) / kStep;
    for (int r = kStep * first; r < n; r += kStep * kConsumerWarps) {
      mine += kConsumerWarps;
      const bf16* row = tile + r * k;
      // The other two rows of a four-row turn: gate/up, the up rows of the tile's units; QKV, the next pair of the
      // tile, or this pair again where the tile ends first (its sums are then not published: a tile is whole pairs).
      const bool second = kTake == Take::kQuad && r + 2 < n;
      const bf16* up = kGateUp ? row + n * k : second ? row + 2 * k : row;
      // (The LM head of a masked launch: the pair's mask bits, loaded before the dot products hide the L2 trip.)
      const uint32_t allowed = stage < 0 && a.mask_tags != nullptr ? mask_pair_bits(a, b, t0 + r) : 3u;
      // (With penalties: the pair's bits in pen_seen, as early.)
      const bool pen = stage < 0 && a.pen_counts != nullptr;
      const uint32_t seen = pen ? pair_bits_l2(a.pen_seen, t0 + r, a.dims.vocab) : 0u;
      float acc0 = 0.f, acc1 = 0.f, up0 = 0.f, up1 = 0.f;
#pragma unroll 4
      for (int c = lane * 8; c < k_dot; c += 256) {
        const uint4 xv = lds128(b.x + c);
        acc0 = dot8(lds128(row + c), xv, acc0);
        acc1 = dot8(lds128(row + k + c), xv, acc1);
        if constexpr (kFour) {
          up0 = dot8(lds128(up + c), xv, up0);
          up1 = dot8(lds128(up + k + c), xv, up1);
        }
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
