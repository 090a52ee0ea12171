#pragma once
// Where the residual is large, train on more points. Two methods, each run every `every` Adam
// steps on every interior condition, from fresh candidate points drawn with the problem's sampler
// from a stream fixed by (seed, step, condition), so a resumed run draws the same ones:
//
// - Residual-based adaptive refinement (RAR; Lu, Meng, Mao & Karniadakis, "DeepXDE: a deep
//   learning library for solving differential equations", SIAM Review 2021), sampling.rar: the
//   `add` candidates with the largest |residual| join the condition's points for the rest of
//   training (resampling redraws only the original ones).
// - Residual-based adaptive distribution (RAD; Wu, Zhu, Tan, Kartha & Lu, "A comprehensive study
//   of non-adaptive and residual-based adaptive sampling for physics-informed neural networks",
//   CMAME 403, 2023), sampling.rad: the condition's points are replaced by as many candidates,
//   drawn with probability proportional to |residual|^k / mean(|residual|^k) + c.

#include <cstdint>
#include <vector>

#include "eddy/core/tensor.h"
#include "solvers/pinn/problem.h"

namespace eddy::pinn {

class PinnState;

// The candidate points of an interior condition after Adam step `step`, drawn with the problem's
// sampler from a generator fixed by (seed, step, condition): the same in a resumed run.
Tensor refinement_candidates(const PinnState& state, size_t condition, int64_t step);

// Adds to each interior condition the `add` candidates with the largest |residual|.
void refine(PinnState& state, int64_t step);

// RAD's draw: `count` distinct indices of the candidates whose |residual| are `sizes`, drawn one
// after another, each with probability proportional to its density
//   |r|^k / mean(|r|^k) + c
// among those not yet drawn (the mean over all candidates; the first term is 0 when every
// residual is 0). A candidate whose residual is not finite has density 0 and counts 0 in the
// mean: training should not be fed a point it cannot evaluate. Uniforms come from `generator`.
std::vector<int64_t> rad_draw(const std::vector<double>& sizes, int64_t count, const RadOptions& options,
                              Generator& generator);

// Replaces each interior condition's points by RAD's draw from fresh candidates.
void redistribute(PinnState& state, int64_t step);

}  // namespace eddy::pinn
