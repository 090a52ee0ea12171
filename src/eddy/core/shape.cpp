#include "eddy/core/shape.h"

#include <algorithm>
#include <ostream>

#include "eddy/core/error.h"

namespace eddy {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    EDDY_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b,
               " cannot be broadcast together (dimension ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t normalize_axis(int64_t axis, int64_t rank, std::string_view op) {
  EDDY_CHECK(rank > 0, op, ": names axis ", axis, " of a tensor of rank 0, which has no axes; give it one "
             "(reshape to [1])");
  EDDY_CHECK(axis >= -rank && axis < rank, op, ": axis ", axis, " is out of range for a tensor of rank ",
             rank, " (valid: ", -rank, " to ", rank - 1, ")");
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t rank,
                                    std::string_view op) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t axis : axes) out.push_back(normalize_axis(axis, rank, op));
  std::sort(out.begin(), out.end());
  auto repeated = std::adjacent_find(out.begin(), out.end());
  EDDY_CHECK(repeated == out.end(), op, ": axis list ", to_string(axes), " repeats axis ",
             *repeated);
  return out;
}

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::ostream& operator<<(std::ostream& out, const Shape& shape) { return out << to_string(shape); }

}  // namespace eddy
