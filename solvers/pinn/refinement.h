#pragma once
// Residual-based adaptive refinement (RAR; Lu, Meng, Mao & Karniadakis, "DeepXDE: a deep learning
// library for solving differential equations", SIAM Review 2021): where the residual is largest,
// train on more points. Every sampling.rar.every Adam steps, each interior condition's residual
// is evaluated at `candidates` fresh points and the `add` points with the largest |residual| join
// that condition's points for the rest of training (resampling redraws only the original ones).

#include <cstdint>

#include "eddy/core/tensor.h"

namespace eddy::pinn {

class PinnState;

// The candidate points of an interior condition after Adam step `step`, drawn with the problem's
// sampler from a generator fixed by (seed, step, condition): the same in a resumed run.
Tensor refinement_candidates(const PinnState& state, size_t condition, int64_t step);

// Adds to each interior condition the `add` candidates with the largest |residual|.
void refine(PinnState& state, int64_t step);

}  // namespace eddy::pinn
