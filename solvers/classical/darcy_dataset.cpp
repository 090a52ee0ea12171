// Darcy datasets: FFT-sampled Gaussian random fields, thresholded, solved and written to HDF5.

#include "solvers/classical/darcy_dataset.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "eddy/autodiff/tape.h"
#include "eddy/fft/fft.h"
#include "eddy/io/hdf5.h"
#include "eddy/ops/ops.h"
#include "solvers/classical/darcy.h"

namespace eddy::classical {
namespace {

void check_options(const DarcyDatasetOptions& o) {
  EDDY_CHECK(o.resolution >= 3, "DarcyDatasetOptions: resolution must be >= 3, got ", o.resolution);
  EDDY_CHECK(o.samples >= 1, "DarcyDatasetOptions: samples must be >= 1, got ", o.samples);
  EDDY_CHECK(o.a_low > 0 && o.a_high > 0 && std::isfinite(o.a_low) && std::isfinite(o.a_high),
             "DarcyDatasetOptions: a_low and a_high must be positive and finite, got ", o.a_low,
             " and ", o.a_high);
  EDDY_CHECK(o.alpha > 1, "DarcyDatasetOptions: alpha must be > 1 for a field of finite variance, got ",
             o.alpha);
  EDDY_CHECK(o.tau > 0, "DarcyDatasetOptions: tau must be positive, got ", o.tau);
  EDDY_CHECK(std::isfinite(o.forcing), "DarcyDatasetOptions: forcing must be finite, got ", o.forcing);
}

}  // namespace

Tensor sample_gaussian_random_field(const DarcyDatasetOptions& options, Generator& generator) {
  check_options(options);
  const int64_t n = options.resolution, m = 2 * (n - 1);
  const double h = 1.0 / static_cast<double>(n - 1);
  // Wavenumbers in cycles per unit length, on the half spectrum of the side-2 periodic square.
  const Tensor kx = reshape(fft::fftfreq(m, h), {m, 1});
  const Tensor ky = reshape(fft::rfftfreq(m, h), {1, m / 2 + 1});
  const Tensor k_squared = 4 * std::numbers::pi * std::numbers::pi * (square(kx) + square(ky));
  const Tensor c = std::pow(options.tau, options.alpha - 1) *
                   pow(k_squared + options.tau * options.tau, -options.alpha / 2);
  const Tensor c_mean_free = where(gt(k_squared, zeros_like(k_squared)), c, zeros_like(c));
  // The orthonormal rfft2 turns real white noise into the unit complex normals xi_k, with the
  // Hermitian symmetry of a real field; the unscaled inverse ("forward" norm) sums the series.
  const Tensor xi = fft::rfft2(randn({m, m}, DType::f64, &generator), {}, {-2, -1}, "ortho");
  const Tensor field = fft::irfft2(c_mean_free * xi, {m, m}, {-2, -1}, "forward");
  return contiguous(slice(slice(field, 0, 0, n), 1, 0, n));
}

Tensor sample_darcy_coefficient(const DarcyDatasetOptions& options, Generator& generator) {
  const Tensor field = sample_gaussian_random_field(options, generator);
  return where(ge(field, zeros_like(field)), full_like(field, options.a_high),
               full_like(field, options.a_low));
}

void write_darcy_dataset(const DarcyDatasetOptions& options, const std::string& path) {
  check_options(options);
  NoGradGuard no_grad;
  const int64_t n = options.resolution;
  const Tensor f = full({n, n}, options.forcing, DType::f64);
  Generator generator(options.seed);
  std::vector<Tensor> a, u;
  for (int64_t k = 0; k < options.samples; ++k) {
    a.push_back(sample_darcy_coefficient(options, generator));
    u.push_back(darcy_solve(a.back(), f));
  }
  io::Hdf5Writer writer(path);
  writer.write("a", stack(a));
  writer.write("u", stack(u));
  writer.set_attribute("/", "resolution", static_cast<double>(n));
  writer.set_attribute("/", "samples", static_cast<double>(options.samples));
  writer.set_attribute("/", "seed", static_cast<double>(options.seed));
  writer.set_attribute("/", "a_high", options.a_high);
  writer.set_attribute("/", "a_low", options.a_low);
  writer.set_attribute("/", "alpha", options.alpha);
  writer.set_attribute("/", "tau", options.tau);
  writer.set_attribute("/", "forcing", options.forcing);
  writer.set_attribute("/", "face_average", "harmonic");
  writer.set_attribute("/", "equation",
                       "-div(a grad u) = f on [0, 1]^2, u = 0 on the boundary; a[k, i, j] at (x, y) = "
                       "(i, j) / (resolution - 1)");
  writer.commit();
}

}  // namespace eddy::classical
