#pragma once
// The CUDA driver and the toolkit's libraries (cuBLAS, cuFFT, NVRTC), opened with dlopen when
// first used instead of linked. The driver is not on machines without a GPU; the libraries'
// start-up, cuBLAS's static initialisers above all, cost every eddy process about 0.15 s and
// 255 MB before main when they were linked, GPU or not: every command, every `import eddy`,
// every test binary once per test.

#include <string>
#include <string_view>

namespace eddy::cuda {

// The exported name of a call whose header maps it to a versioned one (cuMemAlloc to
// cuMemAlloc_v2, cublasCreate to cublasCreate_v2): dlsym needs the name the library exports.
#define EDDY_CUDA_STRING(name) #name
#define EDDY_CUDA_SYMBOL(name) EDDY_CUDA_STRING(name)

class DynamicLibrary {
 public:
  // Opens `soname` as the system finds it (LD_LIBRARY_PATH, ld.so.conf), else in
  // `build_directory` (when given), the folder it was found in when eddy was built. Never
  // closed: its functions are used for as long as the process runs.
  explicit DynamicLibrary(const char* soname, const char* build_directory = nullptr);

  // Binds `function` to the library's `name`; the first that is missing is recorded in
  // unavailable().
  template <typename Function>
  void bind(Function*& function, const char* name) {
    function = reinterpret_cast<Function*>(symbol(name));
  }

  // Why the library, or a function bound so far, cannot be used ("libX.so.N cannot be opened
  // (...)", "libX.so.N has no f"); empty when all is there.
  const std::string& unavailable() const { return unavailable_; }
  // Throws eddy::Error saying that `what` needs this library and why it cannot be used.
  void require(std::string_view what) const;

 private:
  void* symbol(const char* name);

  void* handle_ = nullptr;
  std::string soname_;
  std::string unavailable_;  // empty while the library and every function bound so far are there
};

// The process's `Functions` (a struct holding a DynamicLibrary `library` and binding its function
// pointers when constructed), opened on first use; throws saying that `needed_for` needs the
// library when it or a function is missing.
template <typename Functions>
const Functions& opened(std::string_view needed_for) {
  static const Functions functions;
  functions.library.require(needed_for);
  return functions;
}

}  // namespace eddy::cuda
