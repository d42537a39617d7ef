// A softmax weight divided by its sum with __fdiv_rn's bits, without its slow path on the common inputs: the
// megakernel's staged attention (NOTES.md v29), and the probe that checks it (docs/h100/megakernel-v29/probes/div.cu).
#pragma once

namespace qk {

/** __fdiv_rn, out of line: weight_div's rare case (its range check and slow path stay out of the attention's code). */
static __device__ __noinline__ float weight_div_rare(float p, float l) { return __fdiv_rn(p, l); }

/**
 * p / l rounded to nearest (the bits of __fdiv_rn) for a softmax weight p ≤ 1 over its sum l ≥ 1: a refined
 * reciprocal and two correction steps, without __fdiv_rn's range check, whose slow path a zero weight (a key past the
 * last one in its tile) takes (NOTES.md v29, runs 78b-78d). Zeros give +0, as __fdiv_rn does; weights below 2^-100
 * (quotients that could leave the normal range), sums outside [1, 2^20] and NaNs go to __fdiv_rn itself. The probe
 * docs/h100/megakernel-v29/probes/div.cu checks it against __fdiv_rn over p = 0 and every p in [2^-100, 1] for 64
 * sums.
 */
__device__ __forceinline__ float weight_div(float p, float l) {
  if (p >= 0x1p-100f && l >= 1.f && l <= 0x1p20f) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(l));
    r = fmaf(fmaf(-l, r, 1.f), r, r);
    const float q0 = p * r;
    const float q1 = fmaf(fmaf(-l, q0, p), r, q0);
    return fmaf(fmaf(-l, q1, p), r, q1);
  }
  if (p == 0.f && l >= 1.f && l <= 0x1p20f) return 0.f;
  return weight_div_rare(p, l);
}

}  // namespace qk
