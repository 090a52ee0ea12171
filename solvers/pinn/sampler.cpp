#include "solvers/pinn/sampler.h"

#include <algorithm>
#include <boost/random/sobol.hpp>
#include <cmath>

#include "eddy/ops/ops.h"

namespace eddy::pinn {
namespace {

constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;
// Rounding may carry a coordinate just below 1 up to 1; clamping keeps the half-open promise.
const double kBelowOne = std::nextafter(1.0, 0.0);
// Tags the Philox key for the per-seed shifts, so they never reuse the counters that the same
// generator hands to rand().
constexpr uint64_t kShiftStreamTag = 0x5a3c9e17b4d2f681ull;

// 64 random bits per dimension, a pure function of the seed.
std::vector<uint64_t> seed_shifts(int64_t dim, uint64_t seed) {
  std::vector<uint64_t> shifts(dim);
  for (int64_t d = 0; d < dim; ++d) {
    const auto words = philox4x32(static_cast<uint64_t>(d), seed ^ kShiftStreamTag);
    shifts[d] = uint64_t{words[0]} << 32 | words[1];
  }
  return shifts;
}

std::vector<double> uniform_draws(int64_t count, Generator& generator) {
  return rand({count}, DType::f64, &generator).to_vector<double>();
}

std::vector<double> latin_hypercube(int64_t count, int64_t dim, Generator& generator) {
  const std::vector<double> draws = uniform_draws(2 * count * dim, generator);
  const double* swap_draws = draws.data();
  const double* jitter = draws.data() + count * dim;
  std::vector<double> points(count * dim);
  std::vector<int64_t> strata(count);
  for (int64_t d = 0; d < dim; ++d) {
    for (int64_t i = 0; i < count; ++i) strata[i] = i;
    for (int64_t i = count - 1; i > 0; --i) {  // Fisher-Yates
      const auto j = static_cast<int64_t>(swap_draws[d * count + i] * static_cast<double>(i + 1));
      std::swap(strata[i], strata[std::min(j, i)]);
    }
    for (int64_t i = 0; i < count; ++i) {
      const double u = (static_cast<double>(strata[i]) + jitter[i * dim + d]) / static_cast<double>(count);
      points[i * dim + d] = std::min(u, kBelowOne);
    }
  }
  return points;
}

std::vector<double> sobol(int64_t count, int64_t dim, uint64_t start, uint64_t seed, bool randomized) {
  constexpr auto kMaxDim = static_cast<int64_t>(boost::random::default_sobol_table::max_dimension);
  EDDY_CHECK(dim <= kMaxDim, "sampler sobol: supports at most ", kMaxDim, " dimensions, got ", dim);
  const std::vector<uint64_t> shifts = randomized ? seed_shifts(dim, seed) : std::vector<uint64_t>(dim, 0);
  boost::random::sobol engine(static_cast<std::size_t>(dim));
  engine.seed(start);
  std::vector<double> points(count * dim);
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t d = 0; d < dim; ++d) {
      const uint64_t bits = static_cast<uint64_t>(engine()) ^ shifts[d];
      points[i * dim + d] = static_cast<double>(bits >> 11) * kTwoToMinus53;
    }
  }
  return points;
}

std::vector<uint64_t> first_primes(int64_t count) {
  std::vector<uint64_t> primes;
  for (uint64_t candidate = 2; static_cast<int64_t>(primes.size()) < count; ++candidate) {
    const bool is_prime = std::none_of(primes.begin(), primes.end(),
                                       [&](uint64_t p) { return p * p <= candidate && candidate % p == 0; });
    if (is_prime) primes.push_back(candidate);
  }
  return primes;
}

double radical_inverse(uint64_t index, uint64_t base) {
  const double inverse_base = 1.0 / static_cast<double>(base);
  double scale = inverse_base, result = 0;
  for (; index > 0; index /= base, scale *= inverse_base) {
    result += static_cast<double>(index % base) * scale;
  }
  return result;
}

std::vector<double> halton(int64_t count, int64_t dim, uint64_t start, uint64_t seed, bool randomized) {
  const std::vector<uint64_t> bases = first_primes(dim);
  std::vector<double> rotations(dim, 0.0);
  if (randomized) {
    const std::vector<uint64_t> shifts = seed_shifts(dim, seed);
    for (int64_t d = 0; d < dim; ++d) rotations[d] = static_cast<double>(shifts[d] >> 11) * kTwoToMinus53;
  }
  std::vector<double> points(count * dim);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t index = start + static_cast<uint64_t>(i) + 1;  // index 0 is the origin
    for (int64_t d = 0; d < dim; ++d) {
      double u = radical_inverse(index, bases[d]) + rotations[d];
      if (u >= 1) u -= 1;
      points[i * dim + d] = std::min(u, kBelowOne);
    }
  }
  return points;
}

}  // namespace

