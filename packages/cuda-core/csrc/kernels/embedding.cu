// Indexed row copies: the embedding gather (out[i] = table[ids[i]]) and its inverse, the scatter that writes new
// K/V rows into a cache at positions held in device memory (out[ids[i]] = src[i]; a captured decode graph reuses
// it at every step). One block per indexed row (grid-stride over rows), its threads copying the row in 16-byte
// words when the row is a whole number of them and both pointers are aligned, else in elements. A copy of raw
// words, so every value (NaN payloads included) arrives bit for bit.
#include "../common/cuda_check.h"
#include "../common/launch.cuh"
#include "elementwise.h"
#include "embedding.h"

namespace qk {
namespace {

constexpr int kMaxThreads = 256;

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// kScatter false: out[i] = table[ids[i]] (a zero row for an id outside [0, vocab)); true: out[ids[i]] = table[i]
// (ids outside [0, vocab) are skipped). `vocab` counts the rows of the indexed side.
template <typename W, bool kScatter>
__global__ void __launch_bounds__(kMaxThreads) indexed_rows_kernel(W* __restrict__ out, const int32_t* __restrict__ ids,
                                                                   const W* __restrict__ table, int64_t count,
                                                                   int64_t vocab, int64_t words_per_row) {
  grid_dependency_wait();
  allow_dependents_launch();
  for (int64_t i = blockIdx.x; i < count; i += gridDim.x) {
    const int32_t id = __ldg(ids + i);
    const bool valid = id >= 0 && id < vocab;
    if (kScatter && !valid) continue;
    W* dst = out + (kScatter ? static_cast<int64_t>(id) : i) * words_per_row;
    if (!valid) {
      for (int64_t w = threadIdx.x; w < words_per_row; w += blockDim.x) dst[w] = W{};
      continue;
    }
    const W* src = table + (kScatter ? i : static_cast<int64_t>(id)) * words_per_row;
#pragma unroll 4
    for (int64_t w = threadIdx.x; w < words_per_row; w += blockDim.x) dst[w] = src[w];
  }
}

template <typename W> cudaError_t launch_words(const EmbeddingArgs& a, int64_t words_per_row, cudaStream_t stream) {
  // Enough threads for about two words each, whole warps, at most kMaxThreads.
  int64_t threads = ((words_per_row + 1) / 2 + 31) / 32 * 32;
  threads = threads < 32 ? 32 : (threads > kMaxThreads ? kMaxThreads : threads);
  unsigned blocks = 0;
  QK_RETURN_IF_ERROR(grid_stride_blocks(a.count, static_cast<int>(threads), &blocks));
  const auto kernel = a.scatter ? indexed_rows_kernel<W, true> : indexed_rows_kernel<W, false>;
  return launch_kernel(kernel, dim3(blocks), dim3(static_cast<unsigned>(threads)), 0, stream, static_cast<W*>(a.out),
                       a.ids, static_cast<const W*>(a.table), a.count, a.vocab, words_per_row);
}

}  // namespace

cudaError_t launch_embedding(const EmbeddingArgs& a, cudaStream_t stream) {
  if (a.count < 0 || a.vocab < 0 || a.hidden < 0 || !is_float(a.dtype)) return cudaErrorInvalidValue;
  if (a.count == 0 || a.hidden == 0) return cudaSuccess;
  const int64_t row_bytes = a.hidden * static_cast<int64_t>(dtype_size(a.dtype));
  if (row_bytes % 16 == 0 && aligned16(a.out) && aligned16(a.table)) {
    return launch_words<uint4>(a, row_bytes / 16, stream);
  }
  return dtype_size(a.dtype) == 4 ? launch_words<uint32_t>(a, a.hidden, stream)
                                  : launch_words<uint16_t>(a, a.hidden, stream);
}

}  // namespace qk
