#include "solvers/classical/grf.h"

#include <cmath>
#include <numbers>

#include "eddy/fft/fft.h"
#include "eddy/ops/ops.h"

namespace eddy::classical {
namespace {

void check(const GaussianRandomField& field) {
  EDDY_CHECK(field.dim == 1 || field.dim == 2, "GaussianRandomField: dim must be 1 or 2, got ", field.dim);
  EDDY_CHECK(field.resolution >= 2, "GaussianRandomField: resolution must be at least 2, got ", field.resolution);
  EDDY_CHECK(field.length > 0 && field.tau > 0 && field.alpha > 0 && field.sigma >= 0,
             "GaussianRandomField: length, tau and alpha must be positive and sigma non-negative, got length ",
             field.length, ", tau ", field.tau, ", alpha ", field.alpha, ", sigma ", field.sigma);
}

}  // namespace

double GaussianRandomField::effective_sigma() const {
  return sigma > 0 ? sigma : std::pow(tau, alpha - 0.5 * static_cast<double>(dim));
}

Tensor GaussianRandomField::eigenvalues(DType dtype) const {
  check(*this);
  const double scale = 2 * std::numbers::pi / length;
  Tensor k_last = square(fft::rfftfreq(resolution, 1.0 / static_cast<double>(resolution), dtype) * scale);
  Tensor k2 = dim == 1 ? k_last
                       : unsqueeze(square(fft::fftfreq(resolution, 1.0 / static_cast<double>(resolution), dtype) * scale), 1) +
                             k_last;
  const double s = effective_sigma();
  Tensor lambda = s * s * pow(k2 + tau * tau, -alpha);
  // The mean mode is dropped: the fields have mean zero, as in the FNO data.
  return where(eq(k2, zeros_like(k2)), zeros_like(lambda), lambda);
}

Tensor GaussianRandomField::sample(int64_t count, Generator& generator, DType dtype) const {
  check(*this);
  EDDY_CHECK(count >= 0, "GaussianRandomField::sample: count must be non-negative, got ", count);
  Shape shape{count};
  for (int64_t d = 0; d < dim; ++d) shape.push_back(resolution);
  const std::vector<int64_t> axes = dim == 1 ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 2};
  const std::vector<int64_t> sizes(dim, resolution);
  // White noise with unit variance per point has E|xi_k|^2 = N (points) in every DFT mode, and
  // the inverse DFT divides by N; so filtering by sqrt(N lambda_k) gives each point the variance
  // sum_k lambda_k, that of the continuous field truncated to the grid's modes.
  const double points = std::pow(static_cast<double>(resolution), static_cast<double>(dim));
  Tensor noise = randn(shape, dtype, &generator);
  Tensor filter = sqrt(eigenvalues(dtype) * points);
  return fft::irfftn(fft::rfftn(noise, {}, axes) * filter, sizes, axes);
}

}  // namespace eddy::classical
