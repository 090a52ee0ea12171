#pragma once
// A dataset's arrays in the dtype `eddy generate` writes them in (output.dtype), refused where that
// dtype cannot hold them: float32 files held inf for an initial field's amplitude of 1e41, and
// zeros for one of 1e-45 (t all inf for time.final = 1e46), written without a word, though the
// solves in float64 were right.

#include <string>

#include "eddy/core/tensor.h"

namespace eddy::classical {

// `values` cast to `dtype`, once each row (axis 0: a sample, or a single value of a 1-D array) has
// been checked to lie within its range: the largest magnitude of a row finite there, and either 0
// or of a normal number by dtype's precision (so its values keep their digits). Errors name `what`
// and the row, and end with `remedy`.
Tensor in_output_dtype(const Tensor& values, DType dtype, const std::string& what, const std::string& remedy);

}  // namespace eddy::classical
