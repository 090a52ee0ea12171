#include "solvers/lm/run.h"

#include <algorithm>
#include <filesystem>

#include "eddy/core/error.h"
#include "eddy/io/checkpoint.h"
#include "eddy/nn/init.h"
#include "solvers/common/resume_settings.h"
#include "solvers/common/training_loop.h"
#include "solvers/lm/corpus.h"
#include "solvers/lm/hf.h"
#include "solvers/lm/model.h"
#include "solvers/lm/trainer.h"

namespace eddy::lm {

namespace {

// The model section an HF folder's model would have had in a config.yaml.
ModelSpec model_spec_of(const nn::CausalLanguageModel& model) {
  ModelSpec spec;
  if (const auto* gpt2 = dynamic_cast<const nn::Gpt2Model*>(&model)) {
    const nn::Gpt2Options& o = gpt2->options();
    spec.architecture = Architecture::gpt2;
    spec.context = o.context_length;
    spec.hidden_size = o.hidden_size;
    spec.layers = o.layers;
    spec.heads = o.heads;
    spec.intermediate_size = o.intermediate_size;
    spec.tie_embeddings = o.tie_embeddings;
    return spec;
  }
  const nn::LlamaOptions& o = dynamic_cast<const nn::LlamaModel&>(model).options();
  spec.architecture = Architecture::llama;
  spec.context = o.context_length;
  spec.hidden_size = o.hidden_size;
  spec.layers = o.layers;
  spec.heads = o.heads;
  spec.kv_heads = o.kv_heads;
  spec.intermediate_size = o.intermediate_size;
  spec.tie_embeddings = o.tie_embeddings;
  spec.rope_theta = o.rope_theta;
  return spec;
}

// A Hugging Face folder (a config.json and no eddy config.yaml) rather than an eddy run.
bool is_hf_folder(const std::string& dir) {
  return !dir.empty() && !std::filesystem::exists(dir + "/config.yaml") &&
         std::filesystem::exists(dir + "/config.json");
}

TrainedModel load_hf_folder(const std::string& dir) {
  EDDY_CHECK(std::filesystem::exists(dir + "/tokenizer.json"), dir, " has a config.json but no tokenizer.json; ",
             "eddy reads a Hugging Face folder's tokenizer from its tokenizer.json");
  TrainedModel trained{LmProblem{}, io::BpeTokenizer::load(dir + "/tokenizer.json"), load_hf_model(dir), 0, {}, dir};
  trained.problem.source = dir + "/config.json";
  trained.problem.model = model_spec_of(*trained.model);
  EDDY_CHECK(trained.tokenizer->vocab_size() <= trained.model->vocab_size(), dir, "/tokenizer.json has ",
             trained.tokenizer->vocab_size(), " tokens, more than config.json's vocab_size ",
             trained.model->vocab_size());
  return trained;
}

// What generate, export and --resume read in `dir`, as paths relative to it, by the kind of folder
// it is: a training run's (a config.yaml beside a tokenizer.json or checkpoint, with its corpus and
// token files under data/) or a Hugging Face folder's (a config.json). Nothing for another folder,
// one holding a config.yaml of its own, say.
std::vector<std::string> files_read_in(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ignored;
  std::vector<std::string> read;
  if (fs::exists(dir / "config.yaml", ignored) &&
      (fs::exists(dir / "tokenizer.json", ignored) || fs::exists(dir / "checkpoint.safetensors", ignored))) {
    LmProblem layout;
    layout.output.dir = dir.string();
    const CorpusPaths corpus = corpus_paths(layout);
    read = {"config.yaml", "history.h5", "checkpoint.safetensors"};
    for (const std::string& path : {corpus.tokenizer, corpus.description, corpus.train_tokens, corpus.validation_tokens}) {
      read.push_back(fs::path(path).lexically_relative(dir).generic_string());
    }
  }
  if (fs::exists(dir / "config.json", ignored)) {
    // transformers reads the tokenizer's two side files too.
    read.insert(read.end(), {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json",
                             "tokenizer_config.json", "special_tokens_map.json"});
  }
  return read;
}

}  // namespace

void refuse_the_runs_own_files(const std::string& run_dir, const std::string& output, bool folder,
                               std::string_view argument) {
  namespace fs = std::filesystem;
  std::error_code ignored;
  // Absolute first: a relative path whose first folder does not exist yet stayed relative, and its
  // folders' parents became the working directory.
  const fs::path run = fs::weakly_canonical(fs::absolute(run_dir, ignored), ignored);
  const fs::path target = fs::weakly_canonical(fs::absolute(output, ignored), ignored);
  if (folder) {
    if (target == run) {
      throw Error(cat(argument, " ", output, " is the run folder itself; give the export a folder of its own"));
    }
    // An export into a training run's folder replaced its tokenizer.json.
    const std::vector<std::string> read = files_read_in(target);
    if (std::find(read.begin(), read.end(), "config.yaml") != read.end()) {
      throw Error(cat(argument, " ", output, " is the folder of a training run (its config.yaml and tokenizer.json "
                      "or checkpoint); give the export a folder of its own"));
    }
    return;
  }
  // This run's files, and another run's: a model quantised onto another run's checkpoint left that
  // run unloadable.
  for (const fs::path& dir : {run, target.parent_path(), target.parent_path().parent_path()}) {
    const std::vector<std::string> read = files_read_in(dir);
    const std::string within = target.lexically_relative(dir).generic_string();
    if (std::find(read.begin(), read.end(), within) != read.end()) {
      throw Error(cat(argument, " ", output, " is ", dir == run ? std::string("the run's own ") :
                      cat("the run ", dir.string(), "'s own "), within,
                      ", which generate, export and --resume read; give another file"));
    }
  }
}

void export_hf_folder(const std::string& run_dir, const std::string& output, std::string_view argument) {
  // Written again, its generation_config.json and special tokens became eddy's <|endoftext|>: a
  // model whose eos_token_id lists other ids no longer stopped.
  EDDY_CHECK(!is_hf_folder(run_dir), "lm export: ", run_dir, " is a Hugging Face folder already (config.json, "
             "model.safetensors, tokenizer.json); copy it instead: export writes the run folders of `eddy lm train`");
  refuse_the_runs_own_files(run_dir, output, true, argument);
  solvers::refuse_export_while_a_run_holds(run_dir);
  const TrainedModel trained = load_trained_model(run_dir);
  save_hf_folder(*trained.model, *trained.tokenizer, output);
}

TrainedModel load_trained_model(const std::string& run_dir) {
  if (is_hf_folder(run_dir)) return load_hf_folder(run_dir);
  for (const char* file : {"config.yaml", "tokenizer.json", "checkpoint.safetensors"}) {
    EDDY_CHECK(std::filesystem::exists(run_dir + "/" + file), run_dir, " has no ", file,
               "; give a run folder written by `eddy lm train` (its output.dir) that has written a checkpoint, ",
               "or a Hugging Face folder (config.json, model.safetensors, tokenizer.json)");
  }
  auto config = io::Config::load(run_dir + "/config.yaml", {}, io::Config::RelativePaths::working_directory);
  TrainedModel trained{read_lm_problem(*config, /*for_training=*/false), io::BpeTokenizer::load(run_dir + "/tokenizer.json"), nullptr, 0, {}, run_dir};
  {
    // load_checkpoint sets every parameter (it refuses a file that lacks one).
    nn::init::SkipRandomInitialisation loaded_next;
    trained.model = make_model(trained.problem.model, trained.tokenizer->vocab_size(),
                               trained.problem.training.dtype, trained.problem.training.seed);
  }
  const io::CheckpointInfo info =
      solvers::load_run_checkpoint(run_dir, trained.problem.derived_settings, kResumable, *trained.model);
  trained.step = info.step;
  // For inference, as a Hugging Face folder loads: in training mode a run with dropout gave
  // different logits on every call.
  trained.model->eval();
  return trained;
}

std::string generate_text(TrainedModel& trained, const std::string& prompt, const nn::GenerationOptions& options,
                          const std::function<void(const std::string&)>& on_text) {
  const io::BpeTokenizer& tokenizer = *trained.tokenizer;
  // An eddy run stops at and starts from <|endoftext|>; a Hugging Face folder where its config
  // says, as transformers' generate does (a chat model's eos is not <|endoftext|>).
  const std::optional<int32_t> end_of_text = tokenizer.token_to_id(kEndOfText);
  SpecialTokenIds special;
  if (is_hf_folder(trained.run_dir)) special = hf_special_token_ids(trained.run_dir);
  if (special.end.empty() && end_of_text) special.end.push_back(*end_of_text);
  if (!special.start) special.start = end_of_text;
  // An id outside the vocabulary is never drawn, so it stops nothing (transformers' default eos,
  // 50256, in a folder of a small vocabulary was refused as "stop token 0"); as a start, it is
  // refused naming where it came from.
  const int32_t vocabulary = tokenizer.vocab_size();
  std::erase_if(special.end, [&](int32_t id) { return id >= vocabulary; });
  std::vector<int32_t> prompt_ids = tokenizer.encode(prompt);
  EDDY_CHECK(!prompt_ids.empty() || !special.start || *special.start < vocabulary, "the prompt is empty and the "
             "token to start from, ", *special.start, " (bos_token_id of ", trained.run_dir, "), is outside the "
             "vocabulary of ", vocabulary, " tokens; give a prompt");
  // No prompt: the start of a document, which is what follows an end of text in training.
  if (prompt_ids.empty() && special.start) prompt_ids.push_back(*special.start);
  EDDY_CHECK(!prompt_ids.empty(), "the prompt is empty and the model names no token to start from (",
             kEndOfText, ", or a Hugging Face folder's bos_token_id)");
  const int64_t context = trained.model->context_length();
  EDDY_CHECK(static_cast<int64_t>(prompt_ids.size()) <= context, "the prompt is ", prompt_ids.size(),
             " tokens long, more than the model's context of ", context, " tokens; shorten it");
  nn::GenerationOptions until_end = options;
  until_end.stop_tokens.insert(until_end.stop_tokens.end(), special.end.begin(), special.end.end());
  until_end.vocabulary = tokenizer.vocab_size();  // a padded embedding's extra ids decode to nothing
  std::string text;
  nn::generate(*trained.model, prompt_ids, until_end, [&](int32_t id) {
    if (std::find(special.end.begin(), special.end.end(), id) != special.end.end()) return;
    const std::string piece = tokenizer.decode({id});
    text += piece;
    if (on_text) on_text(piece);
  });
  return text;
}

}  // namespace eddy::lm
