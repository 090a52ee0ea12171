#pragma once
/// @file
/// Linear least squares from LAPACK's dgelsd (in the OpenBLAS that eddy links), for fits made
/// once outside autodiff: a PINN's output layer fitted to its initial condition
/// (solvers/pinn). It is not an op; nothing differentiates through it.

#include "eddy/core/tensor.h"

namespace eddy::optim {

/// The minimum-norm X that minimises ||A X - B|| (A [m, n], B [m, k], float32 or float64), as
/// numpy.linalg.lstsq computes it: through the SVD of A, with singular values below
/// max(m, n) * machine epsilon times the largest treated as zero, so a rank-deficient A still has
/// a unique answer. Computed in float64 on one thread (the same bits at every thread count);
/// returned as [n, k] in A's dtype. Throws eddy::Error on mismatched shapes, a non-finite entry,
/// or if LAPACK fails.
Tensor least_squares(const Tensor& a, const Tensor& b);

}  // namespace eddy::optim
