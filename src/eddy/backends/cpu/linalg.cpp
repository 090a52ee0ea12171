// Batched GEMM through OpenBLAS. Transposed operands (as produced by the matmul VJP) are
// passed as transpose flags rather than copied.

#include <cblas.h>

#include <Eigen/Core>

#include "eddy/backends/cpu/cpu_backend.h"
#include "eddy/backends/cpu/kernel_util.h"

namespace eddy::cpu_kernels {
namespace {

struct MatrixLayout {
  bool usable = false;
  CBLAS_TRANSPOSE transpose = CblasNoTrans;
  int64_t leading = 1;
};

// How BLAS can read a rows x cols matrix with these strides, if it can at all.
MatrixLayout layout_of(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if ((col_stride == 1 || cols == 1) && (row_stride >= std::max<int64_t>(cols, 1) || rows == 1)) {
    return {true, CblasNoTrans, std::max<int64_t>({row_stride, cols, 1})};
  }
  if ((row_stride == 1 || rows == 1) && (col_stride >= std::max<int64_t>(rows, 1) || cols == 1)) {
    return {true, CblasTrans, std::max<int64_t>({col_stride, rows, 1})};
  }
  return {};
}

// OpenBLAS packs both operands before it multiplies. When the inner or the output's column
// dimension is a few elements (a PINN's input and output layers and their gradients) that
// overhead dominates; Eigen's product made eddy 1.55x (10000x2)@(2x20) and 2.8x (10000x20)@(20x1)
// faster than OpenBLAS in float32 (docs/benchmarks.md, GEMM table).
constexpr int64_t kThinDimension = 4;

template <typename T>
void thin_gemm(bool transpose_a, bool transpose_b, int64_t n, int64_t m, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T* c, int64_t ldc) {
  using Stride = Eigen::OuterStride<>;
  using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  // A transposed row-major operand is the column-major matrix with the same leading dimension.
  auto multiply = [&](const auto& left) {
    Eigen::Map<RowMajor, 0, Stride> out(c, n, m, Stride(ldc));
    if (transpose_b) {
      out.noalias() += left * Eigen::Map<const ColMajor, 0, Stride>(b, k, m, Stride(ldb));
    } else {
      out.noalias() += left * Eigen::Map<const RowMajor, 0, Stride>(b, k, m, Stride(ldb));
    }
  };
  if (transpose_a) {
    multiply(Eigen::Map<const ColMajor, 0, Stride>(a, n, k, Stride(lda)));
  } else {
    multiply(Eigen::Map<const RowMajor, 0, Stride>(a, n, k, Stride(lda)));
  }
}

// C += A B: the caller zeroes C first. OpenBLAS's beta = 0 path clears C in a separate strided
// pass; a contiguous fill followed by beta = 1 made (10000x20)@(20x20) 1.17x faster in float32
// (docs/benchmarks.md, GEMM table).
template <typename T>
void gemm_accumulate(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t n, int64_t m, int64_t k, const T* a,
                     int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (std::min(k, m) <= kThinDimension) {
      thin_gemm(ta == CblasTrans, tb == CblasTrans, n, m, k, a, lda, b, ldb, c, ldc);
      return;
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, n, m, k, 1.0f, a, lda, b, ldb, 1.0f, c, ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, ta, tb, n, m, k, 1.0, a, lda, b, ldb, 1.0, c, ldc);
  } else {
    const T one(1);
    if constexpr (std::is_same_v<T, c64>) {
      cblas_cgemm(CblasRowMajor, ta, tb, n, m, k, &one, a, lda, b, ldb, &one, c, ldc);
    } else {
      cblas_zgemm(CblasRowMajor, ta, tb, n, m, k, &one, a, lda, b, ldb, &one, c, ldc);
    }
  }
}

}  // namespace

void CpuBackend::matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  const int64_t rank = out.dim();
  const int64_t n = out.shape()[rank - 2], m = out.shape()[rank - 1];
  const int64_t k = a_in.shape()[rank - 1];
  auto matrix_layout = [&](const Tensor& t, int64_t rows, int64_t cols) {
    return layout_of(rows, cols, t.strides()[rank - 2], t.strides()[rank - 1]);
  };
  Tensor a = a_in, b = b_in;
  MatrixLayout la = matrix_layout(a, n, k), lb = matrix_layout(b, k, m);
  // Operands BLAS cannot read directly are copied to a dense layout once for all batches.
  auto densify = [&](Tensor& t, MatrixLayout& layout, int64_t rows, int64_t cols) {
    Tensor dense = Tensor::empty(t.shape(), t.dtype(), t.device());
    copy(t, dense);
    t = dense;
    layout = matrix_layout(t, rows, cols);
  };
  if (!la.usable) densify(a, la, n, k);
  if (!lb.usable) densify(b, lb, k, m);
  fill(out, 0.0);
  if (k == 0) return;
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const int64_t batches = numel(batch);
  EDDY_DISPATCH_INEXACT(out.dtype(), T, "matmul", {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.data<T>();
    Shape index(batch.size(), 0);
    for (int64_t i = 0; i < batches; ++i) {
      int64_t off_a = 0, off_b = 0, off_c = 0;
      for (size_t d = 0; d < batch.size(); ++d) {
        off_a += index[d] * a.strides()[d];
        off_b += index[d] * b.strides()[d];
        off_c += index[d] * out.strides()[d];
      }
      gemm_accumulate<T>(la.transpose, lb.transpose, n, m, k, pa + off_a, la.leading, pb + off_b, lb.leading,
              pc + off_c, std::max<int64_t>(m, 1));
      for (size_t d = batch.size(); d-- > 0;) {
        if (++index[d] < batch[d]) break;
        index[d] = 0;
      }
    }
  });
}

}  // namespace eddy::cpu_kernels
