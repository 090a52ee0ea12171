#include "solvers/classical/navier_stokes.h"

#include <cmath>

#include <numbers>

#include "eddy/fft/fft.h"
#include "eddy/ops/ops.h"
#include "solvers/classical/rollout.h"

namespace eddy::classical {
namespace {

// The entries of params().
enum Param : size_t {
  kExplicitPart,     // 1 - h nu Lap / 2
  kImplicitInverse,  // 1 / (1 + h nu Lap / 2)
  kForcing,          // the forcing's spectrum times h
  kMask,             // the modes the 2/3 rule keeps
  kDdx,              // i k_x on the kept modes
  kDdy,              // i k_y on the kept modes
  kVelocityX,        // w_hat -> u_hat: i k_y / |k|^2 on the kept modes
  kVelocityY,        // w_hat -> v_hat: -i k_x / |k|^2 on the kept modes
};

Tensor imaginary(const Tensor& x) { return complex(zeros_like(x), x); }

// 1 where Orszag's 2/3 rule keeps the wavenumber index (3 |k| < n), 0 elsewhere.
Tensor kept_by_two_thirds_rule(const Tensor& index, double n) {
  return cast(lt(abs(index) * 3.0, full_like(index, n)), index.dtype());
}

}  // namespace

NavierStokes2d::NavierStokes2d(int64_t resolution, double dt, const Tensor& nu, const Tensor& forcing,
                               dist::Communicator* communicator)
    : n_(resolution), dt_(dt), dtype_(nu.defined() ? nu.dtype() : DType::f64), communicator_(communicator) {
  EDDY_CHECK(resolution >= 4, "NavierStokes2d: resolution must be at least 4, got ", resolution);
  EDDY_CHECK(std::isfinite(dt) && dt > 0, "NavierStokes2d: dt must be positive and finite, got ", dt);
  EDDY_CHECK(nu.defined() && nu.numel() == 1 && (dtype_ == DType::f32 || dtype_ == DType::f64),
             "NavierStokes2d: nu must be a one-element float32 or float64 tensor");
  sources_ = CoefficientSources("NavierStokes2d", nu, {{"forcing", forcing}});
  rows_ = communicator_ ? dist::slab_rows(n_, n_, *communicator_) : dist::SlabRows{0, n_};
  const std::string slab = communicator_ ? cat(" (rows [", rows_.start, ", ", rows_.stop(), ") on rank ",
                                               communicator_->rank(), ")")
                                         : "";
  EDDY_CHECK(forcing.defined() && forcing.shape() == (Shape{rows_.count, n_}) && forcing.dtype() == dtype_,
             "NavierStokes2d: forcing must be [", rows_.count, ", ", n_, "] ", dtype_, slab, ", got ",
             forcing.defined() ? forcing.shape() : Shape{}, " ", forcing.defined() ? forcing.dtype() : dtype_);
  // Skipped where the forcing's values are unknown (a solver built inside a compiled function):
  // reading them there refused the construction itself.
  const std::optional<double> forcing_size = host_value(sum(abs(forcing.detach())));
  EDDY_CHECK(!forcing_size || std::isfinite(*forcing_size), "NavierStokes2d: the forcing", slab, " has non-finite values");
  const double n = static_cast<double>(n_);
  // The wavenumbers of this rank's rows: the dealiasing mask and the zero mode go by global index.
  const Tensor index_x = unsqueeze(slice(fft::fftfreq(n_, 1.0 / n, dtype_), 0, rows_.start, rows_.stop()), 1);
  const Tensor index_y = fft::rfftfreq(n_, 1.0 / n, dtype_);  // [m]
  const Tensor mask = kept_by_two_thirds_rule(index_x, n) * kept_by_two_thirds_rule(index_y, n);
  const Tensor kx = index_x * (2 * std::numbers::pi), ky = index_y * (2 * std::numbers::pi);
  const Tensor laplacian = square(kx) + square(ky);  // the symbol of -Laplacian, [rows, m]
  // psi_hat = w_hat / |k|^2; the mean mode has no velocity, so any nonzero divisor does there.
  const Tensor inverse_laplacian = 1.0 / where(eq(laplacian, zeros_like(laplacian)), ones_like(laplacian), laplacian);
  const Tensor half_diffusion = reshape(nu, {}) * laplacian * (0.5 * dt);
  params_ = {1.0 - half_diffusion,
             1.0 / (1.0 + half_diffusion),
             forward_transform(forcing) * dt,
             mask,
             imaginary(kx * mask),
             imaginary(ky * mask),
             imaginary(ky * inverse_laplacian * mask),
             imaginary(-kx * inverse_laplacian * mask)};
}

Tensor NavierStokes2d::fno_forcing(int64_t resolution, DType dtype) {
  const Tensor x = arange(0, static_cast<double>(resolution), 1, dtype) / static_cast<double>(resolution);
  const Tensor phase = (unsqueeze(x, 1) + x) * (2 * std::numbers::pi);
  return (sin(phase) + cos(phase)) * 0.1;
}

Tensor NavierStokes2d::forward_transform(const Tensor& w) const {
  return communicator_ ? dist::rfft2(w, n_, *communicator_) : fft::rfft2(w);
}

Tensor NavierStokes2d::to_spectral(const Tensor& w) const {
  EDDY_CHECK(w.dim() >= 2 && w.size(-1) == n_ && w.size(-2) == rows_.count && w.dtype() == dtype_,
             "NavierStokes2d: expected vorticity of shape [..., ", rows_.count, ", ", n_, "] and dtype ", dtype_,
             ", got ", w.shape(), " ", w.dtype());
  return forward_transform(w);
}

Tensor NavierStokes2d::to_physical(const Tensor& w_hat) const {
  return communicator_ ? dist::irfft2(w_hat, n_, n_, *communicator_) : fft::irfft2(w_hat, {n_, n_});
}

std::pair<Tensor, Tensor> NavierStokes2d::velocity(const Tensor& w) const {
  const Tensor w_hat = to_spectral(w);
  return {to_physical(params_[kVelocityX] * w_hat), to_physical(params_[kVelocityY] * w_hat)};
}

Tensor NavierStokes2d::advection(const Tensor& w_hat, const std::vector<Tensor>& params) const {
  const Tensor u = to_physical(params[kVelocityX] * w_hat), v = to_physical(params[kVelocityY] * w_hat);
  const Tensor w_x = to_physical(params[kDdx] * w_hat), w_y = to_physical(params[kDdy] * w_hat);
  return forward_transform(u * w_x + v * w_y) * params[kMask] * -1.0;
}

Tensor NavierStokes2d::step(const Tensor& w_hat, const std::vector<Tensor>& params) const {
  const Tensor &implicit_inverse = params[kImplicitInverse];
  const Tensor base = params[kExplicitPart] * w_hat + params[kForcing];
  const Tensor N = advection(w_hat, params);
  const Tensor predictor = (base + N * dt_) * implicit_inverse;
  return (base + (N + advection(predictor, params)) * (0.5 * dt_)) * implicit_inverse;
}

std::vector<Tensor> NavierStokes2d::solve(const Tensor& w0, const std::vector<int64_t>& record_steps,
                                         int64_t checkpoint_every) const {
  return solve_spectral(*this, w0, record_steps, checkpoint_every);
}

}  // namespace eddy::classical
