#include "eddy/optim/lbfgs.h"

#include <algorithm>
#include <cmath>

#include "eddy/autodiff/tape.h"
#include "eddy/ops/ops.h"
#include "eddy/optim/line_search.h"
#include "eddy/optim/optimizer.h"

namespace eddy::optim {
namespace {

using Vector = std::vector<double>;

double dot(const Vector& a, const Vector& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

double max_abs(const Vector& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

double l1_norm(const Vector& v) {
  double sum = 0;
  for (double x : v) sum += std::abs(x);
  return sum;
}

// t d
Vector scaled(const Vector& d, double t) {
  Vector out(d.size());
  for (size_t i = 0; i < d.size(); ++i) out[i] = t * d[i];
  return out;
}

// x + t d
Vector moved(const Vector& x, double t, const Vector& d) {
  Vector out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] + t * d[i];
  return out;
}

bool all_finite(const Vector& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// -H g by the two-loop recursion (Nocedal & Wright algorithm 7.4), with H_0 = (s.y / y.y) I
// from the newest pair; -g when there are no pairs.
Vector direction(const std::vector<Vector>& s, const std::vector<Vector>& y, const Vector& g) {
  Vector q = g;
  std::vector<double> alpha(s.size());
  for (size_t j = s.size(); j-- > 0;) {
    alpha[j] = dot(s[j], q) / dot(y[j], s[j]);
    for (size_t i = 0; i < q.size(); ++i) q[i] -= alpha[j] * y[j][i];
  }
  if (!s.empty()) {
    const double gamma = dot(s.back(), y.back()) / dot(y.back(), y.back());
    for (double& v : q) v *= gamma;
  }
  for (size_t j = 0; j < s.size(); ++j) {
    const double beta = dot(y[j], q) / dot(y[j], s[j]);
    for (size_t i = 0; i < q.size(); ++i) q[i] += (alpha[j] - beta) * s[j][i];
  }
  for (double& v : q) v = -v;
  return q;
}

// The parameters as one flat float64 vector, and back.
Vector read_parameters(const std::vector<Tensor>& parameters) {
  Vector x;
  for (const Tensor& p : parameters) {
    const auto values = p.to_vector<double>();
    x.insert(x.end(), values.begin(), values.end());
  }
  return x;
}

void write_parameters(const std::vector<Tensor>& parameters, const Vector& x) {
  NoGradGuard no_grad;
  size_t offset = 0;
  for (const Tensor& p : parameters) {
    const auto n = static_cast<size_t>(p.numel());
    Tensor(p).copy_(tensor(Vector(x.begin() + offset, x.begin() + offset + n), p.shape()));
    offset += n;
  }
}

// Runs the closure at the parameters' current values: loss and flat gradient (zeros for a
// parameter the loss does not reach).
LinePoint evaluate(const std::vector<Tensor>& parameters, const Closure& closure) {
  const Tensor loss = closure();
  EDDY_CHECK(loss.defined() && loss.numel() == 1, "Lbfgs: the closure must return a one-element "
             "loss, got ", loss.defined() ? cat("shape ", loss.shape()) : "an undefined tensor");
  LinePoint point;
  point.value = loss.item<double>();
  bool any_gradient = false;
  for (const Tensor& p : parameters) {
    any_gradient = any_gradient || p.grad().defined();
    const Tensor g = p.grad().defined() ? p.grad() : zeros_like(p);
    const auto values = g.to_vector<double>();
    point.gradient.insert(point.gradient.end(), values.begin(), values.end());
  }
  // No gradient at all is a closure that did not compute them, not a minimum: it reported
  // convergence at once.
  EDDY_CHECK(any_gradient, "Lbfgs: after the closure no parameter has a gradient; the closure must compute ",
             "them (loss.backward()) before it returns the loss");
  point.finite = std::isfinite(point.value) && all_finite(point.gradient);
  return point;
}

// Leaves .grad() holding the flat gradient g, split back into the parameters' shapes and dtypes.
void write_grads(const std::vector<Tensor>& parameters, const Vector& g) {
  std::vector<Tensor> grads;
  size_t offset = 0;
  for (const Tensor& p : parameters) {
    const auto n = static_cast<size_t>(p.numel());
    grads.push_back(cast(tensor(Vector(g.begin() + offset, g.begin() + offset + n), p.shape()),
                         p.dtype()));
    offset += n;
  }
  set_grads(parameters, grads);
}

const char* stop_name(LbfgsStop stop) {
  switch (stop) {
    case LbfgsStop::gradient_tolerance: return "gradient tolerance";
    case LbfgsStop::change_tolerance: return "change tolerance";
    case LbfgsStop::max_iterations: return "max_iterations";
    case LbfgsStop::max_evaluations: return "max_evaluations";
    case LbfgsStop::no_progress: return "no progress";
    case LbfgsStop::non_finite: return "non-finite loss or gradient";
    case LbfgsStop::interrupted: return "interrupted";
  }
  return "";
}

}  // namespace

const char* stop_identifier(LbfgsStop stop) {
  switch (stop) {
    case LbfgsStop::gradient_tolerance: return "gradient_tolerance";
    case LbfgsStop::change_tolerance: return "change_tolerance";
    case LbfgsStop::max_iterations: return "max_iterations";
    case LbfgsStop::max_evaluations: return "max_evaluations";
    case LbfgsStop::no_progress: return "no_progress";
    case LbfgsStop::non_finite: return "non_finite";
    case LbfgsStop::interrupted: return "interrupted";
  }
  return "";
}

Lbfgs::Lbfgs(std::vector<Tensor> parameters, const LbfgsOptions& options)
    : parameters_(std::move(parameters)), options_(options) {
  check_parameters(parameters_, "Lbfgs");
  set_learning_rate(options.learning_rate);
  EDDY_CHECK(options.max_iterations >= 1, "Lbfgs: max_iterations must be >= 1, got ",
             options.max_iterations);
  EDDY_CHECK(options.max_evaluations >= 2, "Lbfgs: max_evaluations must be >= 2 (the start and "
             "one trial), got ", options.max_evaluations);
  check_range(options.tolerance_grad, 0, HUGE_VAL, false, "Lbfgs", "tolerance_grad");
  check_range(options.tolerance_change, 0, HUGE_VAL, false, "Lbfgs", "tolerance_change");
  EDDY_CHECK(options.history_size >= 1, "Lbfgs: history_size must be >= 1, got ",
             options.history_size);
  const LineSearchOptions& ls = options.line_search;
  EDDY_CHECK(0 < ls.c1 && ls.c1 < ls.c2 && ls.c2 < 1, "Lbfgs: line search needs 0 < c1 < c2 < 1, "
             "got c1 = ", ls.c1, ", c2 = ", ls.c2);
  EDDY_CHECK(ls.max_evaluations >= 1, "Lbfgs: line_search.max_evaluations must be >= 1, got ",
             ls.max_evaluations);
  for (const Tensor& p : parameters_) size_ += p.numel();
}

void Lbfgs::set_learning_rate(double learning_rate) {
  EDDY_CHECK(std::isfinite(learning_rate) && learning_rate > 0,
             "Lbfgs: learning rate must be finite and > 0, got ", learning_rate);
  options_.learning_rate = learning_rate;
}

void Lbfgs::zero_grad() {
  for (Tensor& p : parameters_) p.zero_grad();
}

LbfgsReport Lbfgs::step(const Closure& closure) {
  LbfgsReport report;
  auto stop = [&](LbfgsStop reason, const std::string& detail) {
    report.stop = reason;
    report.message = cat("L-BFGS stopped (", stop_name(reason), "): ", detail, "; ",
                         report.iterations, " iterations, ", report.evaluations, " evaluations",
                         report.non_finite_evaluations > 0
                             ? cat(", ", report.non_finite_evaluations, " non-finite (rejected)")
                             : std::string());
  };
  Vector x = read_parameters(parameters_);
  try {
    LinePoint current = evaluate(parameters_, closure);
    report.evaluations = 1;
    report.loss = report.initial_loss = current.value;
    if (!current.finite) {
      report.non_finite_evaluations = 1;
      stop(LbfgsStop::non_finite, cat("the loss (", current.value, ") or its gradient is not "
                                      "finite at the starting point; the parameters are unchanged"));
      return report;
    }
    double previous_loss = current.value;
    while (true) {
      const double g_max = max_abs(current.gradient);
      const double decrease = previous_loss - current.value;
      const double scale = std::max(std::abs(previous_loss), std::abs(current.value));
      if (g_max <= options_.tolerance_grad) {
        stop(LbfgsStop::gradient_tolerance,
             cat("max |g| = ", g_max, " <= tolerance_grad = ", options_.tolerance_grad));
        break;
      }
      if (report.iterations > 0 && decrease <= options_.tolerance_change * scale) {
        stop(LbfgsStop::change_tolerance,
             cat("the last iteration lowered the loss by ", decrease, " <= tolerance_change * ",
                 "max(|f_k|, |f_k+1|) = ", options_.tolerance_change * scale));
        break;
      }
      if (report.iterations >= options_.max_iterations) {
        stop(LbfgsStop::max_iterations, cat("reached max_iterations = ", options_.max_iterations));
        break;
      }
      if (report.evaluations >= options_.max_evaluations) {
        stop(LbfgsStop::max_evaluations,
             cat("reached max_evaluations = ", options_.max_evaluations));
        break;
      }
      if (options_.stop_requested && options_.stop_requested()) {
        stop(LbfgsStop::interrupted, "a stop was requested");
        break;
      }

      Vector d = direction(s_, y_, current.gradient);
      if (!(dot(current.gradient, d) < 0)) {  // rounding can spoil the model: fall back to -g
        s_.clear();
        y_.clear();
        d = direction(s_, y_, current.gradient);
      }
      current.t = 0;
      current.slope = dot(current.gradient, d);
      const double t_initial =
          s_.empty() ? options_.learning_rate * std::min(1.0, 1.0 / l1_norm(current.gradient))
                     : options_.learning_rate;
      const LineFunction phi = [&](double t) {
        write_parameters(parameters_, moved(x, t, d));
        LinePoint point = evaluate(parameters_, closure);
        point.t = t;
        point.slope = dot(point.gradient, d);
        return point;
      };
      const int64_t budget = std::min(options_.line_search.max_evaluations,
                                      options_.max_evaluations - report.evaluations);
      LineSearchResult search = strong_wolfe(phi, current, t_initial, options_.line_search, budget);
      report.evaluations += search.evaluations;
      report.non_finite_evaluations += search.non_finite_evaluations;

      if (search.status == LineSearchStatus::no_decrease) {
        const bool all_non_finite = search.non_finite_evaluations == search.evaluations;
        if (all_non_finite) {
          stop(LbfgsStop::non_finite, "every trial point of the last line search had a non-finite "
               "loss or gradient; kept the last good point");
          break;
        }
        if (report.evaluations >= options_.max_evaluations) {
          stop(LbfgsStop::max_evaluations, cat("reached max_evaluations = ",
                                               options_.max_evaluations, " inside a line search"));
          break;
        }
        if (s_.empty()) {
          stop(LbfgsStop::no_progress, cat("no trial along -g had a loss below ", current.value));
          break;
        }
        s_.clear();  // a stale quasi-Newton model can give a useless direction: retry along -g
        y_.clear();
        continue;
      }

      LinePoint next = std::move(search.point);
      remember(scaled(d, next.t), current.gradient, next.gradient);
      x = moved(x, next.t, d);
      previous_loss = current.value;
      current = std::move(next);
      ++report.iterations;
    }
    write_parameters(parameters_, x);
    write_grads(parameters_, current.gradient);
    report.loss = current.value;
    report.gradient_max_abs = max_abs(current.gradient);
  } catch (...) {
    write_parameters(parameters_, x);
    throw;
  }
  return report;
}

void Lbfgs::remember(Vector s, const Vector& g_old, const Vector& g_new) {
  Vector y(g_new.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = g_new[i] - g_old[i];
  const double sy = dot(s, y);
  if (!(sy > 1e-10 * std::sqrt(dot(s, s) * dot(y, y)))) return;
  if (static_cast<int64_t>(s_.size()) == options_.history_size) {
    s_.erase(s_.begin());
    y_.erase(y_.begin());
  }
  s_.push_back(std::move(s));
  y_.push_back(std::move(y));
}

nn::StateDict Lbfgs::state_dict() const {
  nn::StateDict state;
  state["lbfgs.history"] = scalar(static_cast<double>(s_.size()), DType::i64);
  for (size_t j = 0; j < s_.size(); ++j) {
    state[cat("lbfgs.s.", j)] = tensor(s_[j]);
    state[cat("lbfgs.y.", j)] = tensor(y_[j]);
  }
  return state;
}

void Lbfgs::load_state_dict(const nn::StateDict& state) {
  const auto count = state_entry(state, "lbfgs.history", {}, DType::i64).item<int64_t>();
  EDDY_CHECK(count >= 0 && count <= options_.history_size, "load_state_dict: \"lbfgs.history\" is ",
             count, ", outside [0, history_size = ", options_.history_size, "]");
  std::vector<Vector> s, y;
  for (int64_t j = 0; j < count; ++j) {
    s.push_back(state_entry(state, cat("lbfgs.s.", j), {size_}, DType::f64).to_vector<double>());
    y.push_back(state_entry(state, cat("lbfgs.y.", j), {size_}, DType::f64).to_vector<double>());
  }
  s_ = std::move(s);
  y_ = std::move(y);
}

}  // namespace eddy::optim
