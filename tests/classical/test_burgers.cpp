// Burgers' equation against the Cole-Hopf exact solution, its fourth-order convergence in time,
// and gradients through a rollout against central differences.

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "eddy/compiler/compile.h"
#include "eddy/eddy.h"
#include "eddy/fft/fft.h"
#include "eddy/io/hdf5.h"
#include "solvers/classical/burgers.h"
#include "support/expect_error.h"
#include "support/scoped_env.h"

namespace eddy::classical {
namespace {

constexpr double kNu = 0.1, kA = 1.5;  // phi = a + exp(-nu t) cos x

// Cole-Hopf: with phi_t = nu phi_xx, u = -2 nu phi_x / phi solves u_t + u u_x = nu u_xx. Here
// phi = a + exp(-nu t) cos x on [0, 2 pi), so u = 2 nu exp(-nu t) sin x / (a + exp(-nu t) cos x).
Tensor cole_hopf(int64_t n, double t) {
  const Tensor x = arange(0, static_cast<double>(n), 1, DType::f64) * (2 * std::numbers::pi / static_cast<double>(n));
  const double decay = std::exp(-kNu * t);
  return sin(x) * (2 * kNu * decay) / (cos(x) * decay + kA);
}

double max_error_at(int64_t n, double dt, double t_end) {
  Burgers solver(n, 2 * std::numbers::pi, dt, scalar(kNu, DType::f64));
  const auto steps = static_cast<int64_t>(std::lround(t_end / dt));
  Tensor u = solver.solve(cole_hopf(n, 0), {steps})[0];
  return max(abs(u - cole_hopf(n, t_end))).item<double>();
}

TEST(Burgers, MatchesColeHopfAndConvergesAtFourthOrderInTime) {
  std::vector<double> errors;
  for (double dt : {0.4, 0.2, 0.1, 0.05}) errors.push_back(max_error_at(128, dt, 2.0));
  for (size_t i = 1; i < errors.size(); ++i) {
    const double order = std::log2(errors[i - 1] / errors[i]);
    std::printf("Burgers ETDRK4: dt %.3g, max error %.3e, observed order %.2f\n", 0.4 / std::pow(2, i), errors[i], order);
    EXPECT_NEAR(order, 4.0, 0.3);
  }
  EXPECT_LT(errors.back(), 1e-7);
}

TEST(Burgers, GradientsThroughARolloutMatchCentralDifferences) {
  const int64_t n = 32;
  Generator generator(5);
  const Tensor u0 = cole_hopf(n, 0) + randn({n}, DType::f64, &generator) * 0.01;
  const Tensor weights = randn({n}, DType::f64, &generator);
  auto loss = [&](const Tensor& initial, const Tensor& nu) {
    Burgers solver(n, 2 * std::numbers::pi, 0.05, nu);
    return sum(solver.solve(initial, {6})[0] * weights);
  };
  Tensor initial = u0.detach().requires_grad_(), nu = scalar(kNu, DType::f64).requires_grad_();
  std::vector<Tensor> grads = grad({loss(initial, nu)}, {initial, nu});

  const double h = 1e-6;
  const Tensor direction = randn({n}, DType::f64, &generator);
  const double fd_u0 = (loss(u0 + direction * h, nu.detach()) - loss(u0 - direction * h, nu.detach())).item<double>() / (2 * h);
  const double ad_u0 = sum(grads[0] * direction).item<double>();
  EXPECT_NEAR(ad_u0, fd_u0, 1e-7 * (1 + std::abs(fd_u0)));
  const double fd_nu = (loss(u0, scalar(kNu + h, DType::f64)) - loss(u0, scalar(kNu - h, DType::f64))).item<double>() / (2 * h);
  EXPECT_NEAR(grads[1].item<double>(), fd_nu, 1e-7 * (1 + std::abs(fd_nu)));
  EXPECT_GT(std::abs(fd_nu), 1e-3);  // the check is not vacuous
}

// The neuraloperator repository's small Burgers set (visc 0.01, 16 points, 17 times): the 16-point
// initial conditions of its first 20 test samples, interpolated spectrally to 256 points and
// solved on [0, 1) to t = 1, match its final states to within what the 16-point data loses of the
// true initial conditions. The same comparison with nu halved or doubled is an order of magnitude
// off.
double neural_operator_set_error(double nu) {
  const std::string path = std::string(EDDY_DATA_DIR) + "/burgers_operator16.h5";
  const Tensor u0 = slice(io::read_hdf5(path, "test/u0"), 0, 0, 20), u = slice(io::read_hdf5(path, "test/u"), 0, 0, 20);
  const int64_t fine = 256, coarse = 16;
  const Tensor spectrum = pad(fft::rfft(u0), {0, 0}, {0, fine / 2 - coarse / 2}) * (double(fine) / double(coarse));
  Burgers solver(fine, 1.0, 1.0 / 800, scalar(nu, DType::f64));
  const Tensor final_state = slice(solver.solve(fft::irfft(spectrum, fine), {800})[0], 1, 0, fine, fine / coarse);
  const Tensor reference = squeeze(slice(u, 1, 16, 17), 1);
  return (norm(final_state - reference) / norm(reference)).item<double>();
}

TEST(Burgers, ReproducesTheNeuralOperatorBurgersSet) {
  const double error = neural_operator_set_error(0.01);
  std::printf("neuraloperator Burgers set at t = 1: relative L2 error %.3e\n", error);
  EXPECT_LT(error, 0.04);
  EXPECT_GT(neural_operator_set_error(0.005), 5 * error);
  EXPECT_GT(neural_operator_set_error(0.02), 5 * error);
}

TEST(Burgers, RejectsBadInput) {
  expect_error([] { Burgers(32, 1.0, 0.0, scalar(0.1, DType::f64)); }, {"Burgers", "dt", "positive"});
  expect_error([] { Burgers(32, 1.0, INFINITY, scalar(0.1, DType::f64)); }, {"Burgers", "positive and finite", "inf"});
  expect_error([] { Burgers(32, INFINITY, 0.1, scalar(0.1, DType::f64)); }, {"Burgers", "positive and finite", "inf"});
  Burgers solver(32, 1.0, 0.1, scalar(0.1, DType::f64));
  expect_error([&] { solver.solve(zeros({16}, DType::f64), {1}); }, {"Burgers", "[..., 32]", "[16]"});
  // Anti-diffusion ran to a blow-up, and NaN to NaN, without a word.
  expect_error([] { Burgers(32, 1.0, 0.1, scalar(-0.01, DType::f64)); }, {"Burgers", "non-negative", "-0.01"});
  expect_error([] { Burgers(32, 1.0, 0.1, scalar(std::nan(""), DType::f64)); }, {"Burgers", "finite"});
}

// The coefficients are computed from nu when the solver is built: a solver kept across a fit's
// steps while nu moved in place solved, and differentiated, at the first nu every time.
TEST(Burgers, RefusesANuChangedInPlaceSinceItWasBuilt) {
  Tensor nu = scalar(0.03, DType::f64);
  const Burgers solver(32, 1.0, 1e-2, nu);
  const Tensor u0 = sin(arange(0, 32, 1, DType::f64) * (2 * std::numbers::pi / 32));
  EXPECT_NO_THROW(solver.solve(u0, {2}));
  nu.fill_(0.025);
  expect_error([&] { solver.solve(u0, {2}); }, {"Burgers: nu is 0.025", "from nu = 0.03", "build a new solver"});
}

// A compiled loss holding a solver built outside it ran its program on later calls without the
// check above: after nu moved, it gave the first nu's loss and gradient, without a word.
TEST(Burgers, ACompiledFunctionRefusesANuChangedSinceTheSolverWasBuilt) {
  const ScopedEnv no_kernels("EDDY_COMPILER_DISABLE", "fusion");  // what is checked is not fused code
  const Tensor nu = scalar(0.05, DType::f64).requires_grad_();
  const Burgers solver(32, 2 * std::numbers::pi, 0.02, nu);
  const Tensor u0 = sin(arange(0, 32, 1, DType::f64) * (2 * std::numbers::pi / 32));
  const auto loss = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum(square(solver.solve(in[0], {5})[0]))};
  };
  CompiledFunction compiled = compile(loss);
  const double eager = loss({u0})[0].item<double>();
  EXPECT_NEAR(compiled({u0})[0].item<double>(), eager, 1e-12 * eager);
  EXPECT_NEAR(compiled({u0})[0].item<double>(), eager, 1e-12 * eager);
  EXPECT_EQ(compiled.stats().traces, 1) << "an unchanged nu captured again";
  {
    NoGradGuard no_grad;
    Tensor(nu).fill_(0.5);
  }
  expect_error([&] { compiled({u0}); }, {"Burgers: nu is 0.5", "from nu = 0.05", "build a new solver"});
}

