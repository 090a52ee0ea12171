#pragma once
// A dataset's arrays in the dtype `eddy generate` writes them in (output.dtype), refused where they
// are not finite or that dtype cannot hold them: float32 files held inf for an initial field's
// amplitude of 1e41, and zeros for one of 1e-45 (t all inf for time.final = 1e46), written without
// a word, though the solves in float64 were right.

#include <cstdint>
#include <string>

#include "eddy/core/tensor.h"

namespace eddy::classical {

// `values` cast to `dtype`, once each row (axis 0: a sample, or a single value of a 1-D array) has
// been checked: its largest magnitude finite, and in float32 within range and either 0 or far
// enough above the smallest normal number to keep its digits. Errors name `what` and the row
// (counted from `first_row`: the batch's first sample), and end with `rescale`, what to scale.
Tensor in_output_dtype(const Tensor& values, DType dtype, const std::string& what, const std::string& rescale,
                       int64_t first_row = 0);

}  // namespace eddy::classical
