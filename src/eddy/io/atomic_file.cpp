#include "eddy/io/atomic_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>

#include "eddy/core/error.h"

namespace eddy::io {

namespace {

// The writer's pid of a temporary NAME.tmp-PID, or 0 for another name.
long writer_of_temporary(const std::string& file) {
  const std::string name = std::filesystem::path(file).filename().string();
  const size_t mark = name.rfind(".tmp-");
  if (mark == std::string::npos) return 0;
  const std::string id = name.substr(mark + 5);
  if (id.empty() || id.size() > 9 || id.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stol(id);
}

// Calls `visit` with each temporary of `path` (path.tmp-PID) beside its write destination.
void for_each_temporary_of(const std::string& path, const std::function<void(const std::filesystem::path&)>& visit) {
  namespace fs = std::filesystem;
  const fs::path destination = write_destination(path);
  const fs::path folder = destination.parent_path().empty() ? fs::path(".") : destination.parent_path();
  const std::string prefix = destination.filename().string() + ".tmp-";
  std::error_code error;
  for (auto entry = fs::directory_iterator(folder, error); !error && entry != fs::directory_iterator();
       entry.increment(error)) {
    if (entry->path().filename().string().starts_with(prefix)) visit(entry->path());
  }
}

}  // namespace

bool is_abandoned_temporary(const std::string& file) {
  const auto writer = static_cast<pid_t>(writer_of_temporary(file));
  return writer != 0 && writer != ::getpid() && ::kill(writer, 0) != 0 && errno == ESRCH;
}

void remove_abandoned_temporaries_in(const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code error;
  for (auto entry = fs::recursive_directory_iterator(folder, error);
       !error && entry != fs::recursive_directory_iterator(); entry.increment(error)) {
    if (entry.depth() > 0) entry.disable_recursion_pending();
    if (entry->is_regular_file(error) && is_abandoned_temporary(entry->path().string())) {
      fs::remove(entry->path(), error);
    }
  }
}

void remove_abandoned_temporaries_of(const std::string& path) {
  for_each_temporary_of(path, [](const std::filesystem::path& temporary) {
    std::error_code ignored;
    if (is_abandoned_temporary(temporary.string())) std::filesystem::remove(temporary, ignored);
  });
}

long live_writer_of(const std::string& path) {
  long live = 0;
  for_each_temporary_of(path, [&live](const std::filesystem::path& temporary) {
    const long writer = writer_of_temporary(temporary.string());
    // EPERM: running, as another user.
    if (writer != 0 && writer != ::getpid() && (::kill(static_cast<pid_t>(writer), 0) == 0 || errno == EPERM)) {
      live = writer;
    }
  });
  return live;
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::string temporary = temporary_for(path, ::getpid());
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  EDDY_CHECK(fd >= 0, "cannot create ", temporary, ": ", std::strerror(errno));
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      ::unlink(temporary.c_str());
      throw Error(cat("cannot write ", temporary, ": ", std::strerror(error)));
    }
    written += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const int error = errno;
  ::close(fd);
  if (!synced) {
    ::unlink(temporary.c_str());
    throw Error(cat("cannot write ", temporary, ": ", std::strerror(error)));
  }
  move_into_place(temporary, path);
}

void create_folders(const std::string& path, const std::string& what) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (!error) return;
  // The usual cause, said plainly.
  const std::string file = file_in_the_way(path);
  EDDY_CHECK(file.empty(), what, ": cannot make the folder ", path, ": ", file, " is a file");
  throw Error(cat(what, ": cannot make the folder ", path, " (", error.message(), ")"));
}

std::string file_in_the_way(const std::string& folder) {
  std::error_code ignored;
  std::filesystem::path part(folder);
  while (!part.empty() && !std::filesystem::exists(part, ignored)) part = part.parent_path();
  return part.empty() || std::filesystem::is_directory(part, ignored) ? std::string() : part.string();
}

