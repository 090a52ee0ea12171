#pragma once
// Where a tensor's storage lives. Backends register themselves per DeviceType.

#include <cstdint>
#include <iosfwd>

namespace eddy {

enum class DeviceType : uint8_t { cpu, cuda };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  bool operator==(const Device&) const = default;
};

inline Device cpu() { return Device{DeviceType::cpu, 0}; }
std::ostream& operator<<(std::ostream& out, Device device);

}  // namespace eddy
