#include "eddy/core/storage.h"

#include <array>
#include <ostream>

#include "eddy/core/error.h"

namespace eddy {
namespace {
std::array<Allocator*, kNumDeviceTypes>& allocators() {
  static std::array<Allocator*, kNumDeviceTypes> table{&cpu_allocator(), nullptr};
  return table;
}
}  // namespace

std::ostream& operator<<(std::ostream& out, Device device) {
  return out << (device.type == DeviceType::cpu ? "cpu" : "cuda") << ":" << device.index;
}

Allocator& allocator_for(Device device) {
  Allocator* allocator = allocators()[static_cast<int>(device.type)];
  EDDY_CHECK(allocator, "no backend is available for device ", device,
             " (this build has no kernels for it)");
  return *allocator;
}

void register_allocator(DeviceType type, Allocator* allocator) {
  allocators()[static_cast<int>(type)] = allocator;
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
