#pragma once
// `eddy lm ...`: language models (docs/lm.md).
//
//   eddy lm train FILE [key=value ...] [--resume] [--eager] [--quiet] [--device D]
//                                                                        train a language model from its YAML
//   eddy lm check FILE [key=value ...]                                   validate and print the resolved config
//   eddy lm generate RUN_DIR [--prompt TEXT] [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
//                    [--quantized int8|int4] [--device D]                continue a prompt, streaming the text
//                                                                        (RUN_DIR may be a Hugging Face folder)
//   eddy lm quantize RUN_DIR [--bits 4|8] [--group G] [--output FILE]    write an int8/int4 model for inference
//                                                                        and print the validation perplexities
//   eddy lm export RUN_DIR --format hf [--output DIR]                    write a folder transformers loads

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "eddy/io/config.h"
#include "eddy/nn/generation.h"

namespace eddy::cli {

// Validates a language-model config and prints a summary and the config resolved: `eddy lm
// check`, and `eddy check` on such a file. Returns the exit status.
int check_lm_config(io::Config& config);

class LmCommands {
 public:
  explicit LmCommands(CLI::App& app);
  bool chosen() const { return lm_->parsed(); }
  // `lm train`, which runs on the ranks of an mpirun job (the `parallel:` section of its file).
  bool distributed() const { return train_->parsed(); }
  // Runs the chosen subcommand; returns the exit status. `resume_command`: what `lm train`
  // prints to go on after Ctrl-C or SIGTERM (interrupted.h).
  int run(const std::string& resume_command) const;

 private:
  CLI::App* lm_;
  CLI::App* train_;
  CLI::App* check_;
  CLI::App* generate_;
  CLI::App* export_;
  CLI::App* quantize_;
  std::string file_;
  std::vector<std::string> overrides_;
  bool resume_ = false, eager_ = false, quiet_ = false;
  std::string run_dir_, prompt_, format_, output_, quantized_, device_;
  int bits_ = 4;
  int64_t group_ = 64;
  nn::GenerationOptions generation_;
};

}  // namespace eddy::cli
