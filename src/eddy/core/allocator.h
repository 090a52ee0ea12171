#pragma once
// A caching allocator: freed blocks are kept in per-size free lists and handed out again, so
// training loops that allocate the same shapes every step stop calling the system allocator.

#include <cstddef>
#include <cstdint>
#include <memory>

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

// Where a caching allocator gets blocks its free lists lack, and returns them: the system's
// aligned_alloc for host memory, cuMemAlloc for a GPU's.
class MemorySource {
 public:
  virtual ~MemorySource() = default;
  // Null when the memory is exhausted.
  virtual void* get(size_t bytes) = 0;
  virtual void put(void* ptr) noexcept = 0;
  // Throws the error for a request that failed even with the cache emptied.
  [[noreturn]] virtual void exhausted(size_t bytes, const AllocatorStats& stats) = 0;
};

// Blocks are rounded up to a power of two (at least 256 bytes) below 1 MiB and to 1 MiB
// multiples above, which bounds waste while letting equal-shaped tensors share blocks.
size_t caching_block_size(size_t bytes);

// A caching allocator over `source`. Freed blocks are handed out again at once: for device
// memory that is safe because each device runs its work on one stream, in order.
std::unique_ptr<Allocator> make_caching_allocator(std::unique_ptr<MemorySource> source);

// The process-wide caching allocator for host memory (64-byte aligned blocks).
Allocator& cpu_allocator();

}  // namespace eddy
