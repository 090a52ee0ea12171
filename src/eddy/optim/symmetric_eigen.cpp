#include "eddy/optim/symmetric_eigen.h"

#include <climits>
#include <cmath>
#include <vector>

#include "eddy/ops/ops.h"
#include "eddy/optim/lapack.h"

namespace eddy::optim {

std::optional<Tensor> symmetric_eigenvectors(const Tensor& a) {
  EDDY_CHECK(a.dim() == 2 && a.size(0) == a.size(1) && is_floating(a.dtype()),
             "symmetric_eigenvectors: expects a square float32 or float64 matrix, got shape ", a.shape(),
             " and dtype ", a.dtype());
  const int64_t n = a.size(0);
  // dsyevd's workspace for eigenvectors: 1 + 6n + 2n^2 doubles and 3 + 5n ints.
  const int64_t work_size = 1 + 6 * n + 2 * n * n;
  EDDY_CHECK(work_size <= INT_MAX, "symmetric_eigenvectors: a ", n, " x ", n,
             " matrix is too large for LAPACK's 32-bit workspace sizes");
  std::vector<double> values = a.to_vector<double>();
  for (double x : values) {
    if (!std::isfinite(x)) return std::nullopt;
  }
  if (n == 0) return a;
  const int order = static_cast<int>(n), lwork = static_cast<int>(work_size), liwork = static_cast<int>(3 + 5 * n);
  std::vector<double> eigenvalues(n), work(work_size);
  std::vector<int> iwork(liwork);
  int info = 0;
  // LAPACK is column-major: the row-major buffer is read as a's transpose, which is a (so its
  // lower triangle, 'L', is a's upper), and the eigenvectors it writes as columns read back as rows.
  on_one_thread([&] {
    dsyevd_("V", "L", &order, values.data(), &order, eigenvalues.data(), work.data(), &lwork, iwork.data(), &liwork,
            &info, 1, 1);
  });
  EDDY_CHECK(info == 0, "symmetric_eigenvectors: LAPACK dsyevd failed on a ", n, " x ", n, " matrix (info ", info, ")");
  return cast(contiguous(transpose(tensor(values, {n, n}))), a.dtype());
}

}  // namespace eddy::optim