Sampler Sampler::from_name(const std::string& name, const std::string& path) {
  if (name == "uniform") return {SamplerKind::uniform};
  if (name == "latin_hypercube" || name == "lhs") return {SamplerKind::latin_hypercube};
  if (name == "sobol") return {SamplerKind::sobol};
  if (name == "halton") return {SamplerKind::halton};
  throw Error(cat(path, ": unknown sampler '", name,
                  "'; valid samplers are uniform, latin_hypercube (or lhs), sobol, halton"));
}

const std::vector<std::string>& Sampler::names() {
  static const std::vector<std::string> all{"uniform", "latin_hypercube", "sobol", "halton"};
  return all;
}

std::string Sampler::name() const { return names()[static_cast<size_t>(kind)]; }

std::vector<double> Sampler::unit_points(int64_t count, int64_t dim, Generator& generator) const {
  EDDY_CHECK(count >= 0 && dim >= 0, "sampler ", name(), ": count and dim must be non-negative, got ", count,
             " and ", dim);
  if (count == 0 || dim == 0) return {};
  switch (kind) {
    case SamplerKind::uniform:
      return uniform_draws(count * dim, generator);
    case SamplerKind::latin_hypercube:
      return latin_hypercube(count, dim, generator);
    case SamplerKind::sobol:
      return sobol(count, dim, generator.advance(count), generator.seed(), randomized);
    case SamplerKind::halton:
      return halton(count, dim, generator.advance(count), generator.seed(), randomized);
  }
  throw Error("sampler: unhandled kind");
}

std::vector<int64_t> random_subset(int64_t available, int64_t keep, Generator& generator) {
  // Selection sampling (Knuth's algorithm S): row r is kept with probability (still to keep) /
  // (rows left), which gives every subset of size `keep` the same chance.
  const std::vector<double> draws = uniform_draws(available, generator);
  std::vector<int64_t> rows;
  for (int64_t row = 0; row < available && static_cast<int64_t>(rows.size()) < keep; ++row) {
    if (draws[row] * static_cast<double>(available - row) < static_cast<double>(keep - static_cast<int64_t>(rows.size()))) {
      rows.push_back(row);
    }
  }
  return rows;
}

std::vector<int64_t> spread_subset(int64_t available, int64_t keep, Generator& generator) {
  EDDY_CHECK(keep >= 0 && keep <= available, "spread_subset: cannot keep ", keep, " of ", available);
  std::vector<int64_t> rows;
  const std::vector<double> draws = uniform_draws(keep, generator);
  // Stretch i is [i available / keep, (i + 1) available / keep), at least one index long.
  for (int64_t i = 0; i < keep; ++i) {
    const int64_t first = i * available / keep, length = (i + 1) * available / keep - first;
    rows.push_back(first + std::min(length - 1, static_cast<int64_t>(draws[static_cast<size_t>(i)] * static_cast<double>(length))));
  }
  return rows;
}

Generator step_stream(uint64_t seed, uint64_t salt, int64_t step, size_t condition) {
  return Generator((seed ^ salt) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(step) * 1000003ull + condition);
}

std::vector<int64_t> split_by_measure(int64_t count, const std::vector<double>& weights,
                                      Generator& generator) {
  double total = 0;
  for (double weight : weights) total += weight;
  EDDY_CHECK(total > 0, "split_by_measure: weights must have a positive sum");
  std::vector<int64_t> parts(weights.size());
  std::vector<double> fractions(weights.size());
  int64_t assigned = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    const double share = static_cast<double>(count) * weights[k] / total;
    parts[k] = static_cast<int64_t>(std::floor(share));
    fractions[k] = share - static_cast<double>(parts[k]);
    assigned += parts[k];
  }
  const int64_t remainder = count - assigned;
  if (remainder <= 0) return parts;
  // Systematic sampling: `remainder` unit-spaced marks from one random start over the stacked
  // fractional parts; each part is below 1, so no part gets more than one extra.
  double mark = uniform_draws(1, generator)[0], cumulative = 0;
  int64_t given = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    cumulative += fractions[k];
    while (given < remainder && mark < cumulative) {
      ++parts[k];
      ++given;
      mark += 1;
    }
  }
  // Rounding in the cumulative sum can leave the last mark just past the end.
  for (size_t k = weights.size(); given < remainder && k-- > 0;) {
    if (weights[k] > 0) {
      parts[k] += remainder - given;
      given = remainder;
    }
  }
  return parts;
}

}  // namespace eddy::pinn
