#pragma once
// A finished (or checkpointed) `eddy lm train` run, loaded for use: its config, tokenizer and
// model with the checkpoint's weights. What `eddy lm generate` and the Python eddy.lm start from.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "eddy/io/tokenizer.h"
#include "eddy/nn/generation.h"
#include "solvers/lm/problem.h"

namespace eddy::lm {

struct TrainedModel {
  LmProblem problem;
  std::optional<io::BpeTokenizer> tokenizer;  // always set
  std::shared_ptr<nn::CausalLanguageModel> model;
  int64_t step = 0;  // the step its checkpoint was written at
  // Of the float weights it was loaded with, taken before any quantising (float_weights_fingerprint).
  std::string float_fingerprint;
  std::string run_dir;  // the folder it was loaded from
};

// Refuses an output that would write over the run at `run_dir` or another run (`argument` names
// it in the message: "--output", "path"): for a folder, the run folder or a training run's; for a
// file, one that generate, export and --resume read in that run or in the run folder holding the
// file (a training run's checkpoint, config, tokenizer, history and token data; a Hugging Face
// folder's model, config, tokenizer and generation config).
void refuse_the_runs_own_files(const std::string& run_dir, const std::string& output, bool folder,
                               std::string_view argument);

// Reads RUN_DIR/config.yaml, tokenizer.json and checkpoint.safetensors; errors name the missing
// or mismatched file. A folder with a config.json and no config.yaml is read as a Hugging Face
// folder instead (load_hf_model, hf.h, and its tokenizer.json): its problem then holds only the
// source file and the model section, and step is 0.
TrainedModel load_trained_model(const std::string& run_dir);

// `eddy lm export RUN_DIR --format hf`: the run's model and tokenizer as a Hugging Face folder at
// `output` (`argument` names it in errors), refused while a run holds RUN_DIR.
void export_hf_folder(const std::string& run_dir, const std::string& output, std::string_view argument);

// Continues `prompt` and returns the new text, passing each token's text to `on_text` as it is
// chosen. An empty prompt starts a new document. Generation ends at <|endoftext|> (not part of
// the text), after max_new_tokens, or when the context is full; a prompt of more tokens than the
// context is an error that gives both.
std::string generate_text(TrainedModel& trained, const std::string& prompt, const nn::GenerationOptions& options,
                          const std::function<void(const std::string&)>& on_text = {});

}  // namespace eddy::lm
