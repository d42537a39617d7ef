// A softmax weight divided by its sum with __fdiv_rn's bits, without its slow path on the common inputs: the
// megakernel's staged attention (megakernel/DESIGN.md, "The staged attention"), and the probe that checked it (in git
// history: `git show fa84167:docs/h100/megakernel-v29/probes/div.cu`).
#pragma once

namespace qk {

/** __fdiv_rn, out of line: weight_div's rare case (its range check and slow path stay out of the attention's code). */
static __device__ __noinline__ float weight_div_rare(float p, float l) { return __fdiv_rn(p, l); }

/** The refined reciprocal of a softmax sum l that weight_div_by divides by (computed once per sum). */
__device__ __forceinline__ float weight_rcp(float l) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(l));
  return fmaf(fmaf(-l, r, 1.f), r, r);
}

/**
 * p / l rounded to nearest (the bits of __fdiv_rn) for a softmax weight p ≤ 1 over its sum l ≥ 1, r = weight_rcp(l):
 * two correction steps on p · r, without __fdiv_rn's range check, whose slow path a zero weight (a key past the last
 * one in its tile) takes (that slow path was what HF's roundings cost the staged attention). Zeros give +0, as
 * __fdiv_rn does (the steps give +0 for them); weights in (0, 2^-100) (quotients that could leave the normal range),
 * sums outside [1, 2^20] and NaNs go to __fdiv_rn itself. The probe above found the same bits as __fdiv_rn over p = 0
 * and every p in [2^-100, 1] for 64 sums in [1, 2^20]: 53,687,091,328 pairs, none different.
 */
__device__ __forceinline__ float weight_div_by(float p, float l, float r) {
  if ((p >= 0x1p-100f || p == 0.f) && l >= 1.f && l <= 0x1p20f) {
    const float q0 = p * r;
    const float q1 = fmaf(fmaf(-l, q0, p), r, q0);
    return fmaf(fmaf(-l, q1, p), r, q1);
  }
  return weight_div_rare(p, l);
}

/** weight_div_by with the reciprocal of l computed here. */
__device__ __forceinline__ float weight_div(float p, float l) { return weight_div_by(p, l, weight_rcp(l)); }

}  // namespace qk
