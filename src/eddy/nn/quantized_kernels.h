#pragma once
// The kernels behind quantized_matmul (quantized.h, which gives the packed layout): the layout's
// sizes, x rounded to int8 as the products take it, one row of x times a packed matrix, and rows
// of a packed matrix as floats.

#include <cstdint>

#include "eddy/nn/quantized.h"

namespace eddy::nn::quantized_kernels {

inline constexpr int64_t kInt4Run = 32;  // values per 16-byte run of int4 nibbles

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The bytes of one packed row.
inline int64_t row_bytes(int bits, int64_t columns, int64_t group) {
  return bits == 8 ? ceil_div(columns, 4) * 4 : ceil_div(columns, group) * group / 2;
}

// x's `columns` values as the floats the products multiply: each run of 32 rounded to a multiple
// of its max |x| / 127 (quantized.h).
void round_activations(const float* x, int64_t columns, float* rounded);

// y [rows] = the matrix times one row x [columns], x rounded as above; the output rows run on
// eddy's threads when the matrix is large enough to pay for them.
void matrix_vector(const QuantizedMatrix& m, const float* x, float* y);

// Rows [first, end) of the matrix as floats into `into` [end - first, columns].
void dequantize_rows(const QuantizedMatrix& m, int64_t first, int64_t end, float* into);

}  // namespace eddy::nn::quantized_kernels
