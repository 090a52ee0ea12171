// The build without the CUDA toolkit: CUDA source is still rendered, but not compiled or run.

#include "eddy/compiler/cuda_runner.h"
#include "eddy/compiler/nvrtc.h"
#include "eddy/core/backend.h"
#include "eddy/core/error.h"

namespace eddy::compiler {
namespace {

const std::string kNoToolkit = "this eddy was built without the CUDA toolkit (CMake option EDDY_WITH_CUDA)";

// What a GPU run is refused with: core's reason, as the CUDA build gives its own.
[[noreturn]] void no_gpu() { throw Error("cuda:0: " + device_unavailable_reason(Device::cuda(0))); }

}  // namespace

bool nvrtc_available() { return false; }

std::string compile_cuda_to_ptx(const std::string&, const std::string&) { throw Error("nvrtc: " + kNoToolkit); }

std::string cuda_device_architecture() { no_gpu(); }

struct CudaKernelSet::Loaded {};

CudaKernelSet::CudaKernelSet(const std::vector<KernelPlan>&, Device device) : device_(device) {
  throw Error("compiler: no kernels for " + cat(device) + ": " + kNoToolkit);
}

CudaKernelSet::~CudaKernelSet() = default;

void CudaKernelSet::launch(size_t, const KernelPlan&, const std::vector<void*>&) const { no_gpu(); }

std::vector<Tensor> run_cuda_kernel(const KernelPlan&, const std::string&, const std::vector<Tensor>&) { no_gpu(); }

}  // namespace eddy::compiler
