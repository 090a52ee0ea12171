#pragma once
// Capture: run a function once with a graph recorder on the interpreter stack (ops/primitive.h),
// under autodiff, and keep what it did as a Graph. The ops autodiff emits reach the recorder too,
// so a function that calls grad() (a whole training step, derivatives of any order included) is
// captured whole. Concretely the kernels run as it records; abstractly none does, and values
// are shapes and dtypes only, so a program can be captured where it cannot run.

#include <functional>
#include <vector>

#include "eddy/compiler/graph.h"

namespace eddy::compiler {

using TensorFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

enum class Evaluation {
  concrete,  // kernels run: the trace's outputs are the function's values
  abstract,  // nothing runs: the inputs and outputs are abstract tensors (Tensor::abstract)
};

// A captured tensor whose elements the function read on the host (item(), a mask's count): the
// graph holds what was read, so a call after the tensor changed must trace again.
struct HostRead {
  Tensor tensor;
  Tensor values;  // a dense copy of what the function read

  bool unchanged() const;
};

struct Trace {
  Graph graph;
  std::vector<Tensor> outputs;  // of the run that recorded it: abstract ones when it was abstract
  std::vector<HostRead> host_reads;
};

// Refuses inputs a capture cannot take: an undefined tensor, or one tensor passed twice (the
// graph has one input per value). Every call of a compiled function checks, not only the first.
void check_inputs(const std::vector<Tensor>& inputs);

// Runs `function` on `inputs` and records it; abstractly (always, when an input is abstract),
// on abstract tensors of the inputs' shapes, dtypes, devices and requires_grad. Values are recognised by the identity their handles
// share (TensorImpl::identity). Throws eddy::Error, naming the operation, when the function
// reads a value computed from its inputs on the host (control flow on tensor values), writes a
// tensor in place, or draws random numbers from a generator: none of these can be replayed from
// a graph (a draw from a key passed in as an input can).
Trace trace(const TensorFunction& function, const std::vector<Tensor>& inputs,
            Evaluation evaluation = Evaluation::concrete);

}  // namespace eddy::compiler
