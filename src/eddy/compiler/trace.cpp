#include "eddy/compiler/trace.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "eddy/autodiff/forward.h"
#include "eddy/core/autograd.h"
#include "eddy/core/distribution.h"
#include "eddy/core/tracing.h"
#include "eddy/ops/ops.h"

namespace eddy::compiler {
namespace {

class GraphRecorder final : public TraceRecorder, public Interpreter {
 public:
  Graph graph;
  // Tensors read on the host that the function did not compute: captured ones, or constants it
  // made (which die with the trace unless the graph holds them); weak, so as not to keep
  // mark_constants from seeing which captured tensors only the graph holds.
  std::vector<std::weak_ptr<TensorImpl>> host_read_tensors;
  // Those read before the graph knew them (host_read), and those guarded (guard_unchanged).
  std::vector<Tensor> host_read_kept;

  void add_input(const Tensor& tensor) {
    const ValueId id = add_value(tensor, ValueSource::input, tensor.requires_grad());
    graph.inputs.push_back(id);
    remember(tensor, id);
  }

  // The value of `tensor`, capturing it when the function did not compute it.
  ValueId value_of(const Tensor& tensor) {
    if (std::optional<ValueId> known = find(tensor)) return *known;
    const ValueId id = add_value(tensor, ValueSource::captured, tensor.requires_grad());
    graph.captured.push_back(CapturedTensor{id, tensor, false});
    remember(tensor, id);
    return id;
  }

  Tensor interpret(const OpCall& call) override {
    Tensor output = interpret_below(*this, call);
    // A call made inside a primitive's eval arrives with the recorder paused (the kernel
    // evaluator pauses it), and stays inside that primitive's node.
    if (active_trace_recorder() != this) return output;
    GraphNode node{&call.primitive, call.attrs, {}, -1};
    bool carries = output.requires_grad();
    for (size_t k = 0; k < call.inputs.size(); ++k) {
      const Tensor& input = call.inputs[k];
      ValueId id = value_of(input);
      // Derivatives pass only through differentiable inputs (stop_gradient's own is constant).
      if (call.primitive.differentiable_input(static_cast<int>(k))) {
        if (derivatives_stop_at(input, id)) id = stopped(input, id);
        carries = carries || carries_[id];
      }
      node.inputs.push_back(id);
    }
    node.output = add_value(output, ValueSource::node, carries);
    remember(output, node.output);
    graph.nodes.push_back(std::move(node));
    return output;
  }

  // An output is used as an op's input is: through a handle where derivatives stop, the stopped
  // value (a detached output, or one computed under no_grad, came back differentiable).
  void add_output(const Tensor& output) {
    ValueId id = value_of(output);
    if (derivatives_stop_at(output, id)) id = stopped(output, id);
    graph.outputs.push_back(id);
  }

  void host_read(const Tensor& tensor, std::string_view operation) override {
    const std::optional<ValueId> known = find(tensor);
    if (!known) {
      refuse_parameter_read(tensor, operation);
      // Not in the graph: a captured tensor not yet used in ops, or a temporary made for the
      // read (a NumPy mask wrapped as a tensor), kept so that the next call compares the memory
      // it was read from.
      host_read_kept.push_back(tensor);
      return;
    }
    const std::optional<std::vector<ValueId>> sources = captured_sources(*known);
    if (!sources) {
      throw Error("compile: the traced function reads the elements of a tensor computed from its inputs (" +
                  std::string(operation) + " on shape " + shape_text(tensor) +
                  "); a captured graph cannot branch on tensor values. Move that decision out of "
                  "the compiled function, or express it with where()");
    }
    if (tensor.is_abstract()) {
      throw Error("compile: the traced function reads the elements of a tensor it computed from captured tensors (" +
                  std::string(operation) + " on shape " + shape_text(tensor) +
                  "), which tracing on shapes alone does not compute; read the captured tensor itself (c.item(), "
                  "c.numpy()) or compute the value before the compiled function");
    }
    // A value computed from captured tensors alone (c[0], c * 2) is guarded by those tensors.
    for (ValueId source : *sources) {
      const Tensor& captured = captured_tensor(source);
      refuse_parameter_read(captured, operation);
      host_read_tensors.push_back(captured.impl_ptr());
    }
  }

