#pragma once
// Runs generated CUDA kernels on an NVIDIA GPU, to check them against the CPU kernels. eddy has
// no CUDA tensor backend yet, so this does not run a compiled program on a GPU: it copies host
// tensors to the device, launches one fused kernel (render_cuda_source, then
// compile_cuda_to_ptx) with the geometry its epilogue needs, and copies the outputs back.
//
// The driver (libcuda.so.1) is opened when first needed, not linked, so eddy starts on machines
// without one, as CI's are.

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
