// The process-wide split-K workspace: fp32 partial tiles and per-tile tickets shared by the kernels that split K
// (the small-M linear, gemm_skinny.cu; the Hopper GEMM, gemm_sm90.cu). The process drives one device and launches
// on one stream, so launches that use it are ordered; each leaves its tickets at zero for the next. A CUDA graph
// that captured such a launch keeps the workspace's address, which growing it later frees: the engines capture only
// their M = 1 decode steps, which never split K (the GEMV kernels).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace qk {

/** Upper bound on the partials one launch may use: 64 MB of fp32. */
constexpr size_t kSplitkMaxFloats = 16u << 20;

struct SplitkWorkspace {
  float* partials = nullptr;
  size_t floats = 0;
  unsigned* tickets = nullptr;  // zero between launches
  size_t ticket_count = 0;
};

/**
 * Grows the workspace to at least `floats` partials and `tickets` tickets and returns it in `*out`. False when it
 * cannot: during stream capture (no allocation may be captured) or when the device is out of memory; the caller
 * then runs without splitting K.
 */
bool reserve_splitk_workspace(size_t floats, size_t tickets, cudaStream_t stream, SplitkWorkspace* out);

}  // namespace qk
