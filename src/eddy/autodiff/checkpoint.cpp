// The checkpoint primitive. Its node saves only the segment's inputs; its VJP rule reruns the
// segment with recording on and takes the gradient through that graph, written with grad() and
// ordinary ops, so it is as differentiable as any other rule.

#include "eddy/autodiff/checkpoint.h"

#include <algorithm>
#include <optional>
#include <unordered_set>
#include <utility>

#include "eddy/autodiff/forward.h"
#include "eddy/core/distribution.h"
#include "eddy/core/tracing.h"
#include "eddy/ops/ops.h"
#include "eddy/ops/primitive.h"

namespace eddy {
namespace {

// What the node carries in Attrs::payload.
struct Segment {
  MultiFunction fn;
  std::vector<Shape> output_shapes;
  DType dtype = DType::f32;  // of every output
  // The packed outputs, computed before dispatch (infer needs their shape) and handed to eval.
  Tensor forward_value;
};

// Watches a segment run while a function is captured, for reads of abstract values other than
// its inputs (given as fresh values, so that the closure's own handles of them count) and what
// it makes from them: tensors its closure holds that the captured function made. The compiled
// program runs the segment's node itself, later, where those have no values.
class ClosureReadWatch final : public Interpreter {
 public:
  explicit ClosureReadWatch(const std::vector<Tensor>& arguments) {
    for (const Tensor& argument : arguments) known_.insert(value_identity(argument).get());
  }

  Tensor interpret(const OpCall& call) override {
    for (const Tensor& input : call.inputs) refuse_closure_read(input);
    Tensor output = interpret_below(*this, call);
    known_.insert(value_identity(output).get());
    return output;
  }

  // Also for the segment's outputs: one its closure holds, returned as it is, is read by no op.
  // (A distributed tensor's whole has no values of its own: its local part says whether it has.)
  void refuse_closure_read(const Tensor& value) const {
    EDDY_CHECK(!local_part(value).is_abstract() || known_.contains(value_identity(value).get()), "checkpoint: inside a "
               "compiled function, the segment's closure holds a tensor of shape ", value.shape(), " of the "
               "function's own (one of its inputs, or a value it computed); the compiled program runs the segment "
               "later, where that tensor has no values. Pass it to checkpoint() as an input (detach() it first where "
               "no derivative should reach it), or make it inside the segment");
  }

 private:
  std::unordered_set<const ValueIdentity*> known_;
};

Segment& segment_of(const Attrs& attrs) { return *static_cast<Segment*>(attrs.payload.get()); }

Tensor pack(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> flat;
  for (const Tensor& output : outputs) flat.push_back(reshape(output, {-1}));
  return flat.size() == 1 ? flat[0] : concat(flat, 0);
}

std::vector<Tensor> unpack(const Tensor& packed, const std::vector<Shape>& shapes) {
  std::vector<Tensor> outputs;
  int64_t start = 0;
  for (const Shape& shape : shapes) {
    const int64_t count = numel(shape);
    outputs.push_back(reshape(slice(packed, 0, start, start + count), shape));
    start += count;
  }
  return outputs;
}

// The cotangent of every `wanted` input, by rerunning the segment with recording on. Wanted, not
// requires_grad(): a compiled function's derivative rules replay its graph on values that track
// no gradient (compiler/compiled_call.cpp), and a segment whose input was an intermediate value
// then gave that input none, so the gradient of everything before it came out 0, silently.
std::vector<Tensor> input_cotangents(Inputs inputs, const Segment& segment, const Tensor& cotangent,
                                     const std::vector<bool>& wanted) {
  // The inner backward pass must stop at this segment's inputs: a parameter that earlier segments
  // use too is reachable through the state they made as well, and a gradient with respect to the
  // parameter itself would count those paths here, and again when the outer pass goes on through
  // them. So the segment reruns on detached copies, which keep their forward-mode tangents (forward
  // mode over a compiled reverse pass), or with create_graph (recording is on here), when the
  // result must stay differentiable with respect to the inputs, on new graph nodes of them.
  // An input not wanted here stays attached too under create_graph: the cotangents of the others
  // depend on it (d/dp of the gradient in x of sin(x p)), and detached it made that derivative 0.
  const bool create_graph = GradMode::enabled();
  std::vector<Tensor> arguments;
  std::vector<size_t> tracked;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!wanted[i] || !is_inexact(inputs[i].dtype())) {
      arguments.push_back(create_graph && inputs[i].requires_grad() ? identity(inputs[i])
                                                                    : detach_keeping_tangents(inputs[i]));
      continue;
    }
    tracked.push_back(i);
    arguments.push_back(create_graph && inputs[i].requires_grad() ? identity(inputs[i])
                                                                  : detach_keeping_tangents(inputs[i]).requires_grad_());
  }
  std::vector<Tensor> outputs;
  {
    GradModeGuard recording(true);
    outputs = segment.fn(arguments);
  }
  std::vector<Tensor> targets;
  for (size_t i : tracked) targets.push_back(arguments[i]);
  std::vector<Tensor> grads = grad(outputs, targets, unpack(cotangent, segment.output_shapes), create_graph);
  std::vector<Tensor> result(inputs.size());
  for (size_t k = 0; k < tracked.size(); ++k) result[tracked[k]] = grads[k];
  return result;
}

