#include "eddy/core/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace eddy {

size_t caching_block_size(size_t bytes) {
  constexpr size_t kSmallestBlock = 256;
  if (bytes <= kSmallestBlock) return kSmallestBlock;
  constexpr size_t kMiB = size_t{1} << 20;
  if (bytes < kMiB) return std::bit_ceil(bytes);
  return (bytes + kMiB - 1) / kMiB * kMiB;
}

namespace {

class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(std::unique_ptr<MemorySource> source) : source_(std::move(source)) {}
  ~CachingAllocator() override { empty_cache(); }

  void* allocate(size_t bytes) override {
    size_t size = caching_block_size(bytes);
    std::lock_guard lock(mutex_);
    auto& list = free_lists_[size];
    void* ptr;
    if (!list.empty()) {
      ptr = list.back();
      list.pop_back();
      stats_.bytes_cached -= static_cast<int64_t>(size);
      ++stats_.cache_hits;
    } else {
      ptr = source_->get(size);
      if (!ptr) {
        release_cache_locked();
        ptr = source_->get(size);
        if (!ptr) source_->exhausted(size, stats_);
      }
      ++stats_.system_allocations;
    }
    stats_.bytes_in_use += static_cast<int64_t>(size);
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    return ptr;
  }

  void deallocate(void* ptr, size_t bytes) noexcept override {
    size_t size = caching_block_size(bytes);
    std::lock_guard lock(mutex_);
    stats_.bytes_in_use -= static_cast<int64_t>(size);
    // Keeping the block may need a larger free list; when memory is exhausted (which is when
    // most blocks are freed, as an out-of-memory error unwinds) it goes back to the source.
    try {
      free_lists_[size].push_back(ptr);
      stats_.bytes_cached += static_cast<int64_t>(size);
    } catch (const std::bad_alloc&) {
      source_->put(ptr);
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
      for (void* ptr : list) source_->put(ptr);
      list.clear();
    }
    stats_.bytes_cached = 0;
  }

  std::unique_ptr<MemorySource> source_;
  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_lists_;
  AllocatorStats stats_;
};

class HostMemory final : public MemorySource {
 public:
  void* get(size_t bytes) override { return std::aligned_alloc(kAlignment, bytes); }
  void put(void* ptr) noexcept override { std::free(ptr); }
  [[noreturn]] void exhausted(size_t, const AllocatorStats&) override { throw std::bad_alloc(); }

 private:
  static constexpr size_t kAlignment = 64;
};

}  // namespace

std::unique_ptr<Allocator> make_caching_allocator(std::unique_ptr<MemorySource> source) {
  return std::make_unique<CachingAllocator>(std::move(source));
}

Allocator& cpu_allocator() {
  // Leaked on purpose: tensors in static objects may be freed after main returns.
  static Allocator* allocator = make_caching_allocator(std::make_unique<HostMemory>()).release();
  return *allocator;
}

}  // namespace eddy
