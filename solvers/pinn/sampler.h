#pragma once
// Point sets in the unit hypercube [0, 1)^dim, from which geometries draw collocation points.
// Every sampler is driven by an eddy Generator, so the same (seed, offset) gives the same points.

#include <cstdint>
#include <string>
#include <vector>

#include "eddy/core/rng.h"

namespace eddy::pinn {

enum class SamplerKind {
  uniform,          // independent uniform points (Philox)
  latin_hypercube,  // one point per stratum [k/n, (k+1)/n) per dimension, strata randomly paired
  sobol,            // Sobol' sequence (Boost.Random, Joe-Kuo directions), at most 3667 dimensions
  halton,           // radical inverses in the first `dim` prime bases
};

// A sampler is a kind plus whether the low-discrepancy sequences are randomised.
//
// How the generator is used:
// - uniform and latin_hypercube consume fresh counters on every call, so each call is a new,
//   independent draw (a Latin hypercube is stratified within one call).
// - sobol and halton use the generator's offset as the position in the sequence (a call for n
//   points advances it by n), so successive calls continue one sequence. Both skip the all-zero
//   first point: unrandomised Sobol' starts (0.5, 0.5), (0.75, 0.25), (0.25, 0.75), ... and
//   unrandomised Halton starts (1/2, 1/3), (1/4, 2/3), (3/4, 1/9), ...
//   When `randomized`, the seed picks a random digital shift (Sobol', an XOR that keeps its net
//   structure) or a random rotation modulo 1 (Halton), so different seeds give different points.
struct Sampler {
  SamplerKind kind = SamplerKind::uniform;
  bool randomized = true;

  // "uniform", "latin_hypercube" (or "lhs"), "sobol", "halton"; `path` names the config key in
  // the error for an unknown name.
  static Sampler from_name(const std::string& name, const std::string& path = "sampler");
  static const std::vector<std::string>& names();
  std::string name() const;

  // `count` points, row-major [count, dim], every coordinate in [0, 1).
  std::vector<double> unit_points(int64_t count, int64_t dim, Generator& generator) const;
};

// Splits `count` into parts proportional to `weights`. Each part is its exact share rounded down
// or up, with the ups drawn at random so that every part is right on average: a deterministic
// rounding would starve a small face in every one of many small batches.
std::vector<int64_t> split_by_measure(int64_t count, const std::vector<double>& weights,
                                      Generator& generator);

// `keep` of the indices 0..available-1, each subset equally likely, in increasing order.
std::vector<int64_t> random_subset(int64_t available, int64_t keep, Generator& generator);

// `keep` (at most `available`) of the indices 0..available-1, in increasing order: one drawn at
// random from each of `keep` equal stretches of the range (stratified sampling). A run of indices
// keeps its share of the subset to within one (of a batch drawn face by face, every face keeps its
// share of the points), and within a stretch the draw is random: one offset for every stretch
// (systematic sampling) kept the indices of one residue, which in a Sobol or Halton sequence's
// order are points of one part of the face.
std::vector<int64_t> spread_subset(int64_t available, int64_t keep, Generator& generator);

// The generator of a draw made at step (or resampling round) `step` for one condition: the
// collocation points, refinement's candidates, the NTK's points. Fixed by (seed, step, condition)
// so that a resumed run and every rank draw alike; `salt` keeps each kind of draw apart from the
// others, whose step numbers could coincide.
Generator step_stream(uint64_t seed, uint64_t salt, int64_t step, size_t condition);

// Resampling's salt: 0, which keeps the streams its points were drawn from before step_stream.
inline constexpr uint64_t kResamplingSalt = 0;

}  // namespace eddy::pinn
