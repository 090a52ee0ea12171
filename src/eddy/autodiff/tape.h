#pragma once
// Reverse mode. Each recorded op leaves a Node on its output; the graph is the web of nodes
// reachable through their saved inputs, and lives exactly as long as tensors refer to it.

#include <memory>
#include <vector>

#include "eddy/core/tensor.h"
#include "eddy/ops/primitive.h"

namespace eddy {

struct Node {
  const Primitive* primitive;
  Attrs attrs;
  std::vector<Tensor> inputs;  // kept with their tangents, so forward-over-reverse works
  // The output, for *_from_output rules; weak, since the output holds this node.
  std::weak_ptr<TensorImpl> output;

  // Frees the graph behind this node iteratively: a time-stepping loop can leave a chain of
  // millions of nodes, which a recursive release would overflow the stack on.
  ~Node();
};

struct AutogradMeta {
  std::shared_ptr<Node> grad_fn;  // null for leaves
  bool requires_grad = false;     // leaves only: a gradient target of backward()
  Tensor grad;                    // leaves only: accumulated by backward()
};

// Whether ops record nodes. Off inside NoGradGuard; backward turns it on only for create_graph.
class GradMode {
 public:
  static bool enabled();
  static void set_enabled(bool enabled);
};

// Sets GradMode for a scope and restores it on exit, exceptions included.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(GradMode::enabled()) {
    GradMode::set_enabled(enabled);
  }
  ~GradModeGuard() { GradMode::set_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

// d(outputs)/d(inputs) contracted with grad_outputs (ones for one-element outputs when omitted).
// With create_graph the result is itself differentiable, for higher derivatives. An input the
// outputs do not depend on gets zeros.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool create_graph = false);

}  // namespace eddy
