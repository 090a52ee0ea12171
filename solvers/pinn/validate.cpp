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
  if (ref.points.defined()) {
    points = ref.points;
  } else {
    // The grid in the file's axis order, its columns then put in coordinate order.
    std::vector<int64_t> column_of;
    for (const std::string& name : p.coordinates) {
      column_of.push_back(std::find(ref.layout.begin(), ref.layout.end(), name) - ref.layout.begin());
    }
    points = index_select(meshgrid_points(ref.axes), 1, tensor(column_of));
  }
  for (const auto& [field, values] : ref.values) values_[field] = reshape(values, {-1, 1});
  // NaN marks reference points without a value (DeepXDE's L-shape grid covers the removed
  // quadrant with NaN); those points are left out of the comparison.
  std::vector<bool> valid(static_cast<size_t>(points.shape()[0]), true);
  for (const auto& [field, values] : values_) {
    std::vector<bool> finite = flatten(eq(values, values)).to_vector<bool>();
    for (size_t i = 0; i < valid.size(); ++i) valid[i] = valid[i] && finite[i];
  }
  std::vector<int64_t> rows;
  for (size_t i = 0; i < valid.size(); ++i) {
    if (valid[i]) rows.push_back(static_cast<int64_t>(i));
  }
  EDDY_CHECK(!rows.empty(), "validation.reference: ", ref.file, ": the reference has no finite values");
  // A value outside the domain would score the network where the problem has no solution (a
  // reference on [0, 2] for a problem on [0, 1] reported 0.61 where the error in it was 1.2e-5).
  {
    const int64_t coordinates = static_cast<int64_t>(p.coordinates.size());
    const std::vector<double> at = cast(points, DType::f64).to_vector<double>();
    int64_t outside = 0, first_outside = -1;
    for (int64_t row : rows) {
      if (p.contains(at.data() + row * coordinates)) continue;
      if (outside++ == 0) first_outside = row;
    }
    if (outside > 0) {
      throw Error(cat("validation.reference: ", ref.file, ": ", outside, " of the reference's ", rows.size(),
                      " points with values lie outside the domain (the first: ",
                      p.point_text(at.data() + first_outside * coordinates), "); crop the reference to the domain, "
                      "or give those points NaN values, which are left out"));
    }
  }
  // This rank's share of the valid points.
  const dist::Communicator& comm = state.communicator();
  const auto [first, last] = dist::shard(0, static_cast<int64_t>(rows.size()), comm.rank(), comm.size());
  if (last - first < static_cast<int64_t>(valid.size())) {
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
  for (const auto& [field, reference] : values_) {
    const int64_t column = std::find(p.fields.begin(), p.fields.end(), field) - p.fields.begin();
    const Tensor error = slice(prediction, 1, column, column + 1) - reference;
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
