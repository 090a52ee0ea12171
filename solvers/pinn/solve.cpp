// The training loop: Adam with a learning-rate schedule, then L-BFGS, both on the (compiled)
// training step; adaptive loss weights and refinement between Adam steps; progress, validation,
// checkpoints, and a clean stop (last good checkpoint kept) on a non-finite loss.
//
// Data parallel over the communicator's ranks (PinnState says how the loss is shared): the ranks
// start from rank 0's parameters, average their gradients before every optimiser step, and so
// hold the same loss, gradient and parameters throughout, which keeps L-BFGS's line search taking
// the same branches everywhere. Validation and the results are shared out too (each rank takes
// its share of the reference points and of the output grid); rank 0 alone logs and writes the
// checkpoint.

#include <cmath>
#include <filesystem>
#include <memory>

#include "eddy/autodiff/tape.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/checkpoint.h"
#include "eddy/ops/ops.h"
#include "eddy/optim/adam.h"
#include "eddy/optim/lbfgs.h"
#include "eddy/optim/schedule.h"
#include "solvers/common/progress.h"
#include "solvers/pinn/output.h"
#include "solvers/pinn/refinement.h"
#include "solvers/pinn/solver.h"
#include "solvers/pinn/training_step.h"
#include "solvers/pinn/weighting.h"

namespace eddy::pinn {
namespace {

// The progress line with the PINN details: loss terms per condition, adaptive weights, causal
// weights and validation errors.
class Progress {
 public:
  Progress(const SolveOptions& options, const PinnState& state)
      : line_(options.log, options.terminal, state.problem().training.log_every),
        problem_(state.problem()),
        state_(state) {}

  void report(const std::string& phase, int64_t step, int64_t total, double loss, const std::vector<double>& terms,
              const std::optional<Metrics>& metrics, bool force) {
    line_.report(phase, step, total, [&] { return details(loss, terms, metrics); }, force);
  }
  void finish_line() { line_.finish_line(); }
  void begin_phase() { line_.begin_phase(); }
  void note(const std::string& text) { line_.note(text); }

 private:
  std::string details(double loss, const std::vector<double>& terms, const std::optional<Metrics>& metrics) const {
    using solvers::ProgressLine;
    std::string text = cat("loss ", ProgressLine::format(loss), " (");
    for (size_t c = 0; c < terms.size(); ++c) {
      text += cat(c ? " " : "", problem_.conditions[c].name, " ", ProgressLine::format(terms[c]));
    }
    text += ")";
    if (problem_.training.loss_weighting.scheme != LossWeighting::fixed) {
      text += "  weights (";
      for (size_t c = 0; c < terms.size(); ++c) {
        text += cat(c ? " " : "", problem_.conditions[c].name, " ", ProgressLine::format(state_.effective_weight(c)));
      }
      text += ")";
    }
    if (problem_.training.causal) text += "  causal_min " + ProgressLine::format(state_.min_causal_weight());
    if (metrics) {
      for (const auto& [field, l2] : metrics->relative_l2) text += cat("  rel_l2(", field, ") ", ProgressLine::format(l2));
    }
    return text;
  }

