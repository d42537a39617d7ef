#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../common/dtype.h"

namespace qk {

/**
 * Embedding lookup: out[i, :] = table[ids[i], :] for i < count, copied bit for bit. `ids` is i32 `[count]`,
 * `table` `[vocab, hidden]`, `out` `[count, hidden]` (not overlapping the table). The caller checks that ids lie
 * in [0, vocab); the kernel never reads outside the table and writes a zero row for an id that does not.
 */
struct EmbeddingArgs {
  DType dtype;
  void* out;
  const int32_t* ids;
  const void* table;
  int64_t count;
  int64_t vocab;
  int64_t hidden;
  /** The inverse copy, out[ids[i], :] = table[i, :]: `out` has `vocab` rows, `table` `count`; ids outside are skipped. */
  bool scatter;
};

cudaError_t launch_embedding(const EmbeddingArgs& args, cudaStream_t stream);

}  // namespace qk
