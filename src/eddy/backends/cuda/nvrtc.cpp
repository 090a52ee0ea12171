#include "eddy/backends/cuda/nvrtc.h"

#include <nvrtc.h>

#include <memory>

#include "eddy/backends/cuda/cuda_libraries.h"
#include "eddy/backends/cuda/dynamic_library.h"
#include "eddy/core/error.h"

namespace eddy::cuda {
namespace {

// The NVRTC calls eddy uses, bound on first use (dynamic_library.h).
struct Nvrtc {
  DynamicLibrary library{EDDY_NVRTC_SONAME, EDDY_CUDA_LIBRARY_DIR};
  decltype(&nvrtcGetErrorString) error_string = nullptr;
  decltype(&nvrtcCreateProgram) create_program = nullptr;
  decltype(&nvrtcDestroyProgram) destroy_program = nullptr;
  decltype(&nvrtcAddNameExpression) add_name_expression = nullptr;
  decltype(&nvrtcCompileProgram) compile_program = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetLoweredName) lowered_name = nullptr;
  decltype(&nvrtcGetPTXSize) ptx_size = nullptr;
  decltype(&nvrtcGetPTX) ptx = nullptr;

  Nvrtc() {
    library.bind(error_string, "nvrtcGetErrorString");
    library.bind(create_program, "nvrtcCreateProgram");
    library.bind(destroy_program, "nvrtcDestroyProgram");
    library.bind(add_name_expression, "nvrtcAddNameExpression");
    library.bind(compile_program, "nvrtcCompileProgram");
    library.bind(log_size, "nvrtcGetProgramLogSize");
    library.bind(log, "nvrtcGetProgramLog");
    library.bind(lowered_name, "nvrtcGetLoweredName");
    library.bind(ptx_size, "nvrtcGetPTXSize");
    library.bind(ptx, "nvrtcGetPTX");
  }
};

const Nvrtc& nvrtc() { return opened<Nvrtc>("compiling CUDA kernels"); }

void check(nvrtcResult result, const char* call) {
  EDDY_CHECK(result == NVRTC_SUCCESS, "nvrtc: ", call, " failed: ", nvrtc().error_string(result));
}

}  // namespace

CompiledSource compile_to_ptx(const std::string& source, const std::string& architecture,
                              const std::vector<std::string>& name_expressions) {
  const Nvrtc& library = nvrtc();
  nvrtcProgram program = nullptr;
  check(library.create_program(&program, source.c_str(), "eddy.cu", 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(&program,
                                                               [](nvrtcProgram* p) { nvrtc().destroy_program(p); });
  for (const std::string& name : name_expressions) {
    check(library.add_name_expression(program, name.c_str()), "nvrtcAddNameExpression");
  }
  const std::string arch_option = "--gpu-architecture=" + architecture;
  // --fmad=false for the reason the CPU kernels are built with -ffp-contract=off: each operation
  // rounds as it does on the CPU.
  const char* options[] = {arch_option.c_str(), "--std=c++17", "-default-device", "--fmad=false"};
  const nvrtcResult compiled = library.compile_program(program, 4, options);
  if (compiled != NVRTC_SUCCESS) {
    size_t log_size = 0;
    library.log_size(program, &log_size);
    std::string log(log_size, '\0');
    library.log(program, log.data());
    throw Error(std::string("nvrtc: CUDA kernels failed to compile for ") + architecture + ": " +
                library.error_string(compiled) + "\n" + log);
  }
  CompiledSource result;
  for (const std::string& name : name_expressions) {
    const char* lowered = nullptr;
    check(library.lowered_name(program, name.c_str(), &lowered), "nvrtcGetLoweredName");
    result.lowered_names.emplace_back(lowered);
  }
  size_t ptx_size = 0;
  check(library.ptx_size(program, &ptx_size), "nvrtcGetPTXSize");
  result.ptx.assign(ptx_size, '\0');
  check(library.ptx(program, result.ptx.data()), "nvrtcGetPTX");
  if (!result.ptx.empty() && result.ptx.back() == '\0') result.ptx.pop_back();
  return result;
}

}  // namespace eddy::cuda
