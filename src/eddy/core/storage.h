#pragma once
// A reference-counted block of memory on one device. Views share a Storage.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "eddy/core/allocator.h"
#include "eddy/core/device.h"

namespace eddy {

class Storage {
 public:
  // Memory from the device's caching allocator.
  static std::shared_ptr<Storage> allocate(size_t bytes, Device device);
  // Memory owned by someone else (a NumPy array, a mapped file); `release` runs when the last
  // view is gone.
  static std::shared_ptr<Storage> wrap(void* data, size_t bytes, Device device,
                                       std::function<void(void*)> release);
  // No memory, only the size and device: the storage of an abstract tensor (Tensor::abstract),
  // which abstract tracing makes to stand for values that are never computed.
  static std::shared_ptr<Storage> abstract(size_t bytes, Device device);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool is_abstract() const { return abstract_; }
  // Memory owned by someone else (wrap): it may change without eddy writing to it.
  bool is_borrowed() const { return static_cast<bool>(release_); }
  // Counts the writes in place into this memory (Tensor::copy_, fill_), so that the backward pass
  // can refuse a value it saved that was written since (autodiff/backward.cpp).
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void note_write() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  Storage(void* data, size_t bytes, Device device, Allocator* allocator,
          std::function<void(void*)> release, bool abstract = false)
      : data_(data), bytes_(bytes), device_(device), allocator_(allocator),
        release_(std::move(release)), abstract_(abstract) {}

  void* data_;
  size_t bytes_;
  Device device_;
  Allocator* allocator_;                 // set for allocator-owned memory
  std::function<void(void*)> release_;  // set for wrapped memory
  bool abstract_;
  std::atomic<uint64_t> version_{0};
};

// Allocators by device: the CPU's is built in, other backends register a lookup for their type
// that gives each device index its own allocator.
Allocator& allocator_for(Device device);
using AllocatorLookup = Allocator& (*)(int device_index);
void register_allocator(DeviceType type, AllocatorLookup lookup);

}  // namespace eddy
