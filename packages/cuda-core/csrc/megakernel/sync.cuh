// Synchronisation between blocks (DESIGN.md, "Synchronisation"): flagged words, the failure path (error code, abort
// flag, host error word), the bounded waits (mbarriers, flagged words, the step's token) with their non-inlined slow
// paths, batched gathers of flagged words, trace stamps, and the end of a step (the arrival counter and the
// publication of the step's token).
//
// Part of the one translation unit qwen3_decode.cu: included there inside namespace qk::{anonymous}, in the
// order listed there, after the files it relies on; not a standalone header.
#pragma once

// ---------------------------------------------------------------------------------------------------------------
// Flagged words: [two bf16 | epoch] per 8 bytes. A value pair is published with one 64-bit store, so a reader that
// sees the epoch in a word also sees the pair written with it.

__device__ __forceinline__ unsigned pack_bf2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&v);
}

/**
 * Publishes values (2·pair, 2·pair + 1) of a flagged buffer: one scalar 64-bit store, which is single-copy atomic
 * (a vector store of two 32-bit words is not: its halves may land separately, and a reader could pair this epoch
 * with the previous launch's values).
 */
__device__ __forceinline__ void flag_store(void* buf, int64_t pair, unsigned packed, unsigned epoch) {
  const unsigned long long word = (static_cast<unsigned long long>(epoch) << 32) | packed;
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(static_cast<unsigned long long*>(buf) + pair), "l"(word)
               : "memory");
}

/** Publishes word `i` of a flagged fp32 buffer: the value's bits and the epoch, in one single-copy-atomic store. */
__device__ __forceinline__ void flag_store_f32(void* buf, int64_t i, float v, unsigned epoch) {
  flag_store(buf, i, __float_as_uint(v), epoch);
}

/**
 * Two flagged words (four values) as they are in L2 now: a vector of two 64-bit elements, each element read as
 * one single-copy-atomic access. x, z: the value pairs; y, w: their epochs.
 */
__device__ __forceinline__ uint4 flag_load(const void* p) {
  unsigned long long lo, hi;
  asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(lo), "=l"(hi) : "l"(p) : "memory");
  return make_uint4(static_cast<unsigned>(lo), static_cast<unsigned>(lo >> 32), static_cast<unsigned>(hi),
                    static_cast<unsigned>(hi >> 32));
}

__device__ __forceinline__ bool flag_ready(const uint4& v, unsigned epoch) { return v.y == epoch && v.w == epoch; }

// ---------------------------------------------------------------------------------------------------------------
// Failures and bounded waits

