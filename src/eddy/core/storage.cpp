#include "eddy/core/storage.h"

#include <array>
#include <charconv>
#include <ostream>

#include "eddy/core/error.h"

namespace eddy {
namespace {
Allocator& the_cpu_allocator(int) { return cpu_allocator(); }

thread_local Device current_default_device = cpu();

std::array<AllocatorLookup, kNumDeviceTypes>& allocators() {
  static std::array<AllocatorLookup, kNumDeviceTypes> table{&the_cpu_allocator, nullptr};
  return table;
}
}  // namespace

std::string to_string(Device device) {
  return (device.type == DeviceType::cpu ? "cpu:" : "cuda:") + std::to_string(device.index);
}

std::ostream& operator<<(std::ostream& out, Device device) { return out << to_string(device); }

Device default_device() { return current_default_device; }

DefaultDeviceScope::DefaultDeviceScope(Device device) : previous_(current_default_device) {
  current_default_device = device;
}

DefaultDeviceScope::~DefaultDeviceScope() { current_default_device = previous_; }

Device parse_device(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return Device::cuda(0);
  int index = -1;
  if (text.starts_with("cuda:")) {
    const std::string_view digits = text.substr(5);
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (error != std::errc() || end != digits.data() + digits.size()) index = -1;
  }
  EDDY_CHECK(index >= 0, "unknown device '", text, "': expected cpu, cuda or cuda:N");
  return Device::cuda(index);
}

Allocator& allocator_for(Device device) {
  const AllocatorLookup lookup = allocators()[static_cast<int>(device.type)];
  EDDY_CHECK(lookup, "no backend is available for device ", device,
             " (this build has no kernels for it: build eddy with the CUDA toolkit for cuda devices)");
  return lookup(device.index);
}

void register_allocator(DeviceType type, AllocatorLookup lookup) {
  allocators()[static_cast<int>(type)] = lookup;
}

std::shared_ptr<Storage> Storage::allocate(size_t bytes, Device device) {
  Allocator& allocator = allocator_for(device);
  void* data = bytes ? allocator.allocate(bytes) : nullptr;
  return std::shared_ptr<Storage>(new Storage(data, bytes, device, &allocator, {}));
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t bytes, Device device,
                                       std::function<void(void*)> release) {
  return std::shared_ptr<Storage>(new Storage(data, bytes, device, nullptr, std::move(release)));
}

std::shared_ptr<Storage> Storage::abstract(size_t bytes, Device device) {
  return std::shared_ptr<Storage>(new Storage(nullptr, bytes, device, nullptr, {}, true));
}

Storage::~Storage() {
  if (release_) {
    release_(data_);
  } else if (allocator_ && data_) {
    allocator_->deallocate(data_, bytes_);
  }
}

}  // namespace eddy
