#include "eddy/core/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace eddy {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kSmallestBlock = 256;

// Blocks are rounded up to a power of two below 1 MiB and to 1 MiB multiples above, which
// bounds waste while letting equal-shaped tensors share blocks.
size_t block_size(size_t bytes) {
  if (bytes <= kSmallestBlock) return kSmallestBlock;
  constexpr size_t kMiB = size_t{1} << 20;
  if (bytes < kMiB) return std::bit_ceil(bytes);
  return (bytes + kMiB - 1) / kMiB * kMiB;
}

class CachingCpuAllocator final : public Allocator {
 public:
  ~CachingCpuAllocator() override { empty_cache(); }

  void* allocate(size_t bytes) override {
    size_t size = block_size(bytes);
    std::lock_guard lock(mutex_);
    auto& list = free_lists_[size];
    void* ptr;
    if (!list.empty()) {
      ptr = list.back();
      list.pop_back();
      stats_.bytes_cached -= static_cast<int64_t>(size);
      ++stats_.cache_hits;
    } else {
      ptr = std::aligned_alloc(kAlignment, size);
      if (!ptr) {
        release_cache_locked();
        ptr = std::aligned_alloc(kAlignment, size);
        if (!ptr) throw std::bad_alloc();
      }
      ++stats_.system_allocations;
    }
    stats_.bytes_in_use += static_cast<int64_t>(size);
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    return ptr;
  }

  void deallocate(void* ptr, size_t bytes) noexcept override {
    size_t size = block_size(bytes);
    std::lock_guard lock(mutex_);
    stats_.bytes_in_use -= static_cast<int64_t>(size);
    // Keeping the block may need a larger free list; when memory is exhausted (which is when
    // most blocks are freed, as an out-of-memory error unwinds) it goes back to the system.
    try {
      free_lists_[size].push_back(ptr);
      stats_.bytes_cached += static_cast<int64_t>(size);
    } catch (const std::bad_alloc&) {
      std::free(ptr);
    }
  }

  AllocatorStats stats() const override {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  void empty_cache() override {
    std::lock_guard lock(mutex_);
    release_cache_locked();
  }

  void reset_peak() override {
    std::lock_guard lock(mutex_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

 private:
  void release_cache_locked() {
    for (auto& [size, list] : free_lists_) {
      for (void* ptr : list) std::free(ptr);
      list.clear();
    }
    stats_.bytes_cached = 0;
  }

  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_lists_;
  AllocatorStats stats_;
};

}  // namespace

Allocator& cpu_allocator() {
  // Leaked on purpose: tensors in static objects may be freed after main returns.
  static auto* allocator = new CachingCpuAllocator();
  return *allocator;
}

}  // namespace eddy
