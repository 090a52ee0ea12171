#pragma once
// Reverse mode. Each recorded op leaves a Node on its output; the graph is the web of nodes
// reachable through their saved inputs, and lives exactly as long as tensors refer to it. The
// state on each tensor (AutogradMeta) and GradMode are core's (core/autograd.h).

#include <cstdint>
#include <memory>
#include <vector>

#include "eddy/core/autograd.h"
#include "eddy/core/tensor.h"
#include "eddy/ops/primitive.h"

namespace eddy {

struct Node {
  const Primitive* primitive;
  Attrs attrs;
  std::vector<Tensor> inputs;  // kept with their tangents, so forward-over-reverse works
  // The output, for *_from_output rules; weak, since the output holds this node.
  std::weak_ptr<TensorImpl> output;
  // The versions of the inputs' and the output's memory when recorded (Storage::version): the
  // backward pass refuses values written in place since, which it would differentiate at.
  std::vector<uint64_t> input_versions;
  uint64_t output_version = 0;

  // Frees the graph behind this node iteratively: a time-stepping loop can leave a chain of
  // millions of nodes, which a recursive release would overflow the stack on.
  ~Node();
};

// The write count of the memory behind `tensor` (Storage::version); 0 where it has none of its own
// (a distributed tensor's whole).
uint64_t memory_version(const Tensor& tensor);

// The recorded graph behind `output`: how many nodes it has, and the bytes of the distinct
// storages their saved inputs keep alive. Walking it costs time in its size, not memory.
struct RecordedGraphSize {
  int64_t nodes = 0;
  int64_t bytes = 0;
};
RecordedGraphSize recorded_graph_size(const Tensor& output);

// Whether `outputs` were computed from a tensor that requires grad besides `leaves`: one an outer
// differentiation tracks (a closure's weights), through which derivatives taken with respect to
// `leaves` must stay differentiable.
bool depends_on_leaves_other_than(const std::vector<Tensor>& outputs, const std::vector<Tensor>& leaves);

// The tangent or cotangent `direction` of `value` in value's dtype. A complex direction for a real
// value is refused, naming `what` ("jvp: tangent 0"): cast, it lost its imaginary part without a
// word (JAX and torch.autograd.grad refuse it too).
Tensor direction_for(const Tensor& value, const Tensor& direction, const std::string& what);

// Reverse mode from `output`: accumulates into .grad() of the leaves it depends on. PyTorch's
// loss.backward() is backward(loss) here: Tensor is core's, and the backward pass is autodiff's.
void backward(const Tensor& output, const Tensor& grad_output = Tensor(), bool create_graph = false);

// d(outputs)/d(inputs) contracted with grad_outputs (ones for one-element outputs when omitted).
// With create_graph the result is itself differentiable, for higher derivatives. An input the
// outputs do not depend on gets zeros.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool create_graph = false);

}  // namespace eddy
