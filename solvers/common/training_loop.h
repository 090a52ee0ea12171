#pragma once
// The training loop the solvers share (`eddy solve`'s Adam steps, `eddy train`'s epochs): steps
// from 0, or from the step a --resume checkpoint was written at, up to a total; a checkpoint
// every `checkpoint_every` steps; and a clean stop on a non-finite loss. What a step does (its
// updates, records, validation, progress details) is the trainer's, through hooks.
//
// A checkpoint is written only once the loss at its parameters has been seen to be finite: the
// one due after step k is written at the first update of step k + 1, once that update's loss is
// checked, so the checkpoint kept after a non-finite stop is a good one.
//
// Ctrl-C and SIGTERM (interrupt.h): the loop accepts them while it exists and ends after the step
// in which one arrived, on every rank; the trainer then finishes as after the last step (its
// checks, the checkpoint and the results) and says why it stopped.
//
// Data parallel: every rank runs the loop alike (the hooks return the loss of all ranks, so every
// rank stops at the same update), the ranks start from rank 0's trainable tensors, and rank 0
// alone writes the run folder.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eddy/dist/communicator.h"
#include "eddy/nn/module.h"
#include "solvers/common/interrupt.h"
#include "solvers/common/progress.h"
#include "solvers/common/resume_settings.h"
#include "solvers/common/training_config.h"

namespace eddy::solvers {

struct TrainingRun {
  std::string dir;              // the run folder: config.yaml, checkpoint.safetensors
  std::string resolved_config;  // written as config.yaml
  std::string config_hash;      // of resolved_config, kept in the checkpoint
  bool resume = false;
  // What a non-finite stop suggests checking besides the learning rate ("the data").
  std::string suspect;
  // The keys of resolved_config that a resumed run may change (resume_settings.h); the checkpoint
  // records the others.
  ResumableKeys resumable{};
  // Keys that checkpoints of an earlier eddy do not record, each with the value that eddy behaved
  // as: such a checkpoint resumes when this run has that value, and is refused otherwise.
  Settings added_later{};
  // The run's length in the loop's steps, where given: a resume from a checkpoint past it is
  // refused (it finished at once and wrote config.yaml with the shorter length).
  std::optional<RunLength> length{};
  // What a checkpoint records besides the config's keys, which a resume must match as it does
  // those (the content of an operator run's training data, the defaults derived from other keys).
  Settings recorded{};
  // The config file the run was read from (not a file for a Python dict): never written over.
  std::string config_file{};
};

// What a trainer does in the loop; begin_step and end_step may be left empty, and restore is
// called only when resuming.
struct TrainingHooks {
  // Optimiser updates per step (an epoch's mini-batches).
  int64_t updates_per_step = 1;
  // Before step `step`'s updates: its learning rate, resampling, the epoch's shuffle.
  std::function<void(int64_t step)> begin_step;
  // Update `update` of step `step` up to the optimiser step: returns the loss over all ranks.
  std::function<double(int64_t step, int64_t update)> evaluate;
  // The optimiser step, once that loss is known to be finite.
  std::function<void()> apply;
  // After the step's updates, `done` = step + 1: records, validation, progress, and the changes
  // (loss weights, added points) that the checkpoint due at `done` is to hold.
  std::function<void(int64_t done)> end_step;
  // The start of the message for a non-finite `loss` at that update ("Adam stopped at step 12:
  // the loss is NaN (pde NaN, left 0.1)").
  std::function<std::string(int64_t step, int64_t update, double loss)> describe_stop;
  // What a checkpoint holds besides the model (optimiser state, history), and restoring it.
  std::function<nn::StateDict()> training_state;
  std::function<void(const nn::StateDict&)> restore;
  // On --resume, after restore, with the checkpoint's step: a refusal here leaves the run folder
  // as it was (config.yaml is written after it). May be left empty.
  std::function<void(int64_t step)> check_resumed_step;
};

// A loss for a stop message: "NaN" where printing gave "nan" or "-nan" by the value's sign bit.
std::string loss_text(double loss);

struct NonFiniteStop {
  int64_t step = 0;  // the step whose update saw the loss
  // The non-finite loss; for a stop on the training state (save), the loss there, which is finite,
  // where the caller knows it, else NaN.
  double loss = 0;
  std::string message;
};

// Every rank's copy of rank 0's `text` (collective).
std::string text_of_rank_0(dist::Communicator& comm, const std::string& text);

// The checkpoint of the run whose folder is `dir`.
std::string checkpoint_path(const std::string& dir);

// The folders the export commands write into the run folder `dir` unless told otherwise:
// `eddy export`'s artifact and `eddy lm export`'s Hugging Face folder. A new run over `dir`
// removes them, as it does the old results: loaded after it, they had given the old run's
// predictions, silently.
std::string default_export_dir(const std::string& dir);
std::string default_hf_export_dir(const std::string& dir);
// The files each writes there: only those are removed, the rest of the folder (a model card beside
// the Hugging Face files, the user's notes) is kept.
inline const std::vector<std::string> kExportFiles{"graph.json", "meta.json", "weights.safetensors"};
inline const std::vector<std::string> kHfExportFiles{"config.json", "model.safetensors", "tokenizer.json",
                                                     "tokenizer_config.json", "generation_config.json"};

// Refuses to export from the run folder `dir` while a run holds it: a run that starts anew there
// removes the exports at its start, so one written meanwhile, of the old run's checkpoint,
// outlived it beside the new results.
void refuse_export_while_a_run_holds(const std::string& dir);

// Removes the files in `dir` whose names match `names` (an ECMAScript regular expression, the
// whole name): an earlier run's outputs that this run may not write again, which ParaView would
// otherwise read as part of its results (an image series' extra slices). Returns the names
// removed.
std::vector<std::string> remove_earlier_outputs(const std::string& dir, const std::string& names);

// Refuses, on every rank and naming the keys, ranks started with different configs. A trainer calls
// it before its first collective: one that only some configs make (ZeRO's parameter check, the
// operator normalisers' sums, a mesh's communicators) met no partner on the other ranks, and the
// job hung where the check came later. `eager` (--eager) is compared too: a compiled rank's
// collectives met an eager rank's others, and the job hung or read garbage.
void require_same_config_on_every_rank(dist::Communicator& comm, const std::string& config_hash,
                                       const std::string& resolved_config, bool eager = false);

// --resume: refuses, naming the key, a checkpoint in `run`'s folder written by a run whose
// settings this one does not keep, from the checkpoint's metadata alone. TrainingLoop::start
// checks the same; a trainer that writes into the run folder before it (the language model's
// corpus and tokenizer) checks first, so that a refused resume leaves the folder as it was and
// names the changed key rather than what the change did.
void check_resume(const TrainingRun& run);

class TrainingLoop {
 public:
  // `trainable`: what the ranks take from rank 0 (the model's parameters and any others).
  TrainingLoop(TrainingRun run, nn::Module& model, std::vector<Tensor> trainable, dist::Communicator& comm,
               ProgressLine& progress, TrainingHooks hooks);
  ~TrainingLoop();
  TrainingLoop(const TrainingLoop&) = delete;
  TrainingLoop& operator=(const TrainingLoop&) = delete;

