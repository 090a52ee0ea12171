// The PINN trainer: Adam or SOAP with a learning-rate schedule in the shared training loop
// (solvers/common/training_loop.h: checkpoints, resume, the stops on a non-finite loss and on
// Ctrl-C or SIGTERM), then L-BFGS, both on the (compiled) training step; adaptive loss weights
// and refinement (RAR, RAD) between their steps; progress, validation and the results.
//
// Data parallel over the communicator's ranks (PinnState says how the loss is shared): the ranks
// start from rank 0's parameters, sum their parts of the gradients before every optimiser step, and so
// hold the same loss, gradient and parameters throughout, which keeps L-BFGS's line search taking
// the same branches everywhere. Validation and the results are shared out too (each rank takes
// its share of the reference points and of the output grid); rank 0 alone logs and writes the
// checkpoint.

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <memory>

#include "eddy/autodiff/tape.h"
#include "eddy/core/fingerprint.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/dist/sharded_optimizer.h"
#include "eddy/io/checkpoint.h"
#include "eddy/io/tensor_fingerprint.h"
#include "eddy/ops/ops.h"
#include "eddy/optim/adam.h"
#include "eddy/optim/lbfgs.h"
#include "eddy/optim/schedule.h"
#include "eddy/optim/soap.h"
#include "solvers/common/file_kind.h"
#include "solvers/common/interrupt.h"
#include "solvers/common/progress.h"
#include "solvers/common/step_function.h"
#include "solvers/common/thread_tuner.h"
#include "solvers/common/training_config.h"
#include "solvers/common/training_loop.h"
#include "solvers/pinn/output.h"
#include "solvers/pinn/refinement.h"
#include "solvers/pinn/solver.h"
#include "solvers/pinn/stages.h"
#include "solvers/pinn/training_step.h"
#include "solvers/pinn/weighting.h"

