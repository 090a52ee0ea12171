// Spectral differentiation of a periodic function, three ways:
//   1. the Fourier multiplier: f' = irfft(i k rfft(f));
//   2. autodiff of the Fourier interpolant p(x) = sum_k c_k e^{ikx} with respect to x, where the
//      coefficients c come from an FFT;
//   3. the analytic derivative.
// Then autodiff *through* the FFTs: for L(f) = sum (D f)^2 with D the spectral derivative,
// dL/df = 2 D^T D f = -2 D^2 f, compared with the analytic -2 f''.
//
//   ./build/examples/cpp/spectral_derivative

#include <cmath>
#include <cstdio>
#include <numbers>

#include "eddy/eddy.h"
#include "eddy/fft/fft.h"
#include "example_args.h"

using namespace eddy;

// i k for the half spectrum of n samples on [0, 2 pi); the Nyquist mode (even n) has no
// well-defined derivative of a real signal and is zeroed.
Tensor derivative_multiplier(int64_t n) {
  Tensor k = fft::rfftfreq(n, 1.0 / static_cast<double>(n));
  if (n % 2 == 0) k = k * cast(ne(k, scalar(n / 2.0, DType::f64)), DType::f64);
  return complex(zeros_like(k), k);
}

Tensor spectral_derivative(const Tensor& f) {
  const int64_t n = f.shape().back();
  return fft::irfft(fft::rfft(f) * derivative_multiplier(n), n);
}

double max_abs_difference(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item<double>(); }

int main(int argc, char** argv) try {
  examples::Args(argc, argv).check_all_used();  // no options: --help says so, others are refused
  const int64_t n = 64;
  const double two_pi = 2 * std::numbers::pi;
  Tensor x = arange(0, static_cast<double>(n), 1, DType::f64) * (two_pi / static_cast<double>(n));
  Tensor f = exp(sin(x));
  Tensor analytic = cos(x) * f;
  Tensor analytic_second = (square(cos(x)) - sin(x)) * f;

  // 1. Fourier multiplier.
  Tensor multiplier = spectral_derivative(f);

  // 2. Autodiff of the interpolant, evaluated at the grid points: p(x) = Re sum_k w_k c_k e^{ikx}
  // with w_k = 2 for the middle modes (each stands for +k and -k), 1 for DC.
  Tensor coefficients = fft::rfft(f) / static_cast<double>(n);
  const int64_t kept = n / 2;  // drop Nyquist, as above
  Tensor c = slice(coefficients, 0, 0, kept);
  Tensor w = full({kept}, 2.0, DType::f64);
  slice(w, 0, 0, 1).fill_(1.0);
  Tensor k = arange(0, static_cast<double>(kept), 1, DType::f64);
  Tensor points = x.detach().requires_grad_();
  Tensor phase = matmul(unsqueeze(points, 1), unsqueeze(k, 0));  // [n, kept]: x_j k
  Tensor interpolant = sum(real(complex(cos(phase), sin(phase)) * (w * c)), {1});
  Tensor autodiff = grad({interpolant}, {points}, {ones_like(interpolant)})[0];

  std::printf("f(x) = exp(sin x) on [0, 2 pi), %lld points, float64\n", static_cast<long long>(n));
  std::printf("interpolant reproduces f:              max |p - f|          = %.2e\n",
              max_abs_difference(interpolant.detach(), f));
  std::printf("1. Fourier multiplier i k:             max |D f - f'|       = %.2e\n",
              max_abs_difference(multiplier, analytic));
  std::printf("2. autodiff of the interpolant in x:   max |dp/dx - f'|     = %.2e\n",
              max_abs_difference(autodiff, analytic));
  std::printf("   the two spectral derivatives agree: max |dp/dx - D f|    = %.2e\n",
              max_abs_difference(autodiff, multiplier));

  // 3. Autodiff through rfft/irfft: the gradient of L = sum (D f)^2 with respect to the samples.
  Tensor samples = f.detach().requires_grad_();
  Tensor loss = sum(square(spectral_derivative(samples)));
  Tensor through_fft = grad({loss}, {samples})[0];
  const double through_error = max_abs_difference(through_fft, -2.0 * analytic_second);
  std::printf("3. autodiff through the FFTs:          max |dL/df + 2 f''|  = %.2e\n", through_error);
  // Spectral accuracy: all three agree with the analytic derivatives to near machine precision.
  const bool accurate = max_abs_difference(multiplier, analytic) < 1e-12 &&
                        max_abs_difference(autodiff, analytic) < 1e-12 && through_error < 1e-10;
  return accurate ? 0 : 1;
} catch (const std::exception& error) {
  std::fprintf(stderr, "error: %s\n", error.what());
  return 2;
}
