#pragma once
// Steady 2-D Darcy flow, -div(a grad u) = f on the unit square with u = 0 on the boundary: the
// Darcy benchmark of the Fourier neural operator paper (Li et al., ICLR 2021), solved by a
// conservative 5-point finite-volume scheme and a sparse Cholesky (LDL^T) factorisation.
//
// Grids: a, f and u are [n, n] node values, boundary included, with a[i, j] the value at
// (x, y) = (i h, j h), h = 1 / (n - 1) (NumPy's meshgrid indexing "ij"). Each node owns the
// square control volume of side h around it, on which a is constant; the flux through the face
// between two nodes uses the harmonic mean 2 a_p a_q / (a_p + a_q) of their coefficients, which
// is the exact conductivity of the two half-cells in series. With an arithmetic mean the flux
// across a 3-to-12 jump would be overestimated by a factor (7.5 / 4.8) ~ 1.6. For smooth a both
// means are second-order accurate (docs/classical_darcy_phase_field.md).
//
// darcy_solve is an eddy primitive, differentiable to any order in both modes, with rules written
// in eddy ops that call darcy_solve again:
//   JVP: A du = df - (dA/da . da) u,
//   VJP: A lambda = g (A is symmetric), df-bar = lambda, da-bar = -lambda^T (dA/da) u,
// so a gradient costs one more solve with the same matrix. The factorisation of the last
// coefficient seen is cached (per thread) and reused when a solve sees the same values again,
// which is the case for the adjoint solve of a backward pass.

#include "eddy/core/tensor.h"

namespace eddy::classical {

// u for coefficient a > 0 and source f, both [n, n] with n >= 3; values of f on boundary nodes
// are ignored (u is 0 there, and their gradient is 0). Computed in float64: float32 inputs are
// cast up and the result cast back to float32, so they are accepted without a float32 solver.
// Throws eddy::Error naming the shape or the offending value for bad input.
Tensor darcy_solve(const Tensor& a, const Tensor& f);

// The discrete operator darcy_solve inverts, -div(a grad u), at the interior nodes of u
// (0 on the boundary nodes): darcy_operator(a, darcy_solve(a, f)) == f inside. In eddy ops.
Tensor darcy_operator(const Tensor& a, const Tensor& u);

}  // namespace eddy::classical
