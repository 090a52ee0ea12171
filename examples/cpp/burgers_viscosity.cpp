// Recovers the viscosity of Burgers' equation from a recorded trajectory, by L-BFGS on log nu with
// the gradient taken through the whole (checkpointed) ETDRK4 rollout.
//
// The set-up is the FNO paper's Burgers data: [0, 1) periodic, nu = 0.01, the initial condition
// drawn from N(0, 625 (-Laplacian + 25)^-2), records up to t = 1. The "measurements" are made on
// a grid `fine` times finer, with a time step `fine` times shorter, and sampled at the n points the
// fit uses, so the fit does not use the very discretisation that made its data (no "inverse
// crime"). The initial condition is known; Gaussian noise of `noise` times the data's RMS can be
// added to the records. Exits 1 when the recovered nu misses nu_true by more than `tolerance`
// (relative), so the smoke test checks the recovery.
//
//   ./build/examples/cpp/burgers_viscosity                          # n = 128, 1000 steps
//   ./build/examples/cpp/burgers_viscosity --noise 0.01 --tolerance 0.05
//   ./build/examples/cpp/burgers_viscosity --n 64 --final-time 0.5 --dt 2.5e-3   # the smoke test

#include <chrono>
#include <cmath>
#include <cstdio>

#include "eddy/eddy.h"
#include "eddy/optim/lbfgs.h"
#include "example_args.h"
#include "solvers/classical/burgers.h"
#include "solvers/classical/grf.h"

using namespace eddy;

int main(int argc, char** argv) try {
  examples::Args args(argc, argv);
  const int64_t n = args.at_least("n", 128, 4);
  const int64_t fine = args.at_least("fine", 4, 1);
  const double nu_true = args.positive("nu", 0.01);
  const double nu_start = nu_true * args.positive("start-factor", 3);
  const double final_time = args.positive("final-time", 1);
  const int64_t records = args.at_least("records", 4, 1);
  const double dt = args.positive("dt", 1e-3);
  const double noise = args.non_negative("noise", 0);
  const int64_t checkpoint_every = args.at_least("checkpoint-every", 50, 0);
  const int64_t iterations = args.at_least("iterations", 30, 1);
  const double tolerance = args.positive("tolerance", 0.01);
  const uint64_t seed = static_cast<uint64_t>(args.at_least("seed", 0, 0));
  args.check_all_used();

  const int64_t steps = examples::Args::steps_to(final_time, dt);
  EDDY_CHECK(steps % records == 0, "--final-time / --dt must be a multiple of --records");
  std::vector<int64_t> record_steps, fine_record_steps;
  for (int64_t r = 1; r <= records; ++r) {
    record_steps.push_back(steps / records * r);
    fine_record_steps.push_back(steps / records * r * fine);
  }

  // The measurements: the fine solution at the record times, on every fine-th point.
  classical::GaussianRandomField prior;
  prior.dim = 1;
  prior.resolution = n * fine;
  prior.alpha = 2;
  prior.tau = 5;
  prior.sigma = 25;
  Generator generator(seed);
  const Tensor u0_fine = squeeze(prior.sample(1, generator), 0);
  const Tensor u0 = contiguous(slice(u0_fine, 0, 0, n * fine, fine));
  Tensor data;
  {
    NoGradGuard no_grad;
    classical::Burgers truth(n * fine, 1, dt / static_cast<double>(fine), scalar(nu_true, DType::f64));
    data = slice(stack(truth.solve(u0_fine, fine_record_steps)), 1, 0, n * fine, fine);
    const double rms = std::sqrt(mean(square(data)).item<double>());
    data = contiguous(data + randn(data.shape(), DType::f64, &generator) * (noise * rms));
  }
  const double data_energy = mean(square(data)).item<double>();

  // The relative misfit of the n-point solver's records for a given nu.
  auto misfit = [&](const Tensor& nu) {
    classical::Burgers model(n, 1, dt, nu);
    const Tensor prediction = stack(model.solve(u0, record_steps, checkpoint_every));
    return mean(square(prediction - data)) / data_energy;
  };
  {
    NoGradGuard no_grad;
    std::printf("n = %lld, dt = %g, %lld steps, records every %g; data from n = %lld, dt = %g; noise %g x RMS\n",
                static_cast<long long>(n), dt, static_cast<long long>(steps), final_time / static_cast<double>(records),
                static_cast<long long>(n * fine), dt / static_cast<double>(fine), noise);
    std::printf("misfit at nu_true: %.3e (discretisation error and noise: the floor of the fit)\n",
                misfit(scalar(nu_true, DType::f64)).item<double>());
  }

  // log nu keeps nu positive and makes a factor-of-3 error a step of size ~1.
  Tensor log_nu = scalar(std::log(nu_start), DType::f64).requires_grad_();
  optim::LbfgsOptions options;
  options.max_iterations = iterations;
  options.max_evaluations = 4 * iterations;
  // The misfit's curvature in log nu is ~0.1 (a factor 3 costs ~0.1), so |g| <= 1e-9 puts log nu
  // within ~1e-8 of the minimiser; tighter tolerances only chase rounding in the line search.
  options.tolerance_grad = 1e-9;
  optim::Lbfgs lbfgs({log_nu}, options);
  int64_t evaluation = 0;
  const auto start = std::chrono::steady_clock::now();
  optim::LbfgsReport report = lbfgs.step([&] {
    lbfgs.zero_grad();
    Tensor loss = misfit(exp(log_nu));
    backward(loss);
    std::printf("  evaluation %2lld: nu = %.6f, misfit %.3e\n", static_cast<long long>(++evaluation),
                std::exp(log_nu.item<double>()), loss.item<double>());
    return loss;
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const double nu = std::exp(log_nu.item<double>());
  const double error = std::abs(nu - nu_true) / nu_true;
  std::printf("L-BFGS: %s\n", report.message.c_str());
  std::printf("nu: true %.6f, start %.6f, recovered %.6f, relative error %.2e (%lld iterations, %lld evaluations, %.1f s)\n",
              nu_true, nu_start, nu, error, static_cast<long long>(report.iterations),
              static_cast<long long>(report.evaluations), seconds);
  if (!(error <= tolerance)) {  // NaN fails too
    std::printf("FAILED: the relative error exceeds the tolerance %g\n", tolerance);
    return 1;
  }
  return 0;
} catch (const std::exception& error) {
  std::fprintf(stderr, "error: %s\n", error.what());
  return 2;
}
