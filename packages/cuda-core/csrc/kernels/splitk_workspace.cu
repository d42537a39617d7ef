// The split-K workspace (splitk_workspace.h).
#include <algorithm>
#include <mutex>

#include "splitk_workspace.h"

namespace qk {
namespace {
SplitkWorkspace g_workspace;
std::mutex g_workspace_mutex;
}  // namespace

bool reserve_splitk_workspace(size_t floats, size_t tickets, cudaStream_t stream, SplitkWorkspace* out) {
  std::lock_guard<std::mutex> lock(g_workspace_mutex);
  SplitkWorkspace& w = g_workspace;
  if (w.floats >= floats && w.ticket_count >= tickets) {
    *out = w;
    return true;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) return false;
  // cudaFree waits for the device, so no launch still reads the old buffers.
  if (w.partials != nullptr) cudaFree(w.partials);
  if (w.tickets != nullptr) cudaFree(w.tickets);
  w = SplitkWorkspace{};
  const size_t want_floats = std::max<size_t>(floats, 1u << 21);  // 8 MB: the model shapes rarely regrow it
  const size_t want_tickets = std::max<size_t>(tickets, 4096);
  if (cudaMalloc(&w.partials, want_floats * sizeof(float)) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (cudaMalloc(&w.tickets, want_tickets * sizeof(unsigned)) != cudaSuccess ||
      cudaMemsetAsync(w.tickets, 0, want_tickets * sizeof(unsigned), stream) != cudaSuccess) {
    cudaGetLastError();
    cudaFree(w.partials);
    if (w.tickets != nullptr) cudaFree(w.tickets);
    w = SplitkWorkspace{};
    return false;
  }
  w.floats = want_floats;
  w.ticket_count = want_tickets;
  *out = w;
  return true;
}

}  // namespace qk
