#pragma once
// Module: the base of every layer and model. A module owns named parameters (trainable leaf
// tensors), named buffers (fixed tensors saved with the model, such as Fourier-feature
// matrices) and named child modules; names nest with dots ("blocks.0.weight").

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "eddy/core/tensor.h"
#include "eddy/nn/state_dict.h"

namespace eddy::nn {

class Module {
 public:
  Module();
  Module(const Module&) = delete;  // registrations point into the object
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  virtual Tensor forward(const Tensor& input) = 0;
  Tensor operator()(const Tensor& input) { return forward(input); }

  // Trainable tensors, depth-first in registration order, each once (under the first name it is
  // reached by, when a module or tensor is registered in two places).
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  int64_t parameter_count() const;

  // Parameters and buffers by name. The tensors share storage with the module's.
  StateDict state_dict() const;
  // Copies values in by name. Every key of the module must be present, with the same shape
  // and dtype; extra keys are an error too (they usually mean the wrong model), except a tied
  // name (register_tied_name, or another name a shared tensor is reached by) holding the same
  // values as the key it is tied to, as PyTorch's state dicts of tied models have (Hugging Face's
  // GPT-2 lists lm_head.weight beside transformer.wte.weight). Errors name the key, the expected
  // and the found shape or dtype.
  void load_state_dict(const StateDict& state);

  // Moves every parameter and buffer, the children's too, to `device` (each stays what it was:
  // a parameter a trainable leaf). Optimisers made before hold the old tensors: make them after.
  void to(Device device);

  // Training mode matters to Dropout; it propagates to children. A compiled function that read
  // it (a forward pass with dropout) is traced again once it changes: the mode is read as a
  // captured tensor's value (compiler/trace.h, host reads), where the graph kept the mode it was
  // traced in (eddy.jit of a step traced under eval() ran without dropout after train()).
  // Virtual so that a model written in Python may override it (keeping a child in eval mode).
  virtual void train(bool enabled = true);
  void eval() { train(false); }
  bool is_training() const;

  // Whether `other` is this module or one of its descendants.
  bool contains(const Module& other) const;

 protected:
  // Registers a member tensor as a trainable parameter (made a requires_grad leaf).
  void register_parameter(std::string name, Tensor& member);
  void register_buffer(std::string name, Tensor& member);
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> child) {
    refuse_taken_name(name, "register_module");
    children_.emplace_back(std::move(name), child);
    return child;
  }
  // Names a tensor the module uses under another registered name (`tied_to`, a key of
  // state_dict()): state dicts from elsewhere may carry it, and load_state_dict accepts it when it
  // holds the same values.
  void register_tied_name(std::string name, std::string tied_to);
  // Registers `child` under `name`, or puts it in place of the child registered under that name:
  // for models whose children are assigned after construction, as Python's are.
  void set_module(const std::string& name, std::shared_ptr<Module> child);
  // Removes the parameter, buffer or child registered under `name`, if any.
  void forget(const std::string& name);

 private:
  template <typename Visit>
  void visit_tensors(const std::string& prefix, bool buffers, Visit&& visit) const;
  template <typename Visit>
  void visit_tied_names(const std::string& prefix, Visit&& visit) const;
  std::vector<std::pair<std::string, Tensor>> named_tensors(bool buffers) const;
  // A name registered twice (as a parameter, buffer or child) kept one entry in state_dict(): a
  // checkpoint saved and loaded without error left the other tensors as they were.
  void refuse_taken_name(const std::string& name, std::string_view registering) const;

  std::vector<std::pair<std::string, Tensor*>> parameters_;
  std::vector<std::pair<std::string, Tensor*>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::pair<std::string, std::string>> tied_names_;  // name, the key it is tied to
  Tensor training_;  // a bool scalar on the CPU
};

}  // namespace eddy::nn
