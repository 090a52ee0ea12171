#include "eddy/optim/adam.h"

#include <cmath>

#include "eddy/autodiff/tape.h"
#include "eddy/ops/ops.h"

namespace eddy::optim {

Adam::Adam(std::vector<Tensor> parameters, const AdamOptions& options)
    : Adam(std::move(parameters), options, false) {}

Adam::Adam(std::vector<Tensor> parameters, const AdamOptions& options, bool decoupled_weight_decay)
    : Optimizer(std::move(parameters), options.learning_rate,
                decoupled_weight_decay ? "adamw" : "adam"),
      options_(options),
      decoupled_weight_decay_(decoupled_weight_decay) {
  check_range(options.beta1, 0, 1, false, name(), "beta1");
  check_range(options.beta2, 0, 1, false, name(), "beta2");
  EDDY_CHECK(std::isfinite(options.eps) && options.eps > 0, name(), ": eps must be > 0, got ",
             options.eps);
  check_range(options.weight_decay, 0, HUGE_VAL, false, name(), "weight_decay");
  for (const Tensor& p : this->parameters()) {
    m_.push_back(zeros_like(p));
    v_.push_back(zeros_like(p));
  }
}

void Adam::step() {
  NoGradGuard no_grad;
  count_step();
  const double t = static_cast<double>(steps());
  const double correction1 = 1 - std::pow(options_.beta1, t);
  const double correction2 = 1 - std::pow(options_.beta2, t);
  const double lr = learning_rate();
  for (size_t i = 0; i < parameters().size(); ++i) {
    Tensor p = parameters()[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (options_.weight_decay != 0) {
      if (decoupled_weight_decay_) {
        p.copy_(p * (1 - lr * options_.weight_decay));
      } else {
        g = g + options_.weight_decay * p;
      }
    }
    m_[i].copy_(options_.beta1 * m_[i] + (1 - options_.beta1) * g);
    v_[i].copy_(options_.beta2 * v_[i] + (1 - options_.beta2) * square(g));
    p.copy_(p - (lr / correction1) * m_[i] / (sqrt(v_[i] / correction2) + options_.eps));
  }
}

nn::StateDict Adam::state_dict() const {
  nn::StateDict state;
  save_steps(state);
  for (size_t i = 0; i < m_.size(); ++i) {
    state[key("m", i)] = copy_of(m_[i]);
    state[key("v", i)] = copy_of(v_[i]);
  }
  return state;
}

void Adam::load_state_dict(const nn::StateDict& state) {
  state_entry(state, name() + ".step", {}, DType::i64);
  for (size_t i = 0; i < m_.size(); ++i) {
    state_entry(state, key("m", i), m_[i].shape(), m_[i].dtype());
    state_entry(state, key("v", i), v_[i].shape(), v_[i].dtype());
  }
  load_steps(state);
  for (size_t i = 0; i < m_.size(); ++i) {
    m_[i].copy_(state.at(key("m", i)));
    v_[i].copy_(state.at(key("v", i)));
  }
}

AdamW::AdamW(std::vector<Tensor> parameters, const AdamOptions& options)
    : Adam(std::move(parameters), options, true) {}

}  // namespace eddy::optim
