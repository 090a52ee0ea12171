#pragma once
// Native code for generated kernels: C++ source is compiled by the system compiler into a shared
// library, cached on disk under a hash of its content and build command, and loaded with dlopen.
// A second run of the same program finds the library and starts without compiling.

#include <filesystem>
#include <memory>
#include <string>

namespace eddy::compiler {

class SharedLibrary {
 public:
  explicit SharedLibrary(const std::filesystem::path& path);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  // The address of an extern "C" symbol; throws eddy::Error naming it when missing.
  void* symbol(const std::string& name) const;

 private:
  void* handle_;
  std::filesystem::path path_;
};

struct LoadedKernels {
  std::shared_ptr<SharedLibrary> library;
  bool from_cache = false;       // found on disk: nothing was compiled
  double compile_seconds = 0;    // time spent in the system compiler
};

// $EDDY_KERNEL_CACHE, else $XDG_CACHE_HOME/eddy/kernels, else ~/.cache/eddy/kernels, the home
// folder being $HOME or, without it, the user's from the password database.
std::filesystem::path kernel_cache_directory();

// Compiles (or finds) `source` and loads it. Throws eddy::Error with the compiler's messages when
// compilation fails, names $EDDY_CXX when no compiler is found, and refuses a cached library that
// another user owns (loading it would run that user's code).
LoadedKernels load_cpu_kernels(const std::string& source);

}  // namespace eddy::compiler
