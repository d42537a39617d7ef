// Device primitives: shared-memory addresses, the clock, the consumers' named barrier, mbarriers, TMA bulk copies
// with an L2 policy, loads issued as volatile asm (so that ptxas cannot sink them past a wait), bf16 conversions,
// 128-bit shared loads, cp.async and the GEMV's dot product of 8 bf16 pairs.
//
// Part of the one translation unit qwen3_decode.cu: included there inside namespace qk::{anonymous}, in the
// order listed there, after the files it relies on; not a standalone header.
#pragma once

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void consumer_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory"); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

/** Adds `bytes` to the transactions the barrier's current phase waits for, without arriving. */
__device__ __forceinline__ void mbar_expect_tx_only(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, unsigned parity) {
  unsigned ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
      : "=r"(ok)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return ok != 0;
}

/** One TMA bulk copy global → shared, completing `bytes` on `bar`, with an L2 eviction policy (createpolicy). */
__device__ __forceinline__ void bulk_copy_hint(void* dst, const void* src, unsigned bytes, uint64_t* bar,
                                               uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

// The kernel's own sync and flagged words are loaded and stored relaxed at GPU scope: every block that reads or writes
// them runs on this GPU. (As ld/st.volatile, relaxed at system scope, they measured 3-4 µs per token slower at
// positions 1-512, with the same bits.) The host-mapped words stay at system scope.
__device__ __forceinline__ unsigned ld_relaxed_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Loads issued where they stand, to overlap a wait that follows. ptxas may otherwise sink a plain load to its first
// use to relieve register pressure (the kernel runs near 255 registers), and the load then starts after the wait it was
// meant to hide under (as volatile asm: 10-30 µs per token faster at positions 128-1024). `nc`: read-only data
// (weights); `cg`: data this kernel writes (the KV cache), read coherently from L2, and the screen's candidate LM-head
// rows (read once: not kept in L1).
__device__ __forceinline__ uint4 ld_early_nc128(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 ld_early_cg128(const void* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 ld_early_cg64(const void* p) {
  uint2 v;
  asm volatile("ld.global.cg.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned short ld_early_nc16(const void* p) {
  unsigned short v;
  asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ float ld_early_nc32f(const float* p) {
  float v;
  asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}

__device__ __forceinline__ float bf(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ bf16 to_bf(float v) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ float round_bf(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

/**
 * 16 bytes of shared memory in one 128-bit load. (Through a `uint4` reference the compiler splits the access into
 * four 32-bit loads, four times the instructions, and with 16-byte lane strides each of them meets a 4-way bank
 * conflict.)
 */
__device__ __forceinline__ uint4 lds128(const void* p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(smem_addr(p)));
  return v;
}

/** A 16-byte copy global → shared that completes in the background (L2 only); waited for by cp_async_wait_all. */
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// The two bf16 of a 32-bit word as floats (exact: a bf16 is the top half of its float). One instruction each: the
// toolkit's __bfloat1622float2 takes two for the high half (a byte permute, then a shift), and in the GEMV's dot loop,
// which issues an instruction every cycle it can, conversions were 2.2 instructions per FMA; one each saved 10-20 µs
// per token at positions 1-128.
__device__ __forceinline__ float bf2_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf2_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ void unpack8(const uint4 u, float (&f)[8]) {
  const unsigned h[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    f[2 * i] = bf2_lo(h[i]);
    f[2 * i + 1] = bf2_hi(h[i]);
  }
}

/** 8 and 4 bytes, and one f32 and one bf16, of shared memory in one load each (see lds128). */
__device__ __forceinline__ uint2 lds64(const void* p) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(smem_addr(p)));
  return v;
}
__device__ __forceinline__ unsigned lds32(const void* p) {
  unsigned v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(smem_addr(p)));
  return v;
}
__device__ __forceinline__ float ldsf(const void* p) { return __uint_as_float(lds32(p)); }
__device__ __forceinline__ float lds_bf(const void* p) {
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(smem_addr(p)));
  return __uint_as_float(static_cast<unsigned>(v) << 16);
}

// Quantized codes as floats in one byte permute each, with no subtraction: the code goes into the mantissa of a
// float near 1 and the offset comes off once per chunk of 8 (quant_turn_dots). An INT8 code q, biased to u = q + 128
// (its sign bit flipped, four codes in one xor), becomes 1 + u / 2^15 (byte 1 under 0x3F80); an INT4 nibble, stored as
// u = q + 8 and masked to its own byte (two masks per word), becomes 0.5 + u / 2^8 (byte 2 under 0x3F). An
// int-to-float conversion issues at a quarter of the FMA rate; the exact form (code | 2^23, minus 2^23 and the bias)
// took a subtraction per weight too. A chunk's sum of such floats times x keeps ~20 (INT4) and ~17 (INT8) bits once
// the offset is taken off: far below the bf16 rounding of the output.
__device__ __forceinline__ float i8_unit(unsigned biased, int i) {
  return __uint_as_float(__byte_perm(biased, 0x3F800000u, 0x7604u | (static_cast<unsigned>(i) << 4)));
}
__device__ __forceinline__ float i4_unit(unsigned nibbles, int j) {
  return __uint_as_float(__byte_perm(nibbles, 0x3F000000u, 0x7044u | (static_cast<unsigned>(j) << 8)));
}

/** Σ (1 + u_i / 2^15) · x_i over 8 INT8 codes (biased u = q + 128) and 8 bf16 inputs, in two chains. */
__device__ __forceinline__ float dot8_i8(const uint2 w, const uint4 x) {
  const unsigned lo = w.x ^ 0x80808080u, hi = w.y ^ 0x80808080u;
  float a = i8_unit(lo, 0) * bf2_lo(x.x), b = i8_unit(lo, 1) * bf2_hi(x.x);
  a = fmaf(i8_unit(lo, 2), bf2_lo(x.y), a);
  b = fmaf(i8_unit(lo, 3), bf2_hi(x.y), b);
  a = fmaf(i8_unit(hi, 0), bf2_lo(x.z), a);
  b = fmaf(i8_unit(hi, 1), bf2_hi(x.z), b);
  a = fmaf(i8_unit(hi, 2), bf2_lo(x.w), a);
  b = fmaf(i8_unit(hi, 3), bf2_hi(x.w), b);
  return a + b;
}

/** Σ (0.5 + u_i / 2^8) · x_i over 8 INT4 codes (one word, element i in nibble i, u = q + 8) and 8 bf16 inputs. */
__device__ __forceinline__ float dot8_i4(const unsigned w, const uint4 x) {
  const unsigned even = w & 0x0F0F0F0Fu, odd = (w >> 4) & 0x0F0F0F0Fu;  // elements 0, 2, 4, 6 and 1, 3, 5, 7
  float a = i4_unit(even, 0) * bf2_lo(x.x), b = i4_unit(odd, 0) * bf2_hi(x.x);
  a = fmaf(i4_unit(even, 1), bf2_lo(x.y), a);
  b = fmaf(i4_unit(odd, 1), bf2_hi(x.y), b);
  a = fmaf(i4_unit(even, 2), bf2_lo(x.z), a);
  b = fmaf(i4_unit(odd, 2), bf2_hi(x.z), b);
  a = fmaf(i4_unit(even, 3), bf2_lo(x.w), a);
  b = fmaf(i4_unit(odd, 3), bf2_hi(x.w), b);
  return a + b;
}

/** Sum of 8 bf16 inputs (in element order). */
__device__ __forceinline__ float sum8(const uint4 x) {
  float s = bf2_lo(x.x) + bf2_hi(x.x);
  s += bf2_lo(x.y);
  s += bf2_hi(x.y);
  s += bf2_lo(x.z);
  s += bf2_hi(x.z);
  s += bf2_lo(x.w);
  s += bf2_hi(x.w);
  return s;
}

/** Dot of 8 bf16 weights with 8 bf16 inputs, accumulated into `acc` (in element order). */
__device__ __forceinline__ float dot8(const uint4 w, const uint4 x, float acc) {
  const unsigned a[4] = {w.x, w.y, w.z, w.w}, b[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    acc = fmaf(bf2_lo(a[i]), bf2_lo(b[i]), acc);
    acc = fmaf(bf2_hi(a[i]), bf2_hi(b[i]), acc);
  }
  return acc;
}
