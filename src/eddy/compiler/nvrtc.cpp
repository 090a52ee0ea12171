#include "eddy/compiler/nvrtc.h"

#include <nvrtc.h>

#include <memory>
#include <vector>

#include "eddy/core/error.h"

namespace eddy::compiler {
namespace {

void check(nvrtcResult result, const char* call) {
  EDDY_CHECK(result == NVRTC_SUCCESS, "nvrtc: ", call, " failed: ", nvrtcGetErrorString(result));
}

}  // namespace

bool nvrtc_available() { return true; }

std::string compile_cuda_to_ptx(const std::string& source, const std::string& architecture) {
  nvrtcProgram program = nullptr;
  check(nvrtcCreateProgram(&program, source.c_str(), "eddy_fused.cu", 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(&program, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
  const std::string arch_option = "--gpu-architecture=" + architecture;
  // --fmad=false for the reason the CPU kernels are built with -ffp-contract=off: each operation
  // rounds as it does in eager eddy.
  const char* options[] = {arch_option.c_str(), "--std=c++17", "-default-device", "--fmad=false"};
  const nvrtcResult compiled = nvrtcCompileProgram(program, 4, options);
  if (compiled != NVRTC_SUCCESS) {
    size_t log_size = 0;
    nvrtcGetProgramLogSize(program, &log_size);
    std::string log(log_size, '\0');
    nvrtcGetProgramLog(program, log.data());
    throw Error(std::string("nvrtc: generated CUDA kernels failed to compile for ") + architecture + ": " +
                nvrtcGetErrorString(compiled) + "\n" + log);
  }
  size_t ptx_size = 0;
  check(nvrtcGetPTXSize(program, &ptx_size), "nvrtcGetPTXSize");
  std::string ptx(ptx_size, '\0');
  check(nvrtcGetPTX(program, ptx.data()), "nvrtcGetPTX");
  if (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

}  // namespace eddy::compiler
