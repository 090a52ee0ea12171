#pragma once
// The CUDA driver, opened at run time (dlopen of libcuda.so.1) rather than linked, so every eddy
// program starts on machines without an NVIDIA driver, as CI's are, and says why only when a GPU
// is asked for. One primary context and one stream per device: kernels, copies and cuBLAS all
// run on that stream, in order, so memory freed by a finished op can be handed to the next op at
// once (the caching allocator relies on this).

#include <cuda.h>

#include <string>

namespace eddy::cuda {

// The driver calls eddy uses, bound with dlsym.
struct Driver {
  decltype(&cuInit) init = nullptr;
  decltype(&cuGetErrorString) error_string = nullptr;
  decltype(&cuDeviceGetCount) device_count = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetAttribute) attribute = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) retain_context = nullptr;
  decltype(&cuCtxSetCurrent) set_context = nullptr;
  decltype(&cuStreamCreate) create_stream = nullptr;
  decltype(&cuStreamSynchronize) synchronize_stream = nullptr;
  decltype(&cuModuleLoadData) load_module = nullptr;
  decltype(&cuModuleUnload) unload_module = nullptr;
  decltype(&cuModuleGetFunction) get_function = nullptr;
  decltype(&cuMemAlloc) allocate = nullptr;
  decltype(&cuMemFree) release = nullptr;
  decltype(&cuMemcpyHtoDAsync) to_device_async = nullptr;
  decltype(&cuMemcpyDtoHAsync) to_host_async = nullptr;
  decltype(&cuMemsetD8Async) fill_bytes_async = nullptr;
  decltype(&cuLaunchKernel) launch = nullptr;

  // Why no GPU can be used here (no driver, no device, a failed cuInit), or empty.
  std::string unavailable;
  int devices = 0;

  std::string describe(CUresult result) const;
  // Throws eddy::Error naming `call` and the driver's message when `result` is not success.
  void check(CUresult result, const char* call) const;
};

// The process's driver, opened on first use; never throws (see `unavailable`).
const Driver& driver();

// Empty when device `index` can be used; otherwise why not.
std::string unavailable_reason(int index = 0);

// The driver, with device `index`'s primary context made current on this thread; throws
// eddy::Error saying why when that device cannot be used.
const Driver& use_device(int index);

// Device `index`'s stream (made on first use); use_device(index) first.
CUstream stream(int index);

// Waits for everything queued on device `index`'s stream; a kernel's own failure shows here.
void synchronize(int index);

// "compute_90" on an H100 or H200: the virtual architecture NVRTC compiles device `index`'s
// kernels for.
std::string architecture(int index);

}  // namespace eddy::cuda
