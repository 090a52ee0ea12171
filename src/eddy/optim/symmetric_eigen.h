#pragma once
/// @file
/// The symmetric eigendecomposition that SOAP refreshes its bases with, from LAPACK's dsyevd
/// (which the OpenBLAS that eddy links ships). It is not an op: nothing differentiates through it,
/// and only optimisers use it, outside autodiff, on small matrices.

#include <optional>

#include "eddy/core/tensor.h"

namespace eddy::optim {

/// The eigenvectors of the symmetric matrix `a` ([n, n], float32 or float64; only its upper
/// triangle is read), as the columns of an [n, n] tensor of a's dtype, in ascending order of
/// their eigenvalues. Computed in float64. Returns nothing when `a` has an inf or NaN entry;
/// throws eddy::Error on a wrong shape or if LAPACK fails.
std::optional<Tensor> symmetric_eigenvectors(const Tensor& a);

}  // namespace eddy::optim
