#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../common/dtype.h"

namespace qk {

/**
 * Where `x` (`count` elements of a float dtype) holds NaN or ±Inf: `stats[0]` = how many such elements,
 * `stats[1]` = the index of the first (UINT64_MAX when there is none). One pass over the bytes at memory speed, for
 * the load-time weight check. `stats` is reset on `stream` before the pass, so the call alone gives the answer.
 */
cudaError_t launch_find_non_finite(DType dtype, const void* x, int64_t count, unsigned long long* stats,
                                   cudaStream_t stream);

}  // namespace qk
