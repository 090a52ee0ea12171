#pragma once
// A solver's per-step tensor function (a loss and its gradient, a forward pass), run through
// eddy::compile unless the run asked for eager execution. The first call with a new input
// signature traces and compiles; its results come from the compiled program too, so a run gives
// the same numbers whether it compiled at its first step or after --resume at a later one.
//
// Some functions cannot be captured: one that reads a tensor's values on the host, draws random
// numbers or writes in place. Others would take minutes to compile: a traced graph above a node
// bound (a high-order PINN derivative) is not compiled. The first such refusal says why in one
// line and the run goes on eagerly, with the function as written.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "eddy/compiler/compile.h"
#include "eddy/optim/adam.h"

namespace eddy::solvers {

class StepFunction {
 public:
  // `what` names the function in the lines given to `note` ("training step"); `note` may be empty.
  // Why the step runs eagerly after all goes to `warn` where given (it is a warning: --quiet,
  // which drops the notes, hid a run 2x slower), else to `note`.
  StepFunction(std::string what, compiler::TensorFunction function, bool compiled,
               std::function<void(const std::string&)> note, std::function<void(const std::string&)> warn = {});

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  // False when eager execution was asked for or the capture was refused.
  bool runs_compiled() const { return compiled_.has_value(); }

 private:
  void tell(const std::string& line) const;

  std::string what_;
  compiler::TensorFunction function_;
  std::optional<CompiledFunction> compiled_;  // empty: eager requested, or capture refused
  std::function<void(const std::string&)> note_, warn_;
  bool reported_ = false;
};

// Runs `adam`'s per-parameter update through the compiler (optim::Adam::run_updates_through):
// one fused loop per parameter shape, where the ops pass over each parameter about fifteen
// times. While `step` (the training step it follows) runs eagerly, so does the update: a run
// whose step the compiler refused then gives the eager run's numbers, bit for bit.
void compile_updates(optim::Adam& adam, const StepFunction& step);

}  // namespace eddy::solvers
