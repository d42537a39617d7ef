// The weight stream (DESIGN.md, "The weight stream"): each stage's weight rows and the block's share of them (stage
// shapes, tiles of one ring slot), the ring position, and the producer warp, which copies every tile of every step
// into the ring with TMA bulk copies in the order the consumers take them.
//
// Part of the one translation unit qwen3_decode.cu: included there inside namespace qk::{anonymous}, in the
// order listed there, after the files it relies on; not a standalone header.
#pragma once

// ---------------------------------------------------------------------------------------------------------------
// The block's share of a stage: units [u0, u1) of `units`, cut into tiles that fit one slot. Shares and tiles are
// whole pairs of units, so that each output pair has one writer.

struct StageShape {
  const uint8_t* w;       // weight rows (gate/up: the gate rows; the up rows follow `up_offset` rows later)
  const float* scales;    // INT8: [rows]; INT4: [rows, groups]; nullptr for bf16 rows
  const bf16* offsets;    // INT4 with zero points: [rows, groups]; else nullptr
  int64_t units;          // outputs (gate/up: SwiGLU outputs, two weight rows each)
  int64_t k;              // columns
  int64_t up_offset;      // gate/up only: rows between a gate row and its up row
  int rows_per_unit;      // 1, or 2 for gate/up
  int row_bytes;          // codes per row (the screen: its whole row)
  int groups;             // INT4: scales (and offsets) per row; else 0
};

/** Bytes one row of `s` takes in a slot: its codes, then (INT4) its scales and offsets. */
__host__ __device__ __forceinline__ int slot_row_bytes(const StageShape& s) {
  return s.row_bytes + s.groups * (s.offsets != nullptr ? 6 : 4);
}

__host__ __device__ __forceinline__ int tile_units_for(int64_t row_bytes, int rows_per_unit, int64_t slot_bytes) {
  // 32-bit (a 64-bit division is a long subroutine on the GPU): a slot is at most 227 KB, and a unit's rows (at most
  // 2 · 65535 · 128 columns of bf16) stay below 2^32 bytes.
  return static_cast<int>(static_cast<unsigned>(slot_bytes) / static_cast<unsigned>(row_bytes * rows_per_unit)) & ~1;
}

__device__ __forceinline__ int tile_units(const MegakernelArgs& a, const StageShape& s) {
  return tile_units_for(slot_row_bytes(s), s.rows_per_unit, a.slot_bytes);
}

/**
 * The block's units of a stage: whole pairs (only the LM head can have an odd count, and then its last block ends
 * on a single row; its outputs are plain logits, not flagged words).
 */
__device__ __forceinline__ void stage_range(int64_t units, int64_t& u0, int64_t& u1, int skip = 0) {
  if (static_cast<int>(blockIdx.x) < skip) {
    u0 = u1 = 0;
    return;
  }
  // 32-bit arithmetic (a 64-bit division is a long subroutine on the GPU): the plan caps units at 2^24, so
  // pairs · (at + 1) < 2^23 · 2^9 fits.
  const unsigned n_units = static_cast<unsigned>(units), pairs = (n_units + 1) / 2;
  const unsigned at = blockIdx.x - skip, n = gridDim.x - skip;
  u0 = min(n_units, pairs * at / n * 2);
  u1 = min(n_units, pairs * (at + 1) / n * 2);
}

/**
 * Attention chunks per KV head for a step at `pos` (pos + 1 keys): at least one pass (kMinChunk keys) each, or
 * `a.chunk_keys` where that is more (tuning chunkKeys: 84, one pass and a staged second pass, lost
 * 10-15 µs per token at positions 128-767), and at most grid / KV heads chunks.
 */
__device__ __forceinline__ int attention_chunks(const MegakernelArgs& a, int pos) {
  if (staged_step(a, pos)) return 1;  // the staged attention: one block per KV head
  const int max_chunks = static_cast<int>(gridDim.x) / static_cast<int>(a.dims.kv_heads);
  const int keys = a.chunk_keys > kMinChunk ? a.chunk_keys : kMinChunk;
  return max(1, min((pos + 1 + keys - 1) / keys, max_chunks));
}

