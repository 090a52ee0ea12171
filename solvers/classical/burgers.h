#pragma once
// 1-D viscous Burgers' equation u_t + u u_x = nu u_xx on the periodic interval [0, length):
// Fourier pseudo-spectral in space with the 2/3 rule, exponential time differencing RK4 in time
// (ETDRK4, Cox & Matthews, J. Comput. Phys. 176, 2002) with the contour-integral coefficients of
// Kassam & Trefethen (SIAM J. Sci. Comput. 26, 2005). The stiff diffusion is integrated exactly,
// so the step is limited by the advection only, and the scheme is fourth order in time.
//
// Everything is written in eddy ops: a rollout is differentiable, to any order, with respect to
// the initial condition and to nu (through the ETDRK4 coefficients).

#include <cstdint>
#include <vector>

#include "eddy/core/tensor.h"
#include "solvers/classical/rollout.h"

namespace eddy::classical {

class Burgers {
 public:
  // nu: a finite, non-negative 0-d float32 or float64 tensor (it may require gradients); its dtype is the
  // solver's. resolution: n points x_i = i * length / n.
  Burgers(int64_t resolution, double length, double dt, const Tensor& nu);

  int64_t resolution() const { return n_; }
  double dt() const { return dt_; }
  DType dtype() const { return dtype_; }

  // Everything step() reads: the ETDRK4 coefficients exp(h L), exp(h L / 2), Q, f1, f2, f3 per
  // mode (functions of nu), then the 2/3 rule's mask and -i k / 2 on the kept modes. Passed to
  // step(), so that checkpointed rollouts reach nu and hold no tensor of their own (built inside
  // a compiled function, such a tensor would have no values when the program reruns a segment).
  const std::vector<Tensor>& params() const { return params_; }
  const CoefficientSources& sources() const { return sources_; }
  // One step of the half spectrum v [..., n / 2 + 1].
  Tensor step(const Tensor& v, const std::vector<Tensor>& params) const;

  Tensor to_spectral(const Tensor& u) const;
  Tensor to_physical(const Tensor& v) const;
  // u after each of record_steps ([..., n] each) from u0 [..., n] in the solver's dtype; see
  // rollout() for checkpoint_every.
  std::vector<Tensor> solve(const Tensor& u0, const std::vector<int64_t>& record_steps,
                            int64_t checkpoint_every = 0) const;

 private:
  // -(1/2) d/dx of u^2, dealiased, as a half spectrum, with the mask and derivative of `params`.
  Tensor nonlinear(const Tensor& v, const std::vector<Tensor>& params) const;

  int64_t n_;
  double dt_;
  DType dtype_;
  std::vector<Tensor> params_;
  CoefficientSources sources_;
};

}  // namespace eddy::classical
