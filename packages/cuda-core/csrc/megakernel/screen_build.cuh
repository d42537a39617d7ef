// The LM head's int8 screen, built once per model on the device (megakernel_screen_build; what its floats bound:
// lm_head.cuh, consume_screen). Included by qwen3_decode.cu inside namespace qk, after the launch; not a
// standalone header.
#pragma once

namespace {

/** One warp per row of the LM head: its int8 screen row (consume_screen describes what the floats bound). */
__global__ void screen_build_kernel(const bf16* w, int64_t vocab, int hidden, uint8_t* out) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (row >= vocab) return;
  const bf16* src = w + row * hidden;
  uint8_t* dst = out + row * (hidden + kScreenMeta);
  float m = 0.f;
  bool bad = false;
  for (int i = lane; i < hidden; i += 32) {
    const float v = bf(src[i]);
    bad |= !isfinite(v);
    m = fmaxf(m, fabsf(v));
  }
  m = warp_max(m);
  bad = __any_sync(0xffffffffu, bad);
  const float s = bad ? 0.f : m / 127.f;
  double e2 = 0.0, n2 = 0.0;
  for (int i = lane; i < hidden; i += 32) {
    const float v = bf(src[i]);
    const float q = s > 0.f ? fminf(fmaxf(rintf(v / s), -127.f), 127.f) : 0.f;
    dst[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    const double e = static_cast<double>(v) - static_cast<double>(s) * static_cast<double>(q);  // exact
    e2 += e * e;
    n2 += static_cast<double>(v) * static_cast<double>(v);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    e2 += __shfl_xor_sync(0xffffffffu, e2, o);
    n2 += __shfl_xor_sync(0xffffffffu, n2, o);
  }
  if (lane == 0) {
    const double e = sqrt(e2) * (1.0 + 1e-9), n = sqrt(n2) * (1.0 + 1e-9) + e;
    const float eu = bad ? INFINITY : __double2float_ru(e), nu = bad ? INFINITY : __double2float_ru(n);
    *reinterpret_cast<float4*>(dst + hidden) = make_float4(s, eu, nu, 0.f);
  }
}

}  // namespace

cudaError_t megakernel_screen_build(const void* lm_head, int64_t vocab, int64_t hidden, void* out,
                                    cudaStream_t stream) {
  if (lm_head == nullptr || out == nullptr || vocab <= 0 || vocab > (1 << 24) || hidden <= 0 || hidden % 16 != 0 ||
      hidden > (1 << 20) || (reinterpret_cast<uintptr_t>(out) & 15) != 0)
    return cudaErrorInvalidValue;
  constexpr int kRowsPerBlock = 8;
  const unsigned blocks = static_cast<unsigned>((vocab + kRowsPerBlock - 1) / kRowsPerBlock);
  screen_build_kernel<<<blocks, kRowsPerBlock * 32, 0, stream>>>(static_cast<const bf16*>(lm_head), vocab,
                                                                  static_cast<int>(hidden), static_cast<uint8_t*>(out));
  return cudaGetLastError();
}
