// The build without the CUDA toolkit: CUDA source is still rendered, but not compiled or run.

#include "eddy/compiler/cuda_runner.h"
#include "eddy/compiler/nvrtc.h"
#include "eddy/core/error.h"

namespace eddy::compiler {
namespace {

const std::string kNoToolkit = "this eddy was built without the CUDA toolkit (CMake option EDDY_WITH_CUDA)";

}  // namespace

bool nvrtc_available() { return false; }

std::string compile_cuda_to_ptx(const std::string&, const std::string&) { throw Error("nvrtc: " + kNoToolkit); }

std::string cuda_unavailable_reason() { return kNoToolkit; }

std::string cuda_device_architecture() { throw Error("cuda:0: " + kNoToolkit); }

struct CudaKernelSet::Loaded {};

CudaKernelSet::CudaKernelSet(const std::vector<KernelPlan>&, Device device) : device_(device) {
  throw Error("compiler: no kernels for " + cat(device) + ": " + kNoToolkit);
}

CudaKernelSet::~CudaKernelSet() = default;

void CudaKernelSet::launch(size_t, const std::vector<void*>&) const { throw Error("cuda:0: " + kNoToolkit); }

std::vector<Tensor> run_cuda_kernel(const KernelPlan&, const std::string&, const std::vector<Tensor>&) {
  throw Error("cuda:0: " + kNoToolkit);
}

}  // namespace eddy::compiler
