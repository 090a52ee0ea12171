#include "eddy/compiler/trace.h"

#include <memory>
#include <sstream>
#include <unordered_map>

#include "eddy/core/tracing.h"

namespace eddy::compiler {
namespace {

// Values are found by what they are (storage and layout), not by handle: autodiff makes fresh
// handles of the same value (detach, tangent-stripping aliases), and all of them must resolve to
// the one graph value. A weak reference tells a dead storage from a new one at the same address.
struct Placement {
  std::weak_ptr<Storage> storage;
  int64_t offset;
  Shape shape;
  Shape strides;
  DType dtype;
  ValueId id;

  bool matches(const Tensor& t) const {
    return !storage.expired() && offset == t.offset() && shape == t.shape() && strides == t.strides() &&
           dtype == t.dtype();
  }
};

class GraphRecorder : public TraceRecorder {
 public:
  Graph graph;

  void add_input(const Tensor& tensor, size_t position) {
    EDDY_CHECK(!find(tensor), "compile: input ", position, " is the same tensor as an earlier input; pass "
               "distinct tensors");
    const ValueId id = graph.add_value(tensor.shape(), tensor.dtype(), ValueSource::input);
    graph.inputs.push_back(id);
    remember(tensor, id);
  }

  // The value of `tensor`, capturing it when the function did not compute it.
  ValueId value_of(const Tensor& tensor) {
    if (const Placement* known = find(tensor)) return known->id;
    const ValueId id = graph.add_value(tensor.shape(), tensor.dtype(), ValueSource::captured);
    graph.captured.push_back(CapturedTensor{id, tensor, false});
    remember(tensor, id);
    return id;
  }

  void record(const Primitive& primitive, std::span<const Tensor> inputs, const Attrs& attrs,
              const Tensor& output) override {
    GraphNode node{&primitive, attrs, {}, -1};
    for (const Tensor& input : inputs) node.inputs.push_back(value_of(input));
    node.output = graph.add_value(output.shape(), output.dtype(), ValueSource::node);
    remember(output, node.output);
    graph.nodes.push_back(std::move(node));
  }

  void host_read(const Tensor& tensor, std::string_view operation) override {
    const Placement* known = find(tensor);
    if (tensor.requires_grad() && tensor.is_leaf()) {
      throw Error("compile: the traced function reads the elements of a parameter (" + std::string(operation) +
                  " on shape " + shape_text(tensor) + "); the graph would keep today's value after the "
                  "optimiser changes it. Use the tensor in ops instead of reading it on the host");
    }
    if (!known || graph.value(known->id).source == ValueSource::captured) return;
    throw Error("compile: the traced function reads the elements of a tensor computed from its inputs (" +
                std::string(operation) + " on shape " + shape_text(tensor) +
                "); a captured graph cannot branch on tensor values. Move that decision out of "
                "the compiled function, or express it with where()");
  }

  void inplace_write(const Tensor& tensor, std::string_view operation) override {
    if (!find(tensor)) return;  // building a fresh constant
    throw Error("compile: the traced function writes in place (" + std::string(operation) +
                ") to a tensor of shape " + shape_text(tensor) +
                " that the graph reads; run in-place updates (an optimiser step) outside the "
                "compiled function");
  }

  void random_draw(std::string_view operation) override {
    throw Error("compile: the traced function draws random numbers (" + std::string(operation) +
                "), which a graph would replay as constants; draw them outside and pass them as "
                "inputs");
  }

  // Captured tensors that only the graph holds were created by the function itself: constants.
  void mark_constants() {
    for (CapturedTensor& entry : graph.captured) {
      entry.constant = entry.tensor.impl_ptr().use_count() == 1 && entry.tensor.storage() &&
                       entry.tensor.storage().use_count() == 1;
    }
  }

 private:
  static std::string shape_text(const Tensor& tensor) {
    std::ostringstream text;
    text << tensor.shape();
    return text.str();
  }

  const Placement* find(const Tensor& tensor) const {
    auto [first, last] = placements_.equal_range(tensor.storage().get());
    for (auto it = first; it != last; ++it) {
      if (it->second.matches(tensor)) return &it->second;
    }
    return nullptr;
  }

  void remember(const Tensor& tensor, ValueId id) {
    Storage* key = tensor.storage().get();
    auto [first, last] = placements_.equal_range(key);
    for (auto it = first; it != last;) {
      // A later value at the same place (an op that returned its input) or a dead storage whose
      // address was reused: either way the old entry no longer names what lives there.
      it = it->second.matches(tensor) || it->second.storage.expired() ? placements_.erase(it) : std::next(it);
    }
    placements_.emplace(key, Placement{tensor.storage(), tensor.offset(), tensor.shape(), tensor.strides(),
                                       tensor.dtype(), id});
  }

  std::unordered_multimap<const Storage*, Placement> placements_;
};

}  // namespace

Trace trace(const TensorFunction& function, const std::vector<Tensor>& inputs) {
  GraphRecorder recorder;
  for (size_t i = 0; i < inputs.size(); ++i) {
    EDDY_CHECK(inputs[i].defined(), "compile: input ", i, " is an undefined tensor");
    recorder.add_input(inputs[i], i);
  }
  std::vector<Tensor> outputs;
  {
    TraceRecorderScope scope(&recorder);
    outputs = function(inputs);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    EDDY_CHECK(outputs[i].defined(), "compile: output ", i, " of the traced function is an undefined tensor");
    recorder.graph.outputs.push_back(recorder.value_of(outputs[i]));
    // Frees the eager run's autodiff graph, whose nodes would otherwise hold the function's
    // constants and keep them from being recognised as such.
    outputs[i] = outputs[i].detach();
  }
  recorder.mark_constants();
  verify(recorder.graph);
  return Trace{std::move(recorder.graph), std::move(outputs)};
}

}  // namespace eddy::compiler