const Primitive& checkpoint_p = [] () -> const Primitive& {
  Primitive p;
  p.name = "checkpoint";
  p.cost = CostClass::opaque;
  p.arity = -1;
  // From the shapes, not the value, which eval hands out once: a compiled function's derivative
  // rules replay the node through dispatch (compiler/compiled_call.cpp).
  p.infer = [](Inputs, const Attrs& attrs) {
    const Segment& segment = segment_of(attrs);
    int64_t elements = 0;
    for (const Shape& shape : segment.output_shapes) elements += numel(shape);
    return OutputSpec{{elements}, segment.dtype};
  };
  // A detached view: the value may alias a segment input, whose graph state must stay its own.
  // A compiled program replays the node without checkpoint() having run first: then it runs
  // the segment itself.
  p.eval = [](Inputs inputs, const Attrs& attrs, const OutputSpec&) {
    Segment& segment = segment_of(attrs);
    if (segment.forward_value.defined()) return std::exchange(segment.forward_value, Tensor()).detach();
    NoGradGuard no_grad;
    return pack(segment.fn(std::vector<Tensor>(inputs.begin(), inputs.end()))).detach();
  };
  // Eager forward mode never reaches this primitive (checkpoint() runs the segment directly);
  // forward mode over a compiled function replays it: the segment runs again, in forward mode.
  p.jvp = [](Inputs inputs, const Attrs& attrs, int input, const Tensor& tangent) {
    const auto moving = static_cast<size_t>(input);
    const auto packed_segment = [&](const std::vector<Tensor>& x) {
      std::vector<Tensor> arguments(inputs.begin(), inputs.end());
      arguments[moving] = x[0];
      return std::vector<Tensor>{pack(segment_of(attrs).fn(arguments))};
    };
    return jvp(packed_segment, {inputs[moving]}, {tangent}).second[0];
  };
  // One recomputation gives every input's cotangent.
  p.vjp_all = [](Inputs inputs, const Attrs& attrs, const Tensor&, const Tensor& cotangent,
                 const std::vector<bool>& wanted) { return input_cotangents(inputs, segment_of(attrs), cotangent, wanted); };
  return register_primitive(std::move(p));
}();

}  // namespace

std::vector<Tensor> checkpoint(const MultiFunction& segment, const std::vector<Tensor>& inputs) {
  EDDY_CHECK(!inputs.empty(), "checkpoint: needs at least one input");
  const bool recording = GradMode::enabled() &&
                         std::any_of(inputs.begin(), inputs.end(), [](const Tensor& x) { return x.requires_grad(); });
  // Under a jvp the segment runs plainly, carrying tangents; one that reached it only through a
  // tensor its closure holds was dropped (0) when a node was recorded because an input required
  // grad.
  if (!recording || forward_mode_active()) return segment(inputs);

  auto state = std::make_shared<Segment>();
  state->fn = segment;
  {
    NoGradGuard no_grad;
    std::optional<ClosureReadWatch> watch;
    std::optional<InterpreterScope> watching;
    std::vector<Tensor> arguments = inputs;
    if (active_trace_recorder()) {
      for (Tensor& argument : arguments) argument = identity(argument);
      watching.emplace(watch.emplace(arguments));
    }
    std::vector<Tensor> outputs = segment(arguments);
    if (watch) {
      for (const Tensor& output : outputs) watch->refuse_closure_read(output);
    }
    EDDY_CHECK(!outputs.empty(), "checkpoint: the segment returned no outputs");
    for (size_t i = 0; i < outputs.size(); ++i) {
      EDDY_CHECK(outputs[i].dtype() == outputs[0].dtype(), "checkpoint: the segment's outputs must share one "
                 "dtype; output 0 is ", outputs[0].dtype(), " but output ", i, " is ", outputs[i].dtype());
      state->output_shapes.push_back(outputs[i].shape());
    }
    state->dtype = outputs[0].dtype();
    // Under abstract evaluation (a capture) no eval runs to take it, and it has no values to give.
    Tensor packed = pack(outputs);
    if (!packed.is_abstract()) state->forward_value = std::move(packed);
  }
  Attrs attrs;
  attrs.payload = state;
  return unpack(dispatch(checkpoint_p, Inputs(inputs.data(), inputs.size()), attrs), state->output_shapes);
}

}  // namespace eddy
