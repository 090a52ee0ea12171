#pragma once
// Files are written to a temporary name beside the target and renamed into place, so a crash or
// kill never leaves a truncated file under the real name.

#include <string>
#include <string_view>

namespace eddy::io {

// Writes `bytes` to `path` atomically (temporary file, fsync, rename). Throws eddy::Error naming
// the path on failure; the previous file, if any, is then left untouched.
void write_file_atomically(const std::string& path, std::string_view bytes);

// The whole file; throws eddy::Error naming the path when it cannot be read or is a directory.
std::string read_file(const std::string& path);

}  // namespace eddy::io
