#include "solvers/pinn/refinement.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "eddy/autodiff/tape.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/ops/ops.h"
#include "solvers/pinn/sampler.h"
#include "solvers/pinn/solver.h"

namespace eddy::pinn {

Tensor refinement_candidates(const PinnState& state, size_t condition, int64_t step) {
  const Problem& p = state.problem();
  const uint64_t salt = 0x5241522043414E44ull;  // "RAR CAND"
  Generator generator = step_stream(p.seed, salt, step, condition);
  return state.interior_points(p.refinement->candidates, generator);
}

void refine(PinnState& state, int64_t step) {
  const Problem& p = state.problem();
  const int64_t add = p.refinement->add;
  for (size_t i = 0; i < p.conditions.size(); ++i) {
    if (p.conditions[i].kind != ConditionKind::interior) continue;
    const Tensor candidates = refinement_candidates(state, i, step);
    // Derivatives in the residual need gradient mode, though only the values are kept.
    std::vector<double> size = flatten(abs(state.interior_residual(i, candidates))).detach().to_vector<double>();
    // A NaN residual ranks last: refinement should not feed the loss a point it cannot evaluate.
    for (double& s : size) {
      if (std::isnan(s)) s = -std::numeric_limits<double>::infinity();
    }
    std::vector<int64_t> order(size.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + add, order.end(),
                      [&](int64_t a, int64_t b) { return size[a] > size[b] || (size[a] == size[b] && a < b); });
    order.resize(static_cast<size_t>(add));
    // Every rank ranks the same candidates with the same weights; rank 0's choice is sent anyway,
    // so that a last-bit difference in a residual cannot give the ranks different point sets.
    const Tensor chosen = index_select(candidates, 0, tensor(order));
    dist::broadcast_tensors({chosen}, state.communicator());
    state.add_points(i, chosen);
  }
}

}  // namespace eddy::pinn
