#pragma once
// What the harnesses share: files named per process for readers that take a path, and the one
// exception type that bad input may end in (eddy::Error, core/error.h). Anything else that leaves
// LLVMFuzzerTestOneInput (another exception, a crash, a sanitizer report) is a finding.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "eddy/core/error.h"
#include "eddy/core/tensor.h"

namespace eddy::fuzz {

// A scratch folder of this process, /tmp/eddy-fuzz-<pid>, removed when the process ends.
inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("eddy-fuzz-" + std::to_string(::getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static Dir dir;
  return dir.path;
}

inline void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file named `name` in the scratch folder holding `bytes`, removed when this goes out of scope.
class TempFile {
 public:
  TempFile(const std::string& name, std::string_view bytes) : path_(scratch_dir() / name) { write_bytes(path_, bytes); }
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Reads every byte of a dense tensor, so that AddressSanitizer sees a tensor whose storage is
// shorter than its shape says.
inline void read_every_byte(const Tensor& tensor) {
  if (!tensor.defined() || tensor.is_abstract() || !tensor.is_contiguous()) return;
  const auto* bytes = static_cast<const unsigned char*>(tensor.raw_data());
  const size_t count = static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype());
  unsigned sum = 0;
  for (size_t i = 0; i < count; ++i) sum += bytes[i];
  volatile unsigned sink = sum;
  (void)sink;
}

// Runs `read`; eddy::Error, what bad input is documented to end in, is the expected outcome.
template <typename Read>
void expecting_errors(Read&& read) {
  try {
    read();
  } catch (const eddy::Error&) {
  }
}

}  // namespace eddy::fuzz
