// Training in stages (stages.h): the keys, and the PinnState side of the stages: moving on to a
// stage, the solution across time-marching windows, and what a checkpoint keeps of them.

#include "solvers/pinn/stages.h"

#include <set>

#include "eddy/autodiff/tape.h"
#include "eddy/core/error.h"
#include "eddy/ops/ops.h"
#include "solvers/pinn/expression.h"
#include "solvers/pinn/solver.h"

namespace eddy::pinn {

int64_t stage_count(const Problem& problem) {
  const TrainingOptions& training = problem.training;
  if (training.time_marching) return training.time_marching->windows;
  if (training.continuation) return static_cast<int64_t>(training.continuation->values.size());
  return 1;
}

int64_t stage_steps(const Problem& problem) { return problem.training.first_order_steps + problem.training.lbfgs_iterations; }

std::pair<double, double> time_window(const Problem& problem, int64_t window) {
  // Not a structured binding: clang before 16 cannot capture one in a lambda (the fuzz build).
  const double start = problem.time->first, end = problem.time->second;
  const double windows = static_cast<double>(problem.training.time_marching->windows);
  // Both ends from the same formula, so that a window starts exactly where the one before it ends.
  auto boundary = [&](int64_t k) { return k == 0 ? start : start + (end - start) * static_cast<double>(k) / windows; };
  return {boundary(window), window + 1 == problem.training.time_marching->windows ? end : boundary(window + 1)};
}

std::string describe_stage(const Problem& problem, int64_t stage) {
  const std::string of = cat(stage + 1, "/", stage_count(problem));
  if (problem.training.time_marching) {
    const auto [start, end] = time_window(problem, stage);
    return cat("window ", of, " (t from ", start, " to ", end, ")");
  }
  if (problem.training.continuation) {
    const ContinuationOptions& continuation = *problem.training.continuation;
    return cat("stage ", of, " (", continuation.parameter, " = ", continuation.values[stage], ")");
  }
  return "";
}

TimeMarchingOptions read_time_marching(const Problem& problem, const io::ConfigNode& node) {
  TimeMarchingOptions marching;
  marching.windows = node.integer("windows", marching.windows);
  if (!problem.time) node.fail("time marching needs geometry.time (its windows are intervals of t)");
  if (marching.windows < 1) node.at("windows").fail(cat("must be at least 1, got ", marching.windows));
  // Each window keeps its trained network: a count whose networks cannot fit in memory is refused
  // here, where eddy check drew every window's boundary points first (71 s at a million windows).
  if (node.has("windows")) {
    const double weights = problem.hidden_layer_weights();
    node.at("windows").require_memory(cat(marching.windows, " windows, each keeping its trained network of ",
                                          weights, " weights,"),
                                      static_cast<double>(marching.windows) * weights *
                                          static_cast<double>(dtype_size(problem.dtype)));
  }
  // Each window's network is kept, not the learnable parameters it was trained with: through an
  // output transform, the grid, validation, eval, export and the next windows' initial targets
  // read every window with the parameters' latest values (a relative L2 of 1.5e-2 reported where
  // each window with its own was 2.3e-4, and --resume was not exact).
  for (const auto& [field, transform] : problem.output_transforms) {
    const std::set<std::string> read = parameters_read(transform, problem.transform_symbols());
    for (const LearnableParameter& parameter : problem.learnable) {
      if (read.count(parameter.name)) {
        node.fail(cat("cannot train the learnable parameter '", parameter.name, "', which model.output_transform.",
                      field, " reads: the windows keep their networks but not the parameter values they were "
                      "trained with; make it a constant, or leave it out of the output transform"));
      }
    }
  }
  bool initial = false;
  for (const Condition& c : problem.conditions) {
    initial = initial || c.kind == ConditionKind::initial;
    // Listed points are not resampled per window, and a window's network is fitted only in it.
    if (c.kind == ConditionKind::data || c.kind == ConditionKind::points) {
      node.fail(cat("conditions.", c.name, " lists its points, which time marching cannot share out among "
                    "windows; it trains interior, boundary, periodic and initial conditions"));
    }
  }
  if (!initial) node.fail("time marching needs an initial condition, which carries each window's solution to the next");
  return marching;
}

ContinuationOptions read_continuation(const Problem& problem, const io::ConfigNode& node) {
  ContinuationOptions continuation;
  const io::ConfigNode parameter = node.at("parameter");
  continuation.parameter = parameter.as_string();
  for (const LearnableParameter& learnable : problem.learnable) {
    if (learnable.name == continuation.parameter) {
      parameter.fail(cat("'", learnable.name, "' is a learnable parameter; continuation steps a constant one"));
    }
  }
  const auto configured = problem.constants.find(continuation.parameter);
  if (configured == problem.constants.end()) {
    std::string names;
    for (const auto& [name, value] : problem.constants) names += cat(names.empty() ? "" : ", ", name);
    parameter.fail(cat("'", continuation.parameter, "' is not a parameter of the problem (",
                       names.empty() ? std::string("it has none") : "parameters: " + names, ")"));
  }
  const io::ConfigNode values = node.at("values");
  if (values.is_scalar()) values.fail("must be a list of numbers, one per stage");
  continuation.values = values.as_numbers();
  if (continuation.values.empty()) values.fail("needs at least one value");
  // The problem the run solves is the configured one; the stages before the last lead up to it.
  if (continuation.values.back() != configured->second) {
    values.fail(cat("the last value (", continuation.values.back(), ") must be ", continuation.parameter,
                    "'s value under parameters (", configured->second, ")"));
  }
  if (problem.training.time_marching) node.fail("cannot be combined with training.time_marching");
  return continuation;
}

void PinnState::enter_stage(int64_t stage) {
  const TrainingOptions& training = problem_.training;
  if (training.time_marching) {
    while (static_cast<int64_t>(windows_.size()) < stage) {
      std::shared_ptr<nn::Module> trained = nn::make_pinn_model(problem_.model);
      trained->load_state_dict(model_->state_dict());
      windows_.push_back(std::move(trained));
    }
    time_ = time_window(problem_, stage);
  }
  if (training.continuation) constants_[training.continuation->parameter] = training.continuation->values[stage];
  stage_ = stage;
  added_.assign(added_.size(), Tensor());
  rad_points_.assign(rad_points_.size(), Tensor());
  drawn_.clear();
}

Tensor PinnState::predict(const Tensor& points) {
  Tensor values = network_fields(*model_, points);
  if (windows_.empty()) return values;
  const int64_t t = points.shape()[1] - 1;
  const Tensor time = slice(points, 1, t, t + 1);
  // From the last trained window back: a point before a window's end takes that window's network.
  for (int64_t k = static_cast<int64_t>(windows_.size()) - 1; k >= 0; --k) {
    const Tensor before_end = expand(lt(time, scalar(time_window(problem_, k).second, problem_.dtype)), values.shape());
    values = where(before_end, network_fields(*windows_[k], points), values);
  }
  return values;
}

Tensor PinnState::initial_targets(size_t condition, const Tensor& points) {
  GradModeGuard with_grad(true);  // the residual may differentiate the fields
  return expression_residual(problem_.conditions[condition], points, Tensor(), 0, windows_.back().get()).detach();
}

void PinnState::save_stages(nn::StateDict& saved) const {
  saved["stage"] = tensor(std::vector<int64_t>{stage_});
  for (size_t k = 0; k < windows_.size(); ++k) {
    for (const auto& [name, value] : windows_[k]->state_dict()) saved[cat("window.", k, ".", name)] = value.detach();
  }
}

void PinnState::restore_stages(const nn::StateDict& saved) {
  const auto stage = saved.find("stage");
  if (stage == saved.end()) return;  // a run without stages
  const int64_t at = stage->second.to_vector<int64_t>().at(0);
  windows_.clear();
  for (int64_t k = 0; problem_.training.time_marching && k < at; ++k) {
    const std::string prefix = cat("window.", k, ".");
    nn::StateDict weights;
    for (const auto& [name, value] : saved) {
      if (name.rfind(prefix, 0) == 0) weights[name.substr(prefix.size())] = value;
    }
    std::shared_ptr<nn::Module> trained = nn::make_pinn_model(problem_.model);
    trained->load_state_dict(weights);
    windows_.push_back(std::move(trained));
  }
  enter_stage(at);
}

}  // namespace eddy::pinn
