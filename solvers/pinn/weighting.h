#pragma once
// How the conditions' losses are weighted during training, beyond the configured fixed weights:
//
// - Learning-rate annealing by gradient norms, in the norm-based form of Wang, Wang, Wang &
//   Perdikaris, "An expert's guide to training physics-informed neural networks" (2023), after
//   Wang, Teng & Perdikaris, "Understanding and mitigating gradient pathologies in
//   physics-informed neural networks" (2021): each condition's adaptive factor moves towards
//   lambda_i_hat = sum_j ||grad L_j|| / ||grad L_i||, so that every weighted loss pulls on the
//   network weights as hard as the others.
// - Causal weighting in time (Wang, Sankaran & Perdikaris, "Respecting causality is all you need
//   for training physics-informed neural networks", 2022): an interior residual at later times
//   counts only once the residual at earlier times is small.

#include <vector>

#include "eddy/core/tensor.h"
#include "solvers/pinn/problem.h"

namespace eddy::pinn {

class PinnState;

// One grad_norm update of the state's adaptive factors: lambda_i <- alpha lambda_i + (1 - alpha)
// lambda_i_hat, with the gradients of the unweighted condition losses taken with respect to the
// network weights (not learnable equation parameters) at the current points of all ranks. A
// condition whose loss has no gradient keeps its factor.
void update_adaptive_weights(PinnState& state);

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
