#include "eddy/compiler/nvrtc.h"

#include "eddy/backends/cuda/nvrtc.h"

namespace eddy::compiler {

bool nvrtc_available() { return true; }

std::string compile_cuda_to_ptx(const std::string& source, const std::string& architecture) {
  return cuda::compile_to_ptx(source, architecture).ptx;
}

}  // namespace eddy::compiler
