// The autodiff interpreter, the top of every interpreter stack (ops/primitive.h): it has the
// value computed by the interpreters below, adds forward-mode tangents level by level, and
// records a reverse-mode node when gradients are being tracked. Installed while the program starts.

#include <algorithm>

#include "eddy/autodiff/forward.h"
#include "eddy/autodiff/tape.h"
#include "eddy/ops/ops.h"
#include "eddy/ops/primitive.h"

namespace eddy {
namespace {

thread_local std::vector<int64_t> open_levels;
int64_t next_level_id = 0;

bool level_open(int64_t level) {
  return std::find(open_levels.begin(), open_levels.end(), level) != open_levels.end();
}

// Records the reverse-mode node on `out` when gradients are tracked. The node keeps the original
// inputs, with every tangent, so a backward pass run inside a jvp sees them (forward-over-reverse).
void record(const Primitive& primitive, Inputs original, const Attrs& attrs, const OutputSpec& spec,
            const Tensor& out) {
  if (!GradMode::enabled() || !is_inexact(spec.dtype) || !primitive.has_vjp()) return;
  bool needs_node = false;
  for (size_t i = 0; i < original.size() && !needs_node; ++i) {
    needs_node = primitive.differentiable_input(static_cast<int>(i)) && original[i].requires_grad();
  }
  if (!needs_node) return;
  std::vector<uint64_t> input_versions;
  for (const Tensor& input : original) input_versions.push_back(memory_version(input));
  auto node = std::make_shared<Node>(Node{&primitive, attrs, std::vector<Tensor>(original.begin(), original.end()),
                                          out.impl_ptr(), std::move(input_versions), memory_version(out)});
  out.impl()->autograd = std::make_shared<AutogradMeta>(AutogradMeta{std::move(node), false, {}});
}

// The value at every level from `level` inwards, plus its tangent at `level`. The value is
// connected to the reverse graph before any tangent rule runs, so rules that use the output
// (jvp_from_output) stay differentiable in reverse mode (reverse-over-forward).
Tensor evaluate(const Interpreter& self, const Primitive& primitive, Inputs original, Inputs inputs,
                const Attrs& attrs, const OutputSpec& spec) {
  const int64_t level = innermost_level(inputs);
  if (level < 0) {
    // A graph recorder below sees the call here, on tangent-free values and before any tangent
    // rule runs, so the graph has each value once and the rules' ops (which may use `out`) find
    // it already recorded.
    Tensor out = interpret_below(self, OpCall{primitive, inputs, attrs, spec});
    record(primitive, original, attrs, spec, out);
    return out;
  }

  return with_output_tangent(primitive, inputs, attrs, spec, level, [&](Inputs primals) {
    return evaluate(self, primitive, original, primals, attrs, spec);
  });
}

class AutodiffInterpreter final : public Interpreter {
 public:
  Tensor interpret(const OpCall& call) override {
    return evaluate(*this, call.primitive, call.inputs, call.inputs, call.attrs, call.spec);
  }
};

AutodiffInterpreter autodiff;

// The autodiff library is linked whole (src/CMakeLists.txt), so every program that links it
// installs this before main runs.
const bool interpreter_installed = (set_top_interpreter(&autodiff), true);

}  // namespace

// ---- forward levels ----
ForwardLevel::ForwardLevel() : id_(next_level_id++) { open_levels.push_back(id_); }
ForwardLevel::~ForwardLevel() { open_levels.pop_back(); }

SuspendedForwardLevels::SuspendedForwardLevels() { suspended_.swap(open_levels); }
SuspendedForwardLevels::~SuspendedForwardLevels() { open_levels = std::move(suspended_); }

bool forward_mode_active() { return !open_levels.empty(); }

int64_t innermost_level(const Tensor& tensor) {
  int64_t level = -1;
  for (const auto& [id, tangent] : tensor.impl()->tangents) {
    if (id > level && level_open(id)) level = id;
  }
  return level;
}

int64_t innermost_level(Inputs inputs) {
  int64_t level = -1;
  for (const Tensor& input : inputs) level = std::max(level, innermost_level(input));
  return level;
}

Tensor with_output_tangent(const Primitive& primitive, Inputs inputs, const Attrs& attrs, const OutputSpec& spec,
                           int64_t level, const std::function<Tensor(Inputs primals)>& value_of) {
  std::vector<Tensor> primals;
  primals.reserve(inputs.size());
  for (const Tensor& input : inputs) primals.push_back(without_tangent(input, level));
  Tensor out = value_of(primals);
  if (!is_inexact(spec.dtype)) return out;
  if (!primitive.jvp) {
    // No tangent rule means a zero derivative (comparisons, sign), unless reverse rules say
    // otherwise: then the tangent is not zero but unknown.
    if (!primitive.has_vjp()) return out;
    for (size_t i = 0; i < inputs.size(); ++i) {
      EDDY_CHECK(!primitive.differentiable_input(static_cast<int>(i)) || !tangent_at(inputs[i], level).defined(),
                 "forward mode: ", primitive.name, " has reverse rules but no tangent rule; use reverse mode");
    }
    return out;
  }
  // Output rules see an alias of the value: the tangent is attached to `out` and must not hold
  // `out` itself through its graph, or the two would keep each other alive forever.
  const Tensor value = primitive.jvp_from_output ? shallow_alias(out) : out;
  Tensor total;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor tangent = tangent_at(inputs[i], level);
    if (!tangent.defined() || !primitive.differentiable_input(static_cast<int>(i))) continue;
    Tensor contribution = primitive.jvp_from_output ? primitive.jvp_from_output(primals, attrs, value, tangent)
                                                    : primitive.jvp(primals, attrs, static_cast<int>(i), tangent);
    total = total.defined() ? add(total, contribution) : contribution;
  }
  if (!total.defined()) return out;
  if (total.shape() != spec.shape) total = expand(total, spec.shape);
  EDDY_CHECK(total.dtype() == spec.dtype, "internal: jvp rule of ", primitive.name, " returned ",
             total.dtype(), " for a ", spec.dtype, " output");
  out.impl()->tangents.emplace_back(level, total);
  return out;
}

Tensor tangent_at(const Tensor& tensor, int64_t level) {
  for (const auto& [id, tangent] : tensor.impl()->tangents) {
    if (id == level) return tangent;
  }
  return Tensor();
}

Tensor with_tangent(const Tensor& tensor, int64_t level, const Tensor& tangent) {
  Tensor alias = without_tangent(tensor, level);
  if (alias.same(tensor)) alias = shallow_alias(tensor);
  alias.impl()->tangents.emplace_back(level, tangent);
  return alias;
}

Tensor detach_keeping_tangents(const Tensor& tensor) {
  Tensor leaf = tensor.detach();
  leaf.impl()->tangents = tensor.impl()->tangents;
  return leaf;
}

Tensor without_tangent(const Tensor& tensor, int64_t level) {
  auto& tangents = tensor.impl()->tangents;
  auto it = std::find_if(tangents.begin(), tangents.end(),
                         [&](const auto& entry) { return entry.first == level; });
  if (it == tangents.end()) return tensor;
  Tensor alias = shallow_alias(tensor);
  alias.impl()->tangents.erase(alias.impl()->tangents.begin() + (it - tangents.begin()));
  return alias;
}

}  // namespace eddy
