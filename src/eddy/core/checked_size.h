#pragma once
// Checked tensor sizes. A shape read from a file (an array header, a checkpoint, an exported graph)
// can be anything: multiplied unchecked, its extents wrap around to a small size that passes a
// reader's size check, and the reader then copies far past its buffer.

#include <algorithm>
#include <cstdint>
#include <optional>

#include "eddy/core/dtype.h"
#include "eddy/core/shape.h"

namespace eddy {

// The bytes of a dense tensor of `shape` and `dtype`; nullopt when an extent is negative or the
// size does not fit in int64_t. Empty extents count as 1 in the overflow test, since the strides
// of an empty tensor are still products of its other extents.
inline std::optional<int64_t> checked_byte_size(const Shape& shape, DType dtype) {
  auto span = static_cast<int64_t>(dtype_size(dtype));
  bool empty = false;
  for (int64_t extent : shape) {
    if (extent < 0 || __builtin_mul_overflow(span, std::max<int64_t>(extent, 1), &span)) return std::nullopt;
    empty = empty || extent == 0;
  }
  return empty ? 0 : span;
}

}  // namespace eddy
