#include "eddy/compiler/kernel_cache.h"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "eddy/core/error.h"

namespace eddy::compiler {
namespace {

namespace fs = std::filesystem;

// The compiler eddy itself was built with, unless $EDDY_CXX names another.
std::string compiler_command() {
  if (const char* chosen = std::getenv("EDDY_CXX"); chosen && *chosen) return chosen;
  return EDDY_KERNEL_CXX;
}

// -march=native ties a library to this CPU; the cache is per user and machine, like ccache's.
// -ffp-contract=off: GCC would otherwise fuse a * b + c into one FMA, rounding once where eager
// eddy, one op at a time, rounds twice; without it fused arithmetic equals eager bit for bit
// (compiled PINN steps measured no slower: docs/compiler.md).
std::string compiler_flags() { return "-std=c++17 -O3 -march=native -fPIC -shared -fopenmp -fno-math-errno -ffp-contract=off"; }

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// Runs `command`, returning its exit status and everything it printed.
std::pair<int, std::string> run(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  EDDY_CHECK(pipe, "compiler: could not run '", command, "'");
  std::array<char, 4096> buffer;
  while (size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

std::string quoted(const fs::path& path) {
  std::string text = "'";
  text += path.string();
  text += "'";
  return text;
}

}  // namespace

SharedLibrary::SharedLibrary(const fs::path& path) : handle_(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)), path_(path) {
  EDDY_CHECK(handle_, "compiler: could not load kernel library ", path, ": ", dlerror());
}

SharedLibrary::~SharedLibrary() { dlclose(handle_); }

void* SharedLibrary::symbol(const std::string& name) const {
  void* address = dlsym(handle_, name.c_str());
  EDDY_CHECK(address, "compiler: kernel library ", path_, " has no symbol ", name);
  return address;
}

fs::path kernel_cache_directory() {
  if (const char* chosen = std::getenv("EDDY_KERNEL_CACHE"); chosen && *chosen) return chosen;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "eddy" / "kernels";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/tmp") / ".cache" / "eddy" / "kernels";
}

LoadedKernels load_cpu_kernels(const std::string& source) {
  const std::string compiler = compiler_command();
  const std::string flags = compiler_flags();
  const fs::path directory = kernel_cache_directory();
  const std::string stem = "kernels-" + hex(fnv1a(compiler + "\n" + flags + "\n" + source));
  const fs::path library = directory / (stem + ".so");
  LoadedKernels loaded;
  if (fs::exists(library)) {
    loaded.library = std::make_shared<SharedLibrary>(library);
    loaded.from_cache = true;
    return loaded;
  }

  std::error_code error;
  fs::create_directories(directory, error);
  EDDY_CHECK(!error, "compiler: cannot create the kernel cache directory ", directory, " (", error.message(),
             "); set EDDY_KERNEL_CACHE to a writable directory");
  // Unique temporary names, renamed into place: concurrent processes (MPI ranks) compiling the
  // same kernels never see a half-written library.
  const std::string unique = stem + "." + std::to_string(getpid());
  const fs::path source_path = directory / (unique + ".cpp");
  const fs::path temporary = directory / (unique + ".so.tmp");
  {
    std::ofstream file(source_path);
    file << source;
    EDDY_CHECK(file.good(), "compiler: cannot write ", source_path);
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string command =
      compiler + " " + flags + " " + quoted(source_path) + " -o " + quoted(temporary) + " -lmvec -lm";
  auto [status, messages] = run(command);
  loaded.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (status != 0) {
    fs::remove(temporary, error);
    throw Error("compiler: the system compiler failed on generated kernels (kept in " + source_path.string() +
                "); command: " + command + "\n" + messages +
                (status == 127 ? "\nset EDDY_CXX to a C++ compiler" : ""));
  }
  fs::remove(source_path, error);
  fs::rename(temporary, library, error);
  EDDY_CHECK(!error, "compiler: cannot move ", temporary, " to ", library, ": ", error.message());
  loaded.library = std::make_shared<SharedLibrary>(library);
  return loaded;
}

}  // namespace eddy::compiler
