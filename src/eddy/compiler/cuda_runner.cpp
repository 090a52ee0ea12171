#include "eddy/compiler/cuda_runner.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eddy/backends/cuda/driver.h"
#include "eddy/compiler/nvrtc.h"
#include "eddy/ops/ops.h"

namespace eddy::compiler {
namespace {

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

// Launches `function`, a kernel of `plan`, on device `index`'s stream.
void launch_plan(CUfunction function, const KernelPlan& plan, const std::vector<void*>& pointers, int index) {
  long long outer = plan.outer, inner = plan.inner;
  std::vector<void*> values = pointers;
  std::vector<void*> arguments;
  for (void*& pointer : values) arguments.push_back(&pointer);
  arguments.push_back(&outer);
  arguments.push_back(&inner);
  constexpr int64_t kBlock = 256;
  const int64_t threads = threads_for(plan);
  if (threads <= 0) return;
  const cuda::Driver& d = cuda::use_device(index);
  const auto blocks = static_cast<unsigned>((threads + kBlock - 1) / kBlock);
  d.check(d.launch(function, blocks, 1, 1, kBlock, 1, 1, 0, cuda::stream(index), arguments.data(), nullptr),
          "cuLaunchKernel");
}

}  // namespace

std::string cuda_device_architecture() { return cuda::architecture(0); }

struct CudaKernelSet::Loaded {
  std::once_flag once;
  std::vector<CUfunction> functions;
};

CudaKernelSet::CudaKernelSet(const std::vector<KernelPlan>& plans, Device device)
    : device_(device), source_(render_cuda_source(plans)), loaded_(std::make_unique<Loaded>()) {
  for (const KernelPlan& plan : plans) names_.push_back(plan.name);
  const std::string architecture = cuda::unavailable_reason(device.index).empty() ? cuda::architecture(device.index)
                                                                                   : "compute_90";
  ptx_ = compile_cuda_to_ptx(source_, architecture);
}

// The module stays loaded for the process: a program's kernels may still be queued on the
// stream when the program goes.
CudaKernelSet::~CudaKernelSet() = default;

void CudaKernelSet::launch(size_t k, const KernelPlan& plan, const std::vector<void*>& pointers) const {
  // A failed load throws out of call_once, which then runs again at the next launch.
  std::call_once(loaded_->once, [&] {
    const cuda::Driver& d = cuda::use_device(device_.index);
    CUmodule module = nullptr;
    d.check(d.load_module(&module, ptx_.c_str()), "cuModuleLoadData");
    std::vector<CUfunction> functions;
    for (const std::string& name : names_) {
      functions.push_back(nullptr);
      d.check(d.get_function(&functions.back(), module, name.c_str()), "cuModuleGetFunction");
    }
    loaded_->functions = std::move(functions);
  });
  launch_plan(loaded_->functions[k], plan, pointers, device_.index);
}

std::vector<Tensor> run_cuda_kernel(const KernelPlan& plan, const std::string& ptx, const std::vector<Tensor>& inputs) {
  EDDY_CHECK(inputs.size() == plan.inputs.size(), "run_cuda_kernel: ", plan.name, " takes ", plan.inputs.size(),
             " inputs, got ", inputs.size());
  const Device gpu = Device::cuda(0);
  const cuda::Driver& d = cuda::use_device(0);
  CUmodule module = nullptr;
  d.check(d.load_module(&module, ptx.c_str()), "cuModuleLoadData");
  std::unique_ptr<CUmod_st, decltype(d.unload_module)> loaded(module, d.unload_module);
  CUfunction function = nullptr;
  d.check(d.get_function(&function, module, plan.name.c_str()), "cuModuleGetFunction");

  std::vector<Tensor> operands;
  for (size_t k = 0; k < inputs.size(); ++k) operands.push_back(to(kernel_operand(plan, plan.inputs[k], inputs[k]), gpu));
  // A sum to one element adds into its output, and a sum of an empty domain is its zeros.
  std::vector<Tensor> outputs{zeros(plan.output_shape, plan.output_dtype, gpu)};
  for (const KernelSideOutput& side : plan.side_outputs) outputs.push_back(zeros(plan.domain, side.dtype, gpu));
  std::vector<void*> pointers;
  for (const Tensor& operand : operands) pointers.push_back(element_address(operand));
  for (const Tensor& output : outputs) pointers.push_back(element_address(output));
  launch_plan(function, plan, pointers, 0);
  std::vector<Tensor> host_outputs;
  for (const Tensor& output : outputs) host_outputs.push_back(to(output, cpu()));  // waits for the kernel
  return host_outputs;
}

}  // namespace eddy::compiler
