#pragma once
// Gaussian random fields on periodic grids, the input distribution of the Fourier neural operator
// datasets (Li et al., "Fourier Neural Operator for Parametric Partial Differential Equations",
// ICLR 2021, and GaussianRF in their random_fields.py): mean zero, covariance operator
//   C = sigma^2 (-Laplacian + tau^2 I)^(-alpha)
// on the periodic box [0, length)^dim. Their Navier-Stokes initial vorticity uses alpha = 2.5,
// tau = 7; their Burgers initial data alpha = 2, tau = 5, sigma = 25.

#include <cstdint>

#include "eddy/core/rng.h"
#include "eddy/core/tensor.h"

namespace eddy::classical {

struct GaussianRandomField {
  int64_t dim = 2;          // 1 or 2
  int64_t resolution = 64;  // n points per side, at x_i = i * length / n
  double length = 1;
  double alpha = 2.5;
  double tau = 7;
  // 0 means tau^(alpha - dim / 2), the FNO code's default, which keeps the field's variance of
  // order one whatever tau is.
  double sigma = 0;

  double effective_sigma() const;
  // The covariance's eigenvalue for each mode of the real FFT layout ([m] or [n, m] with
  // m = n / 2 + 1): sigma^2 ((2 pi |k| / length)^2 + tau^2)^(-alpha), and 0 for the mean.
  Tensor eigenvalues(DType dtype = DType::f64) const;
  // `count` independent samples, [count, n] or [count, n, n]: white noise drawn from `generator`
  // (so the same seed gives the same fields) filtered by the square root of the covariance.
  Tensor sample(int64_t count, Generator& generator, DType dtype = DType::f64) const;
};

}  // namespace eddy::classical
