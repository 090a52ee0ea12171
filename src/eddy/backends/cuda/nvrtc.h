#pragma once
// NVRTC, CUDA's run-time compiler: CUDA C++ source to PTX for one GPU architecture. The eager
// backend's kernels (kernel_source.cpp) and the compiler's fused ones (compiler/codegen.h) are
// both compiled here.

#include <string>
#include <vector>

namespace eddy::cuda {

struct CompiledSource {
  std::string ptx;
  // The mangled names of the requested name expressions ("eddy::fill<float>"), in their order.
  std::vector<std::string> lowered_names;
};

// Compiles `source` for `architecture` (e.g. "compute_90"), instantiating each of
// `name_expressions`. Throws eddy::Error with NVRTC's log when compilation fails.
CompiledSource compile_to_ptx(const std::string& source, const std::string& architecture,
                              const std::vector<std::string>& name_expressions = {});

}  // namespace eddy::cuda
