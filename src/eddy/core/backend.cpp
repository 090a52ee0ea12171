// The registry of kernels by device type. Backends register theirs when they are linked in
// (backends/cpu/backend.cpp for the CPU).

#include "eddy/core/backend.h"

#include <array>

namespace eddy {
namespace {
std::array<Backend*, kNumDeviceTypes>& backends() {
  static std::array<Backend*, kNumDeviceTypes> table{};
  return table;
}
}  // namespace

Backend& backend_for(Device device) {
  Backend* backend = backends()[static_cast<int>(device.type)];
  EDDY_CHECK(backend, "no kernels are registered for device ", device,
             " (was eddy built with that backend, and its library linked whole?)");
  return *backend;
}

void register_backend(DeviceType type, Backend* backend) {
  backends()[static_cast<int>(type)] = backend;
}

}  // namespace eddy