  void guard_unchanged(const Tensor& tensor) override { host_read_kept.push_back(tensor); }

  bool readable_on_host(const Tensor& tensor) override {
    const std::optional<ValueId> known = find(tensor);
    if (!known) return !is_parameter(tensor);
    const std::optional<std::vector<ValueId>> sources = captured_sources(*known);
    return sources && std::none_of(sources->begin(), sources->end(),
                                   [&](ValueId source) { return is_parameter(captured_tensor(source)); });
  }

  void inplace_write(const Tensor& tensor, std::string_view operation) override {
    if (!find(tensor)) return;  // building a fresh constant from host data
    throw Error("compile: the traced function writes in place (" + std::string(operation) +
                ") to a tensor of shape " + shape_text(tensor) +
                " that the graph reads; run in-place updates (an optimiser step) outside the "
                "compiled function, or build the tensor with ops");
  }

  void random_draw(std::string_view operation) override {
    throw Error("compile: the traced function draws random numbers from a generator (" + std::string(operation) +
                "), which a graph would replay as constants; draw them outside and pass them as "
                "inputs, or pass a key (random_key) as an input and draw with uniform(key, ...) or "
                "normal(key, ...)");
  }

  // The interpreter tells of a local part as the output of the op that made it and again as the
  // input of each op that reads it: one fact each is kept.
  void replicated_over(const Tensor& local, dist::Communicator& communicator) override {
    const ValueId id = value_of(local);
    if (replicated_told_.insert({id, &communicator}).second) {
      graph.replicated.push_back(ReplicatedValue{id, &communicator});
    }
  }

  // Captured tensors that only the graph holds were created by the function itself: constants,
  // unless their memory is borrowed (a NumPy array the function closes over), which its owner may
  // change between calls.
  void mark_constants() {
    for (CapturedTensor& entry : graph.captured) {
      const std::shared_ptr<Storage>& storage = entry.tensor.storage();
      entry.constant = entry.tensor.impl_ptr().use_count() == 1 && storage && storage.use_count() == 1 &&
                       !storage->is_borrowed();
    }
  }

 private:
  struct Known {
    std::weak_ptr<const ValueIdentity> identity;  // expired: the address now names another value
    ValueId id;
  };

  // What an optimiser changes between calls: a read of its elements would be a stale constant.
  static bool is_parameter(const Tensor& tensor) { return tensor.requires_grad() && tensor.is_leaf(); }

  static void refuse_parameter_read(const Tensor& tensor, std::string_view operation) {
    if (!is_parameter(tensor)) return;
    throw Error("compile: the traced function reads the elements of a parameter (" + std::string(operation) +
                " on shape " + shape_text(tensor) + "); the graph would keep today's value after the "
                "optimiser changes it. Use the tensor in ops instead of reading it on the host");
  }

  // The captured values `id` is computed from, or nothing when it depends on an input.
  std::optional<std::vector<ValueId>> captured_sources(ValueId id) const {
    std::vector<const GraphNode*> producer(graph.values.size(), nullptr);
    for (const GraphNode& node : graph.nodes) producer[static_cast<size_t>(node.output)] = &node;
    std::vector<ValueId> sources;
    std::vector<bool> visited(graph.values.size(), false);
    std::vector<ValueId> pending{id};
    while (!pending.empty()) {
      const ValueId value = pending.back();
      pending.pop_back();
      if (visited[static_cast<size_t>(value)]) continue;
      visited[static_cast<size_t>(value)] = true;
      switch (graph.value(value).source) {
        case ValueSource::input:
          return std::nullopt;
        case ValueSource::captured:
          sources.push_back(value);
          break;
        case ValueSource::node: {
          const GraphNode* node = producer[static_cast<size_t>(value)];
          if (node == nullptr) return std::nullopt;
          pending.insert(pending.end(), node->inputs.begin(), node->inputs.end());
          break;
        }
      }
    }
    return sources;
  }

