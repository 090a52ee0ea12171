#pragma once
// How BLAS reads a strided matrix in place, shared by the CPU kernels that call it (matmul,
// attention): as itself or as its transpose, with a leading dimension, or not at all.

#include <cblas.h>

#include <algorithm>
#include <cstdint>

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

}  // namespace eddy::cpu_kernels
