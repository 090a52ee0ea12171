#include "eddy/compiler/cuda_runner.h"

#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "eddy/core/error.h"

namespace eddy::compiler {
namespace {

// The exported name of a driver call: cuda.h maps most names to versioned ones (cuMemAlloc to
// cuMemAlloc_v2), and dlsym needs the one the library exports.
#define EDDY_CUDA_STRING(name) #name
#define EDDY_CUDA_SYMBOL(name) EDDY_CUDA_STRING(name)

// The driver calls used here, bound with dlsym, and GPU 0's primary context.
struct Driver {
  decltype(&cuInit) init = nullptr;
  decltype(&cuGetErrorString) error_string = nullptr;
  decltype(&cuDeviceGetCount) device_count = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetAttribute) attribute = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) retain_context = nullptr;
  decltype(&cuCtxSetCurrent) set_context = nullptr;
  decltype(&cuModuleLoadData) load_module = nullptr;
  decltype(&cuModuleUnload) unload_module = nullptr;
  decltype(&cuModuleGetFunction) get_function = nullptr;
  decltype(&cuMemAlloc) allocate = nullptr;
  decltype(&cuMemFree) release = nullptr;
  decltype(&cuMemcpyHtoD) to_device = nullptr;
  decltype(&cuMemcpyDtoH) to_host = nullptr;
  decltype(&cuMemsetD8) fill_bytes = nullptr;
  decltype(&cuLaunchKernel) launch = nullptr;
  decltype(&cuCtxSynchronize) synchronize = nullptr;
  CUdevice device = 0;
  CUcontext context = nullptr;
  std::string unavailable;  // why no kernel can run, or empty

  std::string describe(CUresult result) const {
    const char* text = nullptr;
    if (error_string) error_string(result, &text);
    return text ? text : "CUDA error " + std::to_string(static_cast<int>(result));
  }

  void check(CUresult result, const char* call) const {
    EDDY_CHECK(result == CUDA_SUCCESS, "CUDA: ", call, " failed: ", describe(result));
  }
};

Driver open_driver() {
  Driver d;
  // Never closed: the functions are used for as long as the process runs.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    d.unavailable = std::string("no NVIDIA driver: libcuda.so.1 cannot be opened (") + (why ? why : "") + ")";
    return d;
  }
  bool bound = true;
  auto bind = [&](auto& function, const char* name) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, name));
    if (!function && bound) {
      bound = false;
      d.unavailable = std::string("the NVIDIA driver's libcuda.so.1 has no ") + name;
    }
  };
  bind(d.init, EDDY_CUDA_SYMBOL(cuInit));
  bind(d.error_string, EDDY_CUDA_SYMBOL(cuGetErrorString));
  bind(d.device_count, EDDY_CUDA_SYMBOL(cuDeviceGetCount));
  bind(d.device_get, EDDY_CUDA_SYMBOL(cuDeviceGet));
  bind(d.attribute, EDDY_CUDA_SYMBOL(cuDeviceGetAttribute));
  bind(d.retain_context, EDDY_CUDA_SYMBOL(cuDevicePrimaryCtxRetain));
  bind(d.set_context, EDDY_CUDA_SYMBOL(cuCtxSetCurrent));
  bind(d.load_module, EDDY_CUDA_SYMBOL(cuModuleLoadData));
  bind(d.unload_module, EDDY_CUDA_SYMBOL(cuModuleUnload));
  bind(d.get_function, EDDY_CUDA_SYMBOL(cuModuleGetFunction));
  bind(d.allocate, EDDY_CUDA_SYMBOL(cuMemAlloc));
  bind(d.release, EDDY_CUDA_SYMBOL(cuMemFree));
  bind(d.to_device, EDDY_CUDA_SYMBOL(cuMemcpyHtoD));
  bind(d.to_host, EDDY_CUDA_SYMBOL(cuMemcpyDtoH));
  bind(d.fill_bytes, EDDY_CUDA_SYMBOL(cuMemsetD8));
  bind(d.launch, EDDY_CUDA_SYMBOL(cuLaunchKernel));
  bind(d.synchronize, EDDY_CUDA_SYMBOL(cuCtxSynchronize));
  if (!bound) return d;
  if (const CUresult result = d.init(0); result != CUDA_SUCCESS) {
    d.unavailable = "cuInit failed: " + d.describe(result);
    return d;
  }
  int count = 0;
  if (const CUresult result = d.device_count(&count); result != CUDA_SUCCESS || count == 0) {
    d.unavailable = result == CUDA_SUCCESS ? std::string("the NVIDIA driver sees no CUDA device")
                                           : "cuDeviceGetCount failed: " + d.describe(result);
    return d;
  }
  if (const CUresult result = d.device_get(&d.device, 0); result != CUDA_SUCCESS) {
    d.unavailable = "cuDeviceGet(0) failed: " + d.describe(result);
    return d;
  }
  if (const CUresult result = d.retain_context(&d.context, d.device); result != CUDA_SUCCESS) {
    d.unavailable = "cuDevicePrimaryCtxRetain failed: " + d.describe(result);
  }
  return d;
}