  // Every rank runs the same config by now (the trainer called require_same_config_on_every_rank).
  // Loads the checkpoint when resuming (the model, then the rest through `restore`), once its run's
  // settings are seen to be this run's; then rank 0 takes the run folder, which the loop holds
  // until it is destroyed (another run given the same folder meanwhile is refused), and writes
  // its config.yaml, and the ranks take rank 0's trainable tensors. Returns the step to go on from. Resuming first
  // means a checkpoint that does not fit fails before config.yaml is replaced by a config that does
  // not describe the checkpoint.
  int64_t start();
  // Takes steps from `step` until `total`, advancing `step`, with a checkpoint due after every
  // `checkpoint_every` steps (0: none); the progress line's rate and ETA count from `step`. A stop
  // asked for by a signal ends the steps early, with no stop returned: `step` is then the steps
  // done and interrupted() the signal.
  std::optional<NonFiniteStop> run(int64_t& step, int64_t total, int64_t checkpoint_every);
  // The signal that stopped run() early, or 0.
  int interrupted() const { return interrupted_; }
  // Writes the checkpoint at `step` (rank 0; the others note that it exists), unless a tensor of
  // the state holds NaN or an infinity while the loss is still finite (AdamW's second moment past
  // float32's range): then nothing is written, the last good checkpoint stays, and the stop is
  // returned, naming the tensor, on every rank.
  [[nodiscard]] std::optional<NonFiniteStop> save(int64_t step);
  // Ends the progress line and completes `what` with the checkpoint kept and what to try: the
  // learning rate only `after_updates` (a loss not finite before any update is the problem's).
  std::string stop_message(const std::string& what, bool after_updates);
  // Whether run() has applied an optimiser update in this process.
  bool updated() const { return updated_; }
  // Whether the checkpoint file is a good state of this run: written by it, or resumed from.
  bool has_good_checkpoint() const { return saved_; }

 private:
  // A new run over a finished or stopped one: removes that run's results and exports, and says so.
  void remove_earlier_run();

  TrainingRun run_;
  std::string checkpoint_;
  Settings settings_;  // what a run resuming this one's checkpoint must keep
  nn::Module& model_;
  std::vector<Tensor> trainable_;
  dist::Communicator& comm_;
  ProgressLine& progress_;
  TrainingHooks hooks_;
  bool saved_ = false;
  bool updated_ = false;
  int interrupted_ = 0;
  AcceptInterrupts accepting_;
  int folder_lock_ = -1;  // rank 0's open descriptor of the run folder, locked
};

}  // namespace eddy::solvers
