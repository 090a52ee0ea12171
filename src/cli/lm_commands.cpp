#include "lm_commands.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "eddy/dist/communicator.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/config.h"
#include "device_option.h"
#include "override_option.h"
#include "interrupted.h"
#include "solvers/common/file_kind.h"
#include "solvers/common/interrupt.h"
#include "solvers/common/training_config.h"
#include "solvers/common/training_loop.h"
#include "solvers/lm/corpus.h"
#include "solvers/lm/hf.h"
#include "solvers/lm/quantize.h"
#include "solvers/lm/run.h"
#include "solvers/lm/trainer.h"

namespace eddy::cli {
namespace {

int run_train(const std::string& file, const std::vector<std::string>& overrides, bool resume, bool eager,
              bool quiet, const std::string& resume_command) {
  solvers::install_interrupt_handlers();
  auto config = io::Config::load(file, overrides);
  solvers::require_kind(*config, solvers::FileKind::language_model, "lm train");
  const lm::LmProblem problem = lm::read_lm_problem(*config);
  lm::TrainOptions options;
  options.resume = resume;
  options.eager = eager;
  options.log = quiet ? nullptr : &std::cerr;
  options.terminal = !quiet && ::isatty(STDERR_FILENO);
  const lm::TrainResult result = lm::train(problem, options);
  if (dist::default_communicator().rank() != 0) {  // rank 0 reports
    return result.interrupted ? 128 + result.interrupted : result.finished ? 0 : 3;
  }
  if (!result.finished && !result.interrupted) {
    std::fprintf(stderr, "eddy: %s\n", result.message.c_str());
    return 3;
  }
  std::printf("%s\n", result.message.c_str());
  std::printf("results: %s/history.h5 (HDF5), checkpoint %s/checkpoint.safetensors, tokenizer %s/tokenizer.json\n",
              problem.output.dir.c_str(), problem.output.dir.c_str(), problem.output.dir.c_str());
  return result.interrupted ? report_interrupted(result.interrupted, problem.output.dir, resume_command) : 0;
}

}  // namespace

int check_lm_config(io::Config& config) {
  const lm::LmProblem problem = lm::read_lm_problem(config);
  // The corpus as training reads it before tokenising (its windows need the tokenizer, which
  // check does not train).
  const size_t files = lm::check_corpus(problem);
  std::printf("%s: a %s language model, context %lld, %lld layers of width %lld, on %zu corpus file%s\n",
              problem.source.c_str(), problem.model.architecture == lm::Architecture::gpt2 ? "GPT-2" : "Llama",
              static_cast<long long>(problem.model.context), static_cast<long long>(problem.model.layers),
              static_cast<long long>(problem.model.hidden_size), files, files == 1 ? "" : "s");
  std::printf("%s\n", problem.resolved_config.c_str());
  return 0;
}

namespace {

int run_generate(const std::string& run_dir, const std::string& prompt, const std::string& quantized,
                 const std::string& device_name, const nn::GenerationOptions& options) {
  const std::string flag = cat("--device ", device_name, ": ");
  Device device = cpu();
  try {
    if (!device_name.empty()) device = parse_device(device_name);
  } catch (const Error& unknown) {
    throw Error(flag + unknown.what());
  }
  solvers::place_on_device({device, true, flag}, dist::default_communicator());
  EDDY_CHECK(quantized.empty() || device == cpu(), "--quantized ", quantized, " runs on the CPU (the int8 and "
             "int4 kernels are the CPU's); leave out --device ", device_name);
  lm::TrainedModel trained = lm::load_trained_model(run_dir);
  if (!quantized.empty()) {
    const int bits = quantized == "int8" ? 8 : 4;
    lm::load_quantized_model(trained, lm::quantized_model_path(run_dir, bits), bits);
  }
  trained.model->to(device);
  // The prompt goes out with the first new token, once generate_text has accepted it (a prompt too
  // long for the context, or not UTF-8, is refused with nothing on stdout).
  bool prompt_printed = false;
  auto print_prompt = [&] {
    if (!prompt_printed) std::printf("%s", prompt.c_str());
    prompt_printed = true;
  };
  lm::generate_text(trained, prompt, options, [&](const std::string& piece) {
    print_prompt();
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  print_prompt();
  std::printf("\n");
  return 0;
}

int run_export(const std::string& run_dir, const std::string& format, const std::string& output) {
  const std::string folder = output.empty() ? solvers::default_hf_export_dir(run_dir) : output;
  lm::export_hf_folder(run_dir, folder, "--output");
  std::printf("wrote %s (%s): config.json, model.safetensors, tokenizer.json, tokenizer_config.json, "
              "generation_config.json\n", folder.c_str(), format.c_str());
  return 0;
}

int run_quantize(const std::string& run_dir, int bits, int64_t group, const std::string& output) {
  const std::string path = output.empty() ? lm::quantized_model_path(run_dir, bits) : output;
  lm::refuse_the_runs_own_files(run_dir, path, false, "--output");
  io::refuse_special_file(path, "lm quantize: --output");
  lm::TrainedModel trained = lm::load_trained_model(run_dir);
  const bool measurable = std::filesystem::exists(run_dir + "/data/validation.tokens");
  const double float_perplexity = measurable ? lm::validation_perplexity(trained, run_dir) : 0;
  lm::save_quantized_model(trained, {bits, group}, path);
  std::printf("wrote %s (int%d%s)\n", path.c_str(), bits,
              bits == 4 ? (", groups of " + std::to_string(group)).c_str() : "");
  if (!measurable) {
    std::printf("no data/validation.tokens in %s: perplexity not measured\n", run_dir.c_str());
    return 0;
  }
  const double quantized_perplexity = lm::validation_perplexity(trained, run_dir);
  std::printf("validation perplexity: float32 %.4f, int%d %.4f (%+.2f%%)\n", float_perplexity, bits,
              quantized_perplexity, 100 * (quantized_perplexity / float_perplexity - 1));
  return 0;
}

// A validator for a number option: `accepts` says which numbers it takes, `rule` says so in the
// error ("must be <rule>, got -1").
CLI::Validator number_that(const std::string& rule, bool (*accepts)(double)) {
  return CLI::Validator(
      [rule, accepts](std::string& text) -> std::string {
        double value = 0;
        return CLI::detail::lexical_cast(text, value) && accepts(value) ? "" : "must be " + rule + ", got " + text;
      },
      "");
}

CLI::Validator non_negative() {
  return number_that("a finite number >= 0", [](double v) { return std::isfinite(v) && v >= 0; });
}

// A whole number from 0 to 2^64 - 1: CLI11 reads "-1" into an unsigned option as 2^64 - 1, as
// strtoull does, and saturates above it, so two seeds would give the same text.
CLI::Validator unsigned_64_bit() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        return error == std::errc() && end == text.data() + text.size()
                   ? ""
                   : "must be a whole number from 0 to 18446744073709551615, got " + text;
      },
      "");
}

}  // namespace

