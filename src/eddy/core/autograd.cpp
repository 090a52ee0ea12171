// GradMode and Tensor's autodiff members: they read and write the state core/autograd.h defines.

#include "eddy/core/autograd.h"

#include "eddy/core/distribution.h"
#include "eddy/core/tracing.h"

namespace eddy {
namespace {
thread_local bool grad_mode_enabled = true;
}  // namespace

bool GradMode::enabled() { return grad_mode_enabled; }
void GradMode::set_enabled(bool enabled) { grad_mode_enabled = enabled; }

bool Tensor::requires_grad() const {
  if (!defined()) return false;
  const auto& meta = impl_->autograd;
  return meta && (meta->grad_fn || meta->requires_grad);
}

Tensor& Tensor::requires_grad_(bool enabled) {
  check_defined();
  auto& meta = impl_->autograd;
  if (!enabled) {
    EDDY_CHECK(!meta || !meta->grad_fn, "requires_grad_(false): tensor is the output of a recorded op; "
               "use detach() instead");
    meta.reset();
    return *this;
  }
  EDDY_CHECK(is_inexact(dtype()), "requires_grad_: only floating and complex tensors can require "
             "gradients, got ", dtype());
  if (!meta) meta = std::make_shared<AutogradMeta>();
  EDDY_CHECK(!meta->grad_fn, "requires_grad_: tensor is already the output of a recorded op");
  meta->requires_grad = true;
  return *this;
}

bool Tensor::is_leaf() const {
  check_defined();
  return !impl()->autograd || !impl()->autograd->grad_fn;
}

// A distributed leaf's gradient is its local part's (they share the autodiff state), laid out as
// the leaf is.
Tensor Tensor::grad() const {
  check_defined();
  const auto& meta = impl()->autograd;
  if (!meta || !meta->grad.defined()) return Tensor();
  return is_distributed(*this) ? with_local(*this, meta->grad) : meta->grad;
}

void Tensor::zero_grad() {
  // Traced, the clearing would happen once, at the trace, and later calls would pile the
  // gradients up, silently (an optimiser's zero_grad inside an eddy.jit loss).
  EDDY_CHECK(!active_trace_recorder(), "zero_grad (or .grad = None) inside a compiled function (eddy.jit): it "
             "would run only while tracing, and later calls would add each backward onto the last; clear the "
             "gradients outside the compiled function");
  check_defined();
  if (impl()->autograd) impl()->autograd->grad = Tensor();
}

Tensor Tensor::detach() const {
  if (is_distributed(*this)) return with_local(*this, distribution_of(*this)->local.detach());
  Tensor detached = make_view(*this, shape(), strides(), offset());
  detached.impl()->identity = impl_->identity;  // the same value, for a graph recorder
  return detached;
}

}  // namespace eddy
