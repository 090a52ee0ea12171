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

namespace eddy::solvers {

class StepFunction {
 public:
  // `what` names the function in the lines given to `note` ("training step"); `note` may be empty.
  StepFunction(std::string what, compiler::TensorFunction function, bool compiled,
               std::function<void(const std::string&)> note);

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

 private:
  void tell(const std::string& line) const;

  std::string what_;
  compiler::TensorFunction function_;
  std::optional<CompiledFunction> compiled_;  // empty: eager requested, or capture refused
  std::function<void(const std::string&)> note_;
  bool reported_ = false;
};

}  // namespace eddy::solvers
