#include "eddy/compiler/kernel_cache.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "eddy/core/error.h"
#include "eddy/core/fingerprint.h"

namespace eddy::compiler {
namespace {

namespace fs = std::filesystem;

// The compiler eddy itself was built with, unless $EDDY_CXX names another.
std::string compiler_command() {
  if (const char* chosen = std::getenv("EDDY_CXX"); chosen && *chosen) return chosen;
  return EDDY_KERNEL_CXX;
}

// -march=native ties a library to this CPU, whose identity is part of its name (cpu_identity).
// -ffp-contract=off: GCC would otherwise fuse a * b + c into one FMA, rounding once where eager
// eddy, one op at a time, rounds twice; without it fused arithmetic equals eager bit for bit
// (compiled PINN steps measured no slower: docs/compiler.md).
// -mprefer-vector-width=512: on AVX-512 CPUs GCC's tuning otherwise vectorises loops 256 bits wide
// and calls libmvec's 8-lane tanh and exp; with 16 lanes (a no-op elsewhere) the heat2d example's
// compiled step ran 4 to 6% faster and the language-model example's 2% (2026-12-05, Intel Xeon,
// docs/compiler.md).
// -fno-builtin-pow(f): GCC's vectoriser turns pow(x, 0.5) into sqrt(x), which gives NaN at -inf
// and -0 at -0 where pow (and eager eddy) give +inf and +0; as a plain function, pow keeps its
// libmvec vector variant.
std::string compiler_flags() {
  return "-std=c++17 -O3 -march=native -mprefer-vector-width=512 -fPIC -shared -fopenmp -fno-math-errno "
         "-ffp-contract=off -fno-builtin-pow -fno-builtin-powf";
}

// Whether a /proc/cpuinfo line is `key`'s: the key, then only blanks before the colon, so that
// "model" does not take the "model name" line.
bool is_cpuinfo_line_of(const std::string& line, std::string_view key) {
  return line.starts_with(key) && line.find(':') == line.find_first_not_of(" \t", key.size());
}

// What -march=native resolves to, as far as it differs between machines: the CPU's vendor,
// family, model and feature flags (Linux's /proc/cpuinfo, first processor). Part of a library's
// name, since a cache in a home folder shared across a cluster's nodes would otherwise hand a
// node without AVX-512 the library another node compiled with it (SIGILL).
const std::string& cpu_identity() {
  static const std::string identity = [] {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line, found;
    while (std::getline(cpuinfo, line) && !line.empty()) {  // a blank line ends the first processor
      for (std::string_view key : {"vendor_id", "cpu family", "model", "flags"}) {
        if (is_cpuinfo_line_of(line, key)) found += line + "\n";
      }
    }
    return found;
  }();
  return identity;
}

// The compiler's process group, in the process watching it: kills the group (the shell, the
// compiler driver, cc1plus, the linker, and the watcher itself).
void kill_own_group(int) { kill(0, SIGKILL); }

// Runs `command` through /bin/sh, returning its exit status and everything it printed.
//
// The command runs in a process group of its own under a watcher process that kills the whole
// group when eddy dies (PR_SET_PDEATHSIG), so a killed run leaves no compiler behind it still
// writing into the cache. Being outside eddy's group, the compiler does not get the Ctrl-C a
// terminal sends to eddy, which finishes its step (this compile too) and stops. Between fork and
// exec only async-signal-safe calls are made: eddy may have other threads.
// The exit status of `child` as a shell reports it (128 + the signal that killed it), or -1 when
// waitpid fails other than by EINTR (SIGCHLD ignored, say), which must not read as success.
// Async-signal-safe.
int wait_for(pid_t child) {
  int status = 0;
  for (;;) {
    if (waitpid(child, &status, 0) == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (errno != EINTR) return -1;
  }
}

std::pair<int, std::string> run(const std::string& command) {
  int pipe_ends[2];
  EDDY_CHECK(pipe2(pipe_ends, O_CLOEXEC) == 0, "compiler: cannot create a pipe to run '", command, "': ",
             std::strerror(errno));
  const auto [read_end, write_end] = pipe_ends;
  const char* const arguments[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  struct sigaction kill_group {};
  kill_group.sa_handler = kill_own_group;
  sigset_t death_signal;
  sigemptyset(&death_signal);
  sigaddset(&death_signal, SIGTERM);
  const pid_t eddy_process = getpid();
  const pid_t watcher = fork();
  if (watcher == 0) {
    setpgid(0, 0);
    sigaction(SIGTERM, &kill_group, nullptr);
    sigprocmask(SIG_UNBLOCK, &death_signal, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != eddy_process) kill_own_group(0);  // eddy died before the watch began
    const pid_t compiler = fork();
    if (compiler == 0) {
      dup2(write_end, STDOUT_FILENO);
      dup2(write_end, STDERR_FILENO);
      execv(arguments[0], const_cast<char* const*>(arguments));
      _exit(127);
    }
    close(write_end);
    _exit(compiler < 0 ? 126 : wait_for(compiler));
  }
  const int fork_error = errno;
  close(write_end);
  if (watcher < 0) {
    close(read_end);
    throw Error(cat("compiler: could not run '", command, "': ", std::strerror(fork_error)));
  }
  std::string output;
  std::array<char, 4096> buffer;
  for (;;) {
    const ssize_t n = read(read_end, buffer.data(), buffer.size());
    if (n > 0) {
      output.append(buffer.data(), static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(read_end);
  return {wait_for(watcher), output};
}

// Temporary files in the cache carry ".tmp." in their names, so that nothing looks them up. Those
// older than this were left by a run that was killed (a compile takes seconds, not an hour); newer
// ones may belong to another process compiling now.
constexpr std::chrono::hours kStaleAfter{1};

void remove_stale_temporaries(const fs::path& directory) {
  std::error_code error;
  const auto now = fs::file_time_type::clock::now();
  for (const fs::directory_entry& entry : fs::directory_iterator(directory, error)) {
    if (entry.path().filename().string().find(".tmp.") == std::string::npos) continue;
    const auto written = entry.last_write_time(error);
    if (!error && now - written > kStaleAfter) fs::remove(entry.path(), error);
  }
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
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "eddy" / "kernels";
  // Without HOME, the user's home from the password database, as a login shell would set it; the
  // fallback was /tmp, where any user could leave libraries for this one to load.
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwuid_r(geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found && found->pw_dir &&
      *found->pw_dir) {
    return fs::path(found->pw_dir) / ".cache" / "eddy" / "kernels";
  }
  throw Error("compiler: no folder for the kernel cache: HOME is not set and this user has no home folder; set "
              "EDDY_KERNEL_CACHE to a folder of your own");
}

LoadedKernels load_cpu_kernels(const std::string& source) {
  const std::string compiler = compiler_command();
  const std::string flags = compiler_flags();
  const fs::path directory = kernel_cache_directory();
  const std::string stem =
      "kernels-" + hex_digits(fnv1a(compiler + "\n" + flags + "\n" + cpu_identity() + source));
  const fs::path library = directory / (stem + ".so");
  LoadedKernels loaded;
  std::error_code error;
  if (fs::exists(library)) {
    // Loading a library runs its code: only this user's own are loaded.
    struct stat owner {};
    EDDY_CHECK(::stat(library.c_str(), &owner) == 0 && owner.st_uid == geteuid(), "compiler: the kernel library ",
               library, " belongs to another user (uid ", owner.st_uid, "), and eddy loads only its own user's; set "
               "EDDY_KERNEL_CACHE to a folder of your own");
    try {
      loaded.library = std::make_shared<SharedLibrary>(library);
      loaded.from_cache = true;
      return loaded;
    } catch (const Error&) {
      // Libraries are renamed into place whole, so one that does not load was damaged afterwards
      // (a full disk, a copied cache): compiled again rather than refused at every run.
      fs::remove(library, error);
    }
  }

  fs::create_directories(directory, error);
  EDDY_CHECK(!error, "compiler: cannot create the kernel cache directory ", directory, " (", error.message(),
             "); set EDDY_KERNEL_CACHE to a writable directory");
  remove_stale_temporaries(directory);
  // Unique temporary names, renamed into place: concurrent processes (MPI ranks) and threads
  // compiling the same kernels, and later runs after this one was killed mid-compile, never see a
  // half-written library.
  static std::atomic<uint64_t> compiles_in_this_process{0};
  const std::string unique =
      stem + "." + std::to_string(getpid()) + "-" + std::to_string(compiles_in_this_process++) + ".tmp";
  const fs::path source_path = directory / (unique + ".cpp");
  const fs::path temporary = directory / (unique + ".so");
  {
    std::ofstream file(source_path);
    file << source;
    EDDY_CHECK(file.good(), "compiler: cannot write ", source_path, " (", std::strerror(errno),
               "); set EDDY_KERNEL_CACHE to a writable directory");
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string command =
      compiler + " " + flags + " " + quoted(source_path) + " -o " + quoted(temporary) + " -lmvec -lm";
  auto [status, messages] = run(command);
  loaded.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (status != 0) {
    fs::remove(temporary, error);
    // Kept under a name the stale-temporary sweep leaves alone, for a bug report.
    const fs::path kept = directory / (stem + ".cpp");
    fs::rename(source_path, kept, error);
    const fs::path& source_kept = error ? source_path : kept;
    throw Error("compiler: the system compiler failed on generated kernels (kept in " + source_kept.string() +
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