  const Tensor& captured_tensor(ValueId id) const {
    for (const CapturedTensor& entry : graph.captured) {
      if (entry.id == id) return entry.tensor;
    }
    throw Error("internal: value " + std::to_string(id) + " is not a captured tensor");
  }

  static std::string shape_text(const Tensor& tensor) {
    std::ostringstream text;
    text << tensor.shape();
    return text.str();
  }

  ValueId add_value(const Tensor& tensor, ValueSource source, bool carries) {
    const ValueId id = graph.add_value(tensor.shape(), tensor.dtype(), source);
    carries_.push_back(carries);
    autograd_of_.push_back(tensor.impl()->autograd);
    return id;
  }

  // Whether eagerly no derivative of value `id` passes through `handle`, while autodiff records:
  // a handle that requires no grad (detached, or computed under no_grad), or a leaf of its own
  // made from the value (x.detach().requires_grad_(), whose gradient eagerly goes to the new leaf
  // and not on to x; it named x's value, and derivatives of the compiled call went through both).
  // A leaf's aliases (jvp's tangent-carrying handles of an argument) share its autograd state and
  // pass derivatives on: told apart by handle, they stopped them, and derivatives of a compiled
  // function that took a jvp or hvp at its own argument were zero.
  bool derivatives_stop_at(const Tensor& handle, ValueId id) const {
    if (!GradMode::enabled() || !carries_[id]) return false;
    if (!handle.requires_grad()) return true;
    return handle.is_leaf() && autograd_of_[id].lock() != handle.impl()->autograd;
  }

  // A value that carries derivatives, used as a constant through `handle`: a detached handle of
  // it, or a value computed from it under no_grad, read while autodiff records. Eagerly no
  // derivative passes there, but a compiled call's derivatives walk every node of its graph
  // (compiled_call.cpp), and Taylor mode too, so the graph says so with the op stop_gradient,
  // recorded through this recorder as any op is, once per value.
  ValueId stopped(const Tensor& handle, ValueId id) {
    if (const auto found = stopped_.find(id); found != stopped_.end()) return found->second;
    const ValueId stop = value_of(stop_gradient(handle));
    stopped_.emplace(id, stop);
    return stop;
  }

  std::optional<ValueId> find(const Tensor& tensor) const {
    const ValueIdentity* identity = tensor.impl()->identity.get();
    if (!identity) return std::nullopt;
    auto found = known_.find(identity);
    if (found == known_.end() || found->second.identity.expired()) return std::nullopt;
    return found->second.id;
  }

  // A later value with the same identity (an op that returned its input) takes its place.
  void remember(const Tensor& tensor, ValueId id) {
    const std::shared_ptr<const ValueIdentity>& identity = value_identity(tensor);
    known_.insert_or_assign(identity.get(), Known{identity, id});
  }

  std::unordered_map<const ValueIdentity*, Known> known_;
  // By value: whether it carries derivatives (recorded from a handle that requires grad, or
  // computed from such a value), and the autograd state of the handle it was recorded from.
  std::vector<bool> carries_;
  std::vector<std::weak_ptr<AutogradMeta>> autograd_of_;
  std::unordered_map<ValueId, ValueId> stopped_;
  std::set<std::pair<ValueId, const dist::Communicator*>> replicated_told_;
};

// A copy of a tensor's elements of its own, dense in host memory, made outside any recording.
Tensor dense_host_copy(const Tensor& tensor) {
  Tensor copy = Tensor::empty(tensor.shape(), tensor.dtype(), cpu());
  copy.copy_(to(tensor.detach(), cpu()));
  return copy;
}

bool same_value(const Tensor& a, const Tensor& b) {
  return a.same(b) || (a.impl()->identity && a.impl()->identity == b.impl()->identity);
}

}  // namespace

void check_inputs(const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    EDDY_CHECK(inputs[i].defined(), "compile: input ", i, " is an undefined tensor");
    for (size_t j = 0; j < i; ++j) {
      EDDY_CHECK(!same_value(inputs[i], inputs[j]), "compile: input ", i, " is the same tensor as input ", j,
                 "; pass distinct tensors");
    }
  }
}

