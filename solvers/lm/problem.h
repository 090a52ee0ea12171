#pragma once
// A language-model run as its YAML config describes it (`eddy lm train`): the corpus and how it
// is split, the tokenizer, the model (GPT-2 or Llama layout), training and output. Reading checks
// every key and value; corpus files are read later, by prepare_corpus.

#include <optional>
#include <string>
#include <vector>

#include "eddy/core/dtype.h"
#include "eddy/core/shape.h"
#include "eddy/io/config.h"
#include "eddy/optim/schedule.h"
#include "solvers/common/resume_settings.h"
#include "solvers/common/training_config.h"

namespace eddy::lm {

struct CorpusSpec {
  // Glob patterns of text files, read in sorted order; each must match at least one file.
  std::vector<std::string> files;
  // Glob patterns of file names (not paths) to leave out, e.g. "*.dat".
  std::vector<std::string> exclude;
  // A line of exactly this text ends a document (fortune files use "%"); empty: a file is one
  // document. Documents are joined by the end-of-text token.
  std::string separator;
  // The share of documents held out for validation, chosen by the seed.
  double validation_fraction = 0.05;
  std::string where;  // "file:line:col: data: ", for errors found when reading the files
};

struct TokenizerSpec {
  // A tokenizer.json to use as is; empty: train one on the training documents.
  std::string file;
  int32_t vocab_size = 4096;
  int64_t min_frequency = 2;
};

enum class Architecture { gpt2, llama };

struct ModelSpec {
  Architecture architecture = Architecture::gpt2;
  int64_t context = 256;
  int64_t hidden_size = 256;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t kv_heads = 0;           // llama: grouped-query heads; 0: as many as heads
  int64_t intermediate_size = 0;  // 0: 4 * hidden_size (gpt2), 8/3 * hidden_size rounded up to 32 (llama)
  double dropout = 0;
  bool tie_embeddings = true;
  double rope_theta = 10000;      // llama
};

struct TrainingSpec {
  int64_t steps = 1000;            // optimiser steps
  int64_t batch_size = 16;         // windows per micro-batch
  int64_t accumulation = 1;        // micro-batches per optimiser step
  double learning_rate = 1e-3;
  double weight_decay = 0.1;
  double beta1 = 0.9, beta2 = 0.95;
  double clip = 1.0;               // global gradient norm; 0: no clipping
  optim::ScheduleSpec schedule;    // `every` and `warmup` count optimiser steps
  int64_t evaluate_every = 100;
  int64_t evaluation_batches = 8;  // fixed validation windows: this many batches of batch_size
  DType dtype = DType::f32;
  // bfloat16: the float32 model's matrix products in bfloat16 (ops/autocast.h), in the CPU's
  // bfloat16 instructions where it has them; none: float32 throughout.
  std::optional<DType> autocast;
  uint64_t seed = 0;
  // 1: under mpirun, each data-parallel rank keeps AdamW's moments for its share of the
  // parameters only (ZeRO stage 1, dist/sharded_optimizer.h); 0: every rank keeps them all.
  int64_t zero_stage = 0;
};

struct OutputSpec {
  std::string dir;
  int64_t checkpoint_every = 100;  // steps
};

struct LmProblem {
  std::string source;
  std::string description;
  CorpusSpec corpus;
  TokenizerSpec tokenizer;
  ModelSpec model;
  TrainingSpec training;
  OutputSpec output;
  // `parallel:` how the ranks of an mpirun job share the work, on a mesh with axes named dp (the
  // batch split) and mp (attention heads, MLP units and the vocabulary split, Megatron's layout).
  // Without it, a job of several ranks is data parallel; one process ignores it, so a file runs
  // there unchanged.
  solvers::ParallelSpec parallel;
  // device: where the model, the batches and the training step live.
  solvers::DeviceSpec device;
  std::string resolved_config;
  // The defaults derived from other keys, which resolved_config leaves out (resume_settings.h).
  solvers::Settings derived_settings;
  std::string config_hash;
};

/// Reads and validates an `eddy lm train` file. `for_training` also refuses a model or batch too
/// large for this machine's memory; a trained run's config is read without it, for its model.
LmProblem read_lm_problem(io::Config& config, bool for_training = true);

}  // namespace eddy::lm
