#include "solvers/operator/trainer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <span>

#include "eddy/autodiff/tape.h"
#include "eddy/core/fingerprint.h"
#include "eddy/core/memory.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/dist/dtensor.h"
#include "eddy/dist/sharded_optimizer.h"
#include "eddy/fft/spectral.h"
#include "eddy/io/hdf5.h"
#include "eddy/io/vtk.h"
#include "eddy/ops/ops.h"
#include "eddy/optim/adam.h"
#include "solvers/common/checkpoint_history.h"
#include "solvers/common/interrupt.h"
#include "solvers/common/progress.h"
#include "solvers/common/run_files.h"
#include "solvers/common/step_function.h"
#include "solvers/common/training_config.h"
#include "solvers/common/training_loop.h"

namespace eddy::operator_learning {
namespace {

// Test sets are evaluated in batches of this many samples, to bound memory on large grids.
constexpr int64_t kEvaluationBatch = 64;

struct History {
  std::vector<double> epochs, train_loss;
  std::map<std::string, std::vector<double>> test;  // per test set, at evaluated epochs
  std::vector<double> test_epochs;
};

// The mean squared error is taken in units of the outputs' deviation, as the relative L2 loss is
// free of their magnitude: on physical values it scaled with their square, and data of magnitude
// 1e-4 gave gradients below AdamW's eps, so the model learned nothing (test error 1.0).
Tensor loss_of(LossType type, const OperatorModel& model, const Tensor& prediction, const Tensor& target) {
  return type == LossType::mse ? mse_loss(model.in_output_deviations(prediction), model.in_output_deviations(target))
                               : relative_l2(prediction, target);
}

// A step function's inputs with DeepONet's query points last: test sets with the same sensors
// can have different points, so the points are an input of the compiled function, not a capture.
std::vector<Tensor> with_points(std::initializer_list<Tensor> inputs, const Tensor& points) {
  std::vector<Tensor> all;
  all.reserve(inputs.size() + 1);
  all.insert(all.end(), inputs.begin(), inputs.end());
  if (points.defined()) all.push_back(points);
  return all;
}

// The query points at `position` of a step function's inputs; undefined for grid models.
Tensor points_at(const std::vector<Tensor>& inputs, size_t position) {
  return inputs.size() > position ? inputs[position] : Tensor();
}

// Where batches lie on the job's process mesh: the `parallel` section's, or without one a single
// axis dp over every rank. Each batch's samples split over dp (Shard(0), in shares a sample apart
// where dp does not divide the batch), an FNO's fields also along their first spatial axis over
// grid; the backward pass sums the gradients over the ranks. On one process batches are ordinary
// tensors.
struct Placing {
  std::shared_ptr<const dist::ProcessMesh> mesh;
  std::vector<Placement> training, evaluation;  // evaluation: test batches, which every rank holds
  std::vector<Placement> shares;                // a dp rank's share of a batch, whole on grid
  dist::Communicator* data_parallel = nullptr;  // the dp axis's ranks; null: no dp axis

