#pragma once
// `eddy lm ...`: language models (docs/lm.md).
//
//   eddy lm train FILE [key=value ...] [--resume] [--eager] [--quiet]   train a language model from its YAML
//   eddy lm check FILE [key=value ...]                                   validate and print the resolved config

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace eddy::cli {

class LmCommands {
 public:
  explicit LmCommands(CLI::App& app);
  bool chosen() const { return lm_->parsed(); }
  // Runs the chosen subcommand; returns the exit status.
  int run() const;

 private:
  CLI::App* lm_;
  CLI::App* train_;
  CLI::App* check_;
  std::string file_;
  std::vector<std::string> overrides_;
  bool resume_ = false, eager_ = false, quiet_ = false;
};

}  // namespace eddy::cli
