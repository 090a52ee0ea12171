#pragma once
// How BLAS reads a strided matrix in place, shared by the CPU kernels that call it (matmul,
// attention): as itself or as its transpose, with a leading dimension, or not at all; and the
// walk over a batched product's matrices.

#include <cblas.h>

#include <algorithm>
#include <cstdint>

#include "eddy/core/tensor.h"

namespace eddy::cpu_kernels {

struct MatrixLayout {
  bool usable = false;
  CBLAS_TRANSPOSE transpose = CblasNoTrans;
  int64_t leading = 1;
};

// How BLAS can read a rows x cols matrix with these strides, if it can at all.
inline MatrixLayout layout_of(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if ((col_stride == 1 || cols == 1) && (row_stride >= std::max<int64_t>(cols, 1) || rows == 1)) {
    return {true, CblasNoTrans, std::max<int64_t>({row_stride, cols, 1})};
  }
  if ((row_stride == 1 || rows == 1) && (col_stride >= std::max<int64_t>(rows, 1) || cols == 1)) {
    return {true, CblasTrans, std::max<int64_t>({col_stride, rows, 1})};
  }
  return {};
}

// matrix(offset_a, offset_b, offset_out), in elements, for each matrix of out = a @ b, which share
// out's leading (batch) dimensions; a broadcast operand has stride 0 there.
template <typename Matrix>
void for_each_batch_matrix(const Tensor& a, const Tensor& b, const Tensor& out, Matrix&& matrix) {
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  Shape index(batch.size(), 0);
  for (int64_t i = 0, batches = numel(batch); i < batches; ++i) {
    int64_t off_a = 0, off_b = 0, off_out = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      off_a += index[d] * a.strides()[d];
      off_b += index[d] * b.strides()[d];
      off_out += index[d] * out.strides()[d];
    }
    matrix(off_a, off_b, off_out);
    for (size_t d = batch.size(); d-- > 0;) {
      if (++index[d] < batch[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace eddy::cpu_kernels
