#pragma once
/// @file
/// L-BFGS with a strong-Wolfe line search (Nocedal & Wright, Numerical Optimization, 2nd ed.,
/// algorithms 7.4, 3.5 and 3.6). One call to step() runs a whole minimisation, until one of the
/// stopping rules below fires, and says which one in its report. docs/optim.md has the details.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "eddy/core/tensor.h"
#include "eddy/nn/state_dict.h"

namespace eddy::optim {

/// Zeroes the gradients, computes the loss (one element), calls backward() on it and returns it.
/// Each call is one *evaluation*.
using Closure = std::function<Tensor()>;

/// The strong-Wolfe line search along a descent direction d from x (phi(t) = f(x + t d)).
/// A step length t is accepted when
///     f(x + t d) <= f(x) + c1 * t * phi'(0)           (sufficient decrease)
///     |phi'(t)| <= c2 * |phi'(0)|                     (curvature)
/// Trial steps are placed by safeguarded cubic interpolation.
struct LineSearchOptions {
  double c1 = 1e-4;
  double c2 = 0.9;
  /// Evaluations one line search may use (it also never exceeds what is left of
  /// LbfgsOptions::max_evaluations).
  int64_t max_evaluations = 25;
};

struct LbfgsOptions {
  /// The first trial step of every line search is t = learning_rate along the L-BFGS direction,
  /// or t = learning_rate * min(1, 1 / ||g||_1) along -g when no pairs are stored.
  double learning_rate = 1;
  /// Iterations one step() call may perform. An iteration is one accepted update: a search
  /// direction, a line search, and a move of the parameters to the accepted point.
  int64_t max_iterations = 100;
  /// Closure calls one step() call may make, counting the first evaluation at the starting point
  /// and every line-search trial, accepted or not.
  int64_t max_evaluations = 250;
  /// Converged when the largest gradient entry in absolute value, max_i |g_i|, is <= this, at
  /// the starting point or after any iteration. 0 stops only on an exactly zero gradient.
  double tolerance_grad = 1e-9;
  /// Converged when an iteration lowers the loss by no more than this, relative to the loss:
  /// f_k - f_{k+1} <= tolerance_change * max(|f_k|, |f_{k+1}|). 0 stops only when an iteration
  /// leaves the loss exactly unchanged.
  double tolerance_change = 1e-12;
  /// Number of (s, y) correction pairs kept.
  int64_t history_size = 10;
  LineSearchOptions line_search = {};
  /// Asked before every iteration that the other rules allow; true ends the call at the current
  /// point (LbfgsStop::interrupted). The `eddy` command stops on Ctrl-C through it. Empty: never.
  std::function<bool()> stop_requested = {};
};

/// Why step() returned. Only gradient_tolerance and change_tolerance mean convergence.
enum class LbfgsStop {
  gradient_tolerance,  ///< max_i |g_i| <= tolerance_grad
  change_tolerance,    ///< the last iteration's relative loss decrease <= tolerance_change
  max_iterations,      ///< max_iterations iterations done
  max_evaluations,     ///< no evaluation left for another line search
  no_progress,         ///< no line search, even from a reset history, found a lower loss
  non_finite,          ///< the loss or gradient was inf or NaN where a step had to start or end
  interrupted,         ///< LbfgsOptions::stop_requested said so
};
/// The stop's enumerator as text ("no_progress"), as the Python report and docs/optim.md name it.
const char* stop_identifier(LbfgsStop stop);

struct LbfgsReport {
  int64_t iterations = 0;   ///< accepted updates in this step() call
  int64_t evaluations = 0;  ///< closure calls in this step() call
  /// Closure calls that gave an inf or NaN loss or gradient (those points were rejected).
  int64_t non_finite_evaluations = 0;
  double initial_loss = 0;  ///< loss at the starting point
  double loss = 0;          ///< loss at the final parameters
  double gradient_max_abs = 0;  ///< max_i |g_i| at the final parameters
  LbfgsStop stop = LbfgsStop::max_iterations;
  std::string message;      ///< one line saying what stopped the run, with the numbers
  bool converged() const {
    return stop == LbfgsStop::gradient_tolerance || stop == LbfgsStop::change_tolerance;
  }
};

/// L-BFGS over float32/float64 parameters (leaves that require gradients), treated as one flat
/// float64 vector x. Every step() call:
///
/// 1. evaluates the closure at the current parameters (evaluation 1);
/// 2. repeats iterations: direction d = -H g from the two-loop recursion over the stored
///    pairs (s = x_{k+1} - x_k, y = g_{k+1} - g_k; a pair is stored only when
///    s.y > 1e-10 ||s|| ||y||; if rounding makes d no descent direction, the pairs are dropped
///    and d = -g), a strong-Wolfe line search along d, and a move to the accepted point, until a
///    stopping rule fires. The rules are checked in this order: non-finite start,
///    gradient tolerance (before the first iteration and after each one), change tolerance
///    (after each iteration), max_iterations, max_evaluations, stop_requested;
/// 3. leaves the parameters at the best point found (lowest finite loss), `.grad()` holding the
///    gradient there, and returns a report.
///
/// Non-finite values never reach the weights. A trial point with an inf or NaN loss or gradient
/// is rejected and the line search shortens the step. If the starting point itself is
/// non-finite (nothing moves), or a line search ends with only non-finite trials (the parameters
/// are restored to the last accepted point), step() stops with LbfgsStop::non_finite. If a line search finds no
/// lower loss, the history is dropped and the iteration is retried once along -g before
/// stopping with no_progress. If the closure throws, the parameters are restored to the last
/// good point before the exception propagates.
///
/// The correction pairs persist across step() calls (see state_dict), so calling step()
/// repeatedly continues the same quasi-Newton model.
class Lbfgs {
 public:
  Lbfgs(std::vector<Tensor> parameters, const LbfgsOptions& options = {});

  LbfgsReport step(const Closure& closure);

  const LbfgsOptions& options() const { return options_; }
  double learning_rate() const { return options_.learning_rate; }
  void set_learning_rate(double learning_rate);
  const std::vector<Tensor>& parameters() const { return parameters_; }
  /// Clears `.grad()` of every parameter.
  void zero_grad();

  /// The correction pairs: "lbfgs.history" (0-d int64, the number of pairs m) and, for
  /// j = 0 .. m-1 (oldest first), "lbfgs.s.<j>" and "lbfgs.y.<j>", float64 vectors with one entry
  /// per parameter element.
  nn::StateDict state_dict() const;
  /// Restores state_dict()'s pairs; eddy::Error naming the key when one is missing or has the
  /// wrong shape or dtype, and nothing changes then.
  void load_state_dict(const nn::StateDict& state);

 private:
  // Stores the pair (s, y = g_new - g_old) when s.y > 1e-10 ||s|| ||y||, dropping the oldest
  // beyond history_size.
  void remember(std::vector<double> s, const std::vector<double>& g_old,
                const std::vector<double>& g_new);

  std::vector<Tensor> parameters_;
  LbfgsOptions options_;
  int64_t size_ = 0;  // total number of parameter elements
  std::vector<std::vector<double>> s_, y_;  // oldest first
};

}  // namespace eddy::optim
