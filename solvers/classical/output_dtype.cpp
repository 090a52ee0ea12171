#include "solvers/classical/output_dtype.h"

#include <limits>
#include <vector>

#include "eddy/core/error.h"
#include "eddy/ops/ops.h"

namespace eddy::classical {

Tensor in_output_dtype(const Tensor& values, DType dtype, const std::string& what, const std::string& remedy) {
  if (dtype != DType::f32) return cast(values, dtype);  // float64 holds what the float64 solves give
  constexpr double largest = std::numeric_limits<float>::max();
  // Below this a row's largest value is a subnormal or within float32's precision of one.
  constexpr double smallest = static_cast<double>(std::numeric_limits<float>::min()) /
                              static_cast<double>(std::numeric_limits<float>::epsilon());
  const Tensor magnitudes = abs(cast(values, DType::f64));
  std::vector<int64_t> within_rows;
  for (int64_t axis = 1; axis < values.dim(); ++axis) within_rows.push_back(axis);
  const std::vector<double> row_max =
      (within_rows.empty() ? magnitudes : max(magnitudes, within_rows)).to_vector<double>();
  for (size_t row = 0; row < row_max.size(); ++row) {
    const double size = row_max[row];
    const std::string which = values.dim() > 1 ? cat(what, " of sample ", row) : cat(what, "[", row, "]");
    EDDY_CHECK(size <= largest, "generate: ", which, " reaches |value| = ", size, ", beyond float32's largest (",
               largest, "), where output.dtype: float32 would write inf; ", remedy);
    EDDY_CHECK(size == 0 || size >= smallest, "generate: ", which, " is at most ", size, " in magnitude, below ",
               smallest, ", where output.dtype: float32 keeps few or none of its digits (subnormal numbers or "
               "zero); ", remedy);
  }
  return cast(values, dtype);
}

}  // namespace eddy::classical
