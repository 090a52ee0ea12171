#pragma once
// Files are written to a temporary name beside the target and renamed into place, so a crash or
// kill never leaves a truncated file under the real name.

#include <string>
#include <string_view>

namespace eddy::io {

// Writes `bytes` to `path` atomically (temporary file, fsync, rename). Throws eddy::Error naming
// the path on failure; the previous file, if any, is then left untouched.
void write_file_atomically(const std::string& path, std::string_view bytes);

// The file a write to `path` replaces: `path`, or where its symbolic links lead (a link to a file
// on a larger disk was replaced by a file of its own, and the file it named kept the old data).
std::string write_destination(const std::string& path);
// The temporary a writer fills before move_into_place: beside write_destination(path), on its
// file system, named for the writing process `writer` (its pid).
std::string temporary_for(const std::string& path, long writer);

// Renames a finished temporary file onto write_destination(path). On failure (`path` is a
// directory, say) removes the temporary and throws eddy::Error naming both paths and the reason.
void move_into_place(const std::string& temporary, const std::string& path);

// Throws, naming `what` (the key or option that gave `path`), where write_destination(path) is
// neither absent, a regular file nor a folder: a device, a pipe or a socket, which a file written
// there replaces (output.path=/dev/null replaced it for every user of the machine). Commands call
// it before their work; move_into_place refuses such a path too.
void refuse_special_file(const std::string& path, const std::string& what);
// Removes what is at `path` (a stale result, an earlier export's file) as std::filesystem::remove
// does, but refuses a device, pipe or socket there rather than unlink it. Whether one was removed.
bool remove_stale_file(const std::string& path, const std::string& what);

// Whether `file` is a temporary of those writers (NAME.tmp-PID) whose writer is no longer running:
// a killed writer's leftover, which may be as large as what it was writing.
bool is_abandoned_temporary(const std::string& file);
// Removes the abandoned temporaries of `path` (path.tmp-PID) beside it.
void remove_abandoned_temporaries_of(const std::string& path);
// The pid of another running process whose temporary of `path` is there (it is writing `path`
// now), or 0.
long live_writer_of(const std::string& path);
// Removes every abandoned temporary in `folder` and its folders one level down: a killed run's or
// export's leftovers, once the caller holds the folder.
void remove_abandoned_temporaries_in(const std::string& folder);

// Makes the folder `path` and its missing parents. Throws eddy::Error naming `what` (the command
// or key that gave the path), the path and the reason; std::filesystem's own error named neither.
void create_folders(const std::string& path, const std::string& what);

// The nearest part of the folder path `folder` that exists, where that is not a folder (a file
// where a folder should be); empty otherwise.
std::string file_in_the_way(const std::string& folder);

// The whole file; throws eddy::Error naming the path when it cannot be read or is a directory.
std::string read_file(const std::string& path);

// A file mapped read-only into memory, for readers that use parts of a large file (a checkpoint
// whose optimizer state an inference load skips): pages are read when touched, and none is
// copied. Throws as read_file does.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace eddy::io
