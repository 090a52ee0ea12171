#pragma once
// A caching allocator: freed blocks are kept in per-size free lists and handed out again, so
// training loops that allocate the same shapes every step stop calling the system allocator.

#include <cstddef>
#include <cstdint>

namespace eddy {

struct AllocatorStats {
  int64_t bytes_in_use = 0;     // handed out and not yet freed
  int64_t peak_bytes_in_use = 0;
  int64_t bytes_cached = 0;     // held in free lists
  int64_t system_allocations = 0;  // calls that reached the system allocator
  int64_t cache_hits = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  // Never throws: it runs in destructors, including while an out-of-memory error unwinds.
  virtual void deallocate(void* ptr, size_t bytes) noexcept = 0;
  virtual AllocatorStats stats() const = 0;
  // Returns every cached block to the system.
  virtual void empty_cache() = 0;
  virtual void reset_peak() = 0;
};

// The process-wide caching allocator for host memory (64-byte aligned blocks).
Allocator& cpu_allocator();

}  // namespace eddy
