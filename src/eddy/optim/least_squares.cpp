#include "eddy/optim/least_squares.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <vector>

#include "eddy/ops/ops.h"
#include "eddy/optim/lapack.h"

namespace eddy::optim {

Tensor least_squares(const Tensor& a, const Tensor& b) {
  EDDY_CHECK(a.dim() == 2 && b.dim() == 2 && is_floating(a.dtype()) && is_floating(b.dtype()),
             "least_squares: expects float32 or float64 matrices A [m, n] and B [m, k], got shapes ", a.shape(),
             " and ", b.shape());
  EDDY_CHECK(a.size(0) == b.size(0), "least_squares: A has ", a.size(0), " rows but B has ", b.size(0));
  const int64_t m = a.size(0), n = a.size(1), k = b.size(1);
  const int64_t leading = std::max<int64_t>({m, n, 1});
  EDDY_CHECK(leading * std::max<int64_t>({n, k, 1}) <= INT_MAX, "least_squares: a ", m, " x ", n,
             " system is too large for LAPACK's 32-bit sizes");
  if (m == 0 || n == 0 || k == 0) return zeros({n, k}, a.dtype(), a.device());
  // LAPACK is column-major: the transposes of the row-major buffers, made contiguous, are A and B
  // column by column. B's buffer has max(m, n) rows, the solution's first n of them.
  std::vector<double> matrix = contiguous(transpose(cast(a, DType::f64))).to_vector<double>();
  const std::vector<double> right = contiguous(transpose(cast(b, DType::f64))).to_vector<double>();
  for (double x : matrix) EDDY_CHECK(std::isfinite(x), "least_squares: A has a non-finite entry");
  for (double x : right) EDDY_CHECK(std::isfinite(x), "least_squares: B has a non-finite entry");
  std::vector<double> solution(static_cast<size_t>(leading * k), 0.0);
  for (int64_t column = 0; column < k; ++column) {
    std::copy_n(right.begin() + column * m, m, solution.begin() + column * leading);
  }
  const int rows = static_cast<int>(m), cols = static_cast<int>(n), rhs = static_cast<int>(k);
  const int lda = rows, ldb = static_cast<int>(leading);
  const double rcond = static_cast<double>(leading) * std::numeric_limits<double>::epsilon();
  std::vector<double> singular(static_cast<size_t>(std::min(m, n)));
  int rank = 0, info = 0, query = -1, iwork_size = 0;
  double work_size = 0;
  dgelsd_(&rows, &cols, &rhs, matrix.data(), &lda, solution.data(), &ldb, singular.data(), &rcond, &rank, &work_size,
          &query, &iwork_size, &info);
  EDDY_CHECK(info == 0, "least_squares: LAPACK dgelsd's workspace query failed (info ", info, ")");
  const int lwork = static_cast<int>(work_size);
  std::vector<double> work(static_cast<size_t>(std::max(lwork, 1)));
  std::vector<int> iwork(static_cast<size_t>(std::max(iwork_size, 1)));
  on_one_thread([&] {
    dgelsd_(&rows, &cols, &rhs, matrix.data(), &lda, solution.data(), &ldb, singular.data(), &rcond, &rank,
            work.data(), &lwork, iwork.data(), &info);
  });
  EDDY_CHECK(info == 0, "least_squares: LAPACK dgelsd did not converge on a ", m, " x ", n, " system (info ", info,
             ")");
  // Column j of the solution is solution[j * leading, j * leading + n).
  return cast(transpose(slice(tensor(solution, {k, leading}, a.device()), 1, 0, n)), a.dtype());
}

}  // namespace eddy::optim
