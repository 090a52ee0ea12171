#pragma once
// The autodiff state a Tensor carries, and the switch that says whether ops record it. Core owns
// both, so that Tensor's own members (requires_grad_, grad, detach, the in-place checks of copy_
// and fill_) need nothing above core. Filling the state in (recording nodes at dispatch, the
// backward pass, forward-mode levels) is autodiff's work (autodiff/tape.h, autodiff/forward.h).

#include <memory>

#include "eddy/core/tensor.h"

namespace eddy {

struct Node;  // a recorded op: autodiff/tape.h

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

}  // namespace eddy
