// The Gaussian random field sampler: reproducible per seed, mean zero, and with the variance and
// spectrum its covariance operator prescribes.

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "eddy/eddy.h"
#include "eddy/fft/fft.h"
#include "solvers/classical/grf.h"
#include "support/expect_error.h"

namespace eddy::classical {
namespace {

// sum over all wavenumbers k != 0 of the grid of sigma^2 ((2 pi |k| / L)^2 + tau^2)^(-alpha),
// written out independently of GaussianRandomField::eigenvalues.
double expected_variance(const GaussianRandomField& field) {
  const int64_t n = field.resolution;
  const double s = field.effective_sigma(), c = 2 * std::numbers::pi / field.length;
  auto wavenumber = [n](int64_t i) { return static_cast<double>(2 * i < n ? i : i - n); };
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < (field.dim == 2 ? n : 1); ++j) {
      const double kx = wavenumber(i), ky = field.dim == 2 ? wavenumber(j) : 0;
      if (kx == 0 && ky == 0) continue;
      total += s * s * std::pow(c * c * (kx * kx + ky * ky) + field.tau * field.tau, -field.alpha);
    }
  }
  return total;
}

TEST(GaussianRandomField, SameSeedSameFieldsOtherSeedOtherFields) {
  GaussianRandomField field;
  field.resolution = 16;
  Generator a(7), b(7), c(8);
  Tensor first = field.sample(3, a), again = field.sample(3, b), other = field.sample(3, c);
  EXPECT_EQ(first.shape(), (Shape{3, 16, 16}));
  EXPECT_EQ(first.to_vector<double>(), again.to_vector<double>());
  EXPECT_GT(max(abs(first - other)).item<double>(), 0.1);
  // Successive draws from one generator are independent samples, not repeats.
  EXPECT_GT(max(abs(field.sample(3, a) - first)).item<double>(), 0.1);
}

TEST(GaussianRandomField, TwoDimensionalFieldsHaveTheCovariancesVariance) {
  GaussianRandomField field;  // the FNO Navier-Stokes prior: alpha 2.5, tau 7
  field.resolution = 32;
  Generator generator(1);
  Tensor u = field.sample(400, generator);
  // Every sample has mean zero (the k = 0 mode is dropped).
  EXPECT_LT(max(abs(mean(u, {1, 2}))).item<double>(), 1e-12);
  // 400 samples x 1024 correlated points: the pooled variance is within a few per cent.
  const double variance = mean(square(u)).item<double>(), expected = expected_variance(field);
  EXPECT_NEAR(variance / expected, 1.0, 0.05) << "variance " << variance << ", expected " << expected;
}

// A box of side 2 (as the Darcy data sample it, solvers/classical/darcy_dataset.h) has wavenumbers
// 2 pi k / 2: the variance follows the covariance's spectrum there too.
TEST(GaussianRandomField, FieldsOnALongerBoxHaveTheCovariancesVariance) {
  GaussianRandomField field;
  field.resolution = 32;
  field.length = 2;
  field.alpha = 2;
  field.tau = 3;
  field.sigma = 3;  // tau^(alpha - 1): the Darcy prior
  Generator generator(2);
  Tensor u = field.sample(400, generator);
  const double variance = mean(square(u)).item<double>(), expected = expected_variance(field);
  RecordProperty("variance_ratio", cat(variance / expected));
  EXPECT_NEAR(variance / expected, 1.0, 0.05) << "variance " << variance << ", expected " << expected;
}

TEST(GaussianRandomField, OneDimensionalSpectrumDecaysAsTheCovariance) {
  GaussianRandomField field;
  field.dim = 1;
  field.resolution = 64;
  field.alpha = 2;
  field.tau = 5;
  field.sigma = 25;  // the FNO Burgers prior, 625 (-Laplacian + 25)^(-2)
  Generator generator(3);
  Tensor u = field.sample(2000, generator);
  EXPECT_EQ(u.shape(), (Shape{2000, 64}));
  EXPECT_NEAR(mean(square(u)).item<double>() / expected_variance(field), 1.0, 0.05);
  // Each DFT mode of the samples has E |u_hat_k|^2 = N^2 lambda_k.
  Tensor power = mean(square(abs(fft::rfft(u))), {0}) / (64.0 * 64.0);
  Tensor lambda = field.eigenvalues();
  for (int64_t k : {1, 4, 16}) {
    const double ratio = power.to_vector<double>()[k] / lambda.to_vector<double>()[k];
    EXPECT_NEAR(ratio, 1.0, 0.1) << "mode " << k;
  }
}

TEST(GaussianRandomField, RejectsBadParameters) {
  GaussianRandomField field;
  field.dim = 3;
  Generator generator(0);
  expect_error([&] { field.sample(1, generator); }, {"GaussianRandomField", "dim must be 1 or 2", "3"});
  field.dim = 2;
  field.tau = -1;
  expect_error([&] { field.sample(1, generator); }, {"tau", "-1"});
}

}  // namespace
}  // namespace eddy::classical
