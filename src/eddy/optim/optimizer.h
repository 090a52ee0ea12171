#pragma once
/// @file
/// The base of the first-order optimisers (SGD, Adam, AdamW) and the helpers every optimiser
/// shares: parameter checks and state-dict lookups. L-BFGS (lbfgs.h) needs a closure and returns
/// a report, so it is a class of its own, built on the same helpers.

#include <cstdint>
#include <string>
#include <vector>

#include "eddy/core/tensor.h"
#include "eddy/nn/state_dict.h"

namespace eddy::optim {

/// A first-order optimiser over a fixed list of parameters.
///
/// Parameters are leaf tensors that require gradients, of dtype float32 or float64. step() reads
/// each parameter's `.grad()` (left there by `backward(loss)`) and writes the update into the
/// parameter in place, so the parameter tensor, and every view or alias of it, keeps its
/// identity. A parameter whose `.grad()` is undefined (it took no part in the loss) is skipped.
/// Updates run in the parameter's own dtype.
class Optimizer {
 public:
  /// @param name prefixes every state-dict key and error message ("adam", "sgd", ...).
  Optimizer(std::vector<Tensor> parameters, double learning_rate, std::string name);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Applies one update from the current gradients.
  virtual void step() = 0;

  /// Clears `.grad()` of every parameter (to undefined, as Tensor::zero_grad does), so the next
  /// backward() starts from nothing instead of accumulating.
  void zero_grad();

  double learning_rate() const { return learning_rate_; }
  /// Sets the step size used by the following step() calls; must be finite and >= 0. This is how
  /// a Schedule drives an optimiser: `opt.set_learning_rate(schedule.learning_rate(step))`.
  void set_learning_rate(double learning_rate);

  const std::vector<Tensor>& parameters() const { return parameters_; }
  /// "adam", "adamw", "sgd", "soap": the prefix of state-dict keys and error messages.
  const std::string& name() const { return name_; }
  /// Whether the update of each parameter element depends only on that element's gradient and
  /// state (and on scalars such as the step count), so the optimiser gives the same result run
  /// on any slice of the flattened parameters: what ZeRO's sharded optimiser state
  /// (dist/sharded_optimizer.h) needs. True for SGD, Adam and AdamW; SOAP rotates whole matrices.
  virtual bool updates_elementwise() const { return false; }
  /// Number of step() calls so far (restored by load_state_dict).
  int64_t steps() const { return steps_; }

  /// The optimiser's state (moment estimates, momentum buffers, step count) under keys
  /// "<name>.<what>.<parameter index>" and "<name>.step"; scalars are 0-d tensors. The tensors
  /// are copies. Hyperparameters (learning rate, betas, ...) are construction options, not state.
  virtual nn::StateDict state_dict() const = 0;
  /// Restores what state_dict() saved, for the same parameter list. Throws eddy::Error naming
  /// the key when a key is missing or a tensor's shape or dtype differs; nothing is changed then.
  /// Keys it does not use are ignored, so one dict can hold a model and its optimiser.
  virtual void load_state_dict(const nn::StateDict& state) = 0;

 protected:
  /// "<name>.<what>.<index>", the key of per-parameter state.
  std::string key(const std::string& what, size_t index) const;
  /// The state shared by every optimiser: "<name>.step".
  void save_steps(nn::StateDict& state) const;
  void load_steps(const nn::StateDict& state);
  /// Called by step() implementations once per update.
  void count_step() { ++steps_; }

 private:
  std::vector<Tensor> parameters_;
  double learning_rate_;
  std::string name_;
  int64_t steps_ = 0;
};

/// Throws eddy::Error unless every parameter is a defined float32/float64 leaf that requires
/// gradients; `who` names the optimiser in the message.
void check_parameters(const std::vector<Tensor>& parameters, const std::string& who);

/// Throws eddy::Error unless `value` is finite and lies in [low, high) (or [low, high] when
/// `high_inclusive`), naming `who` and `what`.
void check_range(double value, double low, double high, bool high_inclusive,
                 const std::string& who, const std::string& what);

/// The entry `key` of `state`, checked to have `shape` and `dtype`; throws eddy::Error naming the
/// key otherwise.
const Tensor& state_entry(const nn::StateDict& state, const std::string& key, const Shape& shape,
                          DType dtype);

/// Throws eddy::Error naming `key` unless every entry of the moment `t` is finite and, with
/// `non_negative` (a real second moment), at least 0: a loaded moment below zero turns the
/// update's square root into NaN at the first step after a resume.
void check_moment(const Tensor& t, const std::string& key, bool non_negative);

/// A dense copy of `t` that shares nothing with it; for state_dict() snapshots.
Tensor copy_of(const Tensor& t);

/// Replaces each parameter's `.grad()` by `new_grads[i]` (undefined entries are left alone),
/// detached. Gradients are replaced, never written in place: a gradient may be a broadcast view
/// shared with other tensors. A gradient that a compiled step returned carries the step's
/// history, which holds the step's program, whose graph holds the parameter: kept on the
/// parameter, that history was a cycle, and every compiled solve in a process leaked its programs
/// (about 0.45 MB a Burgers solve).
void set_grads(const std::vector<Tensor>& parameters, const std::vector<Tensor>& new_grads);

}  // namespace eddy::optim
