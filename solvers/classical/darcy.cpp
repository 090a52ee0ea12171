// The darcy_solve primitive: Eigen assembles and factorises the 5-point finite-volume matrix;
// the derivative rules are eddy ops around further darcy_solve calls (see darcy.h).

#include "solvers/classical/darcy.h"

#include <Eigen/SparseCholesky>
#include <Eigen/SparseCore>
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "eddy/ops/ops.h"
#include "eddy/ops/primitive.h"

namespace eddy::classical {
namespace {

using SparseMatrix = Eigen::SparseMatrix<double>;

// The two nodes on either side of each face normal to `axis`: slices of length n - 1 along it.
std::pair<Tensor, Tensor> face_sides(const Tensor& x, int64_t axis) {
  const int64_t n = x.size(axis);
  return {slice(x, axis, 0, n - 1), slice(x, axis, 1, n)};
}

Tensor harmonic_mean(const Tensor& p, const Tensor& q) { return 2.0 * p * q / (p + q); }

// d harmonic_mean(p, q) / dp = 2 q^2 / (p + q)^2, through the ratio p / q: the derivative rules
// that formed q^2 and (p + q)^2 apart left float64's range for coefficients beyond about 1e+-77
// (the gradient came out NaN at 1e-80 and 10% off at 1e80) where the derivative itself is near 1.
Tensor harmonic_mean_slope(const Tensor& p, const Tensor& q) { return 2.0 * square(1.0 / (1.0 + p / q)); }

double inverse_h_squared(int64_t n) { return static_cast<double>((n - 1) * (n - 1)); }

// -div(k grad u) at the interior nodes (0 on the boundary), for face coefficients k[axis] on the
// faces normal to each axis.
Tensor divergence_form(const Tensor (&k)[2], const Tensor& u) {
  const int64_t n = u.size(0);
  Tensor net_outflow;
  for (int64_t axis : {0, 1}) {
    auto [lo, hi] = face_sides(u, axis);
    auto [in, out] = face_sides(k[axis] * (hi - lo), axis);
    Tensor net = slice(out - in, 1 - axis, 1, n - 1);
    net_outflow = net_outflow.defined() ? net_outflow + net : net;
  }
  return pad(-inverse_h_squared(n) * net_outflow, {1, 1}, {1, 1});
}

// ---- the sparse solve ----

// The factorised matrix of one coefficient field.
struct Factorisation {
  int64_t n = 0;
  std::vector<double> a;
  Eigen::SimplicialLDLT<SparseMatrix> solver;
};

SparseMatrix assemble(int64_t n, const std::vector<double>& a) {
  const int64_t m = n - 2;
  const double scale = inverse_h_squared(n);
  auto unknown = [m](int64_t i, int64_t j) { return (i - 1) * m + (j - 1); };
  auto interior = [n](int64_t i) { return i >= 1 && i <= n - 2; };
  std::vector<Eigen::Triplet<double>> entries;
  entries.reserve(5 * m * m);
  for (int64_t i = 1; i <= n - 2; ++i) {
    for (int64_t j = 1; j <= n - 2; ++j) {
      const int64_t row = unknown(i, j);
      const double a_here = a[i * n + j];
      double diagonal = 0;
      for (auto [di, dj] : {std::pair{-1, 0}, {1, 0}, {0, -1}, {0, 1}}) {
        const int64_t ni = i + di, nj = j + dj;
        const double a_there = a[ni * n + nj];
        // The harmonic mean 2 a b / (a + b), written so that no step overflows where the mean
        // itself does not (a = b = 1e160 gave inf / inf, a NaN solution).
        const double low = std::min(a_here, a_there), high = std::max(a_here, a_there);
        const double k = scale * low * (2 / (1 + low / high));
        diagonal += k;
        if (interior(ni) && interior(nj)) entries.emplace_back(row, unknown(ni, nj), -k);
      }
      entries.emplace_back(row, row, diagonal);
    }
  }
  SparseMatrix matrix(m * m, m * m);
  matrix.setFromTriplets(entries.begin(), entries.end());
  return matrix;
}

// The factorisation for coefficient `a`, reusing this thread's last one when the values are the
// same: a backward pass solves again with the forward pass's matrix.
const Factorisation& factorise(int64_t n, std::vector<double> a) {
  thread_local Factorisation cache;
  if (cache.n == n && cache.a == a) return cache;
  for (int64_t index = 0; index < n * n; ++index) {
    EDDY_CHECK(a[index] > 0 && std::isfinite(a[index]),
               "darcy_solve: the coefficient must be positive and finite, got a[", index / n, ", ",
               index % n, "] = ", a[index]);
  }
  cache.n = 0;  // invalid until the factorisation below succeeds
  cache.solver.compute(assemble(n, a));
  EDDY_CHECK(cache.solver.info() == Eigen::Success,
             "darcy_solve: the sparse LDL^T factorisation failed for a ", n, " x ", n, " grid");
  cache.n = n;
  cache.a = std::move(a);
  return cache;
}

Tensor solve(const Tensor& a, const Tensor& f);

const Primitive& darcy_solve_p = []() -> const Primitive& {
  Primitive p;
  p.name = "darcy_solve";
  p.cost = CostClass::opaque;
  p.arity = 2;
  p.infer = [](Inputs in, const Attrs&) {
    const Tensor &a = in[0], &f = in[1];
    EDDY_CHECK(a.dim() == 2 && a.size(0) == a.size(1) && a.size(0) >= 3,
               "darcy_solve: the coefficient a must be a square [n, n] node grid with n >= 3, got shape ",
               a.shape());
    EDDY_CHECK(f.shape() == a.shape(), "darcy_solve: the source f has shape ", f.shape(),
               " but the coefficient a has shape ", a.shape());
    EDDY_CHECK(a.dtype() == DType::f64 && f.dtype() == DType::f64,
               "darcy_solve: the primitive computes in float64, got a ", a.dtype(), " and f ", f.dtype());
    EDDY_CHECK(a.device() == cpu(), "darcy_solve: runs on the CPU, got a tensor on ", a.device());
    return OutputSpec{a.shape(), DType::f64};
  };
  p.eval = [](Inputs in, const Attrs&, const OutputSpec& spec) {
    const int64_t n = spec.shape[0], m = n - 2;
    const Factorisation& factorisation = factorise(n, in[0].to_vector<double>());
    const std::vector<double> f = in[1].to_vector<double>();
    Eigen::VectorXd rhs(m * m);
    for (int64_t i = 1; i <= m; ++i) {
      for (int64_t j = 1; j <= m; ++j) {
        // As for a: one non-finite value would make the whole interior of u non-finite.
        EDDY_CHECK(std::isfinite(f[i * n + j]), "darcy_solve: the source must be finite, got f[", i, ", ", j,
                   "] = ", f[i * n + j]);
        rhs[(i - 1) * m + (j - 1)] = f[i * n + j];
      }
    }
    const Eigen::VectorXd interior = factorisation.solver.solve(rhs);
    Tensor u = Tensor::empty(spec.shape, DType::f64);
    double* values = u.data<double>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const bool boundary = i == 0 || j == 0 || i == n - 1 || j == n - 1;
        values[i * n + j] = boundary ? 0.0 : interior[(i - 1) * m + (j - 1)];
      }
    }
    return u;
  };
  // The face coefficient k = H(a_p, a_q) has dk = 2 (a_q^2 da_p + a_p^2 da_q) / (a_p + a_q)^2.
  p.jvp = [](Inputs in, const Attrs&, int input, const Tensor& t) {
    const Tensor &a = in[0], &f = in[1];
    if (input == 1) return solve(a, t);
    Tensor dk[2];
    for (int64_t axis : {0, 1}) {
      auto [a_p, a_q] = face_sides(a, axis);
      auto [da_p, da_q] = face_sides(t, axis);
      dk[axis] = harmonic_mean_slope(a_p, a_q) * da_p + harmonic_mean_slope(a_q, a_p) * da_q;
    }
    return solve(a, -divergence_form(dk, solve(a, f)));
  };
  // lambda^T (dA/dk) u, face by face, is (u_q - u_p)(lambda_q - lambda_p) / h^2, because u and
  // lambda vanish on the boundary nodes; the chain rule through H then spreads it to both nodes.
  p.vjp = [](Inputs in, const Attrs&, int input, const Tensor& g) {
    const Tensor &a = in[0], &f = in[1];
    const Tensor lambda = solve(a, g);
    if (input == 1) return lambda;
    const Tensor u = solve(a, f);
    const int64_t n = a.size(0);
    Tensor a_bar;
    for (int64_t axis : {0, 1}) {
      auto [a_p, a_q] = face_sides(a, axis);
      auto [u_p, u_q] = face_sides(u, axis);
      auto [lambda_p, lambda_q] = face_sides(lambda, axis);
      const Tensor k_bar = -inverse_h_squared(n) * (u_q - u_p) * (lambda_q - lambda_p);
      std::vector<int64_t> none{0, 0}, one{0, 0};
      one[axis] = 1;
      const Tensor term = pad(k_bar * harmonic_mean_slope(a_p, a_q), none, one) +
                          pad(k_bar * harmonic_mean_slope(a_q, a_p), one, none);
      a_bar = a_bar.defined() ? a_bar + term : term;
    }
    return a_bar;
  };
  return register_primitive(std::move(p));
}();

