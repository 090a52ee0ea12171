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
  update_ = update_rule();
}

Adam::Update Adam::update_rule() const {
  return [options = options_, decoupled = decoupled_weight_decay_](const std::vector<Tensor>& in) {
    const Tensor &decay = in[4], &step_size = in[5], &correction2 = in[6];
    Tensor p = in[0], g = in[1];
    if (options.weight_decay != 0) {
      if (decoupled) {
        p = p * decay;
      } else {
        g = g + options.weight_decay * p;
      }
    }
    Tensor m = options.beta1 * in[2] + (1 - options.beta1) * g;
    Tensor v = options.beta2 * in[3] + (1 - options.beta2) * square(g);
    return std::vector<Tensor>{p - step_size * m / (sqrt(v / correction2) + options.eps), m, v};
  };
}

void Adam::run_updates_through(const std::function<Update(Update)>& wrap) { update_ = wrap(update_rule()); }

void Adam::step() {
  NoGradGuard no_grad;
  count_step();
  const double t = static_cast<double>(steps());
  const double lr = learning_rate();
  // The step's constants, the same for every parameter (Update says what each is).
  const double decay = 1 - lr * options_.weight_decay, step_size = lr / (1 - std::pow(options_.beta1, t)),
               correction2 = 1 - std::pow(options_.beta2, t);
  for (size_t i = 0; i < parameters().size(); ++i) {
    Tensor p = parameters()[i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    auto number = [&](double value) { return scalar(value, p.dtype(), p.device()); };
    const std::vector<Tensor> next =
        update_({p.detach(), g, m_[i], v_[i], number(decay), number(step_size), number(correction2)});
    p.copy_(next[0]);
    m_[i] = next[1];
    v_[i] = next[2];
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
    check_moment(state_entry(state, key("m", i), m_[i].shape(), m_[i].dtype()), key("m", i), false);
    check_moment(state_entry(state, key("v", i), v_[i].shape(), v_[i].dtype()), key("v", i), true);
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
