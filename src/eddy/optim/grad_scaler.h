#pragma once
/// @file
/// Loss scaling for float16 training (the recipe of Micikevicius et al., "Mixed Precision
/// Training", ICLR 2018, and PyTorch's GradScaler): the loss is multiplied by a large power of two
/// before backward, so that small gradients of float16 intermediates (under AutocastScope,
/// ops/autocast.h) do not round to zero; the float32 parameters' gradients are divided back
/// before the step. A step whose gradients overflowed is skipped and the scale halved; after
/// `growth_interval` good steps in a row it doubles. Powers of two make the scaling exact.

#include <cstdint>
#include <set>

#include "eddy/optim/optimizer.h"

namespace eddy::optim {

struct GradScalerOptions {
  double initial_scale = 65536.0;  // 2^16, as PyTorch
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  /// Throws eddy::Error naming the option when a factor or the interval is out of range.
  explicit GradScaler(GradScalerOptions options = {});

  /// The loss times the current scale, to call backward() on. Starts an iteration: the steps
  /// after it divide by the scale it used.
  Tensor scale(const Tensor& loss);

  /// Divides the gradients of `optimizer`'s parameters by the scale now, as PyTorch's unscale_,
  /// so that they can be clipped (clip_grad_norm) before step(), which then does not divide them
  /// again. Once per optimiser and iteration.
  void unscale(Optimizer& optimizer);

  /// Divides the gradients of `optimizer`'s parameters by the scale (unless unscale() did); when
  /// every one is finite, steps the optimizer and returns true. Otherwise clears the gradients,
  /// leaves the parameters as they were and returns false. Several optimisers (one per parameter
  /// group) each take a step() of the same iteration: the iteration lowers the scale once if any of
  /// them overflowed, or counts once as a good one (raising the scale after `growth_interval`).
  bool step(Optimizer& optimizer);

  double current_scale() const { return scale_; }
  int64_t skipped_steps() const { return skipped_; }

  /// The state a resumed run needs to scale as an uninterrupted one would: "scale" (float64),
  /// "good_steps_in_a_row" and "skipped_steps" (int64), scalars. The options stay the
  /// constructor's.
  nn::StateDict state_dict() const;
  /// Restores state_dict()'s values. Throws eddy::Error naming a missing, misshapen or
  /// out-of-range entry, or a key of another kind of state.
  void load_state_dict(const nn::StateDict& state);

 private:
  GradScalerOptions options_;
  double scale_;
  int64_t good_in_a_row_ = 0;
  int64_t skipped_ = 0;
  bool scaled_ = false;  // whether scale() was ever called
  void begin_iteration();
  void divide_gradients(Optimizer& optimizer);
  void require_scaled(const char* operation) const;

  // The iteration since the last scale(): the scale its gradients carry, the optimisers unscaled
  // and stepped, and whether it has counted as good or overflowed.
  double gradients_scale_;
  std::set<const Optimizer*> unscaled_, stepped_;
  bool counted_ = false, overflowed_ = false;
};

}  // namespace eddy::optim