  solvers::ProgressLine line_;
  const Problem& problem_;
  const PinnState& state_;
};

std::map<std::string, double> learned_values(PinnState& state) {
  std::map<std::string, double> values;
  for (auto& [name, tensor] : state.learnable()) values[name] = tensor.item<double>();
  return values;
}

// What a resumed run needs besides the model: the optimiser, the learnable parameters, the
// adaptive loss weights and the points refinement added (which depend on the model's history,
// so cannot be redrawn).
nn::StateDict training_state(const optim::Adam& adam, PinnState& state) {
  nn::StateDict saved = adam.state_dict();
  for (auto& [name, value] : state.learnable()) saved["learnable." + name] = value.detach();
  saved["adaptive_weights"] = tensor(state.adaptive_weights());
  const std::vector<Condition>& conditions = state.problem().conditions;
  for (size_t c = 0; c < conditions.size(); ++c) {
    if (state.added_points(c).defined()) saved["added_points." + conditions[c].name] = state.added_points(c);
  }
  return saved;
}

void restore_training_state(const nn::StateDict& saved, optim::Adam& adam, PinnState& state) {
  adam.load_state_dict(saved);
  NoGradGuard no_grad;
  for (auto& [name, value] : state.learnable()) value.copy_(saved.at("learnable." + name));
  state.set_adaptive_weights(saved.at("adaptive_weights").to_vector<double>());
  const std::vector<Condition>& conditions = state.problem().conditions;
  for (size_t c = 0; c < conditions.size(); ++c) {
    auto added = saved.find("added_points." + conditions[c].name);
    if (added != saved.end()) state.add_points(c, added->second);
  }
}

}  // namespace

SolveResult solve(const Problem& p, const SolveOptions& options) {
  namespace fs = std::filesystem;
  dist::Communicator& comm = options.communicator ? *options.communicator : dist::default_communicator();
  const bool root = comm.rank() == 0;
  if (root) {
    fs::create_directories(p.output.dir);
    io::write_file_atomically(p.output.dir + "/config.yaml", p.resolved_config);
  }
  const std::string checkpoint = p.output.dir + "/checkpoint.safetensors";
  SolveOptions rank_options = options;
  if (!root) rank_options.log = nullptr;

  PinnState state(p, comm);
  optim::AdamOptions adam_options;
  adam_options.learning_rate = p.training.learning_rate;
  optim::Adam adam(state.trainable(), adam_options);
  std::unique_ptr<optim::Schedule> schedule =
      optim::make_schedule(p.training.schedule, p.training.learning_rate, p.training.adam_steps);
  std::optional<Validator> validator;
  if (p.validation.reference) validator.emplace(state);

  int64_t step = 0;
  if (options.resume) {
    nn::StateDict saved;
    step = io::resume_from_checkpoint(checkpoint, p.config_hash, state.model(), saved);
    restore_training_state(saved, adam, state);
  }
  dist::broadcast_tensors(state.trainable(), comm);
  // Whether this run wrote the checkpoint: a file from an earlier run is no "last good" state of this one.
  bool saved_here = options.resume;
  auto save = [&](int64_t at) {
    if (root) io::save_checkpoint(checkpoint, state.model(), training_state(adam, state), {at, p.config_hash, ""});
    saved_here = true;
  };
  auto round_of = [&](int64_t s) { return p.resample_every > 0 ? s / p.resample_every : 0; };
  state.sample(round_of(step));

  History history;
  Progress progress(rank_options, state);
  TrainingStep training_step(state, !options.eager, [&](const std::string& line) { progress.note(line); });
  const std::vector<Tensor> trainable = state.trainable();
  SolveResult result;
  auto record = [&](int64_t at, double loss, const std::vector<double>& terms) {
    history.steps.push_back(at);
    history.loss.push_back(loss);
    history.terms.push_back(terms);
    history.learned.push_back(learned_values(state));
    std::vector<double> weights;
    for (size_t c = 0; c < p.conditions.size(); ++c) weights.push_back(state.effective_weight(c));
    history.weights.push_back(weights);
    history.min_causal_weight.push_back(state.min_causal_weight());
  };
  auto stop_non_finite = [&](int64_t at, double loss, const std::vector<double>& terms, const std::string& phase) {
    auto show = [](double v) { return std::isnan(v) ? std::string("NaN") : cat(v); };
    std::string detail;
    for (size_t c = 0; c < terms.size(); ++c) detail += cat(c ? ", " : "", p.conditions[c].name, " ", show(terms[c]));
    progress.finish_line();
    result.message = cat(phase, " stopped at step ", at, ": the loss is ", show(loss), " (", detail, "); ",
                         saved_here ? "the last good checkpoint is " + checkpoint
                                                : std::string("no checkpoint was written yet"),
                         ". Lower the learning rate or check the equations.");
    result.steps = at;
    result.loss = loss;
    return result;
  };

  // ---- Adam ----
  // A checkpoint is written only once the loss at its parameters has been seen to be finite, so
  // the checkpoint kept after a non-finite stop is a good one.
  std::vector<double> terms;
  bool checkpoint_due = false;
  for (; step < p.training.adam_steps; ++step) {
    if (p.resample_every > 0 && step > 0 && step % p.resample_every == 0) state.sample(round_of(step));
    adam.set_learning_rate(schedule->learning_rate(step));
    const StepEvaluation evaluation = training_step.evaluate();
    terms = evaluation.terms;
    const double value = evaluation.loss.item<double>();
    if (!std::isfinite(value)) return stop_non_finite(step, value, terms, "Adam");
    if (checkpoint_due) save(step);
    checkpoint_due = false;
    optim::set_grads(trainable, evaluation.gradients);
    dist::average_gradients(trainable, comm);
    adam.step();
    const int64_t done = step + 1;
    std::optional<Metrics> metrics;
    if (validator && p.validation.every > 0 && done % p.validation.every == 0) {
      metrics = validator->measure();
      history.metric_steps.push_back(done);
      history.metrics.push_back(*metrics);
    }
    if (p.training.log_every > 0 && (done % p.training.log_every == 0 || done == 1)) record(done, value, terms);
    progress.report("adam", done, p.training.adam_steps, value, terms, metrics, false);
    // Weights and points change between steps, so the checkpoint written at `done` (next
    // iteration) already holds them and a resumed run does not redo the change.
    if (p.training.loss_weighting.scheme == LossWeighting::grad_norm && done % p.training.loss_weighting.every == 0) {
      update_adaptive_weights(state);
    }
    if (p.refinement && done % p.refinement->every == 0) refine(state, done);
    checkpoint_due = p.output.checkpoint_every > 0 && done % p.output.checkpoint_every == 0;
  }
  progress.finish_line();

  // ---- L-BFGS ----
  if (p.training.lbfgs_iterations > 0) {
    optim::LbfgsOptions lbfgs_options;
    lbfgs_options.max_iterations = p.training.lbfgs_iterations;
    lbfgs_options.max_evaluations = p.training.lbfgs_evaluations;
    lbfgs_options.tolerance_grad = 0;
    lbfgs_options.tolerance_change = 0;
    optim::Lbfgs lbfgs(trainable, lbfgs_options);
    int64_t evaluations = 0;
    progress.begin_phase();
    optim::LbfgsReport report = lbfgs.step([&] {
      const StepEvaluation evaluation = training_step.evaluate();
      terms = evaluation.terms;
      optim::set_grads(trainable, evaluation.gradients);
      dist::average_gradients(trainable, comm);
      ++evaluations;
      progress.report("lbfgs", evaluations, p.training.lbfgs_evaluations, evaluation.loss.item<double>(), terms,
                      std::nullopt, false);
      return evaluation.loss;
    });
    progress.finish_line();
    if (rank_options.log) *rank_options.log << report.message << "\n";
    EDDY_CHECK(dist::same_on_every_rank(trainable, comm), "the ranks' parameters differ after L-BFGS; "
               "data-parallel training needs the same build and thread count on every rank");
    if (report.stop == optim::LbfgsStop::non_finite) {
      return stop_non_finite(step + report.iterations, report.loss, terms, "L-BFGS");
    }
    step += report.iterations;
  }

  // ---- results ----
  Tensor final_loss = state.loss(&terms);
  result.loss = final_loss.item<double>();
  if (!std::isfinite(result.loss)) return stop_non_finite(step, result.loss, terms, "training");
  record(step, result.loss, terms);
  if (validator) {
    result.metrics = validator->measure();
    history.metric_steps.push_back(step);
    history.metrics.push_back(*result.metrics);
  }
  save(step);
  write_results(state, history, p.output.dir);
  result.finished = true;
  result.steps = step;
  result.learned = learned_values(state);
  result.message = cat("finished ", step, " steps; loss ", result.loss);
  return result;
}

void load_trained(PinnState& state, const std::string& run_dir) {
  nn::StateDict saved;
  io::load_checkpoint(run_dir + "/checkpoint.safetensors", state.model(), &saved);
  NoGradGuard no_grad;
  for (auto& [name, value] : state.learnable()) value.copy_(saved.at("learnable." + name));
}

Metrics evaluate_run(const std::string& run_dir) {
  auto config = io::Config::load(run_dir + "/config.yaml");
  Problem problem = read_problem(*config);
  PinnState state(problem);
  load_trained(state, run_dir);
  Validator validator(state);
  return validator.measure();
}

}  // namespace eddy::pinn
