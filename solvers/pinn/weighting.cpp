#include "solvers/pinn/weighting.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "eddy/autodiff/tape.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/ops/ops.h"
#include "solvers/pinn/sampler.h"
#include "solvers/pinn/solver.h"

namespace eddy::pinn {

namespace {

// ||grad L_i|| for each condition i, with respect to the network weights.
std::vector<double> gradient_norms(PinnState& state) {
  const std::vector<Tensor> network = state.model().parameters();
  std::vector<double> norms;
  for (size_t i = 0; i < state.problem().conditions.size(); ++i) {
    // Whole on every rank: the backward pass sums the ranks' parts (see PinnState).
    std::vector<Tensor> flat_gradients;
    for (const Tensor& g : grad({state.condition_loss(i)}, network)) flat_gradients.push_back(flatten(g));
    norms.push_back(std::sqrt(sum(square(concat(flat_gradients, 0))).item<double>()));
  }
  return norms;
}

}  // namespace

std::vector<double> ntk_traces(PinnState& state, int64_t step) {
  const Problem& p = state.problem();
  const std::vector<Tensor> network = state.model().parameters();
  dist::Communicator& comm = state.communicator();
  const uint64_t salt = 0x4E544B20504E5453ull;  // "NTK PNTS"
  std::vector<double> traces;
  for (size_t i = 0; i < p.conditions.size(); ++i) {
    const int64_t available = state.all_samples()[i].points.shape()[0];
    Generator generator = step_stream(p.seed, salt, step, i);
    const std::vector<int64_t> rows =
        random_subset(available, std::min(available, p.training.loss_weighting.ntk_points), generator);
    // Each rank differentiates its share of the rows and leaves the others' entries 0, so the
    // sum over ranks holds every row's value exactly as one process computes it. The last entry
    // counts the residual entries differentiated.
    const auto count = static_cast<int64_t>(rows.size());
    std::vector<double> diagonal(rows.size() + 1, 0.0);
    const auto [first, last] = dist::shard(0, count, comm.rank(), comm.size());
    for (int64_t r = first; r < last; ++r) {
      // One point at a time: its residual's gradient is one row of the Jacobian whose Gram matrix
      // is the kernel, and a batch would give only the sum of the rows.
      const Tensor residual = flatten(state.residual_at_rows(i, {rows[r]}));
      for (int64_t entry = 0; entry < residual.numel(); ++entry) {
        for (const Tensor& g : grad({slice(residual, 0, entry, entry + 1)}, network)) {
          diagonal[r] += sum(square(g)).item<double>();
        }
      }
      diagonal.back() += static_cast<double>(residual.numel());
    }
    const Tensor all = tensor(diagonal);
    comm.allreduce(all, all, dist::ReduceOp::sum);
    const std::vector<double> summed = all.to_vector<double>();
    double trace = 0;
    for (int64_t r = 0; r < count; ++r) trace += summed[r];
    traces.push_back(trace / summed.back());
  }
  return traces;
}

void update_adaptive_weights(PinnState& state, int64_t step) {
  const LossWeightingOptions& options = state.problem().training.loss_weighting;
  const std::vector<double> sizes =
      options.scheme == LossWeighting::ntk ? ntk_traces(state, step) : gradient_norms(state);
  double total = 0;
  for (double s : sizes) total += s;
  if (!std::isfinite(total)) return;  // the loss is about to stop training; leave the weights

  // A size lost to rounding beside the total counts as zero: a condition that holds by
  // construction up to rounding (a boundary value an output transform imposes, as sin(pi) is
  // 1.2e-16 and not 0) had weights of 1e28 to 1e32, and its rounding noise then drove training.
  const double negligible = total * (state.problem().dtype == DType::f64 ? std::numeric_limits<double>::epsilon()
                                                                         : std::numeric_limits<float>::epsilon());
  std::vector<double> weights = state.adaptive_weights();
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] > negligible) weights[i] = options.alpha * weights[i] + (1 - options.alpha) * total / sizes[i];
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
