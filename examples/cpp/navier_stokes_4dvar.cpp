// Recovers the initial vorticity of 2-D Navier-Stokes from observations at a later time: a small
// strong-constraint 4D-Var, with the gradient of the misfit taken through the checkpointed rollout.
//
// The truth is the FNO paper's set-up (unit torus, nu = 1e-3, their forcing, w0 drawn from the
// Gaussian random field with tau = 7, alpha = 2.5). We observe w(T) on every `stride`-th grid point
// in each direction, with optional Gaussian noise, and minimise over w0
//
//   J(w0) = 1/2 sum_obs (w(T) - d)^2 / sigma^2 + 1/2 w0^T C^-1 w0,
//
// C being the prior's covariance and sigma the assumed observation error (`obs-error` times the
// data's RMS), by L-BFGS on a preconditioned variable xi (below), from the prior mean w0 = 0.
//
// The data come from the same solver at the same resolution (an "inverse crime"), so without
// noise what limits the recovery is what the observations cannot see: the modes that viscosity
// damps below sigma by time T, and the grid points that are not observed.
//
// Prints the relative L2 errors of w0 and of w(T), the iterations and time, and the peak memory
// of one gradient with and without checkpointing. Exits 1 when the error of w0 exceeds
// `tolerance` (or checkpointing saves no memory), so the smoke test checks the recovery.
//
//   ./build/examples/cpp/navier_stokes_4dvar                      # n = 64, T = 1 (100 steps)
//   ./build/examples/cpp/navier_stokes_4dvar --stride 4 --noise 0.01
//   ./build/examples/cpp/navier_stokes_4dvar --n 32 --final-time 0.5 --iterations 30   # smoke test

#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "eddy/core/allocator.h"
#include "eddy/eddy.h"
#include "eddy/fft/fft.h"
#include "eddy/optim/lbfgs.h"
#include "example_args.h"
#include "solvers/classical/grf.h"
#include "solvers/classical/navier_stokes.h"

using namespace eddy;

namespace {

double relative_l2(const Tensor& estimate, const Tensor& truth) {
  return std::sqrt(sum(square(estimate - truth)).item<double>() / sum(square(truth)).item<double>());
}

Tensor observe(const Tensor& w, int64_t stride) {
  return slice(slice(w, 0, 0, w.size(0), stride), 1, 0, w.size(1), stride);
}

}  // namespace

