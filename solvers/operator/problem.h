#pragma once
// An operator-learning run as its YAML config describes it: the dataset (HDF5 files, keys,
// resolutions, normalisation), the model (FNO or DeepONet), training and output. Reading checks
// every key and value; data files are opened later, by load_data.

#include <string>
#include <vector>

#include "eddy/io/config.h"
#include "eddy/nn/neural_operators.h"
#include "eddy/optim/schedule.h"
#include "solvers/common/resume_settings.h"
#include "solvers/common/training_config.h"

namespace eddy::operator_learning {

// One set of samples: input and output datasets, optionally every `stride`-th grid point.
struct SplitSpec {
  std::string name;
  std::string file;
  std::string input, output;
  int64_t first = 0;     // the file's row of the split's first sample
  int64_t samples = -1;  // how many from `first`; -1: all the rest
  int64_t stride = 1;
  std::string where;     // "file:line:col: data.test[0]: ", for errors found when loading
};

struct DataSpec {
  SplitSpec train;
  std::vector<SplitSpec> tests;
  // Whether arrays carry a channel axis after the sample axis ([N, C, n...]); without one
  // ([N, n...]) the data is a single channel.
  bool input_channels = false;
  bool output_channels = false;
  // Standardise inputs and outputs per channel with the training set's mean and deviation.
  bool normalize = true;
  // DeepONet: the dataset of output coordinates [P, d] in the first split's file; empty: P
  // points evenly spaced on [0, 1).
  std::string points;
};

enum class ModelType { fno, deeponet };

struct ModelSpec {
  ModelType type = ModelType::fno;
  nn::FnoOptions fno;            // channel counts are filled in from the data
  nn::DeepOnetOptions deeponet;  // sensors and coordinates likewise
  // "file:line:col: model.modes: " and the same for model.padding: the prefix of errors found once
  // the data's grid is known.
  std::string modes_where = "model.modes: ", padding_where = "model.padding: ";
};

enum class LossType { relative_l2, mse };

struct TrainingSpec {
  int64_t epochs = 100;
  int64_t batch_size = 20;
  double learning_rate = 1e-3;
  double weight_decay = 1e-4;  // AdamW's decoupled decay
  optim::ScheduleSpec schedule;  // `every` counts epochs
  LossType loss = LossType::relative_l2;
  int64_t evaluate_every = 1;   // epochs between test evaluations
  DType dtype = DType::f32;
  uint64_t seed = 0;
  // 1: under mpirun, each rank keeps AdamW's moments for its share of the parameters only (ZeRO
  // stage 1, dist/sharded_optimizer.h); 0: every rank keeps them all.
  int64_t zero_stage = 0;
};

struct OutputSpec {
  std::string dir;
  int64_t checkpoint_every = 10;  // epochs
  bool vtk = true;
};

struct OperatorProblem {
  std::string source;
  std::string description;
  DataSpec data;
  ModelSpec model;
  TrainingSpec training;
  OutputSpec output;
  // Axes dp (the samples of each batch) and grid (the first spatial axis of an FNO's fields).
  solvers::ParallelSpec parallel;
  // device: where the model, the batches and the training step live.
  solvers::DeviceSpec device;
  std::string resolved_config;
  // The defaults derived from other keys, which resolved_config leaves out (resume_settings.h).
  solvers::Settings derived_settings;
  std::string config_hash;
};

// `for_training` false (export): without the check that training's weights, gradients and AdamW's
// moments fit, so that a run trained on a larger machine exports on a smaller one.
OperatorProblem read_operator_problem(io::Config& config, bool for_training = true);

}  // namespace eddy::operator_learning
