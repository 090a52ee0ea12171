// The build without the CUDA toolkit: CUDA source is still rendered, but not compiled.

#include "eddy/compiler/nvrtc.h"

#include "eddy/core/error.h"

namespace eddy::compiler {

bool nvrtc_available() { return false; }

std::string compile_cuda_to_ptx(const std::string&, const std::string&) {
  throw Error("nvrtc: this eddy was built without NVRTC (no CUDA toolkit found; CMake option EDDY_WITH_NVRTC)");
}

}  // namespace eddy::compiler
