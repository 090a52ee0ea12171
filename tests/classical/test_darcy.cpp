// Darcy flow: second-order convergence to a manufactured solution, the scheme's operator against
// the assembled matrix, adjoint and tangent derivatives against central differences, and errors.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "eddy/eddy.h"
#include "solvers/classical/darcy.h"
#include "support/expect_error.h"

namespace eddy::classical {
namespace {

constexpr double pi = std::numbers::pi;

// Node values g(x_i, y_j) on the [n, n] grid of the unit square.
template <typename Function>
Tensor on_nodes(int64_t n, Function g) {
  std::vector<double> values(n * n);
  const double h = 1.0 / static_cast<double>(n - 1);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) values[i * n + j] = g(i * h, j * h);
  }
  return tensor(values, {n, n});
}

// u = sin(pi x) sin(pi y) with a = 1 + 0.5 sin(2 pi x + 1) cos(3 pi y):
// f = -div(a grad u) = 2 pi^2 a u - a_x u_x - a_y u_y.
double exact_u(double x, double y) { return std::sin(pi * x) * std::sin(pi * y); }
double smooth_a(double x, double y) { return 1 + 0.5 * std::sin(2 * pi * x + 1) * std::cos(3 * pi * y); }
double manufactured_f(double x, double y) {
  const double a_x = pi * std::cos(2 * pi * x + 1) * std::cos(3 * pi * y);
  const double a_y = -1.5 * pi * std::sin(2 * pi * x + 1) * std::sin(3 * pi * y);
  const double u_x = pi * std::cos(pi * x) * std::sin(pi * y);
  const double u_y = pi * std::sin(pi * x) * std::cos(pi * y);
  return 2 * pi * pi * smooth_a(x, y) * exact_u(x, y) - a_x * u_x - a_y * u_y;
}

double max_abs(const Tensor& x) { return max(abs(x)).item<double>(); }

TEST(Darcy, ConvergesAtSecondOrderToAManufacturedSolution) {
  std::vector<double> errors;
  for (int64_t n : {17, 33, 65, 129}) {
    const Tensor u = darcy_solve(on_nodes(n, smooth_a), on_nodes(n, manufactured_f));
    errors.push_back(max_abs(u - on_nodes(n, exact_u)));
  }
  for (size_t k = 1; k < errors.size(); ++k) {
    const double order = std::log2(errors[k - 1] / errors[k]);
    RecordProperty("error_" + std::to_string(k), cat(errors[k]));
    RecordProperty("order_" + std::to_string(k), cat(order));
    EXPECT_NEAR(order, 2.0, 0.1) << "errors " << errors[k - 1] << " -> " << errors[k];
  }
  EXPECT_LT(errors.back(), 3 / (128.0 * 128.0));  // C h^2 with a modest C
}

// The eddy-op operator the derivative rules use must be the matrix the solver factorises.
TEST(Darcy, OperatorInvertsTheSolveForAJumpingCoefficient) {
  const int64_t n = 24;
  Generator generator(3);
  const Tensor a = where(ge(rand({n, n}, DType::f64, &generator), scalar(0.5, DType::f64)),
                         full({n, n}, 12.0, DType::f64), full({n, n}, 3.0, DType::f64));
  const Tensor f = randn({n, n}, DType::f64, &generator);
  const Tensor u = darcy_solve(a, f);
  const Tensor interior_f = pad(slice(slice(f, 0, 1, n - 1), 1, 1, n - 1), {1, 1}, {1, 1});
  EXPECT_LT(max_abs(darcy_operator(a, u) - interior_f), 1e-9 * max_abs(f));
  const Tensor boundary = u - pad(slice(slice(u, 0, 1, n - 1), 1, 1, n - 1), {1, 1}, {1, 1});
  EXPECT_EQ(max_abs(boundary), 0.0);
}

TEST(Darcy, Float32IsSolvedInFloat64AndCastBack) {
  const int64_t n = 17;
  const Tensor a = on_nodes(n, smooth_a), f = on_nodes(n, manufactured_f);
  const Tensor u32 = darcy_solve(cast(a, DType::f32), cast(f, DType::f32));
  EXPECT_EQ(u32.dtype(), DType::f32);
  EXPECT_LT(max_abs(cast(u32, DType::f64) - darcy_solve(a, f)), 1e-6);
}

// A random positive coefficient, source and loss weight on a small grid.
struct Problem {
  int64_t n = 10;
  Tensor a, f, w;
  Problem() {
    Generator generator(7);
    a = exp(randn({n, n}, DType::f64, &generator) * 0.7);
    f = randn({n, n}, DType::f64, &generator);
    w = randn({n, n}, DType::f64, &generator);
  }
  double loss(const Tensor& a_value, const Tensor& f_value) const {
    NoGradGuard no_grad;
    return sum(w * darcy_solve(a_value, f_value)).item<double>();
  }
};

// Central difference of the loss along `direction` in a (which = 0) or f (which = 1).
double central_difference(const Problem& problem, int which, const Tensor& direction, double step) {
  auto shifted = [&](double s) {
    return which == 0 ? problem.loss(problem.a + s * direction, problem.f)
                      : problem.loss(problem.a, problem.f + s * direction);
  };
  return (shifted(step) - shifted(-step)) / (2 * step);
}

Tensor unit(int64_t n, int64_t i, int64_t j) {
  std::vector<double> values(n * n, 0.0);
  values[i * n + j] = 1;
  return tensor(values, {n, n});
}

