// Batched GEMM through OpenBLAS, and oneDNN for large float32 products. Transposed operands (as
// produced by the matmul VJP) are passed as transpose flags rather than copied.

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include "eddy/backends/cpu/eigen_core.h"
#include <algorithm>
#include <vector>

#include "eddy/backends/backend.h"
#include "eddy/backends/cpu/blas_layout.h"
#include "eddy/backends/cpu/cpu_backend.h"
#include "eddy/backends/cpu/half.h"
#include "eddy/backends/cpu/kernel_util.h"
#include "eddy/backends/cpu/loops.h"

namespace eddy::cpu_kernels {
namespace {

// OpenBLAS packs both operands before it multiplies. When the inner or the output's column
// dimension is a few elements that overhead dominates; Eigen's product made (10000x2)@(2x20) 1.55x
// and (10000x20)@(20x1) 2.8x faster than packed OpenBLAS in float32 (docs/benchmarks.md, GEMM
// table). Such products that OpenBLAS's small-matrix kernel takes (see gemm) go there instead.
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

// OpenBLAS (0.3.16 on, AVX-512 targets) multiplies without packing either operand when
// M * N * K <= 100^3 (kernel/x86_64/?gemm_small_kernel_permit_skylakex.c), in a kernel that writes
// C directly when beta = 0. A PINN layer's 10000 x w @ w x w products are 4x (w = 20) to 164x
// (w = 128) that, so OpenBLAS packed their 10000-row operands: in a compiled step, where operands
// come from memory, packing took a quarter of the time. Cut into calls of at most 100^3
// multiply-adds (2500 rows at w = 20, 61 at w = 128), a thin GEMM skips the packing and the fill:
// compiled PINN steps ran 1.25x (Burgers, w = 20) to 1.5x (the Laplacian, w = 64) faster
// (docs/benchmarks.md).
constexpr int64_t kSmallProduct = 100 * 100 * 100;

// C = A B in OpenBLAS's small-matrix kernel (small_kernel: the caller sized the call for it; then
// `overwrite` picks beta = 0), or C += A B on a C the caller zeroed, in Eigen when the product is
// too thin for OpenBLAS's packing to pay. OpenBLAS's own zeroing of a large C is a separate
// strided pass: a contiguous fill followed by beta = 1 made (10000x20)@(20x20) 1.17x faster in
// float32 when it packed (docs/benchmarks.md, GEMM table).
template <typename T>
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t n, int64_t m, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T* c, int64_t ldc, bool small_kernel, bool overwrite) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (!small_kernel && std::min(k, m) <= kThinDimension) {
      thin_gemm(ta == CblasTrans, tb == CblasTrans, n, m, k, a, lda, b, ldb, c, ldc);
      return;
    }
  }
  const T beta(small_kernel && overwrite ? 0 : 1);
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, n, m, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, ta, tb, n, m, k, 1.0, a, lda, b, ldb, beta, c, ldc);
  } else {
    const T one(1);
    if constexpr (std::is_same_v<T, c64>) {
      cblas_cgemm(CblasRowMajor, ta, tb, n, m, k, &one, a, lda, b, ldb, &beta, c, ldc);
    } else {
      cblas_zgemm(CblasRowMajor, ta, tb, n, m, k, &one, a, lda, b, ldb, &beta, c, ldc);
    }
  }
}

// C = A B (C += A B when accumulating) in oneDNN's float32 GEMM, for products past OpenBLAS's
// small-matrix kernel: on the language model's products it ran 1.1x to 1.2x as fast as OpenBLAS
// 0.3.21 at one and two threads here (bench_gemm, docs/benchmarks.md), on the same OpenMP threads,
// and it writes C itself when beta = 0, where OpenBLAS needed a fill first.
void onednn_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t n, int64_t m, int64_t k, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (n == 0 || m == 0) return;
  give_threads_signal_stacks();
  const dnnl_status_t status = dnnl_sgemm(ta == CblasTrans ? 'T' : 'N', tb == CblasTrans ? 'T' : 'N', n, m, k, 1.0f,
                                          a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
  EDDY_CHECK(status == dnnl_success, "matmul: oneDNN's sgemm failed (status ", static_cast<int>(status), ") on [",
             n, ", ", k, "] @ [", k, ", ", m, "]");
}

// c[1 x m] = a[1 x k] B, or c += a B when accumulating: B [k x m] (tb untransposed) or B^T with
// B [m x k] stored. a's elements are lda apart when it is a transposed column.
template <typename T>
void gemv_row(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t k, const T* a, int64_t lda, const T* b,
              int64_t ldb, T* c, bool accumulate) {
  const int64_t a_step = ta == CblasNoTrans ? 1 : lda;
  // Row-major B [k x m] times a is B^T a; a stored B [m x k] times a is B a.
  const CBLAS_TRANSPOSE op = tb == CblasNoTrans ? CblasTrans : CblasNoTrans;
  const int64_t rows = tb == CblasNoTrans ? k : m, cols = tb == CblasNoTrans ? m : k;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemv(CblasRowMajor, op, rows, cols, 1.0f, b, ldb, a, a_step, accumulate ? 1.0f : 0.0f, c, 1);
  } else {
    cblas_dgemv(CblasRowMajor, op, rows, cols, 1.0, b, ldb, a, a_step, accumulate ? 1.0 : 0.0, c, 1);
  }
}

