// Composite ops: compositions of primitives, so they inherit every derivative rule.

#include <cmath>
#include <limits>
#include <numbers>

#include "eddy/core/tracing.h"
#include "eddy/ops/autocast.h"
#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"

namespace eddy {

Tensor detail::widened_if_half(const Tensor& x) { return is_half(x.dtype()) ? cast(x, DType::f32) : x; }

Tensor detail::in_float32(const Tensor& x, const std::function<Tensor(const Tensor&)>& f) {
  return is_half(x.dtype()) ? cast(f(widened_if_half(x)), x.dtype()) : f(x);
}

using detail::in_float32;
using detail::widened_if_half;

Tensor square(const Tensor& x) { return x * x; }

namespace {
// x > 0, and x clamped to each side of 0: a function written by a branch on each side sees its
// own side's values only, so neither branch overflows, nor does the unselected one's derivative
// turn into NaN.
struct Sides {
  Tensor positive, above, below;
};
Sides sides_of_zero(const Tensor& x) {
  const Tensor zero = zeros_like(x);
  const Tensor positive = gt(x, zero);
  return {positive, where(positive, x, zero), where(positive, zero, x)};
}
}  // namespace

// 1 / (1 + exp(-x)) for x > 0 and exp(x) / (1 + exp(x)) otherwise, both keeping their relative
// precision. Through tanh, 0.5 (1 + tanh(x / 2)) cancelled for negative x: sigmoid(-10) was 5e-4
// off in float32, and 0 from -16 on, so log(sigmoid(x)) was -inf.
Tensor sigmoid(const Tensor& x) {
  return in_float32(x, [](const Tensor& v) {
    const auto [positive, above, below] = sides_of_zero(v);
    const Tensor small = exp(below);
    return where(positive, 1.0 / (1.0 + exp(-above)), small / (1.0 + small));
  });
}

// Smooth at 0 in every derivative: max(x, 0) + log(1 + exp(-|x|)) had a second derivative of 0
// there (the kinks of max and abs), where it is 1/4. log1p: log(1 + exp(-40)) is 0 (softplus(-15)
// was 17% off in float32).
Tensor softplus(const Tensor& x) {
  return in_float32(x, [](const Tensor& v) {
    const auto [positive, above, below] = sides_of_zero(v);
    return where(positive, above + log1p(exp(-above)), log1p(exp(below)));
  });
}

// 0 where x <= 0, so that a NaN passes through (as in PyTorch) instead of becoming 0.
Tensor relu(const Tensor& x) { return where(le(x, zeros_like(x)), zeros_like(x), x); }

Tensor gelu_exact(const Tensor& x) {
  return in_float32(x, [](const Tensor& v) { return 0.5 * v * (1.0 + erf(v * (std::numbers::sqrt2 / 2))); });
}

Tensor silu(const Tensor& x) {
  return in_float32(x, [](const Tensor& v) { return v * sigmoid(v); });
}

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
  detail::require_floating("logsumexp", x);
  axis = normalize_axis(axis, x.dim(), "logsumexp");
  // The log of an empty sum, as JAX and PyTorch give it; the shift's max refused the empty axis
  // under its own name.
  if (is_inexact(x.dtype()) && x.shape()[static_cast<size_t>(axis)] == 0) {
    Shape shape = x.shape();
    shape[static_cast<size_t>(axis)] = 1;
    const Tensor out = full(shape, -std::numeric_limits<double>::infinity(), x.dtype(), x.device());
    return keepdims ? out : squeeze(out, axis);
  }
  return in_float32(x, [&](const Tensor& v) {
    Tensor shift = stable_shift(v, axis);
    Tensor out = shift + log(sum(exp(v - shift), {axis}, true));
    return keepdims ? out : squeeze(out, axis);
  });
}

Tensor softmax(const Tensor& x, int64_t axis) {
  // Checked under its own name: log_softmax's messages would name log_softmax.
  detail::require_floating("softmax", x);
  axis = normalize_axis(axis, x.dim(), "softmax");
  return in_float32(x, [&](const Tensor& v) { return exp(log_softmax(v, axis)); });
}

// Not x - logsumexp(x): adding the shift back first rounds away the low bits of the large
// logsumexp (about 1e-5 in float32 for logits near 1000), whereas x - shift is exact.
Tensor log_softmax(const Tensor& x, int64_t axis) {
  detail::require_floating("log_softmax", x);
  axis = normalize_axis(axis, x.dim(), "log_softmax");
  // Nothing to normalise over an empty axis: an empty result, as PyTorch gives (the shift's max
  // refused the axis under its own name).
  if (x.shape()[static_cast<size_t>(axis)] == 0) return zeros_like(x);
  return in_float32(x, [&](const Tensor& v) {
    Tensor shifted = v - stable_shift(v, axis);
    return shifted - log(sum(exp(shifted), {axis}, true));
  });
}

