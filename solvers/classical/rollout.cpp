#include "solvers/classical/rollout.h"

#include <algorithm>
#include <cmath>

#include "eddy/autodiff/checkpoint.h"
#include "eddy/autodiff/tape.h"
#include "eddy/core/tracing.h"

namespace eddy::classical {
namespace {

Tensor advance(const Stepper& step, Tensor state, const std::vector<Tensor>& params, int64_t steps) {
  for (int64_t i = 0; i < steps; ++i) state = step(state, params);
  return state;
}

}  // namespace

std::optional<double> host_value(const Tensor& scalar) {
  if (scalar.is_abstract()) return std::nullopt;
  if (TraceRecorder* recorder = active_trace_recorder(); recorder && !recorder->readable_on_host(scalar)) {
    return std::nullopt;
  }
  return scalar.item<double>();
}

CoefficientSources::CoefficientSources(std::string_view solver, const Tensor& nu,
                                       std::vector<std::pair<std::string, Tensor>> others)
    : solver_(solver), nu_(nu), value_(host_value(nu)), built_in_capture_(active_capture_id()) {
  EDDY_CHECK(!value_ || (std::isfinite(*value_) && *value_ >= 0), solver,
             ": nu must be a finite, non-negative viscosity, got ", *value_);
  for (auto& [name, tensor] : others) others_.push_back({std::move(name), tensor, memory_version(tensor)});
}

void CoefficientSources::require_unchanged() const {
  // Built in the capture now running, the coefficients are nodes of its graph, computed from the
  // sources on every call.
  if (built_in_capture_ != 0 && built_in_capture_ == active_capture_id()) return;
  if (TraceRecorder* recorder = active_trace_recorder()) {
    if (value_) recorder->guard_unchanged(nu_);
    for (const Watched& source : others_) recorder->guard_unchanged(source.tensor);
  }
  std::optional<double> now;
  if (value_) {
    // A viscosity fitted through a compiled loss is a parameter, which a capture may not read (its
    // graph would branch on it); this check reads it outside the capture, as the guard does.
    TraceRecorderScope outside_the_capture(nullptr);
    now = nu_.item<double>();
  }
  EDDY_CHECK(!now || *now == *value_ || (std::isnan(*now) && std::isnan(*value_)), solver_, ": nu is ", *now,
             " but the solver computed its coefficients from nu = ", *value_,
             " when it was built; build a new solver after changing nu (in a fit, build it inside the loss)");
  for (const Watched& source : others_) {
    EDDY_CHECK(memory_version(source.tensor) == source.version, solver_, ": the ", source.name, " was written in place "
               "since the solver computed its coefficients from it; build a new solver after changing it (in a fit, "
               "build it inside the loss)");
  }
}

std::vector<Tensor> rollout(const Stepper& step, const Tensor& state, const std::vector<Tensor>& params,
                            const std::vector<int64_t>& record_steps, int64_t checkpoint_every) {
  EDDY_CHECK(checkpoint_every >= 0, "rollout: checkpoint_every must be non-negative, got ", checkpoint_every);
  std::vector<Tensor> records;
  Tensor current = state;
  int64_t done = 0;
  for (int64_t target : record_steps) {
    EDDY_CHECK(target >= done, "rollout: record steps must be non-negative and non-decreasing, got ", target,
               " after ", done);
    while (done < target) {
      const int64_t count = checkpoint_every > 0 ? std::min(checkpoint_every, target - done) : target - done;
      if (checkpoint_every > 0) {
        std::vector<Tensor> inputs{current};
        inputs.insert(inputs.end(), params.begin(), params.end());
        auto segment = [step, count](const std::vector<Tensor>& x) -> std::vector<Tensor> {
          return {advance(step, x[0], std::vector<Tensor>(x.begin() + 1, x.end()), count)};
        };
        current = checkpoint(segment, inputs)[0];
      } else {
        current = advance(step, current, params, count);
      }
      done += count;
    }
    records.push_back(current);
  }
  return records;
}

}  // namespace eddy::classical