Tensor solve(const Tensor& a, const Tensor& f) { return dispatch(darcy_solve_p, {a, f}); }

}  // namespace

Tensor darcy_solve(const Tensor& a, const Tensor& f) {
  EDDY_CHECK(a.defined() && f.defined(), "darcy_solve: undefined input");
  for (const Tensor* x : {&a, &f}) {
    EDDY_CHECK(is_floating(x->dtype()), "darcy_solve: ", x == &a ? "a" : "f",
               " must be float32 or float64, got ", x->dtype());
  }
  const DType dtype = promote(a.dtype(), f.dtype());
  Tensor u = solve(cast(a, DType::f64), cast(f, DType::f64));
  return dtype == DType::f64 ? u : cast(u, dtype);
}

Tensor darcy_operator(const Tensor& a, const Tensor& u) {
  EDDY_CHECK(a.dim() == 2 && a.size(0) == a.size(1) && a.size(0) >= 3 && u.shape() == a.shape(),
             "darcy_operator: a and u must be the same square [n, n] grid with n >= 3, got shapes ",
             a.shape(), " and ", u.shape());
  Tensor k[2];
  for (int64_t axis : {0, 1}) {
    auto [a_p, a_q] = face_sides(a, axis);
    k[axis] = harmonic_mean(a_p, a_q);
  }
  return divergence_form(k, u);
}

}  // namespace eddy::classical
