// A caching device allocator: freed blocks go back to per-size free lists and are reused, so the decode hot
// path never calls cudaMalloc. It also records every live block, so the binding can check that a pointer
// handed in from JavaScript lies inside memory that is still allocated (no use-after-free reaches a kernel).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace qk {

struct MemoryStats {
  size_t allocated_bytes = 0;  // in live blocks handed out
  size_t reserved_bytes = 0;   // held from CUDA (live + cached)
  size_t peak_allocated_bytes = 0;
  uint64_t cuda_malloc_calls = 0;
  uint64_t cache_hits = 0;
  uint64_t live_blocks = 0;
};

class Allocator {
 public:
  /** A block of at least `bytes` (rounded up); throws OutOfMemory or CudaError. */
  void* allocate(size_t bytes, const char* op);
  /** Returns a block to the cache; throws ArgumentError for a pointer that is not a live block. */
  void release(void* ptr);
  /** Gives every cached (free) block back to CUDA. */
  void empty_cache();
  MemoryStats stats() const;
  /**
   * Graph capture: blocks released between begin_capture and end_capture are kept out of the cache, because the
   * captured graph still addresses them at every replay. end_capture hands them over; the graph's owner returns
   * them with give_back when it destroys the graph.
   */
  void begin_capture();
  std::vector<std::pair<size_t, uintptr_t>> end_capture();
  void give_back(const std::vector<std::pair<size_t, uintptr_t>>& blocks);
  /** Throws ArgumentError unless [ptr, ptr + bytes) lies inside one live block. */
  void check_range(const void* ptr, size_t bytes, const char* op, const char* arg) const;
  static size_t round_size(size_t bytes);

 private:
  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> live_;                   // start → rounded size
  std::multimap<size_t, uintptr_t> free_;              // rounded size → start
  MemoryStats stats_;
  bool capturing_ = false;
  std::vector<std::pair<size_t, uintptr_t>> captured_;  // (size, start) released during the capture
  void* cuda_malloc_locked(size_t bytes, const char* op);
  void empty_cache_locked();
};

Allocator& allocator();

}  // namespace qk
