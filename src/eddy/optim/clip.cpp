#include "eddy/optim/clip.h"

#include <algorithm>
#include <cmath>

#include "eddy/autodiff/tape.h"
#include "eddy/ops/ops.h"
#include "eddy/optim/optimizer.h"

namespace eddy::optim {

namespace {
void check_max_norm(double max_norm) {
  EDDY_CHECK(std::isfinite(max_norm) && max_norm > 0,
             "clip_grad_norm: max_norm must be finite and > 0, got ", max_norm);
}
}  // namespace

double clip_factor(double total_norm, double max_norm) {
  check_max_norm(max_norm);
  // torch's min(1, max_norm / (N + 1e-6)): it scales a norm just under max_norm too.
  if (!std::isfinite(total_norm)) return 1;
  return std::min(1.0, max_norm / (total_norm + 1e-6));
}

double clip_grad_norm(const std::vector<Tensor>& parameters, double max_norm) {
  check_max_norm(max_norm);
  NoGradGuard no_grad;
  // Summed as tensors: the sum of a distributed gradient is a partial sum, which the square root
  // (an op) makes whole on every rank before it is read.
  Tensor sum_of_squares;
  for (const Tensor& p : parameters) {
    if (!p.defined() || !p.grad().defined()) continue;
    // |g| only where g is complex: for real gradients it would be a pass that changes nothing.
    const Tensor& g = p.grad();
    const Tensor squares = sum(square(cast(is_complex(g.dtype()) ? abs(g) : g, DType::f64)));
    sum_of_squares = sum_of_squares.defined() ? sum_of_squares + squares : squares;
  }
  const double total = sum_of_squares.defined() ? sqrt(sum_of_squares).item<double>() : 0.0;
  const double factor = clip_factor(total, max_norm);
  if (factor == 1) return total;
  std::vector<Tensor> clipped(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (parameters[i].defined() && parameters[i].grad().defined()) {
      clipped[i] = parameters[i].grad() * factor;
    }
  }
  set_grads(parameters, clipped);
  return total;
}

}  // namespace eddy::optim
