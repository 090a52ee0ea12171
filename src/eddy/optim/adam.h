#pragma once
/// @file
/// Adam (Kingma & Ba, 2015) and AdamW (Loshchilov & Hutter, 2019), with the update rules of
/// torch.optim.Adam and torch.optim.AdamW (amsgrad off). Tested against trajectories recorded
/// from PyTorch (scripts/reference/adam_reference.py).

#include <functional>

#include "eddy/optim/optimizer.h"

namespace eddy::optim {

struct AdamOptions {
  double learning_rate = 1e-3;
  /// Decay rates of the first and second moment estimates, each in [0, 1).
  double beta1 = 0.9;
  double beta2 = 0.999;
  /// Added to sqrt(v_hat) in the denominator; > 0.
  double eps = 1e-8;
  /// lambda >= 0. Adam folds it into the gradient (L2 penalty); AdamW decays the weights
  /// directly (decoupled weight decay). The two differ: see Adam and AdamW.
  double weight_decay = 0;
};

/// Adam. For each parameter p with gradient g, at step t = 1, 2, ... (t counts step() calls):
///
///     g <- g + weight_decay * p
///     m <- beta1 * m + (1 - beta1) * g              (m, v start at 0)
///     v <- beta2 * v + (1 - beta2) * g^2
///     p <- p - learning_rate * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
///
/// State: "<name>.step", "<name>.m.<i>", "<name>.v.<i>", with <name> "adam" (or "adamw").
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> parameters, const AdamOptions& options);
  void step() override;
  nn::StateDict state_dict() const override;
  void load_state_dict(const nn::StateDict& state) override;
  bool updates_elementwise() const override { return true; }

  /// One parameter's update, written in ops: (p, g, m, v, decay, step_size, correction2) ->
  /// (p', m', v'), where decay = 1 - learning_rate * weight_decay (AdamW), step_size =
  /// learning_rate / (1 - beta1^t) and correction2 = 1 - beta2^t are 0-d tensors of p's dtype,
  /// so that one captured graph serves every step.
  using Update = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  /// Runs every update through wrap(update) instead of op by op: a solver passes the compiler
  /// (solvers/common/step_function.h), which fuses it into one loop per parameter shape that
  /// reads p, g, m and v once, where the ops pass over them about fifteen times (optim sits
  /// below the compiler, so it cannot compile the update itself).
  void run_updates_through(const std::function<Update(Update)>& wrap);

 protected:
  Adam(std::vector<Tensor> parameters, const AdamOptions& options, bool decoupled_weight_decay);

 private:
  Update update_rule() const;

  AdamOptions options_;
  bool decoupled_weight_decay_;
  std::vector<Tensor> m_, v_;
  Update update_;
};

/// AdamW: Adam whose weight decay acts on the weights, not through the moments. Each step first
/// shrinks the weights, then applies Adam's update with the raw gradient:
///
///     p <- p * (1 - learning_rate * weight_decay)
///     (then Adam's m, v and p updates, with g not modified)
///
/// State keys start with "adamw".
class AdamW : public Adam {
 public:
  /// Unlike torch.optim.AdamW (default 1e-2), weight_decay defaults to 0, as for Adam.
  AdamW(std::vector<Tensor> parameters, const AdamOptions& options);
};

}  // namespace eddy::optim