std::string write_destination(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path destination = path;
  std::error_code error;
  // As the kernel follows links, up to its limit of 40.
  for (int hops = 0; hops < 40 && fs::is_symlink(destination, error); ++hops) {
    const fs::path target = fs::read_symlink(destination, error);
    if (error) break;
    destination = target.is_absolute() ? target : destination.parent_path() / target;
  }
  return destination.string();
}

std::string temporary_for(const std::string& path, long writer) {
  return write_destination(path) + ".tmp-" + std::to_string(writer);
}

void refuse_special_file(const std::string& path, const std::string& what) {
  struct stat existing {};
  const std::string destination = write_destination(path);
  if (::stat(destination.c_str(), &existing) != 0 || S_ISREG(existing.st_mode) || S_ISDIR(existing.st_mode)) return;
  const char* kind = S_ISCHR(existing.st_mode) || S_ISBLK(existing.st_mode) ? "a device"
                     : S_ISFIFO(existing.st_mode)                           ? "a pipe"
                                                                            : "a socket";
  throw Error(cat(what, ": ", path, destination != path ? cat(" (a link to ", destination, ")") : std::string(), " is ",
                  kind, ", which writing a file there would replace; give the path of a file"));
}

bool remove_stale_file(const std::string& path, const std::string& what) {
  refuse_special_file(path, what);
  std::error_code error;
  const bool removed = std::filesystem::remove(path, error);
  EDDY_CHECK(!error, what, ": cannot remove ", path, " (", error.message(), ")");
  return removed;
}

void move_into_place(const std::string& temporary, const std::string& path) {
  const std::string destination = write_destination(path);
  try {
    refuse_special_file(path, "cannot write " + path);
  } catch (const Error&) {
    ::unlink(temporary.c_str());
    throw;
  }
  if (::rename(temporary.c_str(), destination.c_str()) == 0) return;
  const int error = errno;
  ::unlink(temporary.c_str());
  std::error_code ignored;
  throw Error(cat("cannot write ", path, destination != path ? cat(" (a link to ", destination, ")") : std::string(),
                  std::filesystem::is_directory(destination, ignored) ? " (it is a directory)" : "", ": moving ",
                  temporary, " there failed: ", std::strerror(error)));
}

std::string read_file(const std::string& path) {
  // A directory opens as a stream that reads nothing, which readers would report as an empty file.
  std::error_code ignored;
  EDDY_CHECK(!std::filesystem::is_directory(path, ignored), path, " is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  EDDY_CHECK(in, "cannot open ", path, ": ", std::strerror(errno));
  // Read straight into a string of the file's size: through a stringstream, a checkpoint of
  // hundreds of MB was held three times over at the peak.
  std::error_code no_size;
  const std::uintmax_t size = std::filesystem::file_size(path, no_size);
  std::string contents(no_size ? 0 : static_cast<size_t>(size), '\0');
  in.read(contents.data(), static_cast<std::streamsize>(contents.size()));
  contents.resize(static_cast<size_t>(in.gcount()));
  // Whatever lies past the size asked for (a file still being written, a pipe) is read too.
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) contents.append(chunk, static_cast<size_t>(in.gcount()));
  return contents;
}

MappedFile::MappedFile(const std::string& path) {
  std::error_code ignored;
  EDDY_CHECK(!std::filesystem::is_directory(path, ignored), path, " is a directory, not a file");
  const int fd = ::open(path.c_str(), O_RDONLY);
  EDDY_CHECK(fd >= 0, "cannot open ", path, ": ", std::strerror(errno));
  struct stat info {};
  const bool sized = ::fstat(fd, &info) == 0;
  const int stat_error = errno;
  size_ = sized ? static_cast<size_t>(info.st_size) : 0;
  if (sized && size_ > 0) data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_error = errno;
  ::close(fd);
  EDDY_CHECK(sized, "cannot read the size of ", path, ": ", std::strerror(stat_error));
  EDDY_CHECK(data_ != MAP_FAILED, "cannot map ", path, ": ", std::strerror(map_error));
  if (size_ == 0) data_ = nullptr;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

}  // namespace eddy::io
