// Phase-field steppers: Cahn-Hilliard mass conservation, Allen-Cahn energy decay, first-order time
// convergence (against an exact solution and by successive halving), gradients through rollouts.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <vector>

#include "eddy/eddy.h"
#include "solvers/classical/phase_field.h"
#include "support/expect_error.h"

namespace eddy::classical {
namespace {

constexpr double two_pi = 2 * std::numbers::pi;

double max_abs(const Tensor& x) { return max(abs(x)).item<double>(); }

// A smooth periodic field on [0, 2 pi)^2: a few low modes.
Tensor smooth_field(int64_t n) {
  std::vector<double> values(n * n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double x = two_pi * i / n, y = two_pi * j / n;
      values[i * n + j] = 0.3 * std::cos(x) + 0.2 * std::sin(2 * y) + 0.15 * std::cos(x + y);
    }
  }
  return tensor(values, {n, n});
}

TEST(CahnHilliard, ConservesMassToRoundOff) {
  Generator generator(2);
  const Tensor c0 = 0.1 + 0.05 * randn({64, 64}, DType::f64, &generator);
  const Tensor c = cahn_hilliard(c0, {.gamma = 0.01, .dt = 1e-3, .steps = 400, .length = two_pi});
  EXPECT_GT(max_abs(c - c0), 0.5) << "spinodal decomposition has happened";
  const double drift = std::abs(mean(c).item<double>() - mean(c0).item<double>());
  RecordProperty("mass_drift", cat(drift));
  EXPECT_LT(drift, 1e-14);
}

TEST(AllenCahn, FreeEnergyDecreasesMonotonically) {
  Generator generator(4);
  const double epsilon = 0.2;
  Tensor u = rand({64, 64}, DType::f64, &generator) - 0.5;
  double energy = ginzburg_landau_energy(u, epsilon * epsilon, two_pi).item<double>();
  const double initial = energy;
  for (int step = 0; step < 200; ++step) {
    u = allen_cahn(u, {.epsilon = epsilon, .dt = 0.05, .steps = 1, .length = two_pi});
    const double next = ginzburg_landau_energy(u, epsilon * epsilon, two_pi).item<double>();
    ASSERT_LE(next, energy) << "step " << step;
    energy = next;
  }
  EXPECT_LT(energy, 0.5 * initial);
  EXPECT_LE(max_abs(u), 1.0) << "the scheme keeps |u| <= 1 at this step size";
}

// A uniform field stays uniform, so Allen-Cahn reduces to u' = u - u^3 with the exact solution
// u(t) = u0 e^t / sqrt(1 - u0^2 + u0^2 e^(2t)), and the scheme to explicit Euler.
TEST(AllenCahn, FirstOrderInTimeAgainstTheExactUniformSolution) {
  const double u0 = 0.2, end = 1.0;
  const double exact = u0 * std::exp(end) / std::sqrt(1 - u0 * u0 + u0 * u0 * std::exp(2 * end));
  std::vector<double> errors;
  for (int64_t steps : {10, 20, 40, 80}) {
    const Tensor u = allen_cahn(full({8, 8}, u0, DType::f64), {.epsilon = 0.1, .dt = end / steps, .steps = steps});
    errors.push_back(max_abs(u - exact));
  }
  for (size_t k = 1; k < errors.size(); ++k) {
    const double order = std::log2(errors[k - 1] / errors[k]);
    RecordProperty("order_" + std::to_string(k), cat(order));
    EXPECT_NEAR(order, 1.0, 0.1);
  }
}

// With no exact solution in 2-D, the differences between successive halvings of dt shrink by 2
// per halving for a first-order scheme.
std::vector<double> successive_orders(const std::function<Tensor(double dt, int64_t steps)>& rollout,
                                      double end, int64_t coarsest_steps, int halvings) {
  std::vector<Tensor> solutions;
  for (int k = 0; k <= halvings; ++k) {
    const int64_t steps = coarsest_steps << k;
    solutions.push_back(rollout(end / steps, steps));
  }
  std::vector<double> orders;
  for (size_t k = 2; k < solutions.size(); ++k) {
    orders.push_back(std::log2(max_abs(solutions[k - 2] - solutions[k - 1]) /
                               max_abs(solutions[k - 1] - solutions[k])));
  }
  return orders;
}

TEST(PhaseField, FirstOrderInTimeBySuccessiveHalving) {
  const Tensor field = smooth_field(32);
  const auto allen_cahn_orders = successive_orders(
      [&](double dt, int64_t steps) {
        return allen_cahn(field, {.epsilon = 0.3, .dt = dt, .steps = steps, .length = two_pi});
      },
      1.0, 10, 4);
  const auto cahn_hilliard_orders = successive_orders(
      [&](double dt, int64_t steps) {
        return cahn_hilliard(field, {.gamma = 0.05, .dt = dt, .steps = steps, .length = two_pi});
      },
      0.5, 40, 4);
  for (size_t k = 0; k < allen_cahn_orders.size(); ++k) {
    RecordProperty("allen_cahn_order_" + std::to_string(k), cat(allen_cahn_orders[k]));
    RecordProperty("cahn_hilliard_order_" + std::to_string(k), cat(cahn_hilliard_orders[k]));
  }
  EXPECT_NEAR(allen_cahn_orders.back(), 1.0, 0.05);
  EXPECT_NEAR(cahn_hilliard_orders.back(), 1.0, 0.05);
}

// d/du0 of sum(w * u_T) through a rollout, against central differences in random directions.
void check_rollout_gradient(const std::function<Tensor(const Tensor&)>& rollout, const char* name) {
  Generator generator(9);
  const Tensor u0 = smooth_field(16) + 0.1 * randn({16, 16}, DType::f64, &generator);
  const Tensor w = randn({16, 16}, DType::f64, &generator);
  auto loss = [&](const Tensor& u) { return sum(w * rollout(u)); };
  const Tensor gradient = grad(loss)(u0);
  double worst = 0;
  for (int trial = 0; trial < 3; ++trial) {
    const Tensor direction = randn({16, 16}, DType::f64, &generator);
    const double step = 1e-6;
    NoGradGuard no_grad;
    const double fd = (loss(u0 + step * direction).item<double>() -
                       loss(u0 - step * direction).item<double>()) / (2 * step);
    const double analytic = sum(gradient * direction).item<double>();
    EXPECT_NEAR(analytic, fd, 1e-7 * (1 + std::abs(fd))) << name << " direction " << trial;
    worst = std::max(worst, std::abs(analytic - fd) / (1 + std::abs(fd)));
  }
  ::testing::Test::RecordProperty(std::string(name) + "_worst_relative_difference", cat(worst));
}

TEST(PhaseField, GradientThroughARolloutMatchesCentralDifferences) {
  check_rollout_gradient(
      [](const Tensor& u) {
        return allen_cahn(u, {.epsilon = 0.3, .dt = 0.05, .steps = 10, .length = two_pi});
      },
      "allen_cahn");
  check_rollout_gradient(
      [](const Tensor& c) {
        return cahn_hilliard(c, {.gamma = 0.05, .dt = 0.01, .steps = 10, .length = two_pi});
      },
      "cahn_hilliard");
}

// The 1-D problem is the square's problem for a field constant along the first axis: each row of
// the 2-D solve must equal the 1-D solve (Raissi's initial condition x^2 cos(pi x) on [-1, 1)).
TEST(AllenCahn, OneDimensionalSolveEqualsASquareConstantAlongItsFirstAxis) {
  const int64_t n = 64;
  std::vector<double> values(n);
  for (int64_t j = 0; j < n; ++j) {
    const double x = -1 + 2.0 * j / n;
    values[j] = x * x * std::cos(std::numbers::pi * x);
  }
  const Tensor line = tensor(values, {n});
  const AllenCahnOptions options{.epsilon = 0.05, .dt = 0.01, .steps = 50, .length = 2};
  AllenCahnOptions one_dimensional = options;
  one_dimensional.dimensions = 1;
  const Tensor u1 = allen_cahn(line, one_dimensional);
  const Tensor u2 = allen_cahn(expand(reshape(line, {1, n}), {n, n}), options);
  EXPECT_GT(max_abs(u1 - line), 0.1) << "the field has moved";
  EXPECT_LT(max_abs(u2 - reshape(u1, {1, n})), 1e-12);

  const Tensor batch = allen_cahn(stack({line, -line}), one_dimensional);
  EXPECT_EQ(batch.shape(), Shape({2, n}));
  EXPECT_LT(max_abs(batch - stack({u1, -u1})), 1e-12) << "u -> -u is a symmetry of the equation";
}

TEST(PhaseField, BadInputNamesTheShapeOrOption) {
  expect_error([] { allen_cahn(zeros({4}, DType::f64), {.dimensions = 3}); }, {"allen_cahn", "dimensions", "3"});
  expect_error([] { allen_cahn(zeros({1}, DType::f64), {.dimensions = 1}); }, {"allen_cahn", "[1]", "n >= 2"});
  expect_error([] { allen_cahn(zeros({4, 5}, DType::f64), {}); }, {"allen_cahn", "square", "[4, 5]"});
  expect_error([] { cahn_hilliard(zeros({4}, DType::f64), {}); }, {"cahn_hilliard", "[4]"});
  expect_error([] { allen_cahn(zeros({4, 4}, DType::i32), {}); }, {"allen_cahn", "int32"});
  // Half floats went through, came back in another dtype, and Cahn-Hilliard was off by 0.57.
  expect_error([] { cahn_hilliard(zeros({4, 4}, DType::f16), {}); }, {"cahn_hilliard", "float16"});
  expect_error([] { allen_cahn(zeros({4, 4}, DType::bf16), {}); }, {"allen_cahn", "bfloat16"});
  expect_error([] { allen_cahn(zeros({4, 4}, DType::f64), {.dt = -1}); }, {"allen_cahn", "dt", "-1"});
  expect_error([] { cahn_hilliard(zeros({4, 4}, DType::f64), {.gamma = 0}); },
               {"cahn_hilliard", "gamma", "0"});
  expect_error([] { cahn_hilliard(zeros({4, 4}, DType::f64), {.steps = -2}); },
               {"cahn_hilliard", "steps", "-2"});
}

}  // namespace
}  // namespace eddy::classical
