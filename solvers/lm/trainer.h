#pragma once
// Training a language model from its config (`eddy lm train`): AdamW with warmup and a cosine
// schedule, gradient clipping and accumulation over random context windows of the training
// tokens, validation loss and perplexity on fixed windows every evaluate_every steps, atomic
// checkpoints with --resume, clean stops on a non-finite loss and on Ctrl-C or SIGTERM
// (solvers/common/interrupt.h), and the history in the run folder.
//
// A run folder holds config.yaml, tokenizer.json, data/ (the token files), checkpoint.safetensors
// (the model with Hugging Face's parameter names, the optimiser and the history) and history.h5.

#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "solvers/lm/problem.h"

namespace eddy::lm {

// The training settings a --resume may change (docs/lm.md); a change to any other key would
// resume another model or corpus than the checkpoint's.
// `parallel` too: the checkpoint holds the whole model, which any mesh places anew.
inline const solvers::ResumableKeys kResumable = {
    "description",        "training.steps",          "training.learning_rate",     "training.weight_decay",
    "training.clip",      "training.evaluate_every", "training.evaluation_batches", "training.schedule",
    "output",             "parallel",                "training.zero_stage",        "device",
    "training.autocast"};

struct TrainOptions {
  bool resume = false;
  // Run the training step and evaluation as written instead of compiled (`--eager`).
  bool eager = false;
  std::ostream* log = nullptr;
  // Warnings (a run folder written over, a problem far from unit scale) go here also when `log` is
  // null; null: nowhere.
  std::ostream* warnings = &std::cerr;
  bool terminal = false;
};

struct TrainResult {
  bool finished = false;  // false: stopped on a non-finite loss or by a signal (message says where)
  // The signal (SIGINT, SIGTERM; solvers/common/interrupt.h) that ended training early, or 0;
  // the checkpoint and history are then written as at the end.
  int interrupted = 0;
  std::string message;
  int64_t steps = 0;
  double train_loss = 0;       // the last step's; NaN when no step was taken
  double validation_loss = 0;  // the last evaluation's
  int64_t parameters = 0;
  // Wall seconds of each step this call ran (its micro-batches, clipping and optimizer update;
  // not evaluation or checkpoints); the first includes tracing and compiling the step.
  std::vector<double> step_seconds;
  int64_t tokens_per_step = 0;  // batch_size x context x accumulation
};

TrainResult train(const LmProblem& problem, const TrainOptions& options);

}  // namespace eddy::lm
