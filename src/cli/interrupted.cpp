#include "interrupted.h"

#include <cstdio>
#include <string_view>

#include "eddy/core/error.h"
#include "eddy/dist/communicator.h"

namespace eddy::cli {
namespace {

std::string shell_quoted(std::string_view word) {
  constexpr std::string_view plain =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+=.,/:@%";
  if (!word.empty() && word.find_first_not_of(plain) == std::string_view::npos) return std::string(word);
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

std::string resume_command(int argc, char** argv) {
  const int ranks = dist::default_communicator().size();
  std::string command = ranks > 1 ? cat("mpirun -np ", ranks, " ") : std::string();
  bool resumes = false;
  for (int i = 0; i < argc; ++i) {
    command += cat(i ? " " : "", shell_quoted(argv[i]));
    resumes = resumes || std::string_view(argv[i]) == "--resume";
  }
  return resumes ? command : command + " --resume";
}

int report_interrupted(int signal, const std::string& run_dir, const std::string& resume_command) {
  std::fprintf(stderr, "eddy: stopped early; the checkpoint is %s/checkpoint.safetensors. To go on from it:\n  %s\n",
               run_dir.c_str(), resume_command.c_str());
  return 128 + signal;
}

}  // namespace eddy::cli
