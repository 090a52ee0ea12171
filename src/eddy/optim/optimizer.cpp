#include "eddy/optim/optimizer.h"

#include <cmath>
#include <utility>

#include "eddy/autodiff/tape.h"
#include "eddy/core/distribution.h"
#include "eddy/ops/ops.h"

namespace eddy::optim {

Optimizer::Optimizer(std::vector<Tensor> parameters, double learning_rate, std::string name)
    : parameters_(std::move(parameters)), learning_rate_(0), name_(std::move(name)) {
  check_parameters(parameters_, name_);
  set_learning_rate(learning_rate);
}

void Optimizer::zero_grad() {
  for (Tensor& p : parameters_) p.zero_grad();
}

void Optimizer::set_learning_rate(double learning_rate) {
  EDDY_CHECK(std::isfinite(learning_rate) && learning_rate >= 0, name_,
             ": learning rate must be finite and >= 0, got ", learning_rate);
  learning_rate_ = learning_rate;
}

std::string Optimizer::key(const std::string& what, size_t index) const {
  return cat(name_, ".", what, ".", index);
}

void Optimizer::save_steps(nn::StateDict& state) const {
  state[name_ + ".step"] = scalar(static_cast<double>(steps_), DType::i64);
}

void Optimizer::load_steps(const nn::StateDict& state) {
  const int64_t steps = state_entry(state, name_ + ".step", {}, DType::i64).item<int64_t>();
  // A negative count made Adam's bias correction 1 - beta^0 = 0 and the next step NaN.
  EDDY_CHECK(steps >= 0, "load_state_dict: \"", name_, ".step\" is ", steps, "; a step count is not negative");
  steps_ = steps;
}

void check_parameters(const std::vector<Tensor>& parameters, const std::string& who) {
  EDDY_CHECK(!parameters.empty(), who, ": no parameters to optimise");
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Tensor& p = parameters[i];
    EDDY_CHECK(p.defined(), who, ": parameter ", i, " is undefined");
    EDDY_CHECK(is_floating(p.dtype()), who, ": parameter ", i, " has dtype ", p.dtype(),
               "; parameters must be floating point: float32, float64, bfloat16 or float16");
    // One that does not require gradients is frozen: it gets none, and is skipped, as in PyTorch
    // (freezing part of a model and passing all its parameters was refused).
    EDDY_CHECK(p.is_leaf(), who, ": parameter ", i, " is computed from other tensors; parameters must be leaf "
               "tensors (made directly, marked requires_grad_())");
    // Listed twice, a tensor was stepped twice a step, with two states (PyTorch warns of it).
    for (size_t j = 0; j < i; ++j) {
      EDDY_CHECK(parameters[j].impl() != p.impl(), who, ": parameter ", i, " is the same tensor as parameter ", j,
                 "; pass each tensor once");
    }
  }
}

void check_range(double value, double low, double high, bool high_inclusive,
                 const std::string& who, const std::string& what) {
  const bool below_high = high_inclusive ? value <= high : value < high;
  EDDY_CHECK(std::isfinite(value) && value >= low && below_high, who, ": ", what,
             " must lie in [", low, ", ", high, high_inclusive ? "]" : ")", ", got ", value);
}

const Tensor& state_entry(const nn::StateDict& state, const std::string& key, const Shape& shape,
                          DType dtype) {
  auto found = state.find(key);
  EDDY_CHECK(found != state.end(), "load_state_dict: missing key \"", key, "\" (expected shape ",
             shape, ", dtype ", dtype, ")");
  const Tensor& t = found->second;
  EDDY_CHECK(t.defined(), "load_state_dict: \"", key, "\" is undefined");
  EDDY_CHECK(t.shape() == shape, "load_state_dict: \"", key, "\" has shape ", t.shape(),
             " but the optimiser expects ", shape);
  EDDY_CHECK(t.dtype() == dtype, "load_state_dict: \"", key, "\" has dtype ", t.dtype(),
             " but the optimiser expects ", dtype);
  return t;
}

void check_moment(const Tensor& t, const std::string& key, bool non_negative) {
  const Distribution* layout = distribution_of(t);
  const Tensor& local = layout ? layout->local : t;
  if (local.numel() == 0) return;
  // NaN propagates through min and max, so one reduction each sees it.
  const double largest = max(abs(local)).item<double>();
  EDDY_CHECK(std::isfinite(largest), "load_state_dict: \"", key, "\" holds non-finite values");
  if (non_negative && !is_complex(local.dtype())) {
    const double least = min(local).item<double>();
    EDDY_CHECK(least >= 0, "load_state_dict: \"", key, "\" holds negative values (the least is ", least,
               "); a second moment is a running mean of squares");
  }
}

// A distributed tensor's copy is laid out alike (optimiser state saved from sharded moments).
Tensor copy_of(const Tensor& t) {
  if (const Distribution* layout = distribution_of(t)) return with_local(t, copy_of(layout->local));
  Tensor copy = Tensor::empty(t.shape(), t.dtype(), t.device());
  copy.copy_(t);
  return copy;
}

void set_grads(const std::vector<Tensor>& parameters, const std::vector<Tensor>& new_grads) {
  for (size_t i = 0; i < parameters.size(); ++i) {
    // A distributed parameter's gradient is kept as its local part (Tensor::grad() lays it out),
    // without history (optimizer.h says why).
    // A frozen parameter (no autograd state) keeps having none: L-BFGS hands every parameter a
    // gradient, and writing a frozen one's crashed.
    const Tensor& g = new_grads[i];
    if (g.defined() && parameters[i].requires_grad()) parameters[i].impl()->autograd->grad = local_part(g).detach();
  }
}

}  // namespace eddy::optim
