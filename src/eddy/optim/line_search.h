#pragma once
/// @file
/// The strong-Wolfe line search used by L-BFGS (Nocedal & Wright, Numerical Optimization, 2nd
/// ed., algorithms 3.5 and 3.6), on a one-dimensional function phi(t) = f(x + t d).

#include <cstdint>
#include <functional>
#include <vector>

#include "eddy/optim/lbfgs.h"

namespace eddy::optim {

/// One evaluation of phi at step length t.
struct LinePoint {
  double t = 0;
  double value = 0;  ///< phi(t) = f(x + t d)
  double slope = 0;  ///< phi'(t) = grad f(x + t d) . d
  /// grad f(x + t d), carried along so that the caller gets the accepted point's gradient
  /// without evaluating it again.
  std::vector<double> gradient;
  /// False when the value or the gradient has an inf or NaN; such a point is never accepted.
  bool finite = true;
};

using LineFunction = std::function<LinePoint(double t)>;

enum class LineSearchStatus {
  wolfe,          ///< found a point satisfying both strong-Wolfe conditions
  decrease_only,  ///< ran out of evaluations or interval; returns the best point with
                  ///< sufficient decrease, which does not satisfy the curvature condition
  no_decrease,    ///< no trial satisfied sufficient decrease; `point` is the start
};

/// "wolfe", "decrease_only" or "no_decrease".
const char* status_name(LineSearchStatus status);

struct LineSearchResult {
  LineSearchStatus status = LineSearchStatus::no_decrease;
  LinePoint point;
  int64_t evaluations = 0;
  int64_t non_finite_evaluations = 0;
};

/// Searches from `start` (t = 0, finite, slope < 0) with first trial `t_initial` > 0, calling
/// phi at most `max_evaluations` times.
///
/// Bracketing phase: while trials satisfy sufficient decrease, keep lowering the loss and still
/// descend, the next trial is the minimiser of the cubic through the last two points, kept in
/// [t + 0.01 (t - t_prev), 10 t]. Zoom phase, once [lo, hi] brackets a Wolfe point: the next
/// trial is the cubic's minimiser, kept at least a tenth of the interval from either end; lo is
/// always the lowest trial with sufficient decrease. A non-finite trial is treated as a step too
/// long: it becomes hi and the next trial is lo + (hi - lo) / 10. The search also ends when the
/// interval has shrunk below 1e-12 of its larger end.
LineSearchResult strong_wolfe(const LineFunction& phi, const LinePoint& start, double t_initial,
                              const LineSearchOptions& options, int64_t max_evaluations);

}  // namespace eddy::optim
