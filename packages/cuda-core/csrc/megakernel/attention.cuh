// The attention of a step: the paths a kernel is compiled with (AttnPath), its placement padding, and the choice per
// step between the staged attention (attention_staged.cuh) and the attention by chunks (attention_chunked.cuh).
//
// Part of the one translation unit qwen3_decode.cu: included there inside namespace qk::{anonymous}, in the
// order listed there, after the files it relies on; not a standalone header.
#pragma once

/**
 * The attention paths a kernel is compiled with (MegakernelArgs::path_kernels): both, decided per step, or the staged
 * attention alone, without the attention by chunks and the O blocks' merge: a third less code, 70 fewer registers,
 * and 5-8 µs per token faster at positions 128-383 (DESIGN.md, "The staged attention"). (A kernel of the chunks alone
 * measured 10-11 µs slower than the one with both at positions 512-1279, and slower at every placement tried.)
 */
enum AttnPath : int { kPathBoth = 0, kPathStaged = 1 };

/**
 * The placement padding (placement_pad: instructions after the attention) of a kernel of query groups of G, path
 * `kPath` and `kPad`: kPad where it is not -1 (the default), else in the kernels with both paths 1,280 after the
 * attention by chunks for query groups of 2 (a search over 0-1,920 at positions 512 and 1024 of Qwen3-0.6B:
 * 621-622 µs per token at 1024, 617-644 across the paddings; 736 before the staged attention's rewrite) and 736 for
 * the others, and none in the staged kernel (paddings of 0-1,920 instructions measured within the machines' spread
 * there). DESIGN.md, "Code placement".
 */
template <int G, int kPath, int kPad>
constexpr int placement_of() {
  return kPad >= 0 ? kPad : kPath == kPathBoth ? (G == 2 ? 1280 : 736) : 0;
}

/** The attention of a step at `pos`: staged (query groups of 2, staged_step) or by chunks (attend_chunked). */
template <int G, bool kStage, int kPath, int kPad>
__device__ __forceinline__ bool attend(const MegakernelArgs& a, const Block& b, const Layout& lay, int layer, int g,
                                      int c, int chunks, int p0, int p1, int pos, int ev, unsigned staged_parity) {
  constexpr int kInstructions = placement_of<G, kPath, kPad>();
  if constexpr (G == 2 && kPath == kPathStaged) {
    const bool ok = attend_staged(a, b, lay, layer, g, pos, ev, staged_parity);
    placement_pad<kInstructions>(a, b);
    return ok;
  } else {
    if constexpr (G == 2 && kPath == kPathBoth) {
      if (staged_step(a, pos)) return attend_staged(a, b, lay, layer, g, pos, ev, staged_parity);
    }
    return attend_chunked<G, kStage, kInstructions>(a, b, lay, layer, g, c, chunks, p0, p1, pos, ev);
  }
}

/**
 * Whether a kernel of path `kPath` can run every step of a launch of `steps` from `pos0`: the staged kernel where all
 * of them are staged steps (one run of positions, so the first and the last decide), the kernel with both always.
 */
template <int kPath>
__host__ __device__ inline bool path_serves(const MegakernelArgs& a, int64_t pos0, int steps) {
  return kPath == kPathBoth ||
         (staged_step(a, static_cast<int>(pos0)) && staged_step(a, static_cast<int>(pos0 + steps - 1)));
}
