#include "solvers/classical/output_dtype.h"

#include <cmath>
#include <limits>
#include <vector>

#include "eddy/core/error.h"
#include "eddy/ops/ops.h"

namespace eddy::classical {

Tensor in_output_dtype(const Tensor& values, DType dtype, const std::string& what, const std::string& rescale,
                       int64_t first_row) {
  constexpr double largest = std::numeric_limits<float>::max();
  // Below this a row's largest value keeps fewer than float32's 24 bits: it is a subnormal number,
  // or would be once divided by its precision.
  constexpr double smallest = static_cast<double>(std::numeric_limits<float>::min()) /
                              static_cast<double>(std::numeric_limits<float>::epsilon());
  const bool float32 = dtype == DType::f32;
  const Tensor magnitudes = abs(cast(values, DType::f64));
  std::vector<int64_t> within_rows;
  for (int64_t axis = 1; axis < values.dim(); ++axis) within_rows.push_back(axis);
  const std::vector<double> row_max =
      (within_rows.empty() ? magnitudes : max(magnitudes, within_rows)).to_vector<double>();
  for (size_t row = 0; row < row_max.size(); ++row) {
    const double size = row_max[row];
    const int64_t index = first_row + static_cast<int64_t>(row);
    const std::string which = values.dim() > 1 ? cat(what, " of sample ", index) : cat(what, "[", index, "]");
    EDDY_CHECK(std::isfinite(size), "generate: ", which, " is not finite (", std::isnan(size) ? "NaN" : "inf",
               ") in float64 already: ", rescale, " into its range");
    if (!float32) continue;
    EDDY_CHECK(size <= largest, "generate: ", which, " reaches |value| = ", size, ", beyond float32's largest (",
               largest, "), where output.dtype: float32 would write inf; write output.dtype: float64, or ", rescale);
    EDDY_CHECK(size == 0 || size >= smallest, "generate: ", which, " is at most ", size, " in magnitude, below ",
               smallest, ", where output.dtype: float32 keeps fewer of its digits than float32 has, or none (subnormal "
               "numbers, zero); write output.dtype: float64, or ", rescale);
  }
  return cast(values, dtype);
}

}  // namespace eddy::classical
