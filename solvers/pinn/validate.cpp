// Validation against a reference solution: analytic expressions, or an HDF5, CSV or NPY file with
// the solution on a grid or at scattered points.

#include <cmath>

#include "eddy/autodiff/tape.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/ops/ops.h"
#include "solvers/pinn/solver.h"

namespace eddy::pinn {

Validator::Validator(PinnState& state) : state_(state) {
  const Problem& p = state.problem();
  EDDY_CHECK(p.validation.reference.has_value(), p.source, ": validation.reference is not set");
  const Reference& ref = *p.validation.reference;
  Tensor& points = points_;
  if (!ref.expressions.empty()) {
    Generator generator(p.seed + 77);
    points = state.interior_points(p.validation.points, generator, true);
    for (const auto& entry : ref.expressions) {
      // Not a structured binding: the lambda below captures it, which clang before 16 refuses.
      const std::string& field = entry.first;
      const Expression& expression = entry.second;
      EvaluationInputs inputs;
      inputs.points = points;
      inputs.fields = [&](const Tensor&) -> Tensor {
        throw Error(cat(expression.where(), ": a reference may only use coordinates and parameters"));
      };
      inputs.parameters = state.parameter_values();
      // The problem's own values, whichever continuation stage the state is in.
      for (const auto& [name, value] : p.constants) inputs.parameters[name] = scalar(value, p.dtype);
      EvaluationContext context(p.symbols(false), inputs);
      values_[field] = evaluate(expression, context).detach();
    }
    return;
  }
  points = ref.points;
  for (const auto& [field, values] : ref.values) values_[field] = reshape(values, {-1, 1});
  const std::vector<int64_t>& rows = ref.rows;
  // This rank's share of the valid points.
  const dist::Communicator& comm = state.communicator();
  const auto [first, last] = dist::shard(0, static_cast<int64_t>(rows.size()), comm.rank(), comm.size());
  if (last - first < points.shape()[0]) {
    Tensor keep = slice(tensor(rows), 0, first, last);
    points = index_select(points, 0, keep);
    for (auto& [field, values] : values_) values = index_select(values, 0, keep);
  }
}

Metrics Validator::measure() {
  const Problem& p = state_.problem();
  NoGradGuard no_grad;
  Tensor prediction = state_.predict(points_);
  // Per field, over this rank's points: the squared error and squared reference summed, and the
  // largest error; then over all ranks' points.
  std::vector<Tensor> sums, largest;
  for (const auto& [field, given] : values_) {
    const int64_t column = std::find(p.fields.begin(), p.fields.end(), field) - p.fields.begin();
    // A file reference may give a field at some of its points only (NaN elsewhere): each field is
    // scored where it has values. Scored where all had, Ghia's cavity table, which gives u and v
    // on different lines, was scored at its centre alone.
    const Tensor has_value = eq(given, given);
    const Tensor reference = where(has_value, given, zeros_like(given));
    const Tensor error = where(has_value, slice(prediction, 1, column, column + 1) - given, zeros_like(given));
    sums.push_back(reshape(sum(square(error)), {1}));
    sums.push_back(reshape(sum(square(reference)), {1}));
    largest.push_back(error.numel() > 0 ? reshape(max(abs(error)), {1}) : zeros({1}, error.dtype()));
  }
  const Tensor all_sums = cast(concat(sums, 0), DType::f64), all_largest = cast(concat(largest, 0), DType::f64);
  dist::Communicator& comm = state_.communicator();
  comm.allreduce(all_sums, all_sums, dist::ReduceOp::sum);
  comm.allreduce(all_largest, all_largest, dist::ReduceOp::max);
  const std::vector<double> summed = all_sums.to_vector<double>(), maxima = all_largest.to_vector<double>();
  Metrics metrics;
  size_t i = 0;
  for (const auto& [field, reference] : values_) {
    metrics.relative_l2[field] = std::sqrt(summed[2 * i] / summed[2 * i + 1]);
    metrics.max_error[field] = maxima[i++];
  }
  return metrics;
}

}  // namespace eddy::pinn