// Built inside the compiled loss, as the message above advises, the solver follows nu.
TEST(Burgers, ASolverBuiltInsideACompiledFunctionFollowsNu) {
  const ScopedEnv no_kernels("EDDY_COMPILER_DISABLE", "fusion");  // what is checked is not fused code
  const Tensor nu = scalar(0.05, DType::f64).requires_grad_();
  const Tensor u0 = sin(arange(0, 32, 1, DType::f64) * (2 * std::numbers::pi / 32));
  // Checkpointed too: the segments take the solver's constants, made inside the compiled function,
  // as inputs (params()); held by the segments, they had no values when the program ran them.
  const auto loss = [&](const std::vector<Tensor>& in) {
    const Burgers solver(32, 2 * std::numbers::pi, 0.02, nu);
    return std::vector<Tensor>{sum(square(solver.solve(in[0], {5})[0])) + sum(square(solver.solve(in[0], {5}, 2)[0]))};
  };
  CompiledFunction compiled = compile(loss);
  for (double value : {0.05, 0.5}) {
    {
      NoGradGuard no_grad;
      Tensor(nu).fill_(value);
    }
    const Tensor compiled_loss = compiled({u0})[0], eager_loss = loss({u0})[0];
    EXPECT_NEAR(compiled_loss.item<double>(), eager_loss.item<double>(), 1e-12 * eager_loss.item<double>()) << value;
    EXPECT_NEAR(grad({compiled_loss}, {nu})[0].item<double>(), grad({eager_loss}, {nu})[0].item<double>(), 1e-9) << value;
  }
  EXPECT_EQ(compiled.stats().traces, 1);
  // Second derivatives from outside, through the checkpointed segments' recomputation.
  const Tensor x = u0.detach().requires_grad_();
  const auto second = [&](const Tensor& first_loss) {
    const Tensor g = grad({first_loss}, {nu}, {}, true)[0];
    return grad({g}, {x, nu});
  };
  const std::vector<Tensor> compiled_second = second(compiled({x})[0]), eager_second = second(loss({x})[0]);
  EXPECT_LT(max(abs(compiled_second[0] - eager_second[0])).item<double>(), 1e-9 * max(abs(eager_second[0])).item<double>());
  EXPECT_NEAR(compiled_second[1].item<double>(), eager_second[1].item<double>(), 1e-9 * std::abs(eager_second[1].item<double>()));
}

}  // namespace
}  // namespace eddy::classical