namespace eddy::pinn {
namespace {

// The PINN details of the progress line: loss terms per condition, adaptive weights, causal
// weights and validation errors.
std::string progress_details(const PinnState& state, double loss, const std::vector<double>& terms,
                             const std::optional<Metrics>& metrics) {
  using solvers::ProgressLine;
  const Problem& problem = state.problem();
  std::string text = cat("loss ", ProgressLine::format(loss), " (");
  for (size_t c = 0; c < terms.size(); ++c) {
    text += cat(c ? " " : "", problem.conditions[c].name, " ", ProgressLine::format(terms[c]));
  }
  text += ")";
  if (problem.training.loss_weighting.scheme != LossWeighting::fixed) {
    text += "  weights (";
    for (size_t c = 0; c < terms.size(); ++c) {
      text += cat(c ? " " : "", problem.conditions[c].name, " ", ProgressLine::format(state.effective_weight(c)));
    }
    text += ")";
  }
  if (problem.training.causal) text += "  causal_min " + ProgressLine::format(state.min_causal_weight());
  if (metrics) {
    for (const auto& [field, l2] : metrics->relative_l2) {
      text += cat("  rel_l2(", field, ") ", ProgressLine::format(l2));
    }
  }
  return text;
}

// "Adam stopped at step 12: the loss is NaN (pde NaN, left 0.1)".
std::string describe_stop(const Problem& p, const std::string& phase, int64_t step, double loss,
                          const std::vector<double>& terms) {
  std::string detail;
  for (size_t c = 0; c < terms.size(); ++c) {
    detail += cat(c ? ", " : "", p.conditions[c].name, " ", solvers::loss_text(terms[c]));
  }
  return cat(phase, " stopped at step ", step, ": the loss is ", solvers::loss_text(loss), " (", detail, ")");
}

// The training settings a --resume may change (docs/config.md, "Resuming a run"); a change to any
// other key would resume another problem or model than the checkpoint's. `parallel` too: the
// checkpoint holds no rank's state, and any number of ranks resumes it.
const solvers::ResumableKeys kResumable = {
    "description",         "training.adam.steps", "training.adam.learning_rate", "training.adam.schedule",
    "training.soap.steps", "training.soap.learning_rate", "training.soap.schedule", "training.lbfgs",
    "training.log_every",  "training.zero_stage", "validation.every", "output", "parallel", "device"};

// Under training in stages the step counts place the stage boundaries (stages.h), so a resumed
// run keeps them.
solvers::ResumableKeys resumable_keys(const Problem& p) {
  solvers::ResumableKeys keys = kResumable;
  if (stage_count(p) > 1) {
    std::erase_if(keys, [](const std::string& key) {
      return key == "training.adam.steps" || key == "training.soap.steps" || key == "training.lbfgs";
    });
  }
  return keys;
}

// Keys that resolved configs of an earlier eddy left out, with the values that eddy used: its
// checkpoints resume (each only where this run has the key).
solvers::Settings added_later(const Problem& p) {
  solvers::Settings keys{{"training.optimizer", "adam"}};
  if (p.training.optimizer == FirstOrderOptimizer::adam) keys["training.adam.eps"] = "1e-08";
  if (p.training.optimizer == FirstOrderOptimizer::soap) keys["training.soap.betas"] = "[0.95, 0.95]";
  for (const Condition& c : p.conditions) {
    if (c.kind != ConditionKind::periodic) continue;
    std::string every_field;
    for (const std::string& field : p.fields) every_field += (every_field.empty() ? "" : ", ") + field;
    keys["conditions." + c.name + ".fields"] = "[" + every_field + "]";
  }
  return keys;
}

// The content of the points and values that conditions read from files or listed: a --resume
// onto a rewritten file (same name, so the same config) trained on the new values, silently.
// Checkpoints written before they recorded it resume, as `added_later` keys.
solvers::Settings listed_points_content(const Problem& p) {
  solvers::Settings content;
  for (const Condition& c : p.conditions) {
    if (!c.fixed_points.defined()) continue;
    uint64_t hash = kFnvOffsetBasis;
    for (const Tensor& array : {c.fixed_points, c.data_values}) {
      if (array.defined()) hash = io::fnv1a_tensor_bytes(array, hash);
    }
    content["conditions." + c.name + " (its points' and values' content)"] = hex_digits(hash);
  }
  return content;
}

std::map<std::string, double> learned_values(PinnState& state) {
  std::map<std::string, double> values;
  for (auto& [name, tensor] : state.learnable()) values[name] = tensor.item<double>();
  return values;
}

// What a resumed run needs besides the model: the optimiser, the learnable parameters, the
// adaptive loss weights, the points refinement added and those RAD drew (which depend on the
// model's history, so cannot be redrawn), the history so far, and under training in stages the
// stage and the trained windows' networks.
// The first-order steps per stage of the run that wrote a checkpoint, which a resume compares.
constexpr const char* kFirstOrderStepsKey = "first_order_steps";

nn::StateDict training_state(const optim::Optimizer& optimizer, PinnState& state, const History& history) {
  nn::StateDict saved = optimizer.state_dict();
  if (stage_count(state.problem()) > 1) state.save_stages(saved);
  save_history(history, state.problem(), saved);
  for (auto& [name, value] : state.learnable()) saved["learnable." + name] = value.detach();
  saved["adaptive_weights"] = tensor(state.adaptive_weights());
  saved[kFirstOrderStepsKey] = tensor(std::vector<int64_t>{state.problem().training.first_order_steps});
  const std::vector<Condition>& conditions = state.problem().conditions;
  for (size_t c = 0; c < conditions.size(); ++c) {
    if (state.added_points(c).defined()) saved["added_points." + conditions[c].name] = state.added_points(c);
    if (state.rad_points(c).defined()) saved["rad_points." + conditions[c].name] = state.rad_points(c);
  }
  return saved;
}

void restore_training_state(const nn::StateDict& saved, optim::Optimizer& optimizer, PinnState& state,
                            History& history) {
  optimizer.load_state_dict(saved);
  history = restored_history(saved, state.problem(), solvers::checkpoint_path(state.problem().output.dir));
  NoGradGuard no_grad;
  for (auto& [name, value] : state.learnable()) value.copy_(saved.at("learnable." + name));
  state.set_adaptive_weights(saved.at("adaptive_weights").to_vector<double>());
  const std::vector<Condition>& conditions = state.problem().conditions;
  for (size_t c = 0; c < conditions.size(); ++c) {
    auto added = saved.find("added_points." + conditions[c].name);
    if (added != saved.end()) state.add_points(c, added->second);
    auto redistributed = saved.find("rad_points." + conditions[c].name);
    if (redistributed != saved.end()) state.set_rad_points(c, redistributed->second);
  }
}

// The first-order phase's optimiser, training.optimizer, sharded over the ranks with
// training.zero_stage 1 (which the config allows with adam only); Adam's update compiled while
// `step` runs compiled.
std::unique_ptr<optim::Optimizer> first_order_optimizer(const TrainingOptions& training,
                                                        const std::vector<Tensor>& trainable, dist::Communicator& comm,
                                                        const solvers::StepFunction& step) {
  if (training.optimizer == FirstOrderOptimizer::soap) {
    optim::SoapOptions options = training.soap;
    options.learning_rate = training.learning_rate;
    return std::make_unique<optim::Soap>(trainable, options);
  }
  optim::AdamOptions options;
  options.learning_rate = training.learning_rate;
  options.eps = training.adam_eps;
  return solvers::make_optimizer(
      training.zero_stage, trainable,
      [options, &step](std::vector<Tensor> slices) {
        auto adam = std::make_unique<optim::Adam>(std::move(slices), options);
        solvers::compile_updates(*adam, step);
        return adam;
      },
      dist::RankGradients::to_sum, comm);
}

// A problem far from unit scale (a field of magnitude 1e-6, a domain 1e-3 wide) gives gradients near
// the first-order optimiser's eps, where its steps shrink by their ratio and training stalls: a heat
// problem scaled by 1e-6 ended 333 times its solution's size off, without a word. Said once, after
// the run's first gradient, where its RMS is below 10 eps: the gradient summed over the ranks, as
// Adam takes it (each rank's share is about 1/ranks of it, and 6 ranks warned where one did not).
void warn_of_gradients_below_eps(const TrainingOptions& training, const std::vector<Tensor>& gradients,
                                 dist::Communicator& comm, const std::function<void(const std::string&)>& warn) {
  std::vector<Tensor> flat;
  for (const Tensor& gradient : gradients) flat.push_back(reshape(cast(gradient, DType::f64), {-1}));
  if (flat.empty()) return;
  Tensor summed = contiguous(concat(flat, 0));
  if (comm.size() > 1) comm.allreduce(summed, summed, dist::ReduceOp::sum);
  const double squares = sum(square(summed)).item<double>(), count = static_cast<double>(summed.numel());
  const bool soap = training.optimizer == FirstOrderOptimizer::soap;
  const double eps = soap ? training.soap.eps : training.adam_eps, rms = std::sqrt(squares / count);
  if (!(rms < 10 * eps)) return;
  warn(cat("the first step's gradients have an RMS of ", rms, ", near ", soap ? "SOAP" : "Adam", "'s eps (", eps,
           "), where its steps shrink in proportion and training stalls: the problem is far from unit scale (fields or "
           "coordinates much smaller or larger than 1). Rescale it (nondimensionalise), or set training.",
           soap ? "soap" : "adam", ".eps well below the gradients (docs/config.md, \"Problems far from unit scale\")"));
}

// L-BFGS after Adam or SOAP, for `iterations`: every closure call is one evaluation of the training step,
// its gradients summed over the ranks; `terms` follows the last evaluation. A signal
// (solvers/common/interrupt.h) ends it at the current iteration, on every rank, and is set in
// `interrupted`.
optim::LbfgsReport run_lbfgs(PinnState& state, TrainingStep& training_step, const std::vector<Tensor>& trainable,
                             int64_t iterations, solvers::ProgressLine& progress, const std::string& phase,
                             std::ostream* log, std::vector<double>& terms, int& interrupted) {
  const TrainingOptions& training = state.problem().training;
  optim::LbfgsOptions options;
  options.max_iterations = iterations;
  options.max_evaluations = training.lbfgs_evaluations;
  options.tolerance_grad = 0;
  options.tolerance_change = 0;
  // The line counts iterations against `iterations` (counting evaluations against their budget,
  // it stopped short of it whenever the iteration budget ended the run first): L-BFGS asks
  // stop_requested before each iteration, so the k-th question follows k - 1 of them.
  double loss = 0;
  int64_t asked = 0;
  auto report_iterations = [&](int64_t done) {
    progress.report(phase, done, iterations, [&] { return progress_details(state, loss, terms, std::nullopt); },
                    false);
  };
  options.stop_requested = [&] {
    if (++asked > 1) report_iterations(asked - 1);
    return (interrupted = solvers::interrupt_signal(state.communicator())) != 0;
  };
  optim::Lbfgs lbfgs(trainable, options);
  progress.begin_phase();
  progress.count_from(0);
  solvers::ThreadTuner tuner;  // each evaluation timed as a step: they cost alike
  optim::LbfgsReport report = lbfgs.step([&] {
    tuner.begin_step();
    const StepEvaluation evaluation = training_step.evaluate();
    terms = evaluation.terms;
    optim::set_grads(trainable, evaluation.gradients);
    dist::sum_gradients(trainable, state.communicator());
    loss = evaluation.loss.item<double>();
    if (const std::string note = tuner.end_step(); !note.empty()) progress.note(note);
    return evaluation.loss;
  });
  // The last iteration asks nothing after it.
  if (report.iterations >= asked) report_iterations(report.iterations);
  progress.finish_line();
  if (log) *log << report.message << "\n";
  EDDY_CHECK(dist::same_on_every_rank(trainable, state.communicator()), "the ranks' parameters differ after L-BFGS; "
             "data-parallel training needs the same build and thread count on every rank");
  return report;
}

}  // namespace

SolveResult solve(const Problem& p, const SolveOptions& options) {
  dist::Communicator& comm = options.communicator ? *options.communicator : dist::default_communicator();
  solvers::require_same_config_on_every_rank(comm, p.config_hash, p.resolved_config, options.eager);
  if (comm.size() > 1) solvers::check_job_size(p.parallel, comm);
  const solvers::SolverScope scope(p.device, comm);
  std::ostream* log = comm.rank() == 0 ? options.log : nullptr;

  refuse_untrainable(p);
  PinnState state(p, comm);
  state.check_boundary_selections();
  const std::vector<Tensor> trainable = state.trainable();
  std::unique_ptr<optim::Optimizer> optimizer;
  const bool soap = p.training.optimizer == FirstOrderOptimizer::soap;
  std::unique_ptr<optim::Schedule> schedule =
      optim::make_schedule(p.training.schedule, p.training.learning_rate, p.training.first_order_steps);
  std::optional<Validator> validator;
  if (p.validation.reference) validator.emplace(state);

  History history;
  solvers::ProgressLine progress(log, options.terminal, p.training.log_every, options.warnings);
  std::unique_ptr<TrainingStep> training_step;
  StepEvaluation evaluation;
  double loss = 0;
  // Training in stages (stages.h): each stage its own optimiser and training step (a continued
  // parameter is a constant of the compiled step), and steps counted from the stage's first.
  const int64_t stages = stage_count(p), per_stage = stage_steps(p);
  auto first_step = [&] { return state.stage() * per_stage; };
  auto phase = [&](const std::string& name) {
    return stages > 1 ? cat(name, " ", describe_stage(p, state.stage())) : name;
  };
  auto begin_stage = [&](int64_t stage) {
    state.enter_stage(stage);
    progress.count_from(first_step());
    training_step = std::make_unique<TrainingStep>(
        state, !options.eager, [&](const std::string& line) { progress.note(line); },
        solvers::rank_0_warnings(progress, comm.rank() == 0));
    optimizer = first_order_optimizer(p.training, trainable, comm, training_step->function());
    if (stages > 1) progress.note(cat(describe_stage(p, stage), stage ? ": from the weights of the stage before" : ""));
  };
  begin_stage(0);
  // A resumed run then loads its trained weights over the fit.
  if (p.fit_initial_condition) {
    // A fit far from the values starts training far from them too, and said nothing (a periodic
    // PirateNet at fourier_scale 1 started 71% off).
    for (const auto& [field, distance] : state.fit_initial_condition()) {
      char percent[32];
      std::snprintf(percent, sizeof percent, "%.3g%%", 100 * distance);
      // The embedding's scale is a remedy only where there is an embedding (model.fourier_scale alone
      // is refused).
      const bool embedded = p.model.fourier_features > 0;
      progress.note(cat("model.fit_initial_condition: ", field, " starts ", percent, " (relative L2) from its initial values",
                        distance > 0.1 && embedded
                            ? "; an embedding of lower frequency (model.fourier_scale) may fit them closer"
                            : ""));
    }
  }
  // The resampling rounds of a stage follow those of the stages before it, so that every stage
  // draws its own points and a single stage draws those of a run without stages.
  const int64_t rounds_per_stage = p.resample_every > 0 ? p.training.first_order_steps / p.resample_every + 1 : 1;
  auto round_of = [&](int64_t s) {
    const int64_t local = s - first_step();
    return state.stage() * rounds_per_stage + (p.resample_every > 0 ? local / p.resample_every : 0);
  };
  auto record = [&](int64_t at, double value, const std::vector<double>& terms) {
    history.steps.push_back(at);
    history.loss.push_back(value);
    history.terms.push_back(terms);
    history.learned.push_back(learned_values(state));
    std::vector<double> weights;
    for (size_t c = 0; c < p.conditions.size(); ++c) weights.push_back(state.effective_weight(c));
    history.weights.push_back(weights);
    history.min_causal_weight.push_back(state.min_causal_weight());
    if (stages > 1) history.stage.push_back(state.stage());
  };

  solvers::TrainingHooks first_order;
  const auto warn = solvers::rank_0_warnings(progress, comm.rank() == 0);
  bool first_update = false;
  first_order.begin_step = [&](int64_t step) {
    first_update = step == 0;
    const int64_t local = step - first_step();
    if (p.resample_every > 0 && local > 0 && local % p.resample_every == 0) state.sample(round_of(step));
    optimizer->set_learning_rate(schedule->learning_rate(local));
  };
  first_order.evaluate = [&](int64_t, int64_t) {
    evaluation = training_step->evaluate();
    loss = evaluation.loss.item<double>();
    return loss;
  };
  first_order.apply = [&] {
    if (first_update) warn_of_gradients_below_eps(p.training, evaluation.gradients, comm, warn);
    optim::set_grads(trainable, evaluation.gradients);
    solvers::sum_gradients(*optimizer, trainable, comm);
    optimizer->step();
  };
  // Cadences count the stage's steps; records and the streams of weighting and refinement take
  // the step counted across stages.
  first_order.end_step = [&](int64_t done) {
    const int64_t local = done - first_step();
    std::optional<Metrics> metrics;
    if (validator && p.validation.every > 0 && local % p.validation.every == 0) {
      metrics = validator->measure();
      history.metric_steps.push_back(done);
      history.metrics.push_back(*metrics);
    }
    if (p.training.log_every > 0 && (local % p.training.log_every == 0 || local == 1)) {
      record(done, loss, evaluation.terms);
    }
    progress.report(phase(soap ? "soap" : "adam"), done, first_step() + p.training.first_order_steps,
                    [&] { return progress_details(state, loss, evaluation.terms, metrics); }, false);
    // Weights and points change between steps, so the checkpoint written at `done` already holds
    // them and a resumed run does not redo the change.
    if (p.training.loss_weighting.scheme != LossWeighting::fixed && local % p.training.loss_weighting.every == 0) {
      update_adaptive_weights(state, done);
    }
    if (p.refinement && local % p.refinement->every == 0) refine(state, done);
    if (p.rad && local % p.rad->every == 0) redistribute(state, done);
  };
  first_order.describe_stop = [&](int64_t step, int64_t, double value) {
    return describe_stop(p, phase(soap ? "SOAP" : "Adam"), step, value, evaluation.terms);
  };
  first_order.training_state = [&] { return training_state(*optimizer, state, history); };
  std::optional<int64_t> saved_first_order_steps;  // none in checkpoints written before they recorded it
  first_order.restore = [&](const nn::StateDict& saved) {
    if (const auto found = saved.find(kFirstOrderStepsKey); found != saved.end()) {
      saved_first_order_steps = found->second.item<int64_t>();
    }
    state.restore_stages(saved);
    if (state.stage() > 0) begin_stage(state.stage());
    restore_training_state(saved, *optimizer, state, history);
  };
  // Checked before the run folder is touched (config.yaml was written with the refused steps).
  first_order.check_resumed_step = [&](int64_t step) {
    // More first-order steps apply from the resumed step on while the run is still in them. Past
    // them (in or after L-BFGS), Adam went on from L-BFGS's weights with the step count of both,
    // short by the L-BFGS iterations; with several stages every stage's first step moves.
    const std::string steps_key = soap ? "training.soap.steps" : "training.adam.steps";
    EDDY_CHECK(!saved_first_order_steps || *saved_first_order_steps == p.training.first_order_steps ||
                   (stages == 1 && step <= *saved_first_order_steps),
               "--resume: ", steps_key, " is ", p.training.first_order_steps, " but the checkpoint's run took ",
               *saved_first_order_steps, stages > 1 ? cat(" in each of its ", stages, " stages")
                                                    : cat(" and is past them (step ", step, ", in or after L-BFGS)"),
               "; first-order steps cannot be added there: keep ", *saved_first_order_steps,
               stages > 1 ? "" : " (training.lbfgs.iterations may grow)", ", or start a new run in another output.dir");
  };
  const solvers::Settings file_content = listed_points_content(p);
  solvers::Settings earlier_defaults = added_later(p);
  earlier_defaults.insert(file_content.begin(), file_content.end());
  solvers::Settings recorded = file_content;
  recorded.insert(p.derived_settings.begin(), p.derived_settings.end());
  solvers::TrainingLoop loop(
      {p.output.dir, p.resolved_config, p.config_hash, options.resume, "the equations", resumable_keys(p),
       earlier_defaults,
       solvers::RunLength{stages * per_stage, cat(stages > 1 ? "stages x (" : "",
                                                  soap ? "training.soap.steps" : "training.adam.steps",
                                                  " + training.lbfgs.iterations", stages > 1 ? ")" : "")},
       recorded, p.source},
      state.model(), trainable, comm, progress, first_order);

  SolveResult result;
  auto stop = [&](int64_t at, double value, std::string message) {
    result.message = std::move(message);
    result.steps = at;
    result.loss = value;
    return result;
  };
  int64_t step = loop.start();
  bool lbfgs_updated = false;  // whether L-BFGS moved the parameters in this process
  std::vector<double> terms;
  int interrupted = 0;
  for (int64_t stage = state.stage(); stage < stages; ++stage) {
    if (stage != state.stage()) begin_stage(stage);
    const int64_t first_order_end = first_step() + p.training.first_order_steps;
    // A run resumed in L-BFGS (after an interrupt) takes the points of Adam's last step, as L-BFGS did.
    state.sample(round_of(std::min(step, std::max(first_order_end - 1, first_step()))));
    const int64_t first_order_start = step;
    if (auto stopped = loop.run(step, first_order_end, p.output.checkpoint_every)) {
      return stop(stopped->step, stopped->loss, stopped->message);
    }
    terms = evaluation.terms;
    interrupted = loop.interrupted();
    // Resumed from a checkpoint written during L-BFGS, the run does the iterations left (building
    // its curvature pairs afresh).
    const int64_t lbfgs_left = first_step() + per_stage - std::max(step, first_order_end);
    // A checkpoint at the end of the first-order steps, when L-BFGS follows: a kill during L-BFGS
    // fell back to the last one due before (the example's step 1,500 of 2,000), or to none. The
    // last update's loss is not seen before L-BFGS evaluates it, so the parameters are checked.
    if (lbfgs_left > 0 && !interrupted && p.output.checkpoint_every > 0 && step > first_order_start &&
        std::all_of(trainable.begin(), trainable.end(),
                    [](const Tensor& t) { return sum(abs(t - t)).item<double>() == 0; })) {
      if (auto stopped = loop.save(step)) return stop(stopped->step, stopped->loss, stopped->message);
    }
    if (lbfgs_left > 0 && !interrupted) {
      const optim::LbfgsReport report = run_lbfgs(state, *training_step, trainable, lbfgs_left, progress,
                                                  phase("lbfgs"), log, terms, interrupted);
      if (report.stop == optim::LbfgsStop::non_finite) {
        const int64_t at = step + report.iterations;
        return stop(at, report.loss, loop.stop_message(describe_stop(p, phase("L-BFGS"), at, report.loss, terms),
                                                       loop.updated() || lbfgs_updated || report.iterations > 0));
      }
      lbfgs_updated = lbfgs_updated || report.iterations > 0;
      step += report.iterations;
    }
    if (interrupted) break;
    // The next stage starts at its own first step even when L-BFGS used up its evaluations early.
    if (stage + 1 < stages) step = first_step() + per_stage;
  }

  // ---- results ----
  result.loss = state.loss(&terms).item<double>();
  if (!std::isfinite(result.loss)) {
    return stop(step, result.loss,
                loop.stop_message(describe_stop(p, "training", step, result.loss, terms), loop.updated() || lbfgs_updated));
  }
  // The checkpoint's history ends with the records of the logging cadence, not with this closing
  // one, so that a resumed run's history is an uninterrupted run's.
  if (auto stopped = loop.save(step)) return stop(stopped->step, result.loss, stopped->message);
  record(step, result.loss, terms);
  if (validator && !history.metric_steps.empty() && history.metric_steps.back() == step) {
    result.metrics = history.metrics.back();  // measured at this step by the cadence already
  } else if (validator) {
    result.metrics = validator->measure();
    history.metric_steps.push_back(step);
    history.metrics.push_back(*result.metrics);
  }
  write_results(state, history, p.output.dir);
  result.finished = !interrupted;
  result.interrupted = interrupted;
  result.steps = step;
  result.learned = learned_values(state);
  result.message = cat(solvers::training_ended(interrupted), step, " steps; loss ", result.loss);
  return result;
}

void load_trained(PinnState& state, const std::string& run_dir) {
  nn::StateDict saved;
  const Problem& problem = state.problem();
  solvers::load_run_checkpoint(run_dir, problem.derived_settings, resumable_keys(problem), state.model(), &saved);
  state.restore_stages(saved);
  NoGradGuard no_grad;
  for (auto& [name, value] : state.learnable()) value.copy_(saved.at("learnable." + name));
}

Metrics evaluate_run(const std::string& run_dir) {
  EDDY_CHECK(std::filesystem::is_regular_file(run_dir + "/config.yaml"), "eval: ", run_dir,
             " has no config.yaml; give a run folder written by `eddy solve` (its output.dir)");
  auto config = io::Config::load(run_dir + "/config.yaml", {}, io::Config::RelativePaths::working_directory);
  EDDY_CHECK(solvers::file_kind(*config) == solvers::FileKind::pinn, "eval: ", run_dir, " is not a run of `eddy "
             "solve` (its config.yaml has no `geometry`); eval re-evaluates PINN runs. A run of `eddy train` "
             "reports its test errors as it ends and keeps them in predictions.h5, one of `eddy lm train` its "
             "validation loss in history.h5");
  Problem problem = read_problem(*config, {}, UnknownEquationNames::supplied_when_trained);
  PinnState state(problem);
  load_trained(state, run_dir);
  Validator validator(state);
  return validator.measure();
}

}  // namespace eddy::pinn
