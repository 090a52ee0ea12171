#include "lm_commands.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "eddy/io/config.h"
#include "solvers/lm/hf.h"
#include "solvers/lm/run.h"
#include "solvers/lm/trainer.h"

namespace eddy::cli {
namespace {

int run_train(const std::string& file, const std::vector<std::string>& overrides, bool resume, bool eager,
              bool quiet) {
  auto config = io::Config::load(file, overrides);
  const lm::LmProblem problem = lm::read_lm_problem(*config);
  lm::TrainOptions options;
  options.resume = resume;
  options.eager = eager;
  options.log = quiet ? nullptr : &std::cerr;
  options.terminal = !quiet && ::isatty(STDERR_FILENO);
  const lm::TrainResult result = lm::train(problem, options);
  if (!result.finished) {
    std::fprintf(stderr, "eddy: %s\n", result.message.c_str());
    return 3;
  }
  std::printf("%s\n", result.message.c_str());
  std::printf("results: %s/history.h5 (HDF5), checkpoint %s/checkpoint.safetensors, tokenizer %s/tokenizer.json\n",
              problem.output.dir.c_str(), problem.output.dir.c_str(), problem.output.dir.c_str());
  return 0;
}

int run_check(const std::string& file, const std::vector<std::string>& overrides) {
  auto config = io::Config::load(file, overrides);
  const lm::LmProblem problem = lm::read_lm_problem(*config);
  std::printf("%s: a %s language model, context %lld, %lld layers of width %lld\n", problem.source.c_str(),
              problem.model.architecture == lm::Architecture::gpt2 ? "GPT-2" : "Llama",
              static_cast<long long>(problem.model.context), static_cast<long long>(problem.model.layers),
              static_cast<long long>(problem.model.hidden_size));
  std::printf("%s\n", problem.resolved_config.c_str());
  return 0;
}

int run_generate(const std::string& run_dir, const std::string& prompt, const nn::GenerationOptions& options) {
  lm::TrainedModel trained = lm::load_trained_model(run_dir);
  std::printf("%s", prompt.c_str());
  lm::generate_text(trained, prompt, options, [](const std::string& piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::printf("\n");
  return 0;
}

int run_export(const std::string& run_dir, const std::string& format, const std::string& output) {
  const std::string folder = output.empty() ? run_dir + "/hf" : output;
  const lm::TrainedModel trained = lm::load_trained_model(run_dir);
  lm::save_hf_folder(*trained.model, *trained.tokenizer, folder);
  std::printf("wrote %s (%s): config.json, model.safetensors, tokenizer.json, tokenizer_config.json, "
              "generation_config.json\n", folder.c_str(), format.c_str());
  return 0;
}

}  // namespace

LmCommands::LmCommands(CLI::App& app) {
  lm_ = app.add_subcommand("lm", "Language models: train from a YAML file (docs/lm.md)");
  lm_->require_subcommand(1);
  train_ = lm_->add_subcommand("train", "Train a language model defined in a YAML file");
  train_->add_option("file", file_, "language-model YAML")->required()->check(CLI::ExistingFile);
  train_->add_option("overrides", overrides_, "key.path=value overrides, e.g. training.steps=100");
  train_->add_flag("--resume", resume_, "continue from the run folder's last checkpoint");
  train_->add_flag("--eager", eager_, "run the training step and evaluation as written instead of compiled");
  train_->add_flag("--quiet", quiet_, "no progress output");
  check_ = lm_->add_subcommand("check", "Validate a language-model config and print it resolved, without training");
  check_->add_option("file", file_, "language-model YAML")->required()->check(CLI::ExistingFile);
  check_->add_option("overrides", overrides_, "key.path=value overrides");
  generate_ = lm_->add_subcommand("generate", "Continue a prompt with a trained model, streaming the text");
  generate_->add_option("run_dir", run_dir_, "run folder of `eddy lm train` (output.dir), or a Hugging Face "
                        "folder")->required()->check(CLI::ExistingDirectory);
  generate_->add_option("--prompt", prompt_, "text to continue (default: the start of a new document)");
  generate_->add_option("--max-tokens", generation_.max_new_tokens, "new tokens at most (default 64)");
  generate_->add_option("--temperature", generation_.temperature, "0: greedy; below 1 sharper, above 1 flatter "
                        "(default 1)");
  generate_->add_option("--top-k", generation_.top_k, "sample among the k most likely tokens (default 0: all)");
  generate_->add_option("--top-p", generation_.top_p, "sample among the most likely tokens that reach this "
                        "probability (default 1: all)");
  generate_->add_option("--seed", generation_.seed, "the same seed gives the same text (default 0)");
  export_ = lm_->add_subcommand("export", "Write a trained model in another framework's layout");
  export_->add_option("run_dir", run_dir_, "run folder of `eddy lm train` (output.dir)")->required()
      ->check(CLI::ExistingDirectory);
  export_->add_option("--format", format_, "hf: a folder that transformers' from_pretrained loads")->required()
      ->check(CLI::IsMember({"hf"}));
  export_->add_option("--output", output_, "folder to write (default: RUN_DIR/hf)");
}

int LmCommands::run() const {
  if (train_->parsed()) return run_train(file_, overrides_, resume_, eager_, quiet_);
  if (generate_->parsed()) return run_generate(run_dir_, prompt_, generation_);
  if (export_->parsed()) return run_export(run_dir_, format_, output_);
  return run_check(file_, overrides_);
}

}  // namespace eddy::cli
