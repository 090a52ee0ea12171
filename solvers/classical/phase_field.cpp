// Allen-Cahn and Cahn-Hilliard steppers as compositions of eddy ops (see phase_field.h).

#include "solvers/classical/phase_field.h"

#include <cmath>
#include <numbers>
#include <string_view>

#include "eddy/fft/fft.h"
#include "eddy/ops/ops.h"

namespace eddy::classical {
namespace {

// n, for a field on a grid of `dimensions` (1 or 2) periodic axes of n points each.
int64_t check_field(std::string_view op, const Tensor& u, int dimensions) {
  EDDY_CHECK(u.defined(), op, ": undefined field");
  EDDY_CHECK(u.dtype() == DType::f32 || u.dtype() == DType::f64, op, ": the field must be float32 or float64, got ",
             u.dtype());
  if (dimensions == 1) {
    EDDY_CHECK(u.dim() >= 1 && u.size(-1) >= 2, op,
               ": with dimensions 1 the field must be [..., n] with n >= 2, got shape ", u.shape());
  } else {
    EDDY_CHECK(u.dim() >= 2 && u.size(-1) == u.size(-2) && u.size(-1) >= 2, op,
               ": the field must be a square [..., n, n] grid with n >= 2, got shape ", u.shape());
  }
  return u.size(-1);
}

void check_positive(std::string_view op, std::string_view name, double value) {
  EDDY_CHECK(value > 0 && std::isfinite(value), op, ": ", name, " must be positive and finite, got ",
             value);
}

// The checks both steppers share; returns n.
int64_t check_stepper(std::string_view op, const Tensor& u, int dimensions, std::string_view coefficient_name,
                      double coefficient, double dt, double length, int64_t steps) {
  EDDY_CHECK(dimensions == 1 || dimensions == 2, op, ": dimensions must be 1 or 2, got ", dimensions);
  const int64_t n = check_field(op, u, dimensions);
  check_positive(op, coefficient_name, coefficient);
  check_positive(op, "dt", dt);
  check_positive(op, "length", length);
  EDDY_CHECK(steps >= 0, op, ": steps must be >= 0, got ", steps);
  return n;
}

// |k|^2 on the half spectrum (rfft or rfft2 layout) of n points per axis of the interval or square
// of side `length`.
Tensor wavenumber_squared(int64_t n, double length, int dimensions, DType dtype) {
  const double spacing = length / static_cast<double>(n), to_angular = 2 * std::numbers::pi;
  const Tensor last_axis = fft::rfftfreq(n, spacing) * to_angular;
  if (dimensions == 1) return cast(square(last_axis), dtype);
  const Tensor kx = reshape(fft::fftfreq(n, spacing), {n, 1}) * to_angular;
  return cast(square(kx) + square(reshape(last_axis, {1, n / 2 + 1})), dtype);
}

Tensor to_spectrum(const Tensor& u, int dimensions) { return dimensions == 1 ? fft::rfft(u) : fft::rfft2(u); }

Tensor to_grid(const Tensor& spectrum, int64_t n, int dimensions) {
  return dimensions == 1 ? fft::irfft(spectrum, n) : fft::irfft2(spectrum, {n, n});
}

}  // namespace

Tensor allen_cahn(const Tensor& u0, const AllenCahnOptions& options) {
  const int dims = options.dimensions;
  const int64_t n = check_stepper("allen_cahn", u0, dims, "epsilon", options.epsilon, options.dt, options.length,
                                  options.steps);
  const double dt = options.dt;
  const Tensor implicit = 1.0 / (1.0 + dt * options.epsilon * options.epsilon *
                                           wavenumber_squared(n, options.length, dims, u0.dtype()));
  Tensor u = u0;
  for (int64_t step = 0; step < options.steps; ++step) {
    u = to_grid(to_spectrum(u + dt * (u - u * u * u), dims) * implicit, n, dims);
  }
  return u;
}

Tensor cahn_hilliard(const Tensor& c0, const CahnHilliardOptions& options) {
  const int64_t n =
      check_stepper("cahn_hilliard", c0, 2, "gamma", options.gamma, options.dt, options.length, options.steps);
  const double dt = options.dt;
  const Tensor k2 = wavenumber_squared(n, options.length, 2, c0.dtype());
  const Tensor implicit = 1.0 / (1.0 + dt * options.gamma * square(k2));
  Tensor c = c0;
  for (int64_t step = 0; step < options.steps; ++step) {
    c = to_grid((fft::rfft2(c) - dt * k2 * fft::rfft2(c * c * c - c)) * implicit, n, 2);
  }
  return c;
}

Tensor ginzburg_landau_energy(const Tensor& u, double kappa, double length) {
  const int64_t n = check_field("ginzburg_landau_energy", u, 2);
  EDDY_CHECK(kappa >= 0 && std::isfinite(kappa),
             "ginzburg_landau_energy: kappa must be >= 0 and finite, got ", kappa);
  check_positive("ginzburg_landau_energy", "length", length);
  // The integral of |grad u|^2 is that of u (-Lap u), which needs one transform pair.
  const Tensor minus_laplacian = to_grid(fft::rfft2(u) * wavenumber_squared(n, length, 2, u.dtype()), n, 2);
  const Tensor density = 0.5 * kappa * u * minus_laplacian + 0.25 * square(u * u - 1.0);
  const double cell_area = (length / static_cast<double>(n)) * (length / static_cast<double>(n));
  return cell_area * sum(density, {-2, -1});
}

}  // namespace eddy::classical