LmCommands::LmCommands(CLI::App& app) {
  lm_ = app.add_subcommand("lm", "Language models: train from a YAML file (docs/lm.md)");
  lm_->require_subcommand(1);
  train_ = lm_->add_subcommand("train", "Train a language model defined in a YAML file");
  train_->add_option("file", file_, "language-model YAML")->required()->check(CLI::ExistingFile);
  add_overrides_option(train_, overrides_, "key.path=value overrides, e.g. training.steps=100");
  train_->add_flag("--resume", resume_, "continue from the run folder's last checkpoint");
  train_->add_flag("--eager", eager_, "run the training step and evaluation as written instead of compiled");
  train_->add_option("--device", device_, kDeviceHelp);
  train_->add_flag("--quiet", quiet_, "no progress output");
  check_ = lm_->add_subcommand("check", "Validate a language-model config and print it resolved, without training");
  check_->add_option("file", file_, "language-model YAML")->required()->check(CLI::ExistingFile);
  add_overrides_option(check_, overrides_, "key.path=value overrides");
  generate_ = lm_->add_subcommand("generate", "Continue a prompt with a trained model, streaming the text");
  generate_->add_option("run_dir", run_dir_, "run folder of `eddy lm train` (output.dir), or a Hugging Face "
                        "folder")->required()->check(CLI::ExistingDirectory);
  generate_->add_option("--prompt", prompt_, "text to continue (default: the start of a new document)");
  generate_->add_option("--max-tokens", generation_.max_new_tokens, "new tokens at most (default 64)")
      ->check(non_negative());
  generate_->add_option("--temperature", generation_.temperature, "0: greedy; below 1 sharper, above 1 flatter "
                        "(default 1)")->check(non_negative());
  generate_->add_option("--top-k", generation_.top_k, "sample among the k most likely tokens (default 0: all)")
      ->check(non_negative());
  generate_->add_option("--top-p", generation_.top_p, "sample among the most likely tokens that reach this "
                        "probability (default 1: all)")
      ->check(number_that("a number in (0, 1]", [](double p) { return p > 0 && p <= 1; }));
  generate_->add_option("--seed", generation_.seed, "the same seed gives the same text (default 0)")
      ->check(unsigned_64_bit());
  generate_->add_option("--quantized", quantized_, "generate with RUN_DIR/quantized-int8.safetensors or "
                        "quantized-int4.safetensors (eddy lm quantize)")->check(CLI::IsMember({"int8", "int4"}));
  generate_->add_option("--device", device_, "cpu, cuda or cuda:N: where the model runs (docs/gpu.md)");
  export_ = lm_->add_subcommand("export", "Write a trained model in another framework's layout");
  export_->add_option("run_dir", run_dir_, "run folder of `eddy lm train` (output.dir)")->required()
      ->check(CLI::ExistingDirectory);
  export_->add_option("--format", format_, "hf: a folder that transformers' from_pretrained loads")->required()
      ->check(CLI::IsMember({"hf"}));
  export_->add_option("--output", output_, "folder to write (default: RUN_DIR/hf)");
  quantize_ = lm_->add_subcommand("quantize", "Quantise a trained model's weights to int8 or int4 for generation, "
                                  "printing the validation perplexity before and after");
  quantize_->add_option("run_dir", run_dir_, "run folder of `eddy lm train` (output.dir)")->required()
      ->check(CLI::ExistingDirectory);
  quantize_->add_option("--bits", bits_, "8: one scale per output row; 4: one per group of columns (default 4)")
      ->check(CLI::IsMember({4, 8}));
  quantize_->add_option("--group", group_, "int4 columns per scale: 32, 64, 96 or 128 (default 64)")
      ->check(CLI::IsMember({32, 64, 96, 128}));
  quantize_->add_option("--output", output_, "file to write (default: RUN_DIR/quantized-int<bits>.safetensors)");
}

int LmCommands::run(const std::string& resume_command) const {
  if (train_->parsed()) {
    std::vector<std::string> overrides = overrides_;
    add_device_override(device_, overrides);
    return run_train(file_, overrides, resume_, eager_, quiet_, resume_command);
  }
  if (generate_->parsed()) return run_generate(run_dir_, prompt_, quantized_, device_, generation_);
  if (quantize_->parsed()) {
    EDDY_CHECK(bits_ == 4 || quantize_->count("--group") == 0,
               "--group is for --bits 4; int8 keeps one scale per output row");
    return run_quantize(run_dir_, bits_, group_, output_);
  }
  if (export_->parsed()) return run_export(run_dir_, format_, output_);
  auto config = io::Config::load(file_, overrides_);
  // As lm train: a PINN file said "missing required key 'data'" instead of naming its command.
  solvers::require_kind(*config, solvers::FileKind::language_model, "lm check");
  return check_lm_config(*config);
}

}  // namespace eddy::cli
