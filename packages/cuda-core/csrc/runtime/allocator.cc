#include "allocator.h"

#include <cuda_runtime.h>

#include <string>

#include "../common/cuda_check.h"

namespace qk {

namespace {
constexpr size_t kSmall = 1 << 20;         // blocks up to 1 MiB round to 512 B
constexpr size_t kSmallGranule = 512;
constexpr size_t kLargeGranule = 2 << 20;  // larger blocks round to 2 MiB
// A cached block serves a request only if it wastes at most this fraction, so a huge block is not pinned by a
// tiny tensor.
constexpr double kMaxWaste = 0.25;
}  // namespace

size_t Allocator::round_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  const size_t g = bytes <= kSmall ? kSmallGranule : kLargeGranule;
  return (bytes + g - 1) / g * g;
}

void* Allocator::cuda_malloc_locked(size_t bytes, const char* op) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free error state
    empty_cache_locked();
    err = cudaMalloc(&p, bytes);
  }
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw OutOfMemory(op, bytes, free_b, total_b);
  }
  if (err != cudaSuccess) throw CudaError(op, err, "cudaMalloc");
  stats_.cuda_malloc_calls++;
  stats_.reserved_bytes += bytes;
  return p;
}

void* Allocator::allocate(size_t bytes, const char* op) {
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* p = nullptr;
  auto it = free_.lower_bound(size);
  if (it != free_.end() && static_cast<double>(it->first - size) <= kMaxWaste * static_cast<double>(size)) {
    p = reinterpret_cast<void*>(it->second);
    live_[it->second] = it->first;
    stats_.allocated_bytes += it->first;
    free_.erase(it);
    stats_.cache_hits++;
  } else {
    p = cuda_malloc_locked(size, op);
    live_[reinterpret_cast<uintptr_t>(p)] = size;
    stats_.allocated_bytes += size;
  }
  stats_.live_blocks++;
  if (stats_.allocated_bytes > stats_.peak_allocated_bytes) stats_.peak_allocated_bytes = stats_.allocated_bytes;
  return p;
}

void Allocator::release(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == live_.end()) throw ArgumentError("free: the pointer is not a live allocation (double free?)");
  if (capturing_) {
    captured_.emplace_back(it->second, it->first);
  } else {
    free_.emplace(it->second, it->first);
  }
  stats_.allocated_bytes -= it->second;
  stats_.live_blocks--;
  live_.erase(it);
}

void Allocator::begin_capture() {
  std::lock_guard<std::mutex> lock(mu_);
  capturing_ = true;
  captured_.clear();
}

std::vector<std::pair<size_t, uintptr_t>> Allocator::end_capture() {
  std::lock_guard<std::mutex> lock(mu_);
  capturing_ = false;
  return std::move(captured_);
}

void Allocator::give_back(const std::vector<std::pair<size_t, uintptr_t>>& blocks) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [size, start] : blocks) free_.emplace(size, start);
}

void Allocator::empty_cache_locked() {
  if (free_.empty()) return;
  // A cached block may still be read by queued kernels of its last owner: wait for the device first.
  cudaDeviceSynchronize();
  for (auto& [size, start] : free_) {
    if (cudaFree(reinterpret_cast<void*>(start)) == cudaSuccess) stats_.reserved_bytes -= size;
  }
  free_.clear();
}

void Allocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  empty_cache_locked();
}

MemoryStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Allocator::check_range(const void* ptr, size_t bytes, const char* op, const char* arg) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.upper_bound(p);
  if (it == live_.begin()) {
    throw ArgumentError(std::string(op) + ": argument \"" + arg + "\" does not point into live GPU memory (disposed tensor?)");
  }
  --it;
  if (p + bytes > it->first + it->second) {
    throw ArgumentError(std::string(op) + ": argument \"" + arg + "\" spans " + std::to_string(bytes) +
                        " bytes past the end of its GPU allocation (shape larger than the tensor?)");
  }
}

Allocator& allocator() {
  static Allocator* instance = new Allocator();  // never destroyed: CUDA may be torn down before statics
  return *instance;
}

}  // namespace qk
