#pragma once
// A compiled program, called as a primitive: each output is a call of the compiled-call
// primitive, whose eval runs the program once for all of them and whose JVP and VJP rules
// differentiate the program's graph node by node with the nodes' own rules. The rules are
// dispatched ops, so grad, jvp and their compositions of a compiled function work to any order,
// as they do for the function run eagerly (JAX's jit is a primitive with rules the same way).

#include <memory>
#include <vector>

#include "eddy/compiler/program.h"

namespace eddy::compiler {

// The program's outputs on `inputs` (the graph's inputs), carrying derivatives with respect to
// them and to the captured tensors that require gradients (parameters the function closed over).
std::vector<Tensor> call_with_derivatives(const std::shared_ptr<const Program>& program,
                                          const std::vector<Tensor>& inputs);

// Whether a call on `inputs` has derivatives to carry: an input or a captured tensor has a
// tangent at an open forward level, or requires gradients while GradMode records.
bool needs_derivatives(const Program& program, const std::vector<Tensor>& inputs);

}  // namespace eddy::compiler
