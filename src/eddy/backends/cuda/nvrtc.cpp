#include "eddy/backends/cuda/nvrtc.h"

#include <nvrtc.h>

#include <memory>

#include "eddy/core/error.h"

namespace eddy::cuda {
namespace {

void check(nvrtcResult result, const char* call) {
  EDDY_CHECK(result == NVRTC_SUCCESS, "nvrtc: ", call, " failed: ", nvrtcGetErrorString(result));
}

}  // namespace

CompiledSource compile_to_ptx(const std::string& source, const std::string& architecture,
                              const std::vector<std::string>& name_expressions) {
  nvrtcProgram program = nullptr;
  check(nvrtcCreateProgram(&program, source.c_str(), "eddy.cu", 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(&program, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
  for (const std::string& name : name_expressions) check(nvrtcAddNameExpression(program, name.c_str()), "nvrtcAddNameExpression");
  const std::string arch_option = "--gpu-architecture=" + architecture;
  // --fmad=false for the reason the CPU kernels are built with -ffp-contract=off: each operation
  // rounds as it does on the CPU.
  const char* options[] = {arch_option.c_str(), "--std=c++17", "-default-device", "--fmad=false"};
  const nvrtcResult compiled = nvrtcCompileProgram(program, 4, options);
  if (compiled != NVRTC_SUCCESS) {
    size_t log_size = 0;
    nvrtcGetProgramLogSize(program, &log_size);
    std::string log(log_size, '\0');
    nvrtcGetProgramLog(program, log.data());
    throw Error(std::string("nvrtc: CUDA kernels failed to compile for ") + architecture + ": " +
                nvrtcGetErrorString(compiled) + "\n" + log);
  }
  CompiledSource result;
  for (const std::string& name : name_expressions) {
    const char* lowered = nullptr;
    check(nvrtcGetLoweredName(program, name.c_str(), &lowered), "nvrtcGetLoweredName");
    result.lowered_names.emplace_back(lowered);
  }
  size_t ptx_size = 0;
  check(nvrtcGetPTXSize(program, &ptx_size), "nvrtcGetPTXSize");
  result.ptx.assign(ptx_size, '\0');
  check(nvrtcGetPTX(program, result.ptx.data()), "nvrtcGetPTX");
  if (!result.ptx.empty() && result.ptx.back() == '\0') result.ptx.pop_back();
  return result;
}

}  // namespace eddy::cuda