int main(int argc, char** argv) try {
  examples::Args args(argc, argv);
  const int64_t n = args.at_least("n", 64, 4);
  const double nu = args.positive("nu", 1e-3);
  const double dt = args.positive("dt", 1e-2);
  const double final_time = args.positive("final-time", 1);
  const int64_t stride = args.integer("stride", 1);
  const double noise = args.non_negative("noise", 0);
  const double obs_error = args.positive("obs-error", 0.01);
  const int64_t iterations = args.at_least("iterations", 200, 1);
  const int64_t checkpoint_every = args.at_least("checkpoint-every", 10, 0);
  const double tolerance = args.positive("tolerance", 0.1);
  const uint64_t seed = static_cast<uint64_t>(args.at_least("seed", 0, 0));
  args.check_all_used();
  EDDY_CHECK(stride >= 1 && stride <= n, "--stride must be from 1 to --n (", n, "), got ", stride);

  const int64_t steps = examples::Args::steps_to(final_time, dt);
  classical::NavierStokes2d solver(n, dt, scalar(nu, DType::f64), classical::NavierStokes2d::fno_forcing(n));
  classical::GaussianRandomField prior;
  prior.resolution = n;
  prior.alpha = 2.5;
  prior.tau = 7;
  Generator generator(seed);
  const Tensor w0_true = squeeze(prior.sample(1, generator), 0);

  Tensor w_final_true, data;
  {
    NoGradGuard no_grad;
    w_final_true = solver.solve(w0_true, {steps})[0];
    const Tensor clean = observe(w_final_true, stride);
    const double rms = std::sqrt(mean(square(clean)).item<double>());
    data = contiguous(clean + randn(clean.shape(), DType::f64, &generator) * (noise * rms));
  }
  const double sigma = obs_error * std::sqrt(mean(square(data)).item<double>());
  std::printf("n = %lld, nu = %g, dt = %g, T = %g (%lld steps); %lld observations of w(T) (stride %lld), noise %g x RMS, "
              "sigma = %g x RMS\n",
              static_cast<long long>(n), nu, dt, final_time, static_cast<long long>(steps),
              static_cast<long long>(data.numel()), static_cast<long long>(stride), noise, obs_error);

  // Preconditioning: w0 = S xi with S a Fourier multiplier p_k = h_k^(-1/2), where h_k is the
  // Hessian of J if the flow only diffused: the observations' precision damped by diffusion,
  // e^(-2 nu |2 pi k|^2 T) / (sigma^2 stride^2), plus the prior's, 1 / (n^2 lambda_k) (n^2 lambda_k
  // being C's eigenvalues on the grid). Advection nearly preserves the L2 norm, so J's Hessian in
  // xi stays close to the identity, and L-BFGS needs tens of iterations rather than hundreds.
  // The mean vorticity is fixed at the prior's 0 (the forcing has none, so it never changes).
  const double points = static_cast<double>(n * n);
  const Tensor lambda = prior.eigenvalues(DType::f64) * points;
  const Tensor freq = fft::fftfreq(n, 1.0 / static_cast<double>(n), DType::f64) * (2 * std::numbers::pi);
  const Tensor k2 = unsqueeze(square(freq), 1) + square(slice(freq, 0, 0, n / 2 + 1));
  const Tensor observed = exp(k2 * (-2 * nu * final_time)) / (sigma * sigma * static_cast<double>(stride * stride));
  const Tensor has_prior = gt(lambda, zeros_like(lambda));
  const Tensor safe_lambda = where(has_prior, lambda, ones_like(lambda));
  const Tensor p = where(has_prior, 1.0 / sqrt(observed + 1.0 / safe_lambda), zeros_like(lambda));
  const Tensor whitening = p / sqrt(safe_lambda);  // C^(-1/2) S
  // p_k^2 is then the posterior variance of mode k (for a purely diffusive flow), so this is the
  // error the data and the prior allow: what the recovery should be compared with.
  std::vector<double> columns(n / 2 + 1, 2.0);  // the half spectrum's columns stand for two modes,
  columns.front() = columns.back() = 1.0;        // except the first and the last
  const Tensor weight = tensor(columns);
  const double expected_error = std::sqrt(sum(weight * square(p)).item<double>() / sum(weight * lambda).item<double>());
  std::printf("expected relative L2 error of w0 (posterior / prior variance, diffusion only): %.4f\n", expected_error);
  auto multiply = [&](const Tensor& x, const Tensor& multiplier) {
    return fft::irfft2(fft::rfft2(x) * multiplier, {n, n});
  };
  auto initial_vorticity = [&](const Tensor& xi) { return multiply(xi, p); };
  auto cost = [&](const Tensor& xi, int64_t checkpoint) {
    const Tensor w_final = solver.solve(initial_vorticity(xi), {steps}, checkpoint)[0];
    return 0.5 * sum(square(observe(w_final, stride) - data)) / (sigma * sigma) +
           0.5 * sum(square(multiply(xi, whitening)));
  };

  // Peak memory of one gradient evaluation, above what was in use before it.
  auto peak_megabytes = [&](int64_t checkpoint) {
    Allocator& allocator = cpu_allocator();
    const int64_t before = allocator.stats().bytes_in_use;
    allocator.reset_peak();
    {
      Tensor xi = zeros({n, n}, DType::f64).requires_grad_();
      Tensor g = grad({cost(xi, checkpoint)}, {xi})[0];
    }
    return static_cast<double>(allocator.stats().peak_bytes_in_use - before) / 1e6;
  };
  const double plain_mb = peak_megabytes(0), checkpointed_mb = peak_megabytes(checkpoint_every);
  std::printf("peak memory of one gradient: %.1f MB plain, %.1f MB checkpointed every %lld steps\n", plain_mb,
              checkpointed_mb, static_cast<long long>(checkpoint_every));

  Tensor xi = zeros({n, n}, DType::f64).requires_grad_();
  optim::LbfgsOptions options;
  options.max_iterations = iterations;
  options.max_evaluations = 2 * iterations;
  options.tolerance_grad = 1e-6;
  optim::Lbfgs lbfgs({xi}, options);
  int64_t evaluation = 0;
  const auto start = std::chrono::steady_clock::now();
  optim::LbfgsReport report = lbfgs.step([&] {
    lbfgs.zero_grad();
    Tensor loss = cost(xi, checkpoint_every);
    backward(loss);
    if (++evaluation % 10 == 0) {
      NoGradGuard no_grad;
      std::printf("  evaluation %3lld: J = %.4e, w0 error %.4f\n", static_cast<long long>(evaluation),
                  loss.item<double>(), relative_l2(initial_vorticity(xi), w0_true));
    }
    return loss;
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  NoGradGuard no_grad;
  const Tensor w0 = initial_vorticity(xi);
  const double w0_error = relative_l2(w0, w0_true);
  const double forecast_error = relative_l2(solver.solve(w0, {steps})[0], w_final_true);
  std::printf("L-BFGS: %s\n", report.message.c_str());
  std::printf("relative L2 error: w0 %.4f, w(T) %.2e (from w0 = 0: 1 and %.2e); %lld iterations, %lld evaluations, "
              "%.1f s\n",
              w0_error, forecast_error, relative_l2(solver.solve(zeros({n, n}, DType::f64), {steps})[0], w_final_true),
              static_cast<long long>(report.iterations), static_cast<long long>(report.evaluations), seconds);
  if (!(w0_error <= tolerance)) {  // NaN fails too
    std::printf("FAILED: the error of w0 exceeds the tolerance %g\n", tolerance);
    return 1;
  }
  if (checkpoint_every > 0 && checkpoint_every < steps && checkpointed_mb >= plain_mb) {
    std::printf("FAILED: checkpointing did not lower the peak memory\n");
    return 1;
  }
  return 0;
} catch (const std::exception& error) {
  std::fprintf(stderr, "error: %s\n", error.what());
  return 2;
}