/** A 64-bit store to host-mapped memory, visible to the host while the kernel runs. */
__device__ __forceinline__ void host_store(uint64_t* p, unsigned long long v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/**
 * Records `code` as the launch's error (first writer wins; the host sees it in host[0], tagged with the launch's
 * epoch) and raises the abort flag every block polls.
 */
__device__ __forceinline__ void fail(unsigned* sync, int32_t* result, uint64_t* host, unsigned launch_epoch,
                                     MegakernelError code) {
  if (atomicCAS(reinterpret_cast<int*>(result + 1), 0, static_cast<int>(code)) == 0)
    host_store(host, (static_cast<unsigned long long>(launch_epoch) << 32) | static_cast<unsigned>(code));
  atomicExch(sync + kAbortWord, 1u);
}

// The slow paths of the waits take scalars only: a reference to a local (the Block, a register array) passed to a
// function that is not inlined would move that local to memory, and local memory here lives in L2 (shared memory
// leaves almost no L1), so every access to it would cost a loaded L2 round trip.

/**
 * Whether a spin that began at `start` must give up: another block aborted, or this one outlasted `timeout_ns` (then
 * recorded as the launch's error). Checked every `mask + 1` spins (`i` counts them).
 */
__device__ __forceinline__ bool spin_must_stop(unsigned i, unsigned mask, uint64_t start, unsigned* sync,
                                               int32_t* result, uint64_t* host, unsigned launch_epoch,
                                               uint64_t timeout_ns) {
  if ((i & mask) != 0) return false;
  if (ld_relaxed_gpu(sync + kAbortWord) != 0) return true;
  if (now_ns() - start <= timeout_ns) return false;
  fail(sync, result, host, launch_epoch, MegakernelError::Timeout);
  return true;
}

/** Spins on an mbarrier phase; false on timeout or when another block aborted. */
__device__ __noinline__ bool mbar_wait_slow(uint64_t* bar, unsigned parity, unsigned* sync, int32_t* result,
                                            uint64_t* host, unsigned launch_epoch, uint64_t timeout_ns) {
  const uint64_t start = now_ns();
  for (unsigned i = 1;; i++) {
    if (mbar_try_wait(bar, parity)) return true;
    if (spin_must_stop(i, 63, start, sync, result, host, launch_epoch, timeout_ns)) return false;
  }
}

/** Waits for an mbarrier phase; false on timeout or when another block aborted. */
__device__ __forceinline__ bool mbar_wait(const Block& b, uint64_t* bar, unsigned parity) {
  return mbar_try_wait(bar, parity) ||
         mbar_wait_slow(bar, parity, b.sync, b.result, b.host, b.launch_epoch, b.timeout_ns);
}

/**
 * Spins until the flagged words at `p` carry `epoch` and returns them; on timeout or abort it returns what it read
 * last (not ready: the caller checks again).
 */
__device__ __noinline__ uint4 flag_wait_slow(const void* p, unsigned epoch, unsigned* sync, int32_t* result,
                                             uint64_t* host, unsigned launch_epoch, uint64_t timeout_ns) {
  const uint64_t start = now_ns();
  for (unsigned i = 1;; i++) {
    const uint4 v = flag_load(p);
    if (flag_ready(v, epoch) || spin_must_stop(i, 31, start, sync, result, host, launch_epoch, timeout_ns)) return v;
  }
}

/** The flagged words at `p` once they carry this step's epoch, given a first read `v`; `ok` false on abort. */
__device__ __forceinline__ uint4 flag_wait(const MegakernelArgs& a, const Block& b, const void* p, uint4 v, bool& ok) {
  if (flag_ready(v, b.epoch) || (a.debug & 1) != 0) return v;
  v = flag_wait_slow(p, b.epoch, b.sync, b.result, b.host, b.launch_epoch, b.timeout_ns);
  ok = ok && flag_ready(v, b.epoch);
  return v;
}

/**
 * The token of the step tagged `epoch` (the previous step of this launch), once the block that reduced its argmax
 * has published it; -1 on timeout or abort.
 */
__device__ __noinline__ int token_wait(unsigned* sync, int32_t* result, uint64_t* host, unsigned launch_epoch,
                                       unsigned epoch, uint64_t timeout_ns) {
  const unsigned long long* p = reinterpret_cast<const unsigned long long*>(sync + kTokenWord);
  const uint64_t start = now_ns();
  for (unsigned i = 1;; i++) {
    unsigned long long w;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
    if (static_cast<unsigned>(w >> 32) == epoch) return static_cast<int>(static_cast<unsigned>(w));
    if (spin_must_stop(i, 31, start, sync, result, host, launch_epoch, timeout_ns)) return -1;
  }
}

/**
 * Waits for the host to tag a mask slot with `epoch` (MegakernelArgs::mask_tags: device memory the host's copies fill,
 * polled in L2); false on timeout, when another block aborted, or when the host cancelled the launch (then recorded
 * as its error).
 */
__device__ __noinline__ bool mask_wait(const uint64_t* tag, unsigned epoch, unsigned* sync, int32_t* result,
                                       uint64_t* host, unsigned launch_epoch, uint64_t timeout_ns) {
  const uint64_t start = now_ns();
  for (unsigned i = 1;; i++) {
    unsigned long long w;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(tag) : "memory");
    if (w == epoch) return true;
    if (w == kMegakernelMaskCancel) {
      fail(sync, result, host, launch_epoch, MegakernelError::Cancelled);
      return false;
    }
    if (spin_must_stop(i, 31, start, sync, result, host, launch_epoch, timeout_ns)) return false;
  }
}