/**
 * Which rows the attending blocks of a step skip: blocks [0, result & 0xffff) take no rows of the GEMV stages whose
 * bit (1 << (16 + stage)) is set. When at most `a.skip_items` blocks attend (short contexts), and not all of them,
 * they skip QKV and O, so that attention starts the moment its q/k/v land; otherwise 0: every block takes rows of every
 * stage. In a step of the staged attention they skip gate/up too (their ring is short while the staged rows hold the
 * rest of it, and their gate/up share delayed the stage by 0.5-0.8 µs per layer), and down as well where the staged
 * rows take the whole ring.
 */
__device__ __forceinline__ int attention_skip(const MegakernelArgs& a, int pos) {
  const int items = static_cast<int>(a.dims.kv_heads) * attention_chunks(a, pos);
  const int skip = items <= a.skip_items && items < static_cast<int>(gridDim.x) ? items : 0;  // (some block must
                                                                                              // take rows)
  int stages = 1 << kQkv | 1 << kO;
  if (staged_step(a, pos)) {
    if (a.staged_slots == 0) stages |= 1 << kGateUp | 1 << kDown;  // (the launch checks that skip is then nonzero)
    else if (a.staged_gate_up == 0) stages |= 1 << kGateUp;
  }
  return skip | stages << 16;
}

/** The blocks that skip a stage's rows in a step whose attention_skip() is `attn_skip` (the first ones). */
__device__ __forceinline__ int stage_skip(int stage, int attn_skip) {
  return (attn_skip >> (16 + stage) & 1) != 0 ? (attn_skip & 0xffff) : 0;
}

/** Whether this block takes no rows of `stage` in a step whose attention_skip() is `attn_skip`. */
__device__ __forceinline__ bool skips_stage(int stage, int attn_skip) {
  return static_cast<int>(blockIdx.x) < stage_skip(stage, attn_skip);
}

/** Index of a GEMV stage among a layer's four (QKV, O, gate/up, down), for the claim counters and
 * MegakernelLayer::scales / offsets. */
__device__ __forceinline__ int gemv_index(int stage) { return stage == kQkv ? 0 : stage - 1; }

__device__ __forceinline__ StageShape stage_shape(const MegakernelArgs& a, int layer, int stage) {
  const MegakernelDims& d = a.dims;
  if (layer < 0) {  // the LM head, or its int8 screen (rows of hidden + 16 bytes, streamed as if bf16 of half the width)
    const int64_t sb = megakernel_screen_row_bytes(d.hidden);
    if (a.lm_screen != nullptr)
      return {static_cast<const uint8_t*>(a.lm_screen), nullptr, nullptr, d.vocab, sb / 2, 0, 1, static_cast<int>(sb),
              0};
    return {static_cast<const uint8_t*>(a.lm_head), nullptr, nullptr, d.vocab, d.hidden, 0, 1,
            static_cast<int>(2 * d.hidden), 0};
  }
  const MegakernelLayer& L = a.layers[layer];
  const void* w;
  int64_t units, k, up = 0;
  int per = 1;
  switch (stage) {
    case kQkv:
      w = L.qkv, units = (d.q_heads + 2 * d.kv_heads) * kD, k = d.hidden;
      break;
    case kO:
      w = L.o, units = d.hidden, k = d.q_heads * kD;
      break;
    case kGateUp:
      w = L.gate_up, units = d.ffn, k = d.hidden, up = d.ffn, per = 2;
      break;
    default:
      w = L.down, units = d.hidden, k = d.ffn;
      break;
  }
  const int g = gemv_index(stage);
  const int bits = static_cast<int>(d.weight_bits);
  // (32-bit: the plan keeps k below 2^20, and groups below 2^17)
  const int groups = bits == 4 ? static_cast<int>(k / d.group_size) : 0;
  const int row_bytes = static_cast<int>(bits == 16 ? 2 * k : bits == 8 ? k : k / 2);
  return {static_cast<const uint8_t*>(w), static_cast<const float*>(L.scales[g]),
          bits == 4 && d.zero_points != 0 ? static_cast<const bf16*>(L.offsets[g]) : nullptr,
          units, k, up, per, row_bytes, groups};
}

// ---------------------------------------------------------------------------------------------------------------
// The ring

/**
 * A place in the weight ring: the slot, and the parity of its current round (the phase its "full" barrier completes
 * next). Stepped by ring_next, never divided out of a tile count: a division by the run-time slot count is a chain of
 * some 20 dependent instructions, paid per tile by the producer and by every consumer warp (removing it took the
 * kernel's loops alone from 288 to 245 µs per token).
 */