// A dense row-major copy of the rows x cols matrix that is stored transposed: element (i, j) at
// x[j * ld + i]. For operands of at most 128 x 128 that a kernel takes faster untransposed.
template <typename T>
std::vector<T> dense_copy_of_transposed(const T* x, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<T> dense(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) dense[static_cast<size_t>(i * cols + j)] = x[j * ld + i];
  }
  return dense;
}

// Asks for `columns` elements of each of `rows` rows, `ld` apart, to be brought into L2.
template <typename T>
void prefetch_rows(const T* first, int64_t rows, int64_t columns, int64_t ld) {
  constexpr int64_t kPerLine = 64 / sizeof(T);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < columns; j += kPerLine) __builtin_prefetch(first + r * ld + j, 0, 2);
  }
}

// A thin GEMM: its output's columns and its inner dimension both at most this.
constexpr int64_t kThinSplitWidth = 128;
// The fewest rows (or, summed over, inner elements) worth a block of their own (loops.h).
constexpr int64_t kRowsPerBlock = 1024;

// C = A B, on eddy's OpenMP threads when a GEMM is thin (a PINN layer: 10000 x 20 @ 20 x 20, or
// its weight gradient 20 x 10000 @ 10000 x 20). OpenBLAS threads such a GEMM by sharing packed
// panels of the narrow operand between its threads, which wait on each other with sched_yield: on
// two threads its 10000 x 20 x 20 GEMMs took 2.5x the one-thread CPU time, and a compiled Burgers
// step gained nothing from the second thread (docs/benchmarks.md). Here each thread calls
// one-thread OpenBLAS (it runs on one thread inside a parallel region) on blocks of rows
// (for_each_block), in calls sized for the small-matrix kernel where they can be; a GEMM summing
// over a long inner dimension cuts it into blocks and adds their partial products in block
// order, so a result is the same at every thread count. With `accumulate`, C += A B.
template <typename T>
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t n, int64_t m, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T* c, int64_t ldc, bool accumulate) {
  const bool thin = m <= kThinSplitWidth && std::min(n, k) <= kThinSplitWidth;
  // A feature-major layer, [width x width] @ [width x points] (m the points).
  const bool wide = !thin && n <= kThinSplitWidth && k <= kThinSplitWidth;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    // One row of A, which is every projection of a decoding step: OpenBLAS 0.3.21's GEMM packs
    // all of B for it, while its GEMV streams B once. Not for a PINN's output layer in
    // feature-major layout (its product is wide, its weight gradient thin): OpenBLAS threads a
    // GEMV along its inner dimension, so the sums would depend on the thread count.
    if (n == 1 && !wide && !thin) {
      gemv_row(ta, tb, m, k, a, lda, b, ldb, c, accumulate);
      return;
    }
  }
  if (thin && n >= k) {
    const int64_t per_call = kSmallProduct / std::max<int64_t>(m * k, 1);
    // A row-major B^T is the small-matrix kernel's column-major TN case, which it takes only for
    // outputs of at most 1200 elements and 32 or more inner ones: a dense copy of B^T, at most
    // 128 x 128, makes the calls B-untransposed (the backward pass's dZ W^T).
    std::vector<T> dense_b;
    if (tb == CblasTrans) {
      dense_b = dense_copy_of_transposed(b, k, m, ldb);
      b = dense_b.data();
      ldb = m;
      tb = CblasNoTrans;
    }
    // Row r of A starts at a + r * lda untransposed, at a + r transposed.
    const int64_t a_row_step = ta == CblasNoTrans ? lda : 1;
    for_each_block(n, block_count(n, kRowsPerBlock), [&](int64_t, int64_t first, int64_t end) {
      for (int64_t begin = first; begin < end; begin += per_call) {
        blas_gemm<T>(ta, tb, std::min(per_call, end - begin), m, k, a + begin * a_row_step, lda, b, ldb,
                     c + begin * ldc, ldc, true, !accumulate);
      }
    });
    return;
  }
  if (thin) {
    // A transposed B here is the long operand, too large to copy: such products are left to packing.
    const bool small_kernel = tb == CblasNoTrans;
    const int64_t per_call = small_kernel ? kSmallProduct / std::max<int64_t>(n * m, 1) : k;
    // Inner index p: column p of A untransposed (a + p), row p transposed; row p of B likewise.
    const int64_t a_inner_step = ta == CblasNoTrans ? 1 : lda, b_inner_step = tb == CblasNoTrans ? ldb : 1;
    const std::vector<T> sum =
        sum_over_blocks<T>(k, block_count(k, kRowsPerBlock), n * m, [&](int64_t first, int64_t end, T* into) {
          for (int64_t begin = first; begin < end; begin += per_call) {
            blas_gemm<T>(ta, tb, n, m, std::min(per_call, end - begin), a + begin * a_inner_step, lda,
                         b + begin * b_inner_step, ldb, into, m, small_kernel, false);
          }
        });
    for (int64_t r = 0; r < n; ++r) {
      const T* row = sum.data() + r * m;
      T* into = c + r * ldc;
      if (accumulate) {
        for (int64_t j = 0; j < m; ++j) into[j] += row[j];
      } else {
        std::copy(row, row + m, into);
      }
    }
    return;
  }
  if (wide) {
    // Blocks of columns (points) on eddy's threads, each in calls sized for the small-matrix
    // kernel, as for thin GEMMs above. A call reads its columns of B and writes those of C as k
    // and n short runs, one per row, too many separate streams for the hardware prefetcher; in
    // float64 the small-matrix kernel then ran a [20 x 20] @ [20 x 10240] product from memory at
    // 19 GFLOP/s against 41 with the operands in cache. Calls of 512 columns with the next call's
    // columns of B and C prefetched before each ran it at 23 to 28 (float32 neither gained nor
    // lost; docs/benchmarks.md, "PINN layer layouts by dtype, and float64 against the peers").
    const int64_t per_call =
        std::min<int64_t>(std::max<int64_t>(kSmallProduct / std::max<int64_t>(n * k, 1), 16), 512);
    // The small-matrix kernel took a transposed A (W^T, from an [in, out] weight) at 41 GFLOP/s
    // and a dense one at 64 (one core, 20 x 20 @ 20 x 1111): a dense copy of A, at most 128 x 128.
    std::vector<T> dense_a;
    if (ta == CblasTrans) {
      dense_a = dense_copy_of_transposed(a, n, k, lda);
      a = dense_a.data();
      lda = k;
      ta = CblasNoTrans;
    }
    // Column j of B starts at b + j untransposed, at b + j * ldb transposed.
    const int64_t b_column_step = tb == CblasNoTrans ? 1 : ldb;
    for_each_block(m, block_count(m, kRowsPerBlock), [&](int64_t, int64_t first, int64_t end) {
      for (int64_t begin = first; begin < end; begin += per_call) {
        // Past the block's end too: the next block is usually this thread's own.
        const int64_t next = begin + per_call, next_columns = std::min(per_call, m - next);
        if (next_columns > 0) {
          if (tb == CblasNoTrans) prefetch_rows(b + next, k, next_columns, ldb);
          prefetch_rows(c + next, n, next_columns, ldc);
        }
        blas_gemm<T>(ta, tb, n, std::min(per_call, end - begin), k, a, lda, b + begin * b_column_step, ldb, c + begin,
                     ldc, true, !accumulate);
      }
    });
    return;
  }
  // Counted also at one thread: a later count would change these bits (solvers' ThreadTuner).
  if (!omp_in_parallel()) note_thread_dependent_kernel();
  if constexpr (std::is_same_v<T, float>) {
    onednn_gemm(ta, tb, n, m, k, a, lda, b, ldb, c, ldc, accumulate);
    return;
  }
  if (!accumulate) {
    // On eddy's threads: OpenBLAS uses them all for the product, so a serial fill of a large
    // output left the others idle.
    for_each_block(n, block_count(n * m, kBlockGrain), [&](int64_t, int64_t first, int64_t end) {
      for (int64_t r = first; r < end; ++r) std::fill(c + r * ldc, c + r * ldc + m, T(0));
    });
  }
  blas_gemm<T>(ta, tb, n, m, k, a, lda, b, ldb, c, ldc, false, false);
}

}  // namespace

void CpuBackend::matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out, bool accumulate) {
  if (native_half_matmul(a_in, b_in, out, accumulate)) return;
  // Other 16-bit operands: a float32 product (float32 accumulation, onto the addend when
  // accumulating), rounded once at the end.
  const bool half = accumulate ? computed_in_float32({a_in, b_in, out}, out, [&](const auto& x, const Tensor& o) {
    copy(x[2], o);
    matmul(x[0], x[1], o, true);
  }) : computed_in_float32({a_in, b_in}, out, [&](const auto& x, const Tensor& o) { matmul(x[0], x[1], o, false); });
  if (half) return;
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
  if (k == 0) {
    if (!accumulate) fill(out, 0.0);
    return;
  }
  EDDY_DISPATCH_INEXACT(out.dtype(), T, "matmul", {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.data<T>();
    for_each_batch_matrix(a, b, out, [&](int64_t off_a, int64_t off_b, int64_t off_c) {
      gemm<T>(la.transpose, lb.transpose, n, m, k, pa + off_a, la.leading, pb + off_b, lb.leading, pc + off_c,
              std::max<int64_t>(m, 1), accumulate);
    });
  });
}

}  // namespace eddy::cpu_kernels
