#pragma once
// How the conditions' losses are weighted during training, beyond the configured fixed weights:
//
// - Learning-rate annealing by gradient norms, in the norm-based form of Wang, Wang, Wang &
//   Perdikaris, "An expert's guide to training physics-informed neural networks" (2023), after
//   Wang, Teng & Perdikaris, "Understanding and mitigating gradient pathologies in
//   physics-informed neural networks" (2021): each condition's adaptive factor moves towards
//   lambda_i_hat = sum_j ||grad L_j|| / ||grad L_i||, so that every weighted loss pulls on the
//   network weights as hard as the others.
// - NTK weighting (Wang, Yu & Perdikaris, "When and why PINNs fail to train: a neural tangent
//   kernel perspective", J. Comput. Phys. 449, 2022), in the trace form of the same expert's
//   guide: lambda_i_hat = sum_j tr(K_j) / tr(K_i), with K_i the kernel of condition i's residual,
//   so that every condition's residual decays at the same average rate under gradient flow.
// - Causal weighting in time (Wang, Sankaran & Perdikaris, "Respecting causality is all you need
//   for training physics-informed neural networks", 2022): an interior residual at later times
//   counts only once the residual at earlier times is small.

#include <vector>

#include "eddy/core/tensor.h"
#include "solvers/pinn/problem.h"

namespace eddy::pinn {

class PinnState;

// One update of the state's adaptive factors after Adam step `step`, by the problem's scheme
// (grad_norm or ntk): lambda_i <- alpha lambda_i + (1 - alpha) lambda_i_hat, with derivatives
// taken with respect to the network weights (not learnable equation parameters) at the current
// points of all ranks. A condition whose gradient or kernel is zero keeps its factor.
void update_adaptive_weights(PinnState& state, int64_t step);

// Each condition's tr(K_i) as the ntk scheme takes it after Adam step `step`: the mean over the
// entries r of its residual at `ntk_points` of its current points of ||d r / d network weights||^2,
// the points a random subset fixed by (seed, step, condition). A mean rather than the sum over
// the points of the paper's Algorithm 1 (the authors' jaxpi code takes the mean too), since each
// condition's loss is a mean: in gradient flow its residual moves with the kernel K_i / N_i, and
// the factors do not then depend on how many points a condition has.
std::vector<double> ntk_traces(PinnState& state, int64_t step);

// The causal loss of one interior condition from the means L_k [M] of its squared residual over
// M consecutive blocks of its points sorted by time:
//   (1/M) sum_k w_k L_k,  w_k = exp(-epsilon sum_{j<k} L_j),
// with the w_k constants (no gradient flows through them), returned as `weights` [M]. The w_k
// are computed with tensor ops, not on the host, so that a compiled training step holds them.
struct CausalLoss {
  Tensor loss;
  Tensor weights;
};
CausalLoss causal_loss(const Tensor& chunk_losses, const CausalOptions& options);

}  // namespace eddy::pinn
