#pragma once
// Runs generated CUDA kernels (render_cuda_source, compiled by NVRTC) on a GPU: a program's fused
// kernels over its device tensors (CudaKernelSet, which Program uses on cuda devices), and one
// kernel over host tensors, to check it against the CPU kernels (run_cuda_kernel).

#include <memory>
#include <string>
#include <vector>

#include "eddy/compiler/codegen.h"
#include "eddy/core/tensor.h"

namespace eddy::compiler {

// Whether GPU 0 can run kernels, and if not why, is core's device_unavailable_reason
// (core/backend.h).

// GPU 0's virtual architecture for compile_cuda_to_ptx, e.g. "compute_90" on an H100 or H200.
// Throws eddy::Error with device_unavailable_reason(Device::cuda(0)) when there is no GPU to ask.
std::string cuda_device_architecture();

// The fused kernels of one program for one GPU: compiled to PTX when made (which needs NVRTC,
// not a GPU), loaded onto the device at the first launch.
class CudaKernelSet {
 public:
  // `plans` must hold no complex values (render_cuda_source has no complex type); the PTX is for
  // `device`'s architecture when that device can be asked, and for compute_90 otherwise.
  CudaKernelSet(const std::vector<KernelPlan>& plans, Device device);
  ~CudaKernelSet();

  // Runs the kernel of `plan` (the k-th of those the set was made from) over device pointers:
  // its inputs in plan order, then the root's output and the side outputs, which must hold zeros
  // when the plan ends in a sum (it adds into them).
  void launch(size_t k, const KernelPlan& plan, const std::vector<void*>& pointers) const;

  const std::string& source() const { return source_; }

 private:
  struct Loaded;
  std::vector<std::string> names_;
  Device device_;
  std::string source_, ptx_;
  std::unique_ptr<Loaded> loaded_;
};

// Runs the kernel `plan.name` of `ptx` on GPU 0 over host tensors `inputs`, one per plan.inputs in
// that order, and returns host tensors: the root's output, then each side output. Throws
// eddy::Error naming the failing driver call (a PTX the driver cannot load says so here).
std::vector<Tensor> run_cuda_kernel(const KernelPlan& plan, const std::string& ptx, const std::vector<Tensor>& inputs);

}  // namespace eddy::compiler