namespace {

// An input that carries forward-mode tangents stands in as one that requires grad: the recorder
// marks where derivatives stop (a detached handle, a value computed under no_grad) by which
// handles require grad, and the compiled call's tangents walk the same graph.
Tensor abstract_like(const Tensor& tensor) {
  Tensor stand_in = Tensor::abstract(tensor.shape(), tensor.dtype(), tensor.device());
  if (tensor.requires_grad() || innermost_level(tensor) >= 0) stand_in.requires_grad_();
  return stand_in;
}

}  // namespace

Trace trace(const TensorFunction& function, const std::vector<Tensor>& inputs, Evaluation evaluation) {
  // Abstract inputs have no values to run kernels on: a capture nested in an abstract one (a
  // Taylor-mode operator tracing its network inside a traced step) is abstract too.
  if (std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.is_abstract(); })) {
    evaluation = Evaluation::abstract;
  }
  GraphRecorder recorder;
  std::vector<Tensor> arguments;
  check_inputs(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    arguments.push_back(evaluation == Evaluation::abstract ? abstract_like(inputs[i]) : inputs[i]);
    recorder.add_input(arguments.back());
  }
  std::vector<Tensor> outputs;
  {
    const SuspendedForwardLevels on_tensors_as_they_are;
    InterpreterScope evaluator(evaluation == Evaluation::abstract ? abstract_evaluator() : kernel_evaluator());
    InterpreterScope recording(recorder);
    TraceRecorderScope hooks(&recorder);
    outputs = function(arguments);
    for (size_t i = 0; i < outputs.size(); ++i) {
      EDDY_CHECK(outputs[i].defined(), "compile: output ", i, " of the traced function is an undefined tensor");
      recorder.add_output(outputs[i]);
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    // Frees the run's autodiff graph, whose nodes would otherwise hold the function's constants
    // and keep them from being recognised as such.
    outputs[i] = outputs[i].detach();
  }
  recorder.mark_constants();
  verify(recorder.graph);
  std::vector<HostRead> host_reads;
  const auto guard = [&](const Tensor& tensor) {
    const bool seen = std::any_of(host_reads.begin(), host_reads.end(),
                                  [&](const HostRead& earlier) { return earlier.tensor.same(tensor); });
    if (!seen) host_reads.push_back(HostRead{tensor, dense_host_copy(tensor)});
  };
  for (const std::weak_ptr<TensorImpl>& read : recorder.host_read_tensors) {
    if (const std::shared_ptr<TensorImpl> alive = read.lock()) guard(Tensor(alive));
  }
  for (const Tensor& read : recorder.host_read_kept) guard(read);
  return Trace{std::move(recorder.graph), std::move(outputs), std::move(host_reads)};
}

// Asked at every call of the compiled function (a module's training mode is such a read): a dense
// host tensor is compared where it lies, without the copy.
bool HostRead::unchanged() const {
  const bool in_place = tensor.device() == cpu() && tensor.is_contiguous() && !distribution_of(tensor);
  const Tensor now = in_place ? tensor : dense_host_copy(tensor);
  return now.shape() == values.shape() &&
         std::memcmp(now.raw_data(), values.raw_data(), static_cast<size_t>(now.numel()) * dtype_size(now.dtype())) == 0;
}

}  // namespace eddy::compiler
