#pragma once
// Shapes and strides. Strides are counted in elements, not bytes, and may be zero (broadcast).

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace eddy {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& shape);
// Row-major strides of a dense tensor of this shape.
Shape contiguous_strides(const Shape& shape);
// NumPy broadcasting of two shapes; `op` names the caller in the error.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);
// Maps a possibly negative axis into [0, rank); throws naming `op` when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank, std::string_view op);
// Normalises, sorts and de-duplicates-checks a list of axes; an empty list means all axes.
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t rank,
                                    std::string_view op);

std::string to_string(const Shape& shape);
std::ostream& operator<<(std::ostream& out, const Shape& shape);

}  // namespace eddy
