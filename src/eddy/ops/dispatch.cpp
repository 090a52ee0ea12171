// The primitive registry, the dispatch point and the interpreter stack it hands calls to
// (ops/primitive.h). The stack's top (autodiff's) is process-wide; what is pushed under it is
// the calling thread's, since a capture belongs to the thread that runs the captured function.

#include <algorithm>
#include <atomic>

#include "eddy/core/tracing.h"
#include "eddy/ops/primitive.h"

namespace eddy {
namespace {

std::deque<Primitive>& primitive_registry() {
  static std::deque<Primitive> registry;
  return registry;
}

std::atomic<uint64_t> evaluations{0};

class KernelEvaluator final : public Interpreter {
 public:
  Tensor interpret(const OpCall& call) override {
    evaluations.fetch_add(1, std::memory_order_relaxed);
    TraceRecorderScope paused(nullptr);
    return call.primitive.eval(call.inputs, call.attrs, call.spec);
  }
};

class AbstractEvaluator final : public Interpreter {
 public:
  Tensor interpret(const OpCall& call) override {
    return Tensor::abstract(call.spec.shape, call.spec.dtype, call.device());
  }
};

KernelEvaluator kernels;
AbstractEvaluator abstract_values;

// Constant-initialised, so a primitive dispatched while the program starts sees it set or null,
// never garbage; autodiff sets it from its own static initialiser.
Interpreter* top_interpreter = nullptr;
Interpreter* distributed_interpreter = nullptr;

// Bottom first; the kernel evaluator lies under all of them.
thread_local std::vector<Interpreter*> pushed_interpreters;

// The top of what the calling thread pushed, the kernel evaluator when it pushed nothing.
Interpreter& top_pushed() { return pushed_interpreters.empty() ? kernels : *pushed_interpreters.back(); }

}  // namespace

bool Primitive::differentiable_input(int i) const {
  return std::find(constant_inputs.begin(), constant_inputs.end(), i) == constant_inputs.end();
}

std::vector<Tensor> Primitive::input_cotangents(Inputs inputs, const Attrs& attrs, const Tensor& output,
                                                const Tensor& cotangent, const std::vector<bool>& wanted) const {
  if (vjp_all) return vjp_all(inputs, attrs, output, cotangent, wanted);
  if (vjp_group) {
    const OutputCotangent alone{&attrs, cotangent};
    return vjp_group(inputs, std::span(&alone, 1), wanted);
  }
  std::vector<Tensor> cotangents(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!wanted[i]) continue;
    cotangents[i] = vjp_from_output && output.defined() ? vjp_from_output(inputs, attrs, output, cotangent)
                                                        : vjp(inputs, attrs, static_cast<int>(i), cotangent);
  }
  return cotangents;
}

const Primitive& register_primitive(Primitive primitive) {
  primitive_registry().push_back(std::move(primitive));
  return primitive_registry().back();
}

const std::deque<Primitive>& all_primitives() { return primitive_registry(); }

const Primitive* find_primitive(std::string_view name) {
  for (const Primitive& primitive : primitive_registry()) {
    if (primitive.name == name) return &primitive;
  }
  return nullptr;
}

Device OpCall::device() const {
  if (spec.device) return *spec.device;
  return inputs.empty() ? attrs.device : inputs[0].device();
}

void set_top_interpreter(Interpreter* interpreter) { top_interpreter = interpreter; }
void set_distributed_interpreter(Interpreter* interpreter) { distributed_interpreter = interpreter; }

InterpreterScope::InterpreterScope(Interpreter& interpreter) { pushed_interpreters.push_back(&interpreter); }

// Scopes can be neither copied nor moved, so they close in the reverse order of opening: the top
// is this scope's.
InterpreterScope::~InterpreterScope() { pushed_interpreters.pop_back(); }

Tensor interpret_below(const Interpreter& self, const OpCall& call) {
  if (&self == top_interpreter) return top_pushed().interpret(call);
  const auto& pushed = pushed_interpreters;
  auto found = std::find(pushed.rbegin(), pushed.rend(), &self);
  EDDY_CHECK(found != pushed.rend(), "internal: interpret_below from an interpreter not on the stack");
  return std::next(found) == pushed.rend() ? kernels.interpret(call) : (*std::next(found))->interpret(call);
}

Interpreter& kernel_evaluator() { return kernels; }
Interpreter& abstract_evaluator() { return abstract_values; }
uint64_t kernel_evaluations() { return evaluations.load(std::memory_order_relaxed); }

Tensor dispatch(const Primitive& primitive, Inputs inputs, const Attrs& attrs) {
  EDDY_CHECK(primitive.arity < 0 || static_cast<int>(inputs.size()) == primitive.arity,
             primitive.name, ": expected ", primitive.arity, " inputs, got ", inputs.size());
  EDDY_CHECK(primitive.arity == 0 || !inputs.empty(), primitive.name, ": needs at least one input");
  for (size_t i = 0; i < inputs.size(); ++i) {
    EDDY_CHECK(inputs[i].defined(), primitive.name, ": input ", i, " is an undefined tensor");
    EDDY_CHECK(inputs[i].device() == inputs[0].device(), primitive.name, ": input ", i, " is on ",
               inputs[i].device(), " but input 0 is on ", inputs[0].device());
  }
  const OutputSpec spec = primitive.infer(inputs, attrs);
  const OpCall call{primitive, inputs, attrs, spec};
  if (std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return is_distributed(t); })) {
    EDDY_CHECK(distributed_interpreter, primitive.name, ": a distributed input needs eddy's dist library linked in");
    return distributed_interpreter->interpret(call);
  }
  return top_interpreter ? top_interpreter->interpret(call) : top_pushed().interpret(call);
}

}  // namespace eddy
