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
  dist::Communicator& comm = state.communicator();
  for (size_t i = 0; i < conditions; ++i) {
    std::vector<Tensor> flat_gradients;
    for (const Tensor& g : grad({state.condition_loss(i)}, network)) flat_gradients.push_back(flatten(g));
    // Each rank holds its share's gradient times the number of ranks (see PinnState), so the
    // mean over ranks is the gradient of the loss of all the points.
    const Tensor flat = concat(flat_gradients, 0);
    comm.allreduce(flat, flat, dist::ReduceOp::mean);
    norms.push_back(std::sqrt(sum(square(flat)).item<double>()));
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

CausalLoss causal_loss(const Tensor& losses, const CausalOptions& options) {
  const int64_t chunks = options.chunks;
  EDDY_CHECK(losses.dim() == 1 && losses.shape()[0] == chunks, "causal_loss: expected ", chunks,
             " chunk losses, got shape ", losses.shape());
  // Running sums in chunk order, as the formula reads: sum_{j<k} L_j for each k.
  const Tensor settled = losses.detach();
  std::vector<Tensor> earlier{zeros({1}, losses.dtype())};
  for (int64_t k = 1; k < chunks; ++k) earlier.push_back(earlier.back() + slice(settled, 0, k - 1, k));
  const Tensor weights = exp(concat(earlier, 0) * -options.epsilon);
  return {sum(losses * weights) / static_cast<double>(chunks), weights};
}

}  // namespace eddy::pinn
