#include "eddy/backends/cuda/dynamic_library.h"

#include <dlfcn.h>

#include "eddy/core/error.h"

namespace eddy::cuda {

DynamicLibrary::DynamicLibrary(const char* soname, const char* build_directory) : soname_(soname) {
  handle_ = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (handle_) return;
  const char* why = dlerror();
  const std::string system_error = why ? why : "";
  if (build_directory) handle_ = dlopen((std::string(build_directory) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) unavailable_ = soname_ + " cannot be opened (" + system_error + ")";
}

void* DynamicLibrary::symbol(const char* name) {
  if (!handle_) return nullptr;
  void* found = dlsym(handle_, name);
  if (!found && unavailable_.empty()) unavailable_ = soname_ + " has no " + name;
  return found;
}

void DynamicLibrary::require(std::string_view what) const {
  EDDY_CHECK(unavailable_.empty(), what, " needs the CUDA toolkit's ", soname_, ": ", unavailable_);
}

}  // namespace eddy::cuda
