#include "solvers/pinn/weighting.h"

#include <cmath>

#include "eddy/autodiff/tape.h"
#include "eddy/ops/ops.h"
#include "solvers/pinn/solver.h"

namespace eddy::pinn {

void update_adaptive_weights(PinnState& state) {
  const std::vector<Tensor> network = state.model().parameters();
  const size_t conditions = state.problem().conditions.size();
  std::vector<double> norms;
  for (size_t i = 0; i < conditions; ++i) {
    const std::vector<Tensor> gradients = grad({state.condition_loss(i)}, network);
    Tensor squares;
    for (const Tensor& g : gradients) {
      Tensor s = sum(square(g));
      squares = squares.defined() ? squares + s : s;
    }
    norms.push_back(std::sqrt(squares.item<double>()));
  }
  double total = 0;
  for (double n : norms) total += n;
  if (!std::isfinite(total)) return;  // the loss is about to stop training; leave the weights

  const double alpha = state.problem().training.loss_weighting.alpha;
  std::vector<double> weights = state.adaptive_weights();
  for (size_t i = 0; i < conditions; ++i) {
    if (norms[i] > 0) weights[i] = alpha * weights[i] + (1 - alpha) * total / norms[i];
  }
  state.set_adaptive_weights(std::move(weights));
}

CausalLoss causal_loss(const Tensor& squared_residuals, const CausalOptions& options) {
  const int64_t rows = squared_residuals.shape()[0], chunks = options.chunks;
  std::vector<Tensor> chunk_losses;
  for (int64_t k = 0; k < chunks; ++k) {
    chunk_losses.push_back(reshape(mean(slice(squared_residuals, 0, k * rows / chunks, (k + 1) * rows / chunks)), {1}));
  }
  const Tensor losses = concat(chunk_losses, 0);
  // Running sums in chunk order, as the formula reads: sum_{j<k} L_j for each k.
  const Tensor settled = losses.detach();
  std::vector<Tensor> earlier{zeros({1}, losses.dtype())};
  for (int64_t k = 1; k < chunks; ++k) earlier.push_back(earlier.back() + slice(settled, 0, k - 1, k));
  const Tensor weights = exp(concat(earlier, 0) * -options.epsilon);
  return {sum(losses * weights) / static_cast<double>(chunks), weights};
}

}  // namespace eddy::pinn