  // A batch of a test set, which every rank holds whole: each keeps its part.
  Tensor place_for_evaluation(const Tensor& batch) const {
    return mesh ? dist::shard_tensor(batch, mesh, evaluation) : batch;
  }
  // This dp rank's share of a training batch of `rows` samples, as the distributed batch (each
  // grid rank keeps its rows, without communication).
  Tensor place_share(const Tensor& share, int64_t rows) const {
    if (!mesh) return share;
    Shape whole = share.shape();
    whole[0] = rows;
    return dist::reshard(dist::from_local(share, mesh, shares, whole), training);
  }
};

Placing placing_for(const OperatorProblem& p, dist::Communicator& world) {
  Placing placing;
  if (world.size() == 1) return placing;
  placing.mesh = solvers::make_mesh(p.parallel, "dp", world);
  const std::vector<std::string>& names = placing.mesh->names();
  placing.training.assign(names.size(), Placement::replicate());
  placing.evaluation = placing.shares = placing.training;
  for (size_t axis = 0; axis < names.size(); ++axis) {
    if (names[axis] == "dp") {
      placing.training[axis] = placing.evaluation[axis] = placing.shares[axis] = Placement::shard(0);
      placing.data_parallel = &placing.mesh->communicator(static_cast<int64_t>(axis));
    }
    if (names[axis] == "grid") placing.training[axis] = placing.evaluation[axis] = Placement::shard(2);
  }
  return placing;
}

// Refuses fields whose grid the mesh cannot split evenly (the distributed FFT's slabs), naming
// the section.
void check_grid_divisible(const OperatorProblem& p, const Dataset& data) {
  const int64_t grid = p.parallel.ranks("grid");
  if (grid == 1) return;  // (a DeepONet's inputs have no grid axis)
  auto check_grid = [&](const Split& split) {
    const int64_t rows = split.input.shape()[2];
    EDDY_CHECK(rows % grid == 0, p.parallel.where, "grid = ", grid, " does not divide the first grid axis of split '",
               split.name, "' (", rows, " points)");
  };
  check_grid(data.train);
  for (const Split& split : data.tests) check_grid(split);
}

// Predictions for a whole split, in evaluation batches, without recording, as ordinary tensors.
// `forward` is the model's (compiled) prediction from a batch's input and the split's points.
Tensor predict_split(solvers::StepFunction& forward, const Split& split, const Placing& placing) {
  NoGradGuard no_grad;
  std::vector<Tensor> parts;
  for (int64_t start = 0; start < split.held(); start += kEvaluationBatch) {
    const int64_t stop = std::min(split.held(), start + kEvaluationBatch);
    const Tensor batch = placing.place_for_evaluation(slice(split.input, 0, start, stop));
    parts.push_back(dist::full_tensor(forward(with_points({batch}, split.points)).at(0)));
  }
  return concat(parts, 0);
}

// Relative L2 of each sample: [N]. The norms run over the axes in place, so a sample split over
// ranks along a grid axis sums its parts without gathering them.
Tensor per_sample_relative_l2(const Tensor& prediction, const Tensor& target) {
  std::vector<int64_t> within_sample(static_cast<size_t>(prediction.dim() - 1));
  std::iota(within_sample.begin(), within_sample.end(), 1);
  return norm(prediction - target, within_sample) / norm(target, within_sample);
}

// Sample 0 of a grid split as a ParaView image: input and output channels, prediction, error.
void write_sample_vti(const std::string& path, const Split& split, const Tensor& prediction) {
  const Shape grid(split.input.shape().begin() + 2, split.input.shape().end());
  std::vector<double> origin(grid.size(), 0.0), spacing;
  for (int64_t n : grid) spacing.push_back(1.0 / static_cast<double>(n));
  // [C, n...] -> [points, C] in C order, as write_vti wants.
  auto point_values = [](const Tensor& sample) {
    return contiguous(transpose(reshape(sample, {sample.shape()[0], -1}), 0, 1));
  };
  const Tensor target = squeeze(slice(split.output, 0, 0, 1), 0);
  const Tensor predicted = squeeze(slice(prediction, 0, 0, 1), 0);
  io::write_vti(path, origin, spacing, grid,
                {{"input", point_values(squeeze(slice(split.input, 0, 0, 1), 0))},
                 {"target", point_values(target)},
                 {"prediction", point_values(predicted)},
                 {"error", point_values(predicted - target)}});
}

// `predictions`: one per test set, in order.
// Each test set's mean relative L2 error of `predictions`.
std::map<std::string, double> test_errors(const Dataset& data, const std::vector<Tensor>& predictions) {
  std::map<std::string, double> errors;
  for (size_t i = 0; i < data.tests.size(); ++i) {
    errors[data.tests[i].name] = mean(per_sample_relative_l2(predictions[i], data.tests[i].output)).item<double>();
  }
  return errors;
}

void write_results(const OperatorProblem& p, const Dataset& data, const std::vector<Tensor>& predictions,
                   const History& history, const std::map<std::string, double>& errors) {
  io::Hdf5Writer out(p.output.dir + "/predictions.h5");
  // An earlier run's image of a test set this run does not have would be read as this run's.
  solvers::remove_earlier_outputs(p.output.dir, solvers::kOperatorSampleImages);
  for (size_t i = 0; i < data.tests.size(); ++i) {
    const Split& split = data.tests[i];
    const Tensor& prediction = predictions[i];
    const Tensor sample_errors = per_sample_relative_l2(prediction, split.output);
    const std::string group = "test/" + split.name;
    // In the data file's layout: an FNO's arrays without a channel axis there had one here, so
    // prediction - the file's test/u broadcast to [N, N, n...] instead of failing.
    const auto as_in_file = [&](const Tensor& values, bool has_channels) {
      return p.model.type == ModelType::fno && !has_channels ? squeeze(values, 1) : values;
    };
    out.write(group + "/input", as_in_file(split.input, p.data.input_channels));
    out.write(group + "/target", as_in_file(split.output, p.data.output_channels));
    out.write(group + "/prediction", as_in_file(prediction, p.data.output_channels));
    out.write(group + "/relative_l2", sample_errors);
    if (split.points.defined()) out.write(group + "/points", split.points);
    out.set_attribute(group, "mean_relative_l2", errors.at(split.name));
    if (p.output.vtk && !split.points.defined()) {
      write_sample_vti(p.output.dir + "/sample0_" + split.name + ".vti", split, prediction);
    }
  }
  out.write("history/epoch", tensor(history.epochs));
  out.write("history/train_loss", tensor(history.train_loss));
  if (!history.test_epochs.empty()) out.write("history/test_epoch", tensor(history.test_epochs));
  for (const auto& [name, values] : history.test) out.write("history/test_relative_l2/" + name, tensor(values));
  out.set_attribute("/", "config_hash", p.config_hash);
  out.commit();
}

// What a resumed run needs besides the model: the optimiser and the history so far.
nn::StateDict training_state(const optim::Optimizer& optimizer, const History& history) {
  nn::StateDict state = optimizer.state_dict();
  solvers::save_series(state, "epoch", history.epochs);
  solvers::save_series(state, "train_loss", history.train_loss);
  solvers::save_series(state, "test_epoch", history.test_epochs);
  for (const auto& [name, values] : history.test) solvers::save_series(state, "test." + name, values);
  return state;
}

void restore_history(const nn::StateDict& state, History& history, const std::string& checkpoint) {
  history.epochs = solvers::restored_series(state, "epoch", checkpoint);
  history.train_loss = solvers::restored_series(state, "train_loss", checkpoint);
  history.test_epochs = solvers::restored_series(state, "test_epoch", checkpoint);
  for (const auto& [key, values] : state) {
    if (key.starts_with("history.test.")) history.test[key.substr(13)] = values.to_vector<double>();
  }
}

}  // namespace

Tensor relative_l2(const Tensor& prediction, const Tensor& target) {
  EDDY_CHECK(prediction.shape() == target.shape(), "relative_l2: prediction ", prediction.shape(), " and target ",
             target.shape(), " differ in shape");
  return mean(per_sample_relative_l2(prediction, target));
}

namespace {

// The training split's content, as a sum of each sample's FNV-1a hash over all ranks: the same
// whichever ranks hold which samples, so a resume on another number of ranks still matches.
std::string training_data_fingerprint(const Split& train, dist::Communicator& comm) {
  uint64_t sum = 0;
  for (const Tensor& array : {train.input, train.output, train.points}) {
    if (!array.defined() || array.numel() == 0) continue;
    const Tensor host = contiguous(to(array, cpu()));
    const size_t row_bytes = static_cast<size_t>(host.numel() / host.shape()[0]) * dtype_size(host.dtype());
    const char* rows = static_cast<const char*>(host.raw_data());
    for (int64_t i = 0; i < host.shape()[0]; ++i) sum += fnv1a_words(rows + static_cast<size_t>(i) * row_bytes, row_bytes);
  }
  Tensor total = tensor(std::vector<int64_t>{static_cast<int64_t>(sum)});
  if (comm.size() > 1) comm.allreduce(total, total, dist::ReduceOp::sum);
  return hex_digits(static_cast<uint64_t>(total.item<int64_t>()));
}

}  // namespace

OperatorModel::OperatorModel(const OperatorProblem& problem, const Split& train, dist::Communicator& comm)
    : type_(problem.model.type) {
  const bool grid = type_ == ModelType::fno;
  input_normalizer_ = register_module(
      "input_normalizer", std::make_shared<Normalizer>(train.input, grid, problem.data.normalize, comm));
  output_normalizer_ = register_module(
      "output_normalizer", std::make_shared<Normalizer>(train.output, grid, problem.data.normalize, comm));
  if (grid) {
    nn::FnoOptions options = problem.model.fno;
    options.in_channels = train.input.shape()[1];
    options.out_channels = train.output.shape()[1];
    options.padding_grid.assign(train.input.shape().begin() + 2, train.input.shape().end());
    // A mode the training grid cannot hold gets no gradient: its weights would stay as initialised,
    // and a finer grid would use them so (1000 modes on 16 points: 100 times the parameters).
    // Every rank holds the whole training set, so the grid is whole here where the mesh splits it.
    for (size_t axis = 0; axis < options.modes.size(); ++axis) {
      const int64_t n = options.padding_grid[axis];
      const int64_t held = fft::spectral_modes_held(n, axis + 1 == options.modes.size());
      EDDY_CHECK(options.modes[axis] <= held, problem.model.modes_where, "entry ", axis, " = ", options.modes[axis],
                 " exceeds the ", held, " Fourier modes that the training grid's ", n,
                 " points hold along that axis; the others would never be trained");
    }
    // A layer's activations for a batch on the padded grid: a padding of 100000 asked for TiB
    // at the first step, in an error that named no key.
    double padded_points = 1;
    for (const int64_t n : options.padding_grid) padded_points *= static_cast<double>(n + options.padding);
    const double activation_bytes = static_cast<double>(problem.training.batch_size) *
                                    static_cast<double>(options.width) * padded_points *
                                    static_cast<double>(dtype_size(options.dtype));
    const UsableMemory memory = usable_memory();
    EDDY_CHECK(options.padding == 0 || memory.bytes == 0 || activation_bytes <= static_cast<double>(memory.bytes),
               problem.model.padding_where, "one layer's activations for a batch of ", problem.training.batch_size,
               " on the grid padded by ", options.padding, " need at least ", memory_text(activation_bytes),
               usable_memory_note());
    fno_ = register_module("fno", std::make_shared<nn::Fno>(options));
  } else {
    nn::DeepOnetOptions options = problem.model.deeponet;
    options.sensors = train.input.shape()[1];
    options.coordinates = train.points.shape()[1];
    deeponet_ = register_module("deeponet", std::make_shared<nn::DeepOnet>(options));
  }
}

Tensor OperatorModel::predict(const Tensor& input, const Tensor& points) {
  const Tensor encoded = input_normalizer_->encode(input);
  const Tensor output = fno_ ? fno_->forward(encoded) : deeponet_->evaluate(encoded, points);
  return output_normalizer_->decode(output);
}

std::string training_file_shape(const OperatorProblem& problem) {
  return to_string(io::hdf5_shape(problem.data.train.file, problem.data.train.input));
}

TrainResult train(const OperatorProblem& p, const TrainOptions& options) {
  dist::Communicator& comm = options.communicator ? *options.communicator : dist::default_communicator();
  solvers::require_same_config_on_every_rank(comm, p.config_hash, p.resolved_config, options.eager);
  const solvers::SolverScope scope(p.device, comm);
  const bool root = comm.rank() == 0;
  const Placing placing = placing_for(p, comm);
  // The ranks that split the training samples, each reading its consecutive share (the normalisers
  // sum over them): the mesh's dp axis's; the ranks along a grid axis hold the same samples.
  const std::unique_ptr<dist::Communicator> alone = dist::make_single_process_communicator();
  dist::Communicator& data_comm = placing.data_parallel ? *placing.data_parallel : *alone;

  // Everything that can fail on bad input (data files, the checkpoint to resume from) happens on
  // every rank alike before the first collective, so a bad run fails the same way everywhere.
  const Dataset data = load_data(p, data_comm);
  if (placing.mesh) check_grid_divisible(p, data);
  OperatorModel model(p, data.train, data_comm);
  optim::AdamOptions adam;
  adam.learning_rate = p.training.learning_rate;
  adam.weight_decay = p.training.weight_decay;
  const std::unique_ptr<optim::Optimizer> made = solvers::make_optimizer(
      p.training.zero_stage, model.parameters(),
      [adam](std::vector<Tensor> slices) { return std::make_unique<optim::AdamW>(std::move(slices), adam); },
      placing.data_parallel ? dist::RankGradients::to_sum : dist::RankGradients::identical,
      placing.data_parallel ? *placing.data_parallel : comm);
  optim::Optimizer& optimizer = *made;
  const auto schedule = optim::make_schedule(p.training.schedule, p.training.learning_rate, p.training.epochs);
  const std::vector<Tensor> parameters = model.parameters();

  History history;
  // The last epoch's predictions of the test sets, which its evaluation made and the results reuse.
  std::vector<Tensor> final_predictions;
  solvers::ProgressLine progress(root ? options.log : nullptr, options.terminal, 1, options.warnings);
  auto note = [&](const std::string& line) { progress.note(line); };
  const auto warn = solvers::rank_0_warnings(progress, root);
  // A batch's loss and its gradient, from the batch's input, target and points. Batches of
  // another size (the last one) compile again, once.
  solvers::StepFunction batch_step(
      "training step",
      [&](const std::vector<Tensor>& inputs) {
        const Tensor loss =
            loss_of(p.training.loss, model, model.predict(inputs[0], points_at(inputs, 2)), inputs[1]);
        std::vector<Tensor> outputs = grad({loss}, parameters);
        outputs.insert(outputs.begin(), loss);
        return outputs;
      },
      !options.eager, note, warn);
  solvers::StepFunction forward(
      "evaluation",
      [&](const std::vector<Tensor>& inputs) {
        return std::vector<Tensor>{model.predict(inputs[0], points_at(inputs, 1))};
      },
      !options.eager, note, warn);
  const int64_t n = data.train.size;
  std::vector<int64_t> order(n);
  double loss_sum = 0;  // over the epoch's samples

  solvers::TrainingHooks epochs;
  epochs.updates_per_step = (n + p.training.batch_size - 1) / p.training.batch_size;
  epochs.begin_step = [&](int64_t epoch) {
    optimizer.set_learning_rate(schedule->learning_rate(epoch));
    // Each epoch's order depends only on (seed, epoch), so a resumed run sees the same batches,
    // and every rank the same global batches.
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 shuffle(p.training.seed * 1000003 + static_cast<uint64_t>(epoch));
    std::shuffle(order.begin(), order.end(), shuffle);
    loss_sum = 0;
  };
  epochs.evaluate = [&](int64_t, int64_t b) {
    const int64_t start = b * p.training.batch_size, stop = std::min(n, start + p.training.batch_size);
    const std::span<const int64_t> batch(order.data() + start, static_cast<size_t>(stop - start));
    // Each rank's share of the batch, fetched from the ranks that hold the samples, and the
    // distributed batch those shares make; a rank whose share is empty still takes part.
    auto [share_input, share_output] = batch_share(data.train, batch, data_comm);
    const int64_t rows = stop - start;
    const Tensor input = placing.place_share(share_input, rows), output = placing.place_share(share_output, rows);
    optimizer.zero_grad();
    // The gradients come out as each dp rank's part, summed over dp once in apply: in the backward
    // pass each parameter's would be sent apart.
    std::optional<dist::DeferGradientSums> per_rank_parts;
    if (placing.data_parallel) per_rank_parts.emplace(*placing.data_parallel);
    const std::vector<Tensor> outputs = batch_step(with_points({input, output}, data.train.points));
    const double batch_loss = dist::full_tensor(outputs[0]).item<double>();
    optim::set_grads(parameters, std::vector<Tensor>(outputs.begin() + 1, outputs.end()));
    loss_sum += batch_loss * static_cast<double>(rows);
    return batch_loss;
  };
  epochs.apply = [&] {
    if (placing.data_parallel) solvers::sum_gradients(optimizer, parameters, *placing.data_parallel);
    optimizer.step();
  };
  epochs.end_step = [&](int64_t done) {
    history.epochs.push_back(static_cast<double>(done));
    history.train_loss.push_back(loss_sum / static_cast<double>(n));
    std::string details = cat("loss ", solvers::ProgressLine::format(history.train_loss.back()));
    // A last epoch off the evaluate_every cadence is evaluated for the results only (below): in
    // the checkpoint's history it stayed when a shortened run was resumed, a record that an
    // uninterrupted run lacks.
    const bool on_cadence = done % p.training.evaluate_every == 0;
    if (on_cadence || done == p.training.epochs) {
      if (on_cadence) history.test_epochs.push_back(static_cast<double>(done));
      for (const Split& split : data.tests) {
        const Tensor prediction = predict_split(forward, split, placing);
        if (done == p.training.epochs) final_predictions.push_back(prediction);
        const double error = relative_l2(prediction, split.output).item<double>();
        if (on_cadence) history.test[split.name].push_back(error);
        details += cat("  test(", split.name, ") ", solvers::ProgressLine::format(error));
      }
    }
    details += cat("  lr ", solvers::ProgressLine::format(optimizer.learning_rate()));
    progress.report("epoch", done, p.training.epochs, [&] { return details; }, false);
  };
  epochs.describe_stop = [&](int64_t epoch, int64_t b, double loss) {
    return cat("training stopped in epoch ", epoch + 1, ", batch ", b + 1, ": the loss is ", solvers::loss_text(loss));
  };
  const std::string checkpoint = solvers::checkpoint_path(p.output.dir);
  epochs.training_state = [&] { return training_state(optimizer, history); };
  epochs.restore = [&](const nn::StateDict& saved) {
    optimizer.load_state_dict(saved);
    restore_history(saved, history, checkpoint);
  };
  // A --resume onto other training data went on with the checkpoint's normalisers, its loss
  // jumping from 0.003 to 1.0, silently. Checkpoints written before they recorded it resume.
  const solvers::Settings data_content{
      {"data.train (its samples' content)", training_data_fingerprint(data.train, data_comm)},
      {kTrainingShapeKey, training_file_shape(p)}};
  solvers::Settings recorded = data_content;
  recorded.insert(p.derived_settings.begin(), p.derived_settings.end());
  // A run of before mse was taken in the outputs' deviations resumed with AdamW's moments of the
  // physical loss, its history in two units: refused, as a key it lacks.
  if (p.training.loss == LossType::mse) recorded["training.loss's units"] = "the training outputs' deviations";
  solvers::TrainingLoop loop(
      {p.output.dir, p.resolved_config, p.config_hash, options.resume, "the data", kResumable, data_content,
       solvers::RunLength{p.training.epochs, "training.epochs", "epoch"}, recorded, p.source},
      model, parameters,
      comm, progress, epochs);

  TrainResult result;
  int64_t epoch = loop.start();
  if (auto stopped = loop.run(epoch, p.training.epochs, p.output.checkpoint_every)) {
    result.epochs = stopped->step;
    result.message = stopped->message;
    return result;
  }

  result.epochs = epoch;
  result.train_loss = history.train_loss.empty() ? std::nan("") : history.train_loss.back();
  // Rank 0 writes the results and decides whether the run finished; the others wait for its word.
  Tensor finished = tensor(std::vector<int64_t>{0});
  std::vector<Tensor> predictions = std::move(final_predictions);
  if (predictions.empty()) {  // a run resumed at its last epoch evaluates here
    for (const Split& split : data.tests) predictions.push_back(predict_split(forward, split, placing));
  }
  if (root) {
    result.test_relative_l2 = test_errors(data, predictions);
    finished.fill_(1);
    for (const auto& [name, error] : result.test_relative_l2) {
      if (!std::isfinite(error)) {
        finished.fill_(0);
        result.message = cat("training ended with a non-finite error on test set '", name, "'; ",
                             loop.has_good_checkpoint() ? "the last good checkpoint is " + checkpoint
                                                        : std::string("no checkpoint was written by this run"));
        break;
      }
    }
  }
  comm.broadcast(finished, 0);
  // Every rank returns the test errors, so that a script branching on them takes one path.
  std::vector<double> error_values(data.tests.size(), 0.0);
  for (size_t i = 0; root && i < data.tests.size(); ++i) error_values[i] = result.test_relative_l2[data.tests[i].name];
  Tensor errors = tensor(error_values);
  comm.broadcast(errors, 0);
  error_values = errors.to_vector<double>();
  for (size_t i = 0; i < data.tests.size(); ++i) result.test_relative_l2[data.tests[i].name] = error_values[i];
  History results = history;
  if (results.test_epochs.empty() || results.test_epochs.back() != static_cast<double>(epoch)) {
    results.test_epochs.push_back(static_cast<double>(epoch));
    for (const auto& [name, error] : result.test_relative_l2) results.test[name].push_back(error);
  }
  if (finished.item<int64_t>() == 0) {
    if (root) write_results(p, data, predictions, results, result.test_relative_l2);
    if (!root) result.message = "training ended with a non-finite test error (reported by rank 0)";
    return result;
  }
  // On every rank, as with ZeRO stage 1 the ranks gather the optimiser state together; then the
  // results, so that results that cannot be written (a full disk) lose no training. The barrier
  // returns once rank 0 has written both.
  if (auto stopped = loop.save(epoch)) {
    result.message = stopped->message;
    return result;
  }
  if (root) write_results(p, data, predictions, results, result.test_relative_l2);
  comm.barrier();
  result.interrupted = loop.interrupted();
  result.finished = !result.interrupted;
  result.message = cat(solvers::training_ended(result.interrupted), epoch, " epochs; ",
                       history.train_loss.empty() ? std::string("no training step taken")
                                                  : cat("training loss ", result.train_loss));
  return result;
}

}  // namespace eddy::operator_learning
