// Composite ops: compositions of primitives, so they inherit every derivative rule.

#include <cmath>
#include <limits>
#include <numbers>

#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"

namespace eddy {

Tensor square(const Tensor& x) { return x * x; }

// Written through tanh so that it neither overflows nor loses precision for large |x|.
Tensor sigmoid(const Tensor& x) { return 0.5 * (1.0 + tanh(0.5 * x)); }

// max(x, 0) + log(1 + exp(-|x|)): exp never sees a positive argument.
Tensor softplus(const Tensor& x) {
  return maximum(x, zeros_like(x)) + log(1.0 + exp(-abs(x)));
}

Tensor relu(const Tensor& x) { return where(gt(x, zeros_like(x)), x, zeros_like(x)); }

Tensor gelu(const Tensor& x) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
}

Tensor silu(const Tensor& x) { return x * sigmoid(x); }

namespace {
// The (detached) maximum along `axis`, kept, to shift by so exp never overflows; the shift
// cancels exactly in the value and in every derivative, which is why detaching it is safe. An
// infinite maximum is replaced by 0 so that the shift never computes inf - inf.
Tensor stable_shift(const Tensor& x, int64_t axis) {
  Tensor shift = max(x, {axis}, true).detach();
  return where(lt(abs(shift), full_like(shift, std::numeric_limits<double>::infinity())), shift,
               zeros_like(shift));
}
}  // namespace

Tensor logsumexp(const Tensor& x, int64_t axis, bool keepdims) {
  detail::require_real("logsumexp", x);
  axis = normalize_axis(axis, x.dim(), "logsumexp");
  Tensor shift = stable_shift(x, axis);
  Tensor out = shift + log(sum(exp(x - shift), {axis}, true));
  return keepdims ? out : squeeze(out, axis);
}

Tensor softmax(const Tensor& x, int64_t axis) { return exp(log_softmax(x, axis)); }

// Not x - logsumexp(x): adding the shift back first rounds away the low bits of the large
// logsumexp (about 1e-5 in float32 for logits near 1000), whereas x - shift is exact.
Tensor log_softmax(const Tensor& x, int64_t axis) {
  detail::require_real("log_softmax", x);
  axis = normalize_axis(axis, x.dim(), "log_softmax");
  Tensor shifted = x - stable_shift(x, axis);
  return shifted - log(sum(exp(shifted), {axis}, true));
}

Tensor norm(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  detail::require_inexact("norm", x);
  Tensor squared = is_complex(x.dtype()) ? real(x * conj(x)) : x * x;
  return sqrt(sum(squared, axes, keepdims));
}

Tensor mse_loss(const Tensor& prediction, const Tensor& target) {
  EDDY_CHECK(prediction.shape() == target.shape(), "mse_loss: prediction has shape ",
             prediction.shape(), " but target has shape ", target.shape());
  return mean(square(prediction - target));
}

}  // namespace eddy
