// The kernel cache when a run is killed mid-compile: the system compiler dies with eddy, the
// cache holds no library under its real name (a later run compiles it afresh instead of loading
// half a file), and the temporaries the killed run left are swept once stale.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "eddy/compiler/kernel_cache.h"

namespace eddy::compiler {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSource = "extern \"C\" int eddy_kernel_cache_answer() { return 42; }\n";

// Whether `pid` has ended: gone, or a zombie nobody has reaped yet.
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string fields;
  if (!std::getline(stat, fields)) return true;
  const size_t after_name = fields.rfind(')');
  return after_name == std::string::npos || fields.substr(after_name + 2, 1) == "Z";
}

// Polls `condition` for up to a minute (a loaded machine is slow; a test that never sees it fails).
template <typename Condition>
bool eventually(Condition&& condition) {
  for (int tries = 0; tries < 600; ++tries) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::vector<std::string> libraries_in(const fs::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".so") && name.find(".tmp.") == std::string::npos) names.push_back(name);
  }
  return names;
}

class KilledCompile : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("eddy-killed-compile-" + std::to_string(::getpid()));
  fs::path cache = dir / "cache";
  fs::path compiler_pid = dir / "compiler.pid";

  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  // A compiler that writes part of its output, says its pid, and then hangs, as a slow compile
  // that is killed halfway would.
  fs::path hanging_compiler() const {
    const fs::path script = dir / "hanging-cxx";
    std::ofstream(script) << "#!/bin/sh\n"
                          << "while [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then out=$2; fi; shift; done\n"
                          << "printf 'half a library' > \"$out\"\n"
                          << "echo $$ > '" << compiler_pid.string() << "'\n"
                          << "exec sleep 600\n";
    fs::permissions(script, fs::perms::owner_all);
    return script;
  }
};

TEST_F(KilledCompile, TheCompilerDiesWithEddyAndTheCacheHoldsNoPartialLibrary) {
  const fs::path compiler = hanging_compiler();
  const pid_t eddy = fork();
  ASSERT_GE(eddy, 0);
  if (eddy == 0) {
    setenv("EDDY_KERNEL_CACHE", cache.c_str(), 1);
    setenv("EDDY_CXX", compiler.c_str(), 1);
    load_cpu_kernels(kSource);
    _exit(0);
  }
  pid_t compiling = 0;
  ASSERT_TRUE(eventually([&] {
    std::ifstream in(compiler_pid);
    return static_cast<bool>(in >> compiling);
  })) << "the compiler never started";
  kill(eddy, SIGKILL);
  int status = 0;
  waitpid(eddy, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  EXPECT_TRUE(eventually([&] { return ended(compiling); })) << "the compiler outlived eddy";
  EXPECT_TRUE(libraries_in(cache).empty());

  // The next run compiles the library (the real compiler this time) and loads it.
  setenv("EDDY_KERNEL_CACHE", cache.c_str(), 1);
  const LoadedKernels loaded = load_cpu_kernels(kSource);
  unsetenv("EDDY_KERNEL_CACHE");
  EXPECT_FALSE(loaded.from_cache);
  using Answer = int (*)();
  EXPECT_EQ(reinterpret_cast<Answer>(loaded.library->symbol("eddy_kernel_cache_answer"))(), 42);
  EXPECT_EQ(libraries_in(cache).size(), 1u);
}

TEST_F(KilledCompile, StaleTemporariesAreSweptAndFreshOnesKept) {
  fs::create_directories(cache);
  const fs::path stale = cache / "kernels-0000000000000001.123.tmp.so";
  const fs::path fresh = cache / "kernels-0000000000000002.456.tmp.so";
  std::ofstream(stale) << "half a library";
  std::ofstream(fresh) << "being written by another process";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));

  setenv("EDDY_KERNEL_CACHE", cache.c_str(), 1);
  load_cpu_kernels(kSource);
  unsetenv("EDDY_KERNEL_CACHE");
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));
}

}  // namespace
}  // namespace eddy::compiler
