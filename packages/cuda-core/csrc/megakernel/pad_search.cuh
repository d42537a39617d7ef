// The placement-search build (QK_MEGAKERNEL_PAD_SEARCH=1 in the build's environment, packages/cuda-core/CMakeLists.txt;
// DESIGN.md, "Code placement"): extra kernel instantiations with each candidate padding. Empty in other builds.
//
// Part of the one translation unit qwen3_decode.cu: included there inside namespace qk::{anonymous}, in the
// order listed there, after the kernel and decode_kernel; not a standalone header.
#pragma once

#ifdef QK_MEGAKERNEL_PAD_SEARCH
// A build for the placement search (QK_MEGAKERNEL_PAD_SEARCH=1 in the build's environment; DESIGN.md,
// "Code placement"): the greedy screened kernels of query groups of 2, of each path, with each padding below;
// QK_MEGAKERNEL_PAD=N (read at each launch) runs the staged one with N instructions where a launch runs the staged
// kernel, QK_MEGAKERNEL_PAD_BOTH=N the one with both paths where a launch runs that.
constexpr int kPadSearch[] = {0,   128,  256,  384,  493,  512,  640,  736, 768, 896,
                               1024, 1152, 1280, 1408, 1536, 1664, 1792, 1920};
constexpr int kPadSearchCount = static_cast<int>(sizeof(kPadSearch) / sizeof(kPadSearch[0]));

template <int kPath, int... I>
void pad_kernels_of(DecodeKernel* out, std::integer_sequence<int, I...>) {
  ((out[I] = qwen3_decode_kernel<false, 2, true, kPath, kPadSearch[I]>), ...);
}

/** Every kernel of the search: the staged ones, then those with both paths. */
void pad_kernels(DecodeKernel* out) {
  pad_kernels_of<kPathStaged>(out, std::make_integer_sequence<int, kPadSearchCount>{});
  pad_kernels_of<kPathBoth>(out + kPadSearchCount, std::make_integer_sequence<int, kPadSearchCount>{});
}

/** The search's kernel for QK_MEGAKERNEL_PAD (_BOTH), or nullptr where it is unset or no padding of the search. */
DecodeKernel pad_kernel(int path, bool sample, bool screen) {
  const char* v = std::getenv(path == kPathStaged ? "QK_MEGAKERNEL_PAD" : "QK_MEGAKERNEL_PAD_BOTH");
  if (v == nullptr || sample || !screen) return nullptr;
  const int pad = std::atoi(v);
  DecodeKernel all[2 * kPadSearchCount];
  pad_kernels(all);
  for (int i = 0; i < kPadSearchCount; i++)
    if (kPadSearch[i] == pad) return all[(path == kPathStaged ? 0 : kPadSearchCount) + i];
  return nullptr;
}
#endif
