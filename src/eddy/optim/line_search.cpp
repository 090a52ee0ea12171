#include "eddy/optim/line_search.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "eddy/core/error.h"

namespace eddy::optim {
namespace {

// The minimiser of the cubic matching value and slope at a and b (Nocedal & Wright eq. 3.59),
// clamped to [low, high]; the middle of [low, high] when the cubic has no minimiser.
double cubic_minimizer(const LinePoint& a, const LinePoint& b, double low, double high) {
  const double d1 = a.slope + b.slope - 3 * (a.value - b.value) / (a.t - b.t);
  const double d2_squared = d1 * d1 - a.slope * b.slope;
  if (d2_squared >= 0) {
    const double d2 = std::copysign(std::sqrt(d2_squared), b.t - a.t);
    const double t = b.t - (b.t - a.t) * (b.slope + d2 - d1) / (b.slope - a.slope + 2 * d2);
    if (std::isfinite(t)) return std::clamp(t, low, high);
  }
  return (low + high) / 2;
}

class Search {
 public:
  Search(const LineFunction& phi, const LinePoint& start, const LineSearchOptions& options,
         int64_t max_evaluations)
      : phi_(phi), start_(start), options_(options), max_evaluations_(max_evaluations) {}

  LineSearchResult run(double t) {
    LinePoint previous = start_;
    while (can_evaluate()) {
      LinePoint trial = evaluate(t);
      if (!trial.finite || !sufficient_decrease(trial) ||
          (previous.t > 0 && trial.value >= previous.value)) {
        return zoom(std::move(previous), std::move(trial));
      }
      if (curvature(trial)) return {LineSearchStatus::wolfe, std::move(trial), evaluations_,
                                    non_finite_};
      if (trial.slope >= 0) return zoom(std::move(trial), std::move(previous));
      t = cubic_minimizer(previous, trial, trial.t + 0.01 * (trial.t - previous.t), 10 * trial.t);
      previous = std::move(trial);
    }
    return give_up(std::move(previous));
  }

 private:
  bool can_evaluate() const { return evaluations_ < max_evaluations_; }

  LinePoint evaluate(double t) {
    ++evaluations_;
    LinePoint point = phi_(t);
    if (!point.finite) ++non_finite_;
    return point;
  }

  bool sufficient_decrease(const LinePoint& p) const {
    return p.value <= start_.value + options_.c1 * p.t * start_.slope;
  }
  bool curvature(const LinePoint& p) const {
    return std::abs(p.slope) <= -options_.c2 * start_.slope;
  }

  // lo: the lowest trial with sufficient decrease (or the start); hi: the other end, beyond which
  // no Wolfe point need lie.
  LineSearchResult zoom(LinePoint lo, LinePoint hi) {
    while (can_evaluate()) {
      const double low = std::min(lo.t, hi.t), high = std::max(lo.t, hi.t);
      const double width = high - low;
      if (width <= 1e-12 * high) break;
      const double t = hi.finite ? cubic_minimizer(lo, hi, low + 0.1 * width, high - 0.1 * width)
                                 : lo.t + 0.1 * (hi.t - lo.t);
      LinePoint trial = evaluate(t);
      // A trial must lower the start's value to become lo. One that only ties a later lo is kept
      // as lo and its slope decides the side: near a minimum, values within rounding of each
      // other no longer tell which side a trial is on (More and Thuente's function 2 needs
      // |phi'| <= 5e-8 where phi varies by 1e-16 of itself).
      const bool not_lower = lo.t == 0 ? trial.value >= lo.value : trial.value > lo.value;
      if (!trial.finite || !sufficient_decrease(trial) || not_lower) {
        hi = std::move(trial);
        continue;
      }
      if (curvature(trial)) return {LineSearchStatus::wolfe, std::move(trial), evaluations_,
                                    non_finite_};
      if (trial.slope * (hi.t - lo.t) >= 0) hi = std::move(lo);
      lo = std::move(trial);
    }
    return give_up(std::move(lo));
  }

  LineSearchResult give_up(LinePoint best) {
    const auto status = best.t > 0 ? LineSearchStatus::decrease_only : LineSearchStatus::no_decrease;
    return {status, std::move(best), evaluations_, non_finite_};
  }

  const LineFunction& phi_;
  const LinePoint& start_;
  const LineSearchOptions& options_;
  int64_t max_evaluations_;
  int64_t evaluations_ = 0;
  int64_t non_finite_ = 0;
};

}  // namespace

const char* status_name(LineSearchStatus status) {
  switch (status) {
    case LineSearchStatus::wolfe: return "wolfe";
    case LineSearchStatus::decrease_only: return "decrease_only";
    case LineSearchStatus::no_decrease: return "no_decrease";
  }
  return "unknown";
}

LineSearchResult strong_wolfe(const LineFunction& phi, const LinePoint& start, double t_initial,
                              const LineSearchOptions& options, int64_t max_evaluations) {
  EDDY_CHECK(start.finite && start.slope < 0, "strong_wolfe: the start must be finite and descend, got phi(0) = ",
             start.value, ", phi'(0) = ", start.slope);
  EDDY_CHECK(std::isfinite(t_initial) && t_initial > 0, "strong_wolfe: the first trial step must be positive, got ",
             t_initial);
  EDDY_CHECK(0 < options.c1 && options.c1 < 1 && 0 < options.c2 && options.c2 < 1,
             "strong_wolfe: c1 and c2 must lie in (0, 1), got c1 = ", options.c1, ", c2 = ", options.c2);
  EDDY_CHECK(max_evaluations >= 1, "strong_wolfe: max_evaluations must be at least 1, got ", max_evaluations);
  return Search(phi, start, options, max_evaluations).run(t_initial);
}

}  // namespace eddy::optim
