#pragma once
/// @file
/// Stochastic gradient descent with optional momentum (heavy-ball or Nesterov) and L2 weight
/// decay, with PyTorch's update rule (torch.optim.SGD with dampening 0).

#include "eddy/optim/optimizer.h"

namespace eddy::optim {

struct SgdOptions {
  double learning_rate = 1e-2;
  /// mu in [0, 1): 0 is plain gradient descent.
  double momentum = 0;
  /// Nesterov momentum; needs momentum > 0.
  bool nesterov = false;
  /// lambda >= 0: L2 penalty folded into the gradient, g <- g + lambda * p.
  double weight_decay = 0;
};

/// For each parameter p with gradient g, at step t = 1, 2, ...:
///
///     g <- g + weight_decay * p
///     b <- momentum * b + g                             (b starts at 0)
///     d <- g + momentum * b   if nesterov, else  b      (d = g when momentum = 0)
///     p <- p - learning_rate * d
///
/// State: "sgd.step" and, when momentum > 0, the buffers b as "sgd.momentum.<i>".
class Sgd : public Optimizer {
 public:
  Sgd(std::vector<Tensor> parameters, const SgdOptions& options);
  void step() override;
  nn::StateDict state_dict() const override;
  void load_state_dict(const nn::StateDict& state) override;
  bool updates_elementwise() const override { return true; }

 private:
  SgdOptions options_;
  std::vector<Tensor> momentum_;  // empty when momentum == 0
};

}  // namespace eddy::optim
