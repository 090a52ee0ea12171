#include "solvers/pinn/refinement.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

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

namespace {

// |residual| at each candidate of an interior condition (the Euclidean norm of a residual with
// several columns), evaluated in blocks: the derivatives at 100,000 candidates at once would take
// more memory than a training step.
std::vector<double> residual_sizes(PinnState& state, size_t condition, const Tensor& candidates) {
  constexpr int64_t kBlock = 8192;
  const int64_t count = candidates.shape()[0];
  std::vector<double> sizes;
  for (int64_t first = 0; first < count; first += kBlock) {
    const int64_t last = std::min(count, first + kBlock);
    const Tensor block_points = slice(candidates, 0, first, last);
    const Tensor residual = reshape(state.interior_residual(condition, block_points), {last - first, -1});
    const std::vector<double> block = sqrt(sum(square(residual.detach()), {1})).to_vector<double>();
    sizes.insert(sizes.end(), block.begin(), block.end());
  }
  return sizes;
}

}  // namespace

std::vector<int64_t> rad_draw(const std::vector<double>& sizes, int64_t count, const RadOptions& options,
                              Generator& generator) {
  const auto candidates = static_cast<int64_t>(sizes.size());
  EDDY_CHECK(count <= candidates, "rad_draw: ", count, " points from ", candidates, " candidates");
  std::vector<double> density(sizes.size(), 0.0);
  double mean = 0;
  for (size_t j = 0; j < sizes.size(); ++j) {
    if (std::isfinite(sizes[j])) density[j] = std::pow(sizes[j], options.k);
    mean += density[j] / static_cast<double>(candidates);
  }
  for (size_t j = 0; j < sizes.size(); ++j) {
    if (std::isfinite(sizes[j])) density[j] = (mean > 0 ? density[j] / mean : 0.0) + options.c;
  }
  // Successive draws without replacement, all at once: candidate j's exponential clock
  // E_j / density_j rings first with probability density_j / (sum of the densities), and the
  // `count` that ring first are such a draw. A density of 0 never rings; those candidates come
  // after the others, in their (random) candidate order, and those whose residual is not finite
  // after all of them.
  const std::vector<double> uniforms = rand({candidates}, DType::f64, &generator).to_vector<double>();
  std::vector<double> rings(sizes.size());
  for (size_t j = 0; j < sizes.size(); ++j) {
    rings[j] = density[j] > 0 ? -std::log1p(-uniforms[j]) / density[j] : std::numeric_limits<double>::infinity();
  }
  std::vector<int64_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  const auto key = [&](int64_t j) { return std::tuple(!std::isfinite(sizes[static_cast<size_t>(j)]), rings[j], j); };
  std::partial_sort(order.begin(), order.begin() + count, order.end(),
                    [&](int64_t a, int64_t b) { return key(a) < key(b); });
  order.resize(static_cast<size_t>(count));
  return order;
}

void redistribute(PinnState& state, int64_t step) {
  const Problem& p = state.problem();
  const uint64_t salt = 0x5241442043414E44ull;  // "RAD CAND"
  for (size_t i = 0; i < p.conditions.size(); ++i) {
    if (p.conditions[i].kind != ConditionKind::interior) continue;
    Generator generator = step_stream(p.seed, salt, step, i);
    const Tensor candidates = state.interior_points(p.rad->candidates, generator);
    const std::vector<double> sizes = residual_sizes(state, i, candidates);
    const Tensor chosen =
        index_select(candidates, 0, tensor(rad_draw(sizes, p.conditions[i].points, *p.rad, generator)));
    // As in refine: rank 0's draw, so that a last-bit difference in a residual cannot give the
    // ranks different points.
    dist::broadcast_tensors({chosen}, state.communicator());
    state.set_rad_points(i, chosen);
  }
}

}  // namespace eddy::pinn
