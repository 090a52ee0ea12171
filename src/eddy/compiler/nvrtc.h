#pragma once
// CUDA code generation's back end: NVRTC (backends/cuda/nvrtc.h) compiles the CUDA source that
// render_cuda_source writes into PTX for a chosen architecture. cuda_runner.h loads and launches
// it on a GPU, one kernel over host tensors, to check it.

#include <string>

namespace eddy::compiler {

// Whether this build links NVRTC (CMake option EDDY_WITH_CUDA, on when the CUDA toolkit is found).
bool nvrtc_available();

// PTX for `architecture` (e.g. "compute_90" for H100/H200). Throws eddy::Error with NVRTC's log
// when compilation fails, or when this build has no NVRTC.
std::string compile_cuda_to_ptx(const std::string& source, const std::string& architecture = "compute_90");

}  // namespace eddy::compiler
