// Algebraic simplification. A rule applies only where it gives the node's value exactly, bit for
// bit, in the node's dtype (IEEE 754 arithmetic for floats), and only where the value it leaves
// has the node's shape and dtype. Left out on purpose:
//  - x + (+0) on floats: -0 + (+0) is +0, not -0. `x + 0.0` makes a +0, so it stays; x + (-0)
//    and x - (+0) are identities for every x and go.
//  - x - x -> 0 and x * 0 -> 0: not for NaN or Inf.
//  - products and powers of complex values: (a + bi)(1 + 0i) computes a*0 and b*0 terms that can
//    turn -0 into +0 and Inf into NaN, so x * 1, x / 1, x * -1 and pow keep their nodes there.
//  - x * 1 where the 1 broadcasts x to a larger shape: that is an expand, not x.
// pow(x, 2) -> x * x is exact against a correctly rounded pow, as IEEE 754 recommends; a libm pow
// may be an ulp off in rare cases, and the product is then the more accurate of the two.

#include <cmath>
#include <numeric>
#include <optional>

#include "eddy/compiler/passes.h"

namespace eddy::compiler {
namespace {

class Simplifier {
 public:
  explicit Simplifier(Graph& graph)
      : graph_(graph), constant_at_(graph.captured_positions()), producer_(graph.values.size(), -1) {
    for (const CapturedTensor& entry : graph.captured) {
      if (!entry.constant) constant_at_[static_cast<size_t>(entry.id)] = -1;
    }
  }

  bool run() {
    std::vector<ValueId> replacement(graph_.values.size());
    std::iota(replacement.begin(), replacement.end(), ValueId{0});
    bool changed = false;
    kept_.reserve(graph_.nodes.size());
    for (GraphNode& node : graph_.nodes) {
      // Redirected as we go, so a rule sees through the rewrites before it (neg(neg(x * 1))).
      for (ValueId& input : node.inputs) input = replacement[static_cast<size_t>(input)];
      // Every rule is about an op's inputs; creation ops have none (fold_constants takes them).
      const bool has_inputs = !node.inputs.empty();
      changed = (has_inputs && rewrite_in_place(node)) || changed;
      if (std::optional<ValueId> same = has_inputs ? equivalent_value(node) : std::nullopt) {
        replacement[static_cast<size_t>(node.output)] = *same;
        changed = true;
        continue;
      }
      producer_[static_cast<size_t>(node.output)] = static_cast<int>(kept_.size());
      kept_.push_back(std::move(node));
    }
    graph_.nodes = std::move(kept_);
    replace_uses(graph_, replacement);
    return changed;
  }

 private:
  const ValueInfo& info(ValueId id) const { return graph_.value(id); }

  // Whether x can stand for the node's output: same shape and dtype.
  bool fits(ValueId x, const GraphNode& node) const {
    return info(x).shape == info(node.output).shape && info(x).dtype == info(node.output).dtype;
  }

  // The node defining `id` when it applies `primitive`, or null.
  const GraphNode* produced_by(ValueId id, std::string_view primitive) const {
    const int position = producer_[static_cast<size_t>(id)];
    if (position < 0 || kept_[static_cast<size_t>(position)].primitive->name != primitive) return nullptr;
    return &kept_[static_cast<size_t>(position)];
  }

  // A one-element constant: captured, or made by a creation node (fold_constants folds those,
  // but simplify runs first).
  std::optional<c128> constant_scalar(ValueId id) const {
    if (const GraphNode* fill = produced_by(id, "full"); fill && numel(info(id).shape) == 1) return fill->attrs.value;
    const int position = constant_at_[static_cast<size_t>(id)];
    if (position < 0) return std::nullopt;
    const Tensor& tensor = graph_.captured[static_cast<size_t>(position)].tensor;
    if (tensor.numel() != 1) return std::nullopt;
    return tensor.to_vector<c128>()[0];
  }

  bool is_scalar(ValueId id, double value) const {
    const std::optional<c128> constant = constant_scalar(id);
    return constant && *constant == c128(value, 0);
  }

  // A zero z with x + z == x (negative zero) or x - z == x (positive zero) for every x of
  // `dtype`: IEEE gives -0 + (-0) = -0 and +0 + (-0) = +0; complex values add part by part.
  bool is_identity_zero(ValueId id, DType dtype, bool negative) const {
    const std::optional<c128> constant = constant_scalar(id);
    if (!constant || *constant != c128(0, 0)) return false;
    if (is_integral(dtype)) return true;
    return std::signbit(constant->real()) == negative &&
           (!is_complex(dtype) || std::signbit(constant->imag()) == negative);
  }

  bool rewrite_in_place(GraphNode& node) const {
    static const Primitive& neg = registered_primitive("neg");
    static const Primitive& mul = registered_primitive("mul");
    const std::string_view name = node.primitive->name;
    const DType dtype = info(node.output).dtype;
    if (name == "mul" && !is_complex(dtype)) {
      for (int side = 0; side < 2; ++side) {
        const ValueId x = node.inputs[static_cast<size_t>(side)], other = node.inputs[static_cast<size_t>(1 - side)];
        if (!is_scalar(other, -1) || !fits(x, node)) continue;
        node.primitive = &neg;
        node.inputs = {x};
        return true;
      }
    }
    if (name == "pow" && is_floating(dtype) && is_scalar(node.inputs[1], 2) && fits(node.inputs[0], node)) {
      node.primitive = &mul;
      node.inputs = {node.inputs[0], node.inputs[0]};
      return true;
    }
    if (name == "reshape") {
      if (const GraphNode* inner = produced_by(node.inputs[0], "reshape")) {
        node.inputs = {inner->inputs[0]};
        return true;
      }
    }
    return false;
  }

  // An existing value equal to the node's output, if a rule finds one.
  std::optional<ValueId> equivalent_value(const GraphNode& node) const {
    const std::string_view name = node.primitive->name;
    const DType dtype = info(node.output).dtype;
    const ValueId a = node.inputs[0], b = node.inputs.size() > 1 ? node.inputs[1] : a;
    auto candidate = [&](bool rule_holds, ValueId x) { return rule_holds && fits(x, node); };
    if (name == "neg") {
      if (const GraphNode* inner = produced_by(a, "neg"); inner && fits(inner->inputs[0], node)) return inner->inputs[0];
    }
    if (name == "reshape" || name == "expand" || name == "cast") {
      if (fits(a, node)) return a;
    }
    if (name == "add") {
      if (candidate(is_identity_zero(b, dtype, true), a)) return a;
      if (candidate(is_identity_zero(a, dtype, true), b)) return b;
    }
    if (name == "sub" && candidate(is_identity_zero(b, dtype, false), a)) return a;
    if (is_complex(dtype)) return std::nullopt;
    if (name == "mul") {
      if (candidate(is_scalar(b, 1), a)) return a;
      if (candidate(is_scalar(a, 1), b)) return b;
    }
    if ((name == "div" || name == "pow") && candidate(is_scalar(b, 1), a)) return a;
    return std::nullopt;
  }

  Graph& graph_;
  std::vector<int> constant_at_;
  std::vector<int> producer_;  // position in kept_
  std::vector<GraphNode> kept_;
};

}  // namespace

bool simplify_algebra(Graph& graph) { return Simplifier(graph).run(); }

}  // namespace eddy::compiler
