// 2-D Navier-Stokes: exact decay of Taylor-Green vortices (forced and unforced), second-order
// convergence in time with and without advection, and gradients through a rollout.

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "eddy/compiler/compile.h"
#include "eddy/eddy.h"
#include "solvers/classical/grf.h"
#include "solvers/classical/navier_stokes.h"
#include "support/expect_error.h"
#include "support/scoped_env.h"

namespace eddy::classical {
namespace {

// cos(2 pi x) cos(2 pi y): its stream function is parallel to it, so advection vanishes and it
// decays as exp(-2 nu k^2 t) with k = 2 pi. The FNO forcing lies on the same wavenumber shell
// |k|^2 = 8 pi^2, so with it w(t) = exp(-lambda t) w0 + (1 - exp(-lambda t)) f / lambda,
// lambda = 8 pi^2 nu, is an exact solution of the full nonlinear equation.
Tensor taylor_green(int64_t n) {
  const Tensor x = arange(0, static_cast<double>(n), 1, DType::f64) * (2 * std::numbers::pi / static_cast<double>(n));
  return unsqueeze(cos(x), 1) * cos(x);
}

double taylor_green_error(double nu, double dt, double t_end, bool forced) {
  const int64_t n = 16;
  const Tensor forcing = forced ? NavierStokes2d::fno_forcing(n) : zeros({n, n}, DType::f64);
  NavierStokes2d solver(n, dt, scalar(nu, DType::f64), forcing);
  const Tensor w0 = taylor_green(n);
  Tensor w = solver.solve(w0, {std::lround(t_end / dt)})[0];
  const double lambda = 8 * std::numbers::pi * std::numbers::pi * nu, decay = std::exp(-lambda * t_end);
  return max(abs(w - (w0 * decay + forcing * ((1 - decay) / lambda)))).item<double>();
}

TEST(NavierStokes2d, TaylorGreenDecaysExactlyAndConvergesAtSecondOrder) {
  for (bool forced : {false, true}) {
    std::vector<double> errors;
    for (double dt : {0.1, 0.05, 0.025}) errors.push_back(taylor_green_error(0.01, dt, 2.0, forced));
    for (size_t i = 1; i < errors.size(); ++i) {
      const double order = std::log2(errors[i - 1] / errors[i]);
      std::printf("Taylor-Green%s: max error %.3e, observed order %.2f\n", forced ? " forced" : "", errors[i], order);
      EXPECT_NEAR(order, 2.0, 0.1);
    }
    EXPECT_LT(errors.back(), 1e-4);
  }
}

// w = cos(2 pi x) + cos(4 pi y) has psi = cos(2 pi x) / (4 pi^2) + cos(4 pi y) / (16 pi^2), so
// u = psi_y = -sin(4 pi y) / (4 pi), v = -psi_x = sin(2 pi x) / (2 pi), and without viscosity or
// forcing w_t = -(u w_x + v w_y) = 1.5 sin(2 pi x) sin(4 pi y). The time derivative is read off
// one step by Richardson extrapolation, 2 D(h / 2) - D(h) with D(h) = (w(h) - w(0)) / h.
TEST(NavierStokes2d, VelocityAndAdvectionMatchTheAnalyticJacobian) {
  const int64_t n = 16;
  const Tensor x = arange(0, static_cast<double>(n), 1, DType::f64) * (2 * std::numbers::pi / static_cast<double>(n));
  const Tensor w0 = unsqueeze(cos(x), 1) + cos(2.0 * x);
  NavierStokes2d reference(n, 1.0, scalar(0.0, DType::f64), zeros({n, n}, DType::f64));
  auto [u, v] = reference.velocity(w0);
  const Tensor u_exact = expand(sin(2.0 * x) * (-0.25 / std::numbers::pi), {n, n});
  const Tensor v_exact = expand(unsqueeze(sin(x), 1) * (0.5 / std::numbers::pi), {n, n});
  EXPECT_LT(max(abs(u - u_exact)).item<double>(), 1e-14);
  EXPECT_LT(max(abs(v - v_exact)).item<double>(), 1e-14);

  auto difference_quotient = [&](double h) {
    NavierStokes2d solver(n, h, scalar(0.0, DType::f64), zeros({n, n}, DType::f64));
    return (solver.solve(w0, {1})[0] - w0) / h;
  };
  const Tensor w_t = difference_quotient(5e-4) * 2.0 - difference_quotient(1e-3);
  const Tensor w_t_exact = unsqueeze(sin(x), 1) * sin(2.0 * x) * 1.5;
  EXPECT_LT(max(abs(w_t - w_t_exact)).item<double>(), 1e-6);
  EXPECT_GT(max(abs(w_t_exact)).item<double>(), 1.0);
}

TEST(NavierStokes2d, NonlinearRolloutConvergesAtSecondOrderInTime) {
  // A random vorticity field from the FNO prior, against rollouts with halved steps.
  const int64_t n = 32;
  GaussianRandomField field;
  field.resolution = n;
  Generator generator(2);
  const Tensor w0 = squeeze(field.sample(1, generator), 0);
  auto final_state = [&](double dt) {
    NavierStokes2d solver(n, dt, scalar(1e-3, DType::f64), NavierStokes2d::fno_forcing(n));
    return solver.solve(w0, {std::lround(1.0 / dt)})[0];
  };
  std::vector<Tensor> states;
  for (double dt : {0.02, 0.01, 0.005, 0.0025}) states.push_back(final_state(dt));
  std::vector<double> differences;
  for (size_t i = 1; i < states.size(); ++i) differences.push_back(max(abs(states[i] - states[i - 1])).item<double>());
  for (size_t i = 1; i < differences.size(); ++i) {
    const double order = std::log2(differences[i - 1] / differences[i]);
    std::printf("Navier-Stokes (GRF initial vorticity): step difference %.3e, observed order %.2f\n", differences[i], order);
    EXPECT_NEAR(order, 2.0, 0.2);
  }
  // The advection is doing something: the flow has moved far from pure decay.
  EXPECT_GT(max(abs(states.back() - w0)).item<double>(), 0.1 * max(abs(w0)).item<double>());
}

TEST(NavierStokes2d, GradientsThroughARolloutMatchCentralDifferences) {
  const int64_t n = 16;
  GaussianRandomField field;
  field.resolution = n;
  Generator generator(4);
  const Tensor w0 = squeeze(field.sample(1, generator), 0);
  const Tensor weights = randn({n, n}, DType::f64, &generator);
  auto loss = [&](const Tensor& initial, const Tensor& nu) {
    NavierStokes2d solver(n, 0.01, nu, NavierStokes2d::fno_forcing(n));
    return sum(solver.solve(initial, {5})[0] * weights);
  };
  Tensor initial = w0.detach().requires_grad_(), nu = scalar(1e-2, DType::f64).requires_grad_();
  std::vector<Tensor> grads = grad({loss(initial, nu)}, {initial, nu});

  const double h = 1e-6;
  const Tensor direction = randn({n, n}, DType::f64, &generator);
  const double fd_w0 = (loss(w0 + direction * h, nu.detach()) - loss(w0 - direction * h, nu.detach())).item<double>() / (2 * h);
  EXPECT_NEAR(sum(grads[0] * direction).item<double>(), fd_w0, 1e-7 * (1 + std::abs(fd_w0)));
  const double fd_nu = (loss(w0, scalar(1e-2 + h, DType::f64)) - loss(w0, scalar(1e-2 - h, DType::f64))).item<double>() / (2 * h);
  EXPECT_NEAR(grads[1].item<double>(), fd_nu, 1e-6 * (1 + std::abs(fd_nu)));
  EXPECT_GT(std::abs(fd_nu), 1e-3);
}

// Built inside a compiled function, with the forcing an input: the forcing's finiteness check
// read its values there, which tracing refused, so no Navier-Stokes inversion could be compiled.
TEST(NavierStokes2d, ASolverBuiltInsideACompiledFunctionGivesTheEagerResult) {
  const int64_t n = 8;
  Generator generator(6);
  const Tensor w0 = randn({n, n}, DType::f64, &generator), forcing = NavierStokes2d::fno_forcing(n);
  const auto rollout = [&](const std::vector<Tensor>& in) {
    NavierStokes2d solver(n, 0.01, scalar(1e-2, DType::f64), in[1]);
    return std::vector<Tensor>{solver.solve(in[0], {3})[0] + solver.solve(in[0], {3}, 2)[0]};  // checkpointed too
  };
  CompiledFunction compiled = compile(rollout);
  const Tensor eager = rollout({w0, forcing})[0], traced = compiled({w0, forcing})[0];
  EXPECT_LT(max(abs(traced - eager)).item<double>(), 1e-12 * max(abs(eager)).item<double>());
}

TEST(NavierStokes2d, RejectsBadInput) {
  expect_error([] { NavierStokes2d(16, 0.01, scalar(1e-3, DType::f64), zeros({8, 8}, DType::f64)); },
               {"NavierStokes2d", "forcing", "[16, 16]", "[8, 8]"});
  NavierStokes2d solver(16, 0.01, scalar(1e-3, DType::f64), zeros({16, 16}, DType::f64));
  expect_error([&] { solver.solve(zeros({16, 16}, DType::f32), {1}); }, {"NavierStokes2d", "float64", "float32"});
  // Accepted before, and solved to NaN.
  expect_error([] { NavierStokes2d(16, INFINITY, scalar(1e-3, DType::f64), zeros({16, 16}, DType::f64)); },
               {"NavierStokes2d: dt must be positive and finite, got inf"});
  Tensor forcing = zeros({16, 16}, DType::f64);
  forcing.fill_(NAN);
  expect_error([&] { NavierStokes2d(16, 0.01, scalar(1e-3, DType::f64), forcing); },
               {"NavierStokes2d: the forcing has non-finite values"});
  // A forcing stepped in place by an optimiser: the solver kept the old forcing's spectrum, and a
  // fit's loss and gradient stayed the same at every step.
  const Tensor fitted = zeros({16, 16}, DType::f64).requires_grad_();
  NavierStokes2d fitting(16, 0.01, scalar(1e-3, DType::f64), fitted);
  fitting.solve(zeros({16, 16}, DType::f64), {1});
  {
    NoGradGuard no_grad;
    Tensor(fitted).copy_(fitted.detach() + 0.5);
  }
  expect_error([&] { fitting.solve(zeros({16, 16}, DType::f64), {1}); },
               {"NavierStokes2d: the forcing was written in place since", "build a new solver"});
}

// A compiled loss holding the solver ran its program on later calls without the check above, and
// gave the old forcing's loss without a word.
TEST(NavierStokes2d, ACompiledFunctionRefusesAForcingWrittenSinceTheSolverWasBuilt) {
  const ScopedEnv no_kernels("EDDY_COMPILER_DISABLE", "fusion");  // what is checked is not fused code
  const Tensor forcing = NavierStokes2d::fno_forcing(8).requires_grad_();
  const NavierStokes2d solver(8, 0.01, scalar(1e-2, DType::f64), forcing);
  CompiledFunction compiled = compile([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum(square(solver.solve(in[0], {3})[0]))};
  });
  const Tensor w0 = randn({8, 8}, DType::f64);
  compiled({w0});
  compiled({w0});
  EXPECT_EQ(compiled.stats().traces, 1);
  {
    NoGradGuard no_grad;
    Tensor(forcing).copy_(forcing.detach() * 3.0);
  }
  expect_error([&] { compiled({w0}); }, {"NavierStokes2d: the forcing was written in place since", "build a new solver"});
}

}  // namespace
}  // namespace eddy::classical
