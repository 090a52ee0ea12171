#include "eddy/optim/sgd.h"

#include <cmath>

#include "eddy/autodiff/tape.h"
#include "eddy/ops/ops.h"

namespace eddy::optim {

Sgd::Sgd(std::vector<Tensor> parameters, const SgdOptions& options)
    : Optimizer(std::move(parameters), options.learning_rate, "sgd"), options_(options) {
  check_range(options.momentum, 0, 1, false, "sgd", "momentum");
  check_range(options.weight_decay, 0, HUGE_VAL, false, "sgd", "weight_decay");
  EDDY_CHECK(!options.nesterov || options.momentum > 0, "sgd: nesterov needs momentum > 0");
  if (options.momentum > 0) {
    for (const Tensor& p : this->parameters()) momentum_.push_back(zeros_like(p));
  }
}

void Sgd::step() {
  NoGradGuard no_grad;
  count_step();
  for (size_t i = 0; i < parameters().size(); ++i) {
    Tensor p = parameters()[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (options_.weight_decay != 0) g = g + options_.weight_decay * p;
    if (!momentum_.empty()) {
      Tensor& b = momentum_[i];
      b.copy_(options_.momentum * b + g);  // b starts at 0, so step 1 gives b = g
      g = options_.nesterov ? g + options_.momentum * b : b;
    }
    p.copy_(p - learning_rate() * g);
  }
}

nn::StateDict Sgd::state_dict() const {
  nn::StateDict state;
  save_steps(state);
  for (size_t i = 0; i < momentum_.size(); ++i) state[key("momentum", i)] = copy_of(momentum_[i]);
  return state;
}

void Sgd::load_state_dict(const nn::StateDict& state) {
  state_entry(state, name() + ".step", {}, DType::i64);
  for (size_t i = 0; i < momentum_.size(); ++i) {
    state_entry(state, key("momentum", i), momentum_[i].shape(), momentum_[i].dtype());
  }
  load_steps(state);
  for (size_t i = 0; i < momentum_.size(); ++i) momentum_[i].copy_(state.at(key("momentum", i)));
}

}  // namespace eddy::optim
