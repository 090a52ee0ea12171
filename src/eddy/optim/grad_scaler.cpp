#include "eddy/optim/grad_scaler.h"

#include <algorithm>
#include <cmath>

#include "eddy/autodiff/tape.h"
#include "eddy/core/tracing.h"
#include "eddy/ops/ops.h"

namespace eddy::optim {

GradScaler::GradScaler(GradScalerOptions options)
    : options_(options), scale_(options.initial_scale), gradients_scale_(options.initial_scale) {
  EDDY_CHECK(std::isfinite(options.initial_scale) && options.initial_scale > 0,
             "GradScaler: initial_scale must be finite and positive, got ", options.initial_scale);
  EDDY_CHECK(options.growth_factor >= 1, "GradScaler: growth_factor must be at least 1, got ", options.growth_factor);
  EDDY_CHECK(options.backoff_factor > 0 && options.backoff_factor < 1,
             "GradScaler: backoff_factor must lie in (0, 1), got ", options.backoff_factor);
  EDDY_CHECK(options.growth_interval >= 1, "GradScaler: growth_interval must be at least 1, got ",
             options.growth_interval);
}

// In float32 for a 16-bit loss or gradient: the scale (65536 at the start) is infinite in float16,
// so a float16 loss scaled to inf and float16 gradients unscaled to 0, every step skipped or
// every step taken without moving a parameter.
Tensor GradScaler::scale(const Tensor& loss) {
  // Traced, the scale would be a constant of the graph while step() divides by the current one:
  // the steps shrank by half at each growth and doubled after each overflow, silently.
  EDDY_CHECK(!active_trace_recorder(), "GradScaler::scale inside a compiled function (eddy.jit): its scale changes "
             "between iterations and a trace would keep the first; return the loss from the compiled function and "
             "scale it outside");
  begin_iteration();
  scaled_ = true;
  return (is_half(loss.dtype()) ? cast(loss, DType::f32) : loss) * scale_;
}

void GradScaler::begin_iteration() {
  gradients_scale_ = scale_;
  unscaled_.clear();
  stepped_.clear();
  counted_ = overflowed_ = false;
}

// A step or unscale before any scale(): the gradients carry no scale, and dividing them by it
// shrank every step by 65536, silently (PyTorch refuses too).
void GradScaler::require_scaled(const char* operation) const {
  EDDY_CHECK(scaled_, "GradScaler::", operation, ": no loss was scaled yet; call backward() on scale(loss), whose "
             "gradients it divides by the scale");
}

void GradScaler::unscale(Optimizer& optimizer) {
  require_scaled("unscale");
  if (stepped_.count(&optimizer)) begin_iteration();  // stepped already: the next iteration's
  EDDY_CHECK(!unscaled_.count(&optimizer), "GradScaler::unscale: this optimiser's gradients were unscaled already "
             "since the last scale()");
  divide_gradients(optimizer);
}

void GradScaler::divide_gradients(Optimizer& optimizer) {
  NoGradGuard no_grad;
  std::vector<Tensor> unscaled;
  for (const Tensor& p : optimizer.parameters()) {
    const Tensor g = p.grad();
    if (!g.defined()) {
      unscaled.emplace_back();
    } else {
      unscaled.push_back(is_half(g.dtype()) ? cast(cast(g, DType::f32) / gradients_scale_, g.dtype())
                                            : g / gradients_scale_);
    }
  }
  set_grads(optimizer.parameters(), unscaled);
  unscaled_.insert(&optimizer);
}

bool GradScaler::step(Optimizer& optimizer) {
  require_scaled("step");
  // A second step of one optimiser without a scale() between (a loss scaled by current_scale()
  // by hand) is the next iteration's, as is unscale() after a step.
  if (stepped_.count(&optimizer)) begin_iteration();
  stepped_.insert(&optimizer);
  NoGradGuard no_grad;
  // A sum in float64 is finite exactly when every element is.
  const std::vector<Tensor>& parameters = optimizer.parameters();
  const bool finite = std::all_of(parameters.begin(), parameters.end(), [](const Tensor& p) {
    return !p.grad().defined() || std::isfinite(sum(cast(p.grad(), DType::f64)).item<double>());
  });
  if (!finite) {
    optimizer.zero_grad();
    if (!overflowed_) {
      scale_ = gradients_scale_ * options_.backoff_factor;
      good_in_a_row_ = 0;
      ++skipped_;
      overflowed_ = true;
    }
    return false;
  }
  if (!unscaled_.count(&optimizer)) divide_gradients(optimizer);
  optimizer.step();
  // At or past the interval: a count loaded from a scaler with a longer one never equalled it.
  if (!counted_ && !overflowed_ && ++good_in_a_row_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    good_in_a_row_ = 0;
  }
  counted_ = true;
  return true;
}

nn::StateDict GradScaler::state_dict() const {
  return {{"scale", scalar(scale_, DType::f64)},
          {"good_steps_in_a_row", scalar(static_cast<double>(good_in_a_row_), DType::i64)},
          {"skipped_steps", scalar(static_cast<double>(skipped_), DType::i64)}};
}

void GradScaler::load_state_dict(const nn::StateDict& state) {
  for (const auto& [key, value] : state) {
    EDDY_CHECK(key == "scale" || key == "good_steps_in_a_row" || key == "skipped_steps",
               "GradScaler::load_state_dict: unexpected key \"", key,
               "\"; a GradScaler's state holds scale, good_steps_in_a_row and skipped_steps");
  }
  const double scale = state_entry(state, "scale", {}, DType::f64).item<double>();
  const int64_t good = state_entry(state, "good_steps_in_a_row", {}, DType::i64).item<int64_t>();
  const int64_t skipped = state_entry(state, "skipped_steps", {}, DType::i64).item<int64_t>();
  EDDY_CHECK(std::isfinite(scale) && scale > 0, "GradScaler::load_state_dict: \"scale\" must be finite and "
             "positive, got ", scale);
  EDDY_CHECK(good >= 0 && skipped >= 0, "GradScaler::load_state_dict: step counts are not negative, got "
             "good_steps_in_a_row ", good, " and skipped_steps ", skipped);
  scale_ = scale;
  good_in_a_row_ = good;
  skipped_ = skipped;
}

}  // namespace eddy::optim
