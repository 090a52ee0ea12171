#pragma once
/// @file
/// Gradient clipping by global norm.

#include <vector>

#include "eddy/core/tensor.h"

namespace eddy::optim {

/// Rescales the gradients of `parameters` so that their joint 2-norm is at most `max_norm`.
///
/// The total norm is N = sqrt(sum over parameters with a defined `.grad()` of sum(g^2)),
/// accumulated in float64. When max_norm / (N + 1e-6) < 1, every such gradient is replaced by
/// g * max_norm / (N + 1e-6) (torch.nn.utils.clip_grad_norm_'s factor, so the result sits just
/// below max_norm); otherwise nothing changes. When N is not finite the gradients are left
/// untouched, so that the caller can see the problem instead of finding zeros or NaNs.
///
/// Gradients are replaced, not written in place (a gradient may be a broadcast view shared with
/// other tensors): a handle to an old `.grad()` still sees the unclipped values.
///
/// @param max_norm finite and > 0, otherwise eddy::Error.
/// @return N, the total norm before clipping (inf or NaN if some gradient entry is).
double clip_grad_norm(const std::vector<Tensor>& parameters, double max_norm);

/// What clip_grad_norm multiplies the gradients by when their total norm is `total_norm`:
/// min(1, max_norm / (total_norm + 1e-6)), and 1 when it is not finite. For gradients held
/// elsewhere than in `.grad()` (dist::clip_reduced_grad_norm). `max_norm` as above.
double clip_factor(double total_norm, double max_norm);

}  // namespace eddy::optim