/** A 32-bit load from L2 (not a line L1 may hold from an earlier step). */
__device__ __forceinline__ uint32_t l2_load_u32(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/** Whether every consumer thread of the block is still fine (`ok` is this thread's view); a consumer barrier. */
__device__ __forceinline__ bool block_ok(const Block& b, bool ok) {
  if (!ok) b.flag[0] = 1;
  consumer_sync();
  return b.flag[0] == 0;
}

/**
 * Loads the flagged word pairs at addr(j), j < count ≤ kBatch, into `v`: every load issued together, then, while any
 * is not ready, every pending one issued again together, so the batch costs one L2 round trip after its last word
 * lands. (Spinning on one word at a time costs a round trip for each word still pending behind it: 4.5 against
 * 2.1 µs for a 3,072-value gather on 132 blocks under a weight stream.) False on timeout or abort.
 */
template <int kBatch, typename Addr>
__device__ __forceinline__ bool flag_wait_batch(const MegakernelArgs& a, const Block& b, uint4 (&v)[kBatch], int count,
                                                Addr addr) {
  static_assert(kBatch <= 32, "the pending set is a 32-bit mask");
  const unsigned active = count >= 32 ? ~0u : (1u << count) - 1u;  // (count ≥ 0; loads past kBatch are not issued)
#pragma unroll
  for (int j = 0; j < kBatch; j++)
    if ((active >> j) & 1u) v[j] = flag_load(addr(j));
  if ((a.debug & 1) != 0) return true;
  unsigned pending = 0;
#pragma unroll
  for (int j = 0; j < kBatch; j++)
    if (((active >> j) & 1u) && !flag_ready(v[j], b.epoch)) pending |= 1u << j;
  if (pending == 0) return true;
  const uint64_t start = now_ns();
  for (unsigned spin = 1;; spin++) {
#pragma unroll
    for (int j = 0; j < kBatch; j++)
      if ((pending >> j) & 1u) v[j] = flag_load(addr(j));
#pragma unroll
    for (int j = 0; j < kBatch; j++)
      if (((pending >> j) & 1u) && flag_ready(v[j], b.epoch)) pending &= ~(1u << j);
    if (pending == 0) return true;
    if (spin_must_stop(spin, 31, start, b.sync, b.result, b.host, b.launch_epoch, b.timeout_ns)) return false;
  }
}

/**
 * Copies `n` values (a multiple of 4) of a flagged buffer into shared memory, waiting for each word of this step, in
 * batches of kBatch loads per thread (flag_wait_batch). This thread's verdict; the caller combines them with block_ok.
 */
template <int kBatch>
__device__ __forceinline__ bool flag_gather(const MegakernelArgs& a, const Block& b, const void* src, int64_t n,
                                            bf16* dst) {
  const uint4* s = static_cast<const uint4*>(src);
  const int64_t words = n / 4;
  for (int64_t base = threadIdx.x; base < words; base += static_cast<int64_t>(kConsumers) * kBatch) {
    auto at = [&](int j) { return base + static_cast<int64_t>(j) * kConsumers; };
    int count = 0;
    while (count < kBatch && at(count) < words) count++;
    uint4 v[kBatch];
    if (!flag_wait_batch<kBatch>(a, b, v, count, [&](int j) { return s + at(j); })) return false;
#pragma unroll
    for (int j = 0; j < kBatch; j++)
      if (j < count) *reinterpret_cast<uint2*>(dst + at(j) * 4) = make_uint2(v[j].x, v[j].z);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// Trace stamps

/** Records trace stamp `event` of this block (consumer thread 0; only when tracing). */
__device__ __forceinline__ void stamp(const MegakernelArgs& a, int event) {
  if (a.trace != nullptr && threadIdx.x == 0)
    a.trace[static_cast<int64_t>(blockIdx.x) * megakernel_trace_events(a.dims.layers) + event] = now_ns();
}

// ---------------------------------------------------------------------------------------------------------------
// The end of a step: the arrival of each block, the token's publication

/**
 * The arrival of this block (thread 0) at the end of a step; whether it is the last. The last one resets the counter
 * and clears the step's claim counters; its fence orders the other blocks' writes before its reads.
 */
__device__ __forceinline__ bool step_arrive(const MegakernelArgs& a, const Block& b) {
  __threadfence();
  const unsigned arrived = atomicAdd(b.sync + kArgmaxCounter, 1u);
  if (arrived != gridDim.x - 1) return false;
  atomicExch(b.sync + kArgmaxCounter, 0u);
  if (a.claim != 0) {
    // Every tile of this step has been claimed and consumed: its claim counters are free for the step two ahead.
    unsigned* claims = b.sync + kClaimCounters + (b.epoch & 1) * kClaimsPerSet;
    for (int i = 0; i < kClaimsPerSet; i++) claims[i] = 0;
  }
  __threadfence();
  return true;
}

/**
 * Publishes the step's token (one thread): to the host, and to the other blocks for the next step (or, on the
 * launch's last step, as the state the next launch starts from).
 */
__device__ __forceinline__ void publish_token(const MegakernelArgs& a, const Block& b, int token, int step, int pos) {
  stamp(a, static_cast<int>(a.dims.layers) * kMegakernelTraceEventsPerLayer + 2);
  const unsigned long long tagged = (static_cast<unsigned long long>(b.epoch) << 32) | static_cast<unsigned>(token);
  host_store(b.host + 1 + step, tagged);
  if (step + 1 < a.steps) {
    // The other blocks wait for this word before the next step's embedding row: everything they read of this step
    // (the cache rows, the flagged words) was written before their arrivals.
    flag_store(b.sync + kTokenWord, 0, static_cast<unsigned>(token), b.epoch);
  } else {
    a.result[0] = token;
    a.state[0] = token;
    a.state[1] = pos + 1;
  }
}