TEST(Darcy, AdjointGradientMatchesCentralDifferences) {
  const Problem problem;
  Tensor a = problem.a.detach().requires_grad_(), f = problem.f.detach().requires_grad_();
  const std::vector<Tensor> grads = grad({sum(problem.w * darcy_solve(a, f))}, {a, f});
  const std::vector<double> grad_a = grads[0].to_vector<double>(), grad_f = grads[1].to_vector<double>();
  const int64_t n = problem.n;
  double worst = 0;
  // Interior nodes, and boundary nodes: their a sets the boundary faces, their f is ignored.
  for (auto [i, j] : {std::pair<int64_t, int64_t>{4, 5}, {1, 1}, {8, 2}, {0, 3}, {9, 9}}) {
    const double fd_a = central_difference(problem, 0, unit(n, i, j), 1e-6);
    const double fd_f = central_difference(problem, 1, unit(n, i, j), 1e-6);
    EXPECT_NEAR(grad_a[i * n + j], fd_a, 1e-7 * (1 + std::abs(fd_a))) << "a[" << i << ", " << j << "]";
    EXPECT_NEAR(grad_f[i * n + j], fd_f, 1e-7 * (1 + std::abs(fd_f))) << "f[" << i << ", " << j << "]";
    worst = std::max({worst, std::abs(grad_a[i * n + j] - fd_a), std::abs(grad_f[i * n + j] - fd_f)});
  }
  RecordProperty("worst_difference", cat(worst));
  EXPECT_EQ(grad_f[0 * n + 3], 0.0);
}

// The rules call darcy_solve again, so forward mode and second derivatives work too.
TEST(Darcy, TangentAndHessianVectorProductMatchCentralDifferences) {
  const Problem problem;
  Generator generator(11);
  const Tensor direction = randn({problem.n, problem.n}, DType::f64, &generator);
  auto loss_of_a = [&](const Tensor& a) { return sum(problem.w * darcy_solve(a, problem.f)); };

  const double tangent = jvp(loss_of_a, problem.a, direction).second.item<double>();
  const double fd = central_difference(problem, 0, direction, 1e-6);
  EXPECT_NEAR(tangent, fd, 1e-7 * (1 + std::abs(fd)));
  RecordProperty("tangent_difference", cat(std::abs(tangent - fd)));

  const Tensor hv = hvp(loss_of_a, problem.a, direction);
  const double step = 1e-5;
  const Tensor fd_hv = (grad(loss_of_a)(problem.a + step * direction) -
                        grad(loss_of_a)(problem.a - step * direction)) / (2 * step);
  EXPECT_LT(max_abs(hv - fd_hv), 1e-6 * (1 + max_abs(fd_hv)));
  RecordProperty("hvp_relative_difference", cat(max_abs(hv - fd_hv) / max_abs(fd_hv)));
}

// u(s a, f) = u(a, f) / s, so the loss's gradient at s a is its gradient at a over s^2 and its
// tangent along s d is its tangent along d over s: at scales where the derivative rules' first
// form left float64's range (NaN at 1e-80, 10% off at 1e80, a refused NaN source at 1e150).
TEST(Darcy, DerivativesFollowTheCoefficientsScale) {
  const Problem problem;
  Generator generator(5);
  const Tensor direction = randn({problem.n, problem.n}, DType::f64, &generator);
  auto loss_of_a = [&](const Tensor& a) { return sum(problem.w * darcy_solve(a, problem.f)); };
  const Tensor gradient = grad(loss_of_a)(problem.a);
  const double tangent = jvp(loss_of_a, problem.a, direction).second.item<double>();
  for (double scale : {1e-80, 1e80, 1e150}) {
    const Tensor scaled_gradient = grad(loss_of_a)(scale * problem.a) * (scale * scale);
    EXPECT_LT(max_abs(scaled_gradient - gradient), 1e-12 * max_abs(gradient)) << "scale " << scale;
    const double scaled_tangent = jvp(loss_of_a, scale * problem.a, scale * direction).second.item<double>() * scale;
    EXPECT_NEAR(scaled_tangent, tangent, 1e-12 * std::abs(tangent)) << "scale " << scale;
  }
}

TEST(Darcy, BadInputNamesTheShapeOrValue) {
  const Tensor ones3 = ones({3, 3}, DType::f64);
  expect_error([] { darcy_solve(ones({4, 5}, DType::f64), ones({4, 5}, DType::f64)); },
               {"darcy_solve", "square", "[4, 5]"});
  expect_error([] { darcy_solve(ones({2, 2}, DType::f64), ones({2, 2}, DType::f64)); },
               {"darcy_solve", "n >= 3", "[2, 2]"});
  expect_error([&] { darcy_solve(ones3, ones({4, 4}, DType::f64)); },
               {"darcy_solve", "[4, 4]", "[3, 3]"});
  expect_error([&] { darcy_solve(ones({3, 3}, DType::i64), ones3); }, {"darcy_solve", "a", "int64"});
  std::vector<double> values(9, 1.0);
  values[1 * 3 + 2] = -1;
  expect_error([&] { darcy_solve(tensor(values, {3, 3}), ones3); },
               {"darcy_solve", "positive", "a[1, 2] = -1"});
  values[1 * 3 + 2] = std::nan("");
  expect_error([&] { darcy_solve(tensor(values, {3, 3}), ones3); }, {"darcy_solve", "a[1, 2] = nan"});
  // A non-finite source made the whole interior non-finite without a word.
  std::vector<double> source(9, 1.0);
  source[1 * 3 + 1] = std::numeric_limits<double>::infinity();
  expect_error([&] { darcy_solve(ones3, tensor(source, {3, 3})); }, {"darcy_solve", "source", "f[1, 1] = inf"});
}

}  // namespace
}  // namespace eddy::classical
