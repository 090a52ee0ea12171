#pragma once
// 2-D incompressible Navier-Stokes in vorticity form on the unit torus [0, 1)^2,
//   w_t + u . grad w = nu Laplacian w + f,   u = (psi_y, -psi_x),   -Laplacian psi = w,
// the set-up of the Navier-Stokes data of the Fourier neural operator paper (Li et al., ICLR 2021,
// and their ns_2d.py): Fourier pseudo-spectral, 2/3-rule dealiasing of the advection, Crank-
// Nicolson for the diffusion. Their advection is explicit Euler, which makes the scheme first
// order; here it is Heun's method (an Euler predictor, then the trapezoid rule), which makes it
// second order: each step is
//   w* = [(1 - h nu Lap / 2) w + h (N(w) + f)] / (1 + h nu Lap / 2)        (Lap: -Laplacian's symbol)
//   w' = [(1 - h nu Lap / 2) w + h ((N(w) + N(w*)) / 2 + f)] / (1 + h nu Lap / 2)
// with N(w) = -u . grad w. Written in eddy ops, so a rollout is differentiable with respect to the
// initial vorticity, nu and the forcing.
//
// Grids: w[..., i, j] is the vorticity at (x, y) = (i / n, j / n).
//
// On several ranks (a communicator given), the grid is cut in slabs along x (dist::rfft2,
// eddy/dist/distributed_fft.h): every field the solver takes or returns, the forcing included, is
// this rank's rows [slab_rows().start, slab_rows().stop()) of axis -2, and the transforms are the
// distributed ones. Everything else in a step is pointwise over the rows, so each rank's result is
// its rows of the one-process result. Gradients follow the SPMD convention of dist/collectives.h:
// a rank's gradient with respect to nu is its share, to be summed over ranks.

#include <cstdint>
#include <vector>

#include "eddy/core/tensor.h"
#include "eddy/dist/distributed_fft.h"
#include "solvers/classical/rollout.h"

namespace eddy::classical {

class NavierStokes2d {
 public:
  // nu: a finite, non-negative one-element float32 or float64 tensor, whose dtype is the solver's; forcing:
  // [n, n] in that dtype, or this rank's rows of it with a communicator (it may require
  // gradients, as may nu). With a communicator (which must outlive the solver) the solver works
  // on slabs, collectively: every rank constructs it and calls it in the same order.
  NavierStokes2d(int64_t resolution, double dt, const Tensor& nu, const Tensor& forcing,
                 dist::Communicator* communicator = nullptr);

  // The forcing of the FNO data, 0.1 (sin(2 pi (x + y)) + cos(2 pi (x + y))).
  static Tensor fno_forcing(int64_t resolution, DType dtype = DType::f64);

  int64_t resolution() const { return n_; }
  double dt() const { return dt_; }
  DType dtype() const { return dtype_; }
  // The rows of axis -2 this rank's fields hold: all n of them without a communicator.
  const dist::SlabRows& slab_rows() const { return rows_; }

  // Everything step() reads: the Crank-Nicolson factors (1 - h nu Lap / 2) and 1 / (1 + h nu Lap
  // / 2) and the forcing's spectrum times h, then the grid's operators (the 2/3 rule's mask, the
  // derivatives, the velocity from the vorticity). Passed to step(), so that checkpointed rollouts
  // reach nu and the forcing and hold no tensor of their own (built inside a compiled function,
  // such a tensor would have no values when the program reruns a segment).
  const std::vector<Tensor>& params() const { return params_; }
  const CoefficientSources& sources() const { return sources_; }
  // One step of the vorticity's half spectrum [..., rows, n / 2 + 1].
  Tensor step(const Tensor& w_hat, const std::vector<Tensor>& params) const;

  Tensor to_spectral(const Tensor& w) const;
  Tensor to_physical(const Tensor& w_hat) const;
  // The velocity (u, v) of a vorticity field [..., rows, n].
  std::pair<Tensor, Tensor> velocity(const Tensor& w) const;
  // w after each of record_steps ([..., rows, n] each) from w0 [..., rows, n]; see rollout() for
  // checkpoint_every.
  std::vector<Tensor> solve(const Tensor& w0, const std::vector<int64_t>& record_steps,
                            int64_t checkpoint_every = 0) const;

 private:
  // -u . grad w, dealiased, as a half spectrum, with the operators of `params`.
  Tensor advection(const Tensor& w_hat, const std::vector<Tensor>& params) const;
  // The transforms, serial or on slabs, without to_spectral's checks.
  Tensor forward_transform(const Tensor& w) const;

  int64_t n_;
  double dt_;
  DType dtype_;
  dist::Communicator* communicator_;  // null: one process holds the whole grid
  dist::SlabRows rows_;
  std::vector<Tensor> params_;
  CoefficientSources sources_;
};

}  // namespace eddy::classical
