#include "eddy/backends/cuda/driver.h"


#include <array>
#include <mutex>

#include "eddy/backends/cuda/dynamic_library.h"
#include "eddy/core/error.h"

namespace eddy::cuda {
namespace {

Driver open_driver() {
  Driver d;
  DynamicLibrary library("libcuda.so.1");
  library.bind(d.init, EDDY_CUDA_SYMBOL(cuInit));
  library.bind(d.error_string, EDDY_CUDA_SYMBOL(cuGetErrorString));
  library.bind(d.device_count, EDDY_CUDA_SYMBOL(cuDeviceGetCount));
  library.bind(d.device_get, EDDY_CUDA_SYMBOL(cuDeviceGet));
  library.bind(d.attribute, EDDY_CUDA_SYMBOL(cuDeviceGetAttribute));
  library.bind(d.retain_context, EDDY_CUDA_SYMBOL(cuDevicePrimaryCtxRetain));
  library.bind(d.set_context, EDDY_CUDA_SYMBOL(cuCtxSetCurrent));
  library.bind(d.create_stream, EDDY_CUDA_SYMBOL(cuStreamCreate));
  library.bind(d.synchronize_stream, EDDY_CUDA_SYMBOL(cuStreamSynchronize));
  library.bind(d.load_module, EDDY_CUDA_SYMBOL(cuModuleLoadData));
  library.bind(d.unload_module, EDDY_CUDA_SYMBOL(cuModuleUnload));
  library.bind(d.get_function, EDDY_CUDA_SYMBOL(cuModuleGetFunction));
  library.bind(d.allocate, EDDY_CUDA_SYMBOL(cuMemAlloc));
  library.bind(d.release, EDDY_CUDA_SYMBOL(cuMemFree));
  library.bind(d.to_device_async, EDDY_CUDA_SYMBOL(cuMemcpyHtoDAsync));
  library.bind(d.to_host_async, EDDY_CUDA_SYMBOL(cuMemcpyDtoHAsync));
  library.bind(d.fill_bytes_async, EDDY_CUDA_SYMBOL(cuMemsetD8Async));
  library.bind(d.launch, EDDY_CUDA_SYMBOL(cuLaunchKernel));
  if (!library.unavailable().empty()) {
    d.unavailable = "no NVIDIA driver: " + library.unavailable();
    return d;
  }
  if (const CUresult result = d.init(0); result != CUDA_SUCCESS) {
    d.unavailable = "cuInit failed: " + d.describe(result);
    return d;
  }
  if (const CUresult result = d.device_count(&d.devices); result != CUDA_SUCCESS || d.devices == 0) {
    d.unavailable = result == CUDA_SUCCESS ? std::string("the NVIDIA driver sees no CUDA device")
                                           : "cuDeviceGetCount failed: " + d.describe(result);
  }
  return d;
}

constexpr int kMaxDevices = 16;

// A device's primary context and stream, made on first use.
struct DeviceState {
  std::once_flag opened;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  std::string failure;  // why the context or stream could not be made
};

std::array<DeviceState, kMaxDevices>& device_states() {
  static std::array<DeviceState, kMaxDevices> states;
  return states;
}

}  // namespace

std::string Driver::describe(CUresult result) const {
  const char* text = nullptr;
  if (error_string) error_string(result, &text);
  return text ? text : "CUDA error " + std::to_string(static_cast<int>(result));
}

void Driver::check(CUresult result, const char* call) const {
  EDDY_CHECK(result == CUDA_SUCCESS, "CUDA: ", call, " failed: ", describe(result));
}

const Driver& driver() {
  static const Driver opened = open_driver();
  return opened;
}

std::string unavailable_reason(int index) {
  const Driver& d = driver();
  if (!d.unavailable.empty()) return d.unavailable;
  if (index < 0 || index >= d.devices || index >= kMaxDevices) {
    return "there is no CUDA device " + std::to_string(index) + " (the driver sees " + std::to_string(d.devices) +
           (d.devices == 1 ? " device)" : " devices)");
  }
  return {};
}

const Driver& use_device(int index) {
  const std::string unavailable = unavailable_reason(index);
  EDDY_CHECK(unavailable.empty(), "cuda:", index, ": ", unavailable);
  const Driver& d = driver();
  DeviceState& state = device_states()[index];
  std::call_once(state.opened, [&] {
    CUdevice device = 0;
    CUresult result = d.device_get(&device, index);
    if (result == CUDA_SUCCESS) result = d.retain_context(&state.context, device);
    if (result == CUDA_SUCCESS) result = d.set_context(state.context);
    if (result == CUDA_SUCCESS) result = d.create_stream(&state.stream, CU_STREAM_NON_BLOCKING);
    if (result != CUDA_SUCCESS) state.failure = "opening the device failed: " + d.describe(result);
  });
  EDDY_CHECK(state.failure.empty(), "cuda:", index, ": ", state.failure);
  d.check(d.set_context(state.context), "cuCtxSetCurrent");
  return d;
}

CUstream stream(int index) { return device_states()[index].stream; }

void synchronize(int index) {
  const Driver& d = use_device(index);
  d.check(d.synchronize_stream(stream(index)), "cuStreamSynchronize (an earlier kernel's own failure shows here)");
}

std::string architecture(int index) {
  const Driver& d = use_device(index);
  CUdevice device = 0;
  d.check(d.device_get(&device, index), "cuDeviceGet");
  int major = 0, minor = 0;
  d.check(d.attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device), "cuDeviceGetAttribute");
  d.check(d.attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device), "cuDeviceGetAttribute");
  return "compute_" + std::to_string(major) + std::to_string(minor);
}

}  // namespace eddy::cuda
