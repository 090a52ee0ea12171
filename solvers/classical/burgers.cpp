#include "solvers/classical/burgers.h"

#include <cmath>

#include <numbers>

#include "eddy/fft/fft.h"
#include "eddy/ops/ops.h"
#include "solvers/classical/rollout.h"

namespace eddy::classical {
namespace {

// Points on the contour of Kassam & Trefethen's coefficients: the upper half of the unit circle
// around each h L. For real h L the lower half gives the complex conjugates, so the real part of
// the mean over the upper half is the mean over the whole circle.
constexpr int64_t kContourPoints = 32;

}  // namespace

Burgers::Burgers(int64_t resolution, double length, double dt, const Tensor& nu)
    : n_(resolution), dt_(dt), dtype_(nu.defined() ? nu.dtype() : DType::f64) {
  EDDY_CHECK(resolution >= 4, "Burgers: resolution must be at least 4, got ", resolution);
  EDDY_CHECK(std::isfinite(length) && length > 0 && std::isfinite(dt) && dt > 0,
             "Burgers: length and dt must be positive and finite, got ", length, " and ", dt);
  EDDY_CHECK(nu.defined() && nu.numel() == 1 && (dtype_ == DType::f32 || dtype_ == DType::f64),
             "Burgers: nu must be a one-element float32 or float64 tensor");
  sources_ = CoefficientSources("Burgers", nu);
  const DType complex_dtype = dtype_ == DType::f64 ? DType::c128 : DType::c64;
  const Tensor index = fft::rfftfreq(n_, 1.0 / static_cast<double>(n_), dtype_);
  // Orszag's 2/3 rule: a product of modes |k| < n / 3 aliases only onto modes it then discards.
  const Tensor mask = cast(lt(index * 3.0, full_like(index, static_cast<double>(n_))), dtype_);
  const Tensor k = index * (2 * std::numbers::pi / length);

  const Tensor hL = reshape(nu, {}) * square(k) * -dt;
  const Tensor angles = (arange(0, kContourPoints, 1, dtype_) + 0.5) * (std::numbers::pi / kContourPoints);
  const Tensor r = complex(cos(angles), sin(angles));
  const Tensor LR = unsqueeze(cast(hL, complex_dtype), 1) + r;  // [modes, contour points]
  const Tensor LR3 = LR * LR * LR;
  const Tensor eLR = exp(LR);
  auto contour_mean = [&](const Tensor& values) { return real(mean(values, {1})) * dt; };
  params_ = {
      exp(hL),
      exp(hL * 0.5),
      contour_mean((exp(LR * 0.5) - 1.0) / LR),
      contour_mean((-4.0 - LR + eLR * (4.0 - 3.0 * LR + LR * LR)) / LR3),
      contour_mean((2.0 + LR + eLR * (LR - 2.0)) / LR3),
      contour_mean((-4.0 - 3.0 * LR - LR * LR + eLR * (4.0 - LR)) / LR3),
      mask,
      complex(zeros_like(k), k * -0.5 * mask),
  };
}

Tensor Burgers::to_spectral(const Tensor& u) const {
  EDDY_CHECK(u.dim() >= 1 && u.size(-1) == n_ && u.dtype() == dtype_, "Burgers: expected u of shape [..., ", n_,
             "] and dtype ", dtype_, ", got ", u.shape(), " ", u.dtype());
  return fft::rfft(u);
}

Tensor Burgers::to_physical(const Tensor& v) const { return fft::irfft(v, n_); }

Tensor Burgers::nonlinear(const Tensor& v, const std::vector<Tensor>& params) const {
  const Tensor &mask = params[6], &derivative = params[7];
  return derivative * fft::rfft(square(fft::irfft(v * mask, n_)));
}

Tensor Burgers::step(const Tensor& v, const std::vector<Tensor>& params) const {
  const Tensor &E = params[0], &E2 = params[1], &Q = params[2], &f1 = params[3], &f2 = params[4], &f3 = params[5];
  const Tensor Nv = nonlinear(v, params);
  const Tensor a = E2 * v + Q * Nv;
  const Tensor Na = nonlinear(a, params);
  const Tensor b = E2 * v + Q * Na;
  const Tensor Nb = nonlinear(b, params);
  const Tensor c = E2 * a + Q * (2.0 * Nb - Nv);
  const Tensor Nc = nonlinear(c, params);
  return E * v + Nv * f1 + 2.0 * (Na + Nb) * f2 + Nc * f3;
}

std::vector<Tensor> Burgers::solve(const Tensor& u0, const std::vector<int64_t>& record_steps,
                                  int64_t checkpoint_every) const {
  return solve_spectral(*this, u0, record_steps, checkpoint_every);
}

}  // namespace eddy::classical
