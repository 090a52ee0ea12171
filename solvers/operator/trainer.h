#pragma once
// Training a neural operator from its config: mini-batch AdamW over epochs with a schedule, the
// relative-L2 (or MSE) loss in physical units, evaluation on every test set (at its own
// resolution), checkpoints with --resume, clean stops on a non-finite loss and on Ctrl-C or
// SIGTERM (solvers/common/interrupt.h), and the results (predictions.h5, ParaView files) in the
// run folder.
//
// Under mpirun the training is data parallel on distributed tensors: rank 0's initial parameters
// are broadcast, each global batch (training.batch_size samples of the same shuffle on every rank)
// is split over the ranks as Shard(0), and the ranks' parts of the gradients are summed before
// every step, so N ranks take the steps one process would. Each rank evaluates its part of the
// test batches; rank 0 writes the run folder (docs/distributed.md).

#include <map>
#include <memory>
#include <iostream>
#include <ostream>
#include <string>

#include "eddy/dist/communicator.h"
#include "solvers/operator/dataset.h"
#include "solvers/operator/problem.h"

namespace eddy::operator_learning {

// The training settings a --resume may change (docs/operators.md); a change to any other key
// would resume another model or dataset than the checkpoint's.
inline const solvers::ResumableKeys kResumable = {
    "description",        "training.epochs", "training.learning_rate", "training.weight_decay",
    "training.evaluate_every", "training.schedule", "training.zero_stage", "output", "parallel", "device"};

// The network between its input and output normalisers; maps physical input to physical output.
class OperatorModel : public nn::Module {
 public:
  // Shaped for the training split's channels (and DeepONet's points); the normalisers'
  // statistics are over all ranks' training samples.
  OperatorModel(const OperatorProblem& problem, const Split& train,
                dist::Communicator& comm = dist::default_communicator());
  // FNO: [B, C_in, grid] -> [B, C_out, grid]. DeepONet: [B, sensors] -> [B, P] at `points`.
  Tensor predict(const Tensor& input, const Tensor& points = {});
  Tensor forward(const Tensor& input) override { return predict(input); }
  // Physical outputs in units of the training outputs' standard deviation per channel (1 where
  // data.normalize is off).
  Tensor in_output_deviations(const Tensor& output) const { return output_normalizer_->in_deviations(output); }

 private:
  ModelType type_;
  std::shared_ptr<Normalizer> input_normalizer_, output_normalizer_;
  std::shared_ptr<nn::Fno> fno_;
  std::shared_ptr<nn::DeepOnet> deeponet_;
};

// Mean over samples of ||prediction - target|| / ||target||, norms over all but axis 0.
Tensor relative_l2(const Tensor& prediction, const Tensor& target);

struct TrainOptions {
  bool resume = false;
  // Run the batch step and evaluation as written instead of compiled (`eddy train --eager`).
  bool eager = false;
  std::ostream* log = nullptr;
  // Warnings (a run folder written over, a problem far from unit scale) go here also when `log` is
  // null; null: nowhere.
  std::ostream* warnings = &std::cerr;
  bool terminal = false;
  // The ranks to train on; null: the process-wide communicator (all ranks of an mpirun job).
  dist::Communicator* communicator = nullptr;
};

struct TrainResult {
  bool finished = false;  // false: stopped on a non-finite loss or by a signal (message says where)
  // The signal (SIGINT, SIGTERM; solvers/common/interrupt.h) that ended training early, or 0;
  // the checkpoint and results are then written as at the end.
  int interrupted = 0;
  std::string message;
  int64_t epochs = 0;
  double train_loss = 0;  // NaN when no training step was taken
  std::map<std::string, double> test_relative_l2;  // per test set
};

TrainResult train(const OperatorProblem& problem, const TrainOptions& options);

// What a checkpoint records of the training input file's shape, under this key: an FNO's padding
// and a DeepONet's query points follow the training grid, so export refuses a run whose training
// file has since changed shape (it rebuilt the model on the new grid, and predicted otherwise
// than the trainer).
inline constexpr const char* kTrainingShapeKey = "data.train (its input's shape in the file)";
std::string training_file_shape(const OperatorProblem& problem);

}  // namespace eddy::operator_learning
