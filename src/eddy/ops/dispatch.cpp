// The primitive registry and the dispatch point. The interpreter that adds derivatives is
// autodiff's and plugs in through set_dispatch_interpreter (ops/primitive.h).

#include <algorithm>

#include "eddy/core/tracing.h"
#include "eddy/ops/primitive.h"

namespace eddy {
namespace {

std::deque<Primitive>& primitive_registry() {
  static std::deque<Primitive> registry;
  return registry;
}

// Constant-initialised, so a primitive dispatched while the program starts sees it set or null,
// never garbage; autodiff sets it from its own static initialiser.
Interpreter installed_interpreter = nullptr;

}  // namespace

bool Primitive::differentiable_input(int i) const {
  return std::find(constant_inputs.begin(), constant_inputs.end(), i) == constant_inputs.end();
}

const Primitive& register_primitive(Primitive primitive) {
  primitive_registry().push_back(std::move(primitive));
  return primitive_registry().back();
}

const std::deque<Primitive>& all_primitives() { return primitive_registry(); }

void set_dispatch_interpreter(Interpreter interpreter) { installed_interpreter = interpreter; }

Tensor eval_primitive(const Primitive& primitive, Inputs inputs, const Attrs& attrs,
                      const OutputSpec& spec) {
  TraceRecorder* recorder = active_trace_recorder();
  Tensor out;
  {
    TraceRecorderScope paused(nullptr);
    out = primitive.eval(inputs, attrs, spec);
  }
  if (recorder) recorder->record(primitive, inputs, attrs, out);
  return out;
}

Tensor dispatch(const Primitive& primitive, Inputs inputs, const Attrs& attrs) {
  EDDY_CHECK(primitive.arity < 0 || static_cast<int>(inputs.size()) == primitive.arity,
             primitive.name, ": expected ", primitive.arity, " inputs, got ", inputs.size());
  EDDY_CHECK(!inputs.empty(), primitive.name, ": needs at least one input");
  for (size_t i = 0; i < inputs.size(); ++i) {
    EDDY_CHECK(inputs[i].defined(), primitive.name, ": input ", i, " is an undefined tensor");
    EDDY_CHECK(inputs[i].device() == inputs[0].device(), primitive.name, ": input ", i, " is on ",
               inputs[i].device(), " but input 0 is on ", inputs[0].device());
  }
  OutputSpec spec = primitive.infer(inputs, attrs);
  if (installed_interpreter) return installed_interpreter(primitive, inputs, attrs, spec);
  return eval_primitive(primitive, inputs, attrs, spec);
}

}  // namespace eddy