const Driver& driver() {
  static const Driver opened = open_driver();
  return opened;
}

const Driver& ready_driver() {
  const Driver& d = driver();
  EDDY_CHECK(d.unavailable.empty(), "CUDA: ", d.unavailable);
  d.check(d.set_context(d.context), "cuCtxSetCurrent");
  return d;
}

// Device memory freed when it goes out of scope.
class DeviceBuffer {
 public:
  DeviceBuffer(const Driver& d, size_t bytes) : driver_(d) {
    // A zero-byte allocation is an error; an empty tensor still gets a valid pointer.
    d.check(d.allocate(&pointer_, std::max<size_t>(bytes, 1)), "cuMemAlloc");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { driver_.release(pointer_); }

  CUdeviceptr* address() { return &pointer_; }
  CUdeviceptr pointer() const { return pointer_; }

 private:
  const Driver& driver_;
  CUdeviceptr pointer_ = 0;
};

size_t bytes_of(const Tensor& tensor) { return static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype()); }

// Threads the kernel's loop needs (codegen.cpp, cuda_loops): one per element, per output element
// of a sum over an axis, or a grid-stride loop for a sum to one element.
int64_t threads_for(const KernelPlan& plan) {
  constexpr int64_t kMaxSumAllThreads = 1 << 16;  // partial sums added with atomicAdd
  switch (plan.epilogue) {
    case Epilogue::none: return plan.outer * plan.inner;
    case Epilogue::sum_all: return std::min(plan.outer * plan.inner, kMaxSumAllThreads);
    case Epilogue::sum_leading: return plan.inner;
    case Epilogue::sum_trailing: return plan.outer;
  }
  return 0;
}

}  // namespace

std::string cuda_unavailable_reason() { return driver().unavailable; }

std::string cuda_device_architecture() {
  const Driver& d = ready_driver();
  int major = 0, minor = 0;
  d.check(d.attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d.device), "cuDeviceGetAttribute");
  d.check(d.attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d.device), "cuDeviceGetAttribute");
  return "compute_" + std::to_string(major) + std::to_string(minor);
}

std::vector<Tensor> run_cuda_kernel(const KernelPlan& plan, const std::string& ptx, const std::vector<Tensor>& inputs) {
  EDDY_CHECK(inputs.size() == plan.inputs.size(), "run_cuda_kernel: ", plan.name, " takes ", plan.inputs.size(),
             " inputs, got ", inputs.size());
  const Driver& d = ready_driver();
  CUmodule module = nullptr;
  d.check(d.load_module(&module, ptx.c_str()), "cuModuleLoadData");
  std::unique_ptr<CUmod_st, decltype(d.unload_module)> loaded(module, d.unload_module);
  CUfunction function = nullptr;
  d.check(d.get_function(&function, module, plan.name.c_str()), "cuModuleGetFunction");

  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor operand = kernel_operand(plan, plan.inputs[k], inputs[k]);
    buffers.push_back(std::make_unique<DeviceBuffer>(d, bytes_of(operand)));
    d.check(d.to_device(buffers.back()->pointer(), operand.raw_data(), bytes_of(operand)), "cuMemcpyHtoD");
  }
  std::vector<Tensor> outputs{Tensor::empty(plan.output_shape, plan.output_dtype)};
  for (const KernelSideOutput& side : plan.side_outputs) outputs.push_back(Tensor::empty(plan.domain, side.dtype));
  for (const Tensor& output : outputs) {
    buffers.push_back(std::make_unique<DeviceBuffer>(d, bytes_of(output)));
    // A sum to one element adds into its output, and a sum of an empty domain is its zeros.
    d.check(d.fill_bytes(buffers.back()->pointer(), 0, std::max<size_t>(bytes_of(output), 1)), "cuMemsetD8");
  }

  long long outer = plan.outer, inner = plan.inner;
  std::vector<void*> arguments;
  for (const std::unique_ptr<DeviceBuffer>& buffer : buffers) arguments.push_back(buffer->address());
  arguments.push_back(&outer);
  arguments.push_back(&inner);
  constexpr int64_t kBlock = 256;
  if (const int64_t threads = threads_for(plan); threads > 0) {
    const auto blocks = static_cast<unsigned>((threads + kBlock - 1) / kBlock);
    d.check(d.launch(function, blocks, 1, 1, kBlock, 1, 1, 0, nullptr, arguments.data(), nullptr), "cuLaunchKernel");
    d.check(d.synchronize(), "cuCtxSynchronize (the kernel's own failure shows here)");
  }
  const size_t first_output = inputs.size();
  for (size_t k = 0; k < outputs.size(); ++k) {
    d.check(d.to_host(outputs[k].raw_data(), buffers[first_output + k]->pointer(), bytes_of(outputs[k])),
            "cuMemcpyDtoH");
  }
  return outputs;
}

}  // namespace eddy::compiler
