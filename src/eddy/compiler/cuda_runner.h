#pragma once
// Runs one generated CUDA kernel (render_cuda_source, then compile_cuda_to_ptx) on GPU 0 over
// host tensors, to check it against the CPU kernels: the operands go to the GPU through the CUDA
// backend, the kernel runs with the geometry its epilogue needs, and the outputs come back.

#include <string>
#include <vector>

#include "eddy/compiler/codegen.h"
#include "eddy/core/tensor.h"

namespace eddy::compiler {

// Empty when a kernel can run on GPU 0 here; otherwise why not: a build without the CUDA toolkit,
// no driver, no device, or the driver's own error.
std::string cuda_unavailable_reason();

// GPU 0's virtual architecture for compile_cuda_to_ptx, e.g. "compute_90" on an H100 or H200.
// Throws eddy::Error with cuda_unavailable_reason() when there is no GPU to ask.
std::string cuda_device_architecture();

// Runs the kernel `plan.name` of `ptx` on GPU 0 over host tensors `inputs`, one per plan.inputs in
// that order, and returns host tensors: the root's output, then each side output. Throws
// eddy::Error naming the failing driver call (a PTX the driver cannot load says so here).
std::vector<Tensor> run_cuda_kernel(const KernelPlan& plan, const std::string& ptx, const std::vector<Tensor>& inputs);

}  // namespace eddy::compiler
