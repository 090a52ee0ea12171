#pragma once
// Where a tensor's storage lives. Backends register themselves per DeviceType.

#include <cstdint>
#include <iosfwd>
#include <string>
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
// "cpu:0", "cuda:1".
std::string to_string(Device device);
std::ostream& operator<<(std::ostream& out, Device device);
// "cpu", "cuda" (GPU 0) or "cuda:N"; throws eddy::Error quoting `text` otherwise.
Device parse_device(std::string_view text);

// Where creation ops put their output when the caller names no device: the CPU, unless a
// DefaultDeviceScope on the calling thread says otherwise. This is how a whole solver runs on a
// GPU (`device: cuda` in a problem file) without threading a device through every tensor it
// makes; code that must stay on the host (messages to MPI, a file's bytes) names cpu().
Device default_device();

class DefaultDeviceScope {
 public:
  explicit DefaultDeviceScope(Device device);
  ~DefaultDeviceScope();
  DefaultDeviceScope(const DefaultDeviceScope&) = delete;
  DefaultDeviceScope& operator=(const DefaultDeviceScope&) = delete;

 private:
  Device previous_;
};

}  // namespace eddy
