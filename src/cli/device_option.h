#pragma once
// `--device DEVICE` of the training commands: the override `device=DEVICE`, so that the flag and
// a file's `device` key are one setting, checked in one place, and errors name the flag's value
// as a command-line override.

#include <string>
#include <vector>

namespace eddy::cli {

inline constexpr const char* kDeviceHelp =
    "cpu, cuda or cuda:N: where the run's tensors live, as the file's `device` key (docs/gpu.md)";

inline void add_device_override(const std::string& device, std::vector<std::string>& overrides) {
  if (!device.empty()) overrides.push_back("device=" + device);
}

}  // namespace eddy::cli
