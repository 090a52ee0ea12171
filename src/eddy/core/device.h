#pragma once
// Where a tensor's storage lives. Backends register themselves per DeviceType.

#include <cstdint>
#include <iosfwd>
#include <string_view>

namespace eddy {

enum class DeviceType : uint8_t { cpu, cuda };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  bool operator==(const Device&) const = default;

  // NVIDIA GPU `index`, as CUDA numbers them.
  static Device cuda(int index = 0) { return Device{DeviceType::cuda, index}; }
};

inline Device cpu() { return Device{DeviceType::cpu, 0}; }
std::ostream& operator<<(std::ostream& out, Device device);
// "cpu", "cuda" (GPU 0) or "cuda:N"; throws eddy::Error quoting `text` otherwise.
Device parse_device(std::string_view text);

}  // namespace eddy