Tensor norm(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  detail::require_inexact("norm", x);
  return in_float32(x, [&](const Tensor& v) {
    Tensor squared = sum(is_complex(v.dtype()) ? real(v * conj(v)) : v * v, axes, keepdims);
    // The root of 1 where the sum is 0, so that the gradient there is 0 (PyTorch's subgradient)
    // rather than 0 times sqrt's infinite slope.
    const Tensor at_zero = eq(squared, zeros_like(squared));
    return where(at_zero, zeros_like(squared), sqrt(where(at_zero, ones_like(squared), squared)));
  });
}

Tensor mse_loss(const Tensor& prediction, const Tensor& target) {
  EDDY_CHECK(prediction.shape() == target.shape(), "mse_loss: prediction has shape ",
             prediction.shape(), " but target has shape ", target.shape());
  // Under autocast in float32 from the operands on, as PyTorch's autocast runs mse_loss: a 16-bit
  // loss received GradScaler's 65536 as a float16 cotangent, inf, so every such iteration was
  // skipped (and a cast of the loss after it did not help: the inf arose at the cast's backward).
  // Of complex values the mean of |e|^2, a real loss, where square(e) gave a complex "loss".
  const auto mean_square = [](const Tensor& e) { return mean(is_complex(e.dtype()) ? real(e * conj(e)) : square(e)); };
  if (autocast_dtype() && (is_half(prediction.dtype()) || is_half(target.dtype()))) {
    return mean_square(widened_if_half(prediction) - widened_if_half(target));  // float64 stays float64
  }
  return in_float32(prediction - target, mean_square);
}

namespace {
// Reads the targets on the host, which a captured graph cannot do: traced calls rely on the
// gather in cross_entropy refusing what this would have named.
void check_targets(const Tensor& targets, int64_t classes, int64_t ignore_index) {
  const std::vector<int64_t> values = targets.to_vector<int64_t>();
  for (size_t i = 0; i < values.size(); ++i) {
    EDDY_CHECK(values[i] == ignore_index || (values[i] >= 0 && values[i] < classes), "cross_entropy: target ",
               values[i], " at flat position ", i, " is not a class in [0, ", classes, ") nor ignore_index ",
               ignore_index);
  }
}
}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Reduction reduction) {
  EDDY_CHECK(logits.defined() && targets.defined(), "cross_entropy: undefined operand");
  EDDY_CHECK(is_floating(logits.dtype()), "cross_entropy: logits must be float32 or float64, got ", logits.dtype());
  EDDY_CHECK(targets.dtype() == DType::i32 || targets.dtype() == DType::i64,
             "cross_entropy: targets must be int32 or int64, got ", targets.dtype());
  EDDY_CHECK(logits.dim() >= 1 && logits.shape().back() > 0,
             "cross_entropy: logits need a non-empty class axis last, got shape ", logits.shape());
  const Shape leading(logits.shape().begin(), logits.shape().end() - 1);
  EDDY_CHECK(targets.shape() == leading, "cross_entropy: logits of shape ", logits.shape(),
             " need targets of shape ", leading, ", got ", targets.shape());
  const int64_t classes = logits.shape().back();
  // Distributed targets: each rank checks its part.
  const Tensor& checked = local_part(targets);
  if (!active_trace_recorder() && !checked.is_abstract()) check_targets(checked, classes, ignore_index);

  // 16-bit logits: the loss in float32 (a float16 mean over 65,520 rows or more was NaN).
  Tensor rows = reshape(widened_if_half(logits), {-1, classes});
  Tensor picked = reshape(targets, {-1, 1});
  Tensor counted = ne(picked, scalar(static_cast<double>(ignore_index), picked.dtype(), picked.device()));
  // An ignored row still gathers something (its loss is masked out below); a negative target
  // that is not ignored is sent past the last class so that gather refuses it instead of
  // counting it from the end.
  picked = where(counted, picked, zeros_like(picked));
  picked = where(lt(picked, zeros_like(picked)), full_like(picked, static_cast<double>(classes)), picked);
  // log sum exp(shifted) - shifted[target]: both terms are small where the loss is, so no large
  // logsumexp is rounded before the subtraction.
  Tensor shifted = rows - stable_shift(rows, 1);
  Tensor losses = log(sum(exp(shifted), {1}, true)) - gather(shifted, 1, picked);
  Tensor total = sum(where(counted, losses, zeros_like(losses)));
  // Under autocast the loss stays float32, as PyTorch's autocast runs cross_entropy: a float16 one
  // held 3 digits, and its gradient, GradScaler's 65536, rounded to inf in float16, so every
  // iteration at that scale was skipped.
  const DType result = is_half(logits.dtype()) && autocast_dtype() ? DType::f32 : logits.dtype();
  if (reduction == Reduction::sum) return cast(total, result);
  return cast(total / sum(cast(counted, rows.dtype())), result);
}

}  // namespace eddy