struct RingPos {
  int slot = 0;
  unsigned phase = 0;
};

__device__ __forceinline__ void ring_next(RingPos& p, int slots) {
  if (++p.slot == slots) {
    p.slot = 0;
    p.phase ^= 1u;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Producer: the block's weight tiles of every step, in consumption order.

/** The claim counter of a GEMV stage (layer −1: the LM head) in the counter set of `epoch`. */
__device__ __forceinline__ unsigned* claim_counter(unsigned* sync, unsigned epoch, int layer, int stage) {
  return sync + kClaimCounters + (epoch & 1) * kClaimsPerSet +
         (layer < 0 ? kMegakernelMaxLayers * 4 : layer * 4 + gemv_index(stage));
}

/**
 * Issues the block's tiles of one stage into the ring, each slot described (first unit, units, last tile of the
 * stage) for the consumers; a stage with no tile for this block gets one empty descriptor. Static shares: the
 * block's slice of stage_range() among the blocks not `skip`ped. Claimed (`counter`): tiles taken from the stage's
 * counter, the next claim always in flight.
 */
template <bool kQuant>
__device__ __forceinline__ bool produce_stage(const MegakernelArgs& a, const Block& b, const StageShape& s,
                                              int skip, unsigned* counter, RingPos& at, unsigned& issued,
                                              uint64_t l2_policy, int cap) {
  const int64_t per = tile_units(a, s);
  int64_t t0 = 0, lim = 0;
  unsigned pending = 0;
  if (counter != nullptr) {
    lim = s.units;
    t0 = static_cast<int64_t>(atomicAdd(counter, 1u)) * per;
    pending = atomicAdd(counter, 1u);  // the tile after it, claimed while this one streams
  } else {
    stage_range(s.units, t0, lim, skip);
  }
  const bool none = t0 >= lim;
  // A cap of a whole ring or more caps nothing: the ring itself holds at most `slots` copies.
  const int inflight = cap < b.nslots ? cap : 0;
  for (;;) {
    const int slot = at.slot;
    if (!mbar_wait(b, &b.empty[slot], at.phase ^ 1u)) return false;
    if (none) {
      b.desc[slot] = make_uint2(0, 0);
      mbar_arrive(&b.full[slot]);
      ring_next(at, b.nslots);
      issued++;
      return true;
    }
    // Everything but the copy itself is done before waiting for the copy in flight, so that this one leaves the
    // moment that one lands, with none of the single producer thread's bookkeeping in between (measured neutral on
    // its own; the producer waits for landed copies some 300 µs of a 600 µs step, and for free slots some 100).
    // The consumers' reads of this slot (generic proxy, ordered before us by the mbarrier) must also be ordered
    // before the TMA's writes (async proxy).
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const int64_t n = lim - t0 < per ? lim - t0 : per;
    const unsigned bytes = static_cast<unsigned>(n) * static_cast<unsigned>(s.row_bytes);
    const int64_t next = counter != nullptr ? static_cast<int64_t>(pending) * per : t0 + per;
    const bool last = next >= lim;
    const bool copy = (a.debug & 32) == 0;
    uint8_t* dst = b.slots + static_cast<size_t>(slot) * a.slot_bytes;
    const uint8_t* src = s.w + t0 * s.row_bytes;
    b.desc[slot] = make_uint2(static_cast<unsigned>(t0), static_cast<unsigned>(n) | (last ? 0x80000000u : 0u));
    // The slot's one arrival, before its copy is issued: the phase completes once the bytes it expects have landed.
    if (copy)
      mbar_expect_tx_only(&b.full[slot],
                          static_cast<unsigned>(n) * static_cast<unsigned>(slot_row_bytes(s) * s.rows_per_unit));
    mbar_arrive(&b.full[slot]);
    // At most `inflight` copies outstanding: wait for the copy `inflight` tiles back to land (its slot cannot have
    // been refilled since: that needs this copy's slot round to come first).
    if (inflight > 0 && issued >= static_cast<unsigned>(inflight)) {
      int back = slot - inflight;
      unsigned phase = at.phase;
      if (back < 0) {  // the previous round
        back += b.nslots;
        phase ^= 1u;
      }
      if (!mbar_wait(b, &b.full[back], phase)) return false;
    }
    if (copy) {
      // The codes of the tile's rows (gate/up: then its up rows), then, for INT4, their scales (gate, up) and their
      // offsets (gate, up): each piece a multiple of 16 bytes (the plan checks the group counts).
      bulk_copy_hint(dst, src, bytes, &b.full[slot], l2_policy);
      if (s.rows_per_unit == 2)
        bulk_copy_hint(dst + bytes, src + s.up_offset * s.row_bytes, bytes, &b.full[slot], l2_policy);
      if (kQuant && s.groups > 0) {
        uint8_t* meta = dst + bytes * s.rows_per_unit;
        const unsigned sb = static_cast<unsigned>(n) * static_cast<unsigned>(s.groups) * 4u;
        bulk_copy_hint(meta, s.scales + t0 * s.groups, sb, &b.full[slot], l2_policy);
        if (s.rows_per_unit == 2)
          bulk_copy_hint(meta + sb, s.scales + (s.up_offset + t0) * s.groups, sb, &b.full[slot], l2_policy);
        if (s.offsets != nullptr) {
          meta += sb * s.rows_per_unit;
          bulk_copy_hint(meta, s.offsets + t0 * s.groups, sb / 2, &b.full[slot], l2_policy);
          if (s.rows_per_unit == 2)
            bulk_copy_hint(meta + sb / 2, s.offsets + (s.up_offset + t0) * s.groups, sb / 2, &b.full[slot],
                           l2_policy);
        }
      }
    }
    ring_next(at, b.nslots);
    issued++;
    if (last) return true;
    t0 = next;
    if (counter != nullptr) pending = atomicAdd(counter, 1u);
  }
}

/** The producer warp's one thread: every step's tiles. kQuant: the kernel's layers are INT8 or INT4 (INT4 tiles
 * carry their scales and offsets). */
template <bool kQuant>
__device__ __forceinline__ void produce(const MegakernelArgs& a, const Block& b, int pos0) {
  // (Asking L2 for 1-5 tiles beyond the ring was measured 4-30% slower per token: the requests compete with the ring's
  // own copies.) Weights do not depend on the token, so the ring runs on into the next step's first layer while this
  // step's LM head and argmax finish.
  RingPos at;
  unsigned issued = 0;  // tiles so far (a stage with no tile counts its empty descriptor)
  // Every weight is read once per step: its lines go first when L2 needs room, so that what a step reads again (the
  // KV cache above all, whole in L2 up to about 256 positions of Qwen3-0.6B) stays: 15-20 µs per token at position 1,
  // none from 512 on, where the cache no longer fits.
  // (tuning l2Stream false: the normal policy, as a copy without a hint.)
  uint64_t l2_policy;
  if (a.l2_stream != 0)
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(l2_policy));
  else
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(l2_policy));
  for (int step = 0; step < a.steps; step++) {
    const int skip = attention_skip(a, pos0 + step);
    const unsigned epoch = a.epoch + static_cast<unsigned>(step);
    for (int layer = 0; layer < a.dims.layers; layer++) {
      // The GEMV stages of a layer in order (the attention stage streams no weights).
      for (int stage = kQkv; stage <= kDown; stage = stage == kQkv ? kO : stage + 1) {
        if (skips_stage(stage, skip)) continue;
        unsigned* counter = a.claim ? claim_counter(b.sync, epoch, layer, stage) : nullptr;
        if (!produce_stage<kQuant>(a, b, stage_shape(a, layer, stage), stage_skip(stage, skip), counter, at, issued,
                           l2_policy, a.inflight))
          return;
      }
    }
    unsigned* counter = a.claim ? claim_counter(b.sync, epoch, -1, -1) : nullptr;
    // The staged attention over the whole ring: its rows hold the ring until the last layer's attention is done.
    if (skips_stage(kDown, skip) &&
        !mbar_wait(b, misc_barrier(b, kStagedFreeBarrier),
                   static_cast<unsigned>(staged_steps_before(a, pos0, step)) & 1u))
      return;
    // The LM head (its own bound on copies in flight: no hop of this step waits behind its stream).
    if (!produce_stage<kQuant>(a, b, stage_shape(a, -1, -1), 0, counter, at, issued, l2_policy, a.lm_inflight)) return;
  }
}
