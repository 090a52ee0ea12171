#pragma once
// Capture: run a function eagerly once while dispatch reports every primitive it evaluates, and
// keep what it did as a Graph. The ops autodiff emits go through dispatch too, so a function
// that calls grad() (a whole training step, derivatives of any order included) is captured
// whole.

#include <functional>
#include <vector>

#include "eddy/compiler/graph.h"

namespace eddy::compiler {

using TensorFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct Trace {
  Graph graph;
  std::vector<Tensor> outputs;  // of the eager run
};

// Runs `function` on `inputs` and records it. Throws eddy::Error, naming the operation, when the
// function reads a value computed from its inputs on the host (control flow on tensor values),
// writes a tensor in place, or draws random numbers: none of these can be replayed from a graph.
Trace trace(const TensorFunction& function, const std::vector<Tensor>& inputs);

}  // namespace eddy::compiler
