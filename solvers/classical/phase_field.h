#pragma once
// Phase-field models on the periodic square [0, length)^2, sampled on an n x n grid (Allen-Cahn
// also on the periodic interval [0, length), sampled at n points), stepped by
// first-order semi-implicit Fourier spectral schemes: the stiff linear part implicit (diagonal in
// Fourier space, so "implicit" is a division), the cubic nonlinearity explicit.
//
//   Allen-Cahn     u_t = eps^2 Lap u - (u^3 - u):
//                  u+ = F^-1[ F[u + dt (u - u^3)] / (1 + dt eps^2 |k|^2) ]
//   Cahn-Hilliard  c_t = Lap(c^3 - c - gamma Lap c):
//                  c+ = F^-1[ (F[c] - dt |k|^2 F[c^3 - c]) / (1 + dt gamma |k|^4) ]
//
// Both are gradient flows of the Ginzburg-Landau energy below (kappa = eps^2 or gamma): Allen-Cahn
// in L^2, Cahn-Hilliard in H^-1. The scheme leaves the k = 0 mode of Cahn-Hilliard untouched, so
// mass is conserved to round-off. With the nonlinearity explicit, the energy is guaranteed to
// decrease only for small enough steps: for Allen-Cahn, dt <= 2 / max|3u^2 - 1| (= 1 while
// |u| <= 1; Shen & Yang, DCDS-A 28, 2010). Time accuracy is first order.
//
// Everything is written in eddy ops (FFTs included), so a rollout is differentiable, to any order
// and in both modes, with respect to the initial condition. Leading axes of the field are a batch.

#include <cstdint>

#include "eddy/core/tensor.h"

namespace eddy::classical {

struct AllenCahnOptions {
  double epsilon = 0.05;  // interface width
  double dt = 0.01;
  int64_t steps = 1;
  double length = 1;  // side of the periodic square
  // 2: fields [..., n, n] on the square; 1: fields [..., n] on the interval [0, length), the 1-D
  // problem that PINN benchmarks pose (Raissi et al. 2019), at a resolution a square cannot reach.
  int dimensions = 2;
};

struct CahnHilliardOptions {
  double gamma = 1e-3;  // gradient-energy coefficient (the square of the interface width)
  double dt = 1e-3;
  int64_t steps = 1;
  double length = 1;
};

// The field after options.steps steps from u0: [..., n, n] (or [..., n] for a 1-D Allen-Cahn)
// float32 or float64 (result in the same dtype). Bad shapes or options throw eddy::Error naming
// them.
Tensor allen_cahn(const Tensor& u0, const AllenCahnOptions& options);
Tensor cahn_hilliard(const Tensor& c0, const CahnHilliardOptions& options);

// E(u) = integral of kappa / 2 |grad u|^2 + (u^2 - 1)^2 / 4 over the square, with the gradient
// term computed spectrally; shape [...] (the batch axes of u).
Tensor ginzburg_landau_energy(const Tensor& u, double kappa, double length = 1);

}  // namespace eddy::classical
