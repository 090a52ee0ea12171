#include "eddy/nn/normalize.h"

#include <numeric>
#include <string_view>
#include <vector>

#include "eddy/core/backend.h"
#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"
#include "eddy/ops/primitive.h"
#include "eddy/ops/sharding.h"

namespace eddy::nn {
namespace {

// The rows less their means (LayerNorm's centring), or as they are (RMSNorm's).
Tensor centred_if(bool centred, const Tensor& x) { return centred ? x - mean(x, {-1}, true) : x; }

// sqrt(mean of the squares + eps) of each row, kept as a column.
Tensor root_mean_square(const Tensor& shifted, double eps) { return sqrt(mean(square(shifted), {-1}, true) + eps); }

Tensor composed(const Tensor& x, double eps, bool centred) {
  const Tensor shifted = centred_if(centred, x);
  return shifted / root_mean_square(shifted, eps);
}

Tensor normalized(const Tensor& x, double eps, bool centred);

// J v for y = normalize(x). Along a row of n, with r = 1 / sqrt(mean of the (centred) squares +
// eps), J = r (I - y y^T / n) without centring and r (I - 1 1^T / n - y y^T / n) with it (y sums
// to zero there): symmetric, so one formula gives tangents and cotangents.
Tensor apply_jacobian(const Tensor& x, const Tensor& y, const Tensor& v, double eps, bool centred) {
  const Tensor r = 1.0 / root_mean_square(centred_if(centred, x), eps);
  return r * (centred_if(centred, v) - y * mean(y * v, {-1}, true));
}

// eps travels in Attrs::scale.
const Primitive& normalize_primitive(std::string_view name, bool centred) {
  Primitive p;
  p.name = name;
  p.arity = 1;
  p.cost = CostClass::reduction;
  p.infer = [name](Inputs in, const Attrs&) {
    EDDY_CHECK(in[0].dim() >= 1 && (in[0].dtype() == DType::f32 || in[0].dtype() == DType::f64), name,
               ": expected float32 or float64 of rank 1 or more, got ", in[0].dtype(), " ", in[0].shape());
    return OutputSpec{in[0].shape(), in[0].dtype()};
  };
  p.eval = [centred](Inputs in, const Attrs& attrs, const OutputSpec& spec) {
    Tensor out = Tensor::empty(spec.shape, spec.dtype, in[0].device());
    backend_for(out.device()).normalize_last_axis(in[0], attrs.scale, centred, out);
    return out;
  };
  const auto from_output = [centred](Inputs in, const Attrs& attrs, const Tensor& y, const Tensor& seed) {
    return apply_jacobian(in[0], y, seed, attrs.scale, centred);
  };
  p.jvp_from_output = from_output;
  p.vjp_from_output = from_output;
  // Where the output is no longer alive, it is computed again.
  const auto recomputing = [centred](Inputs in, const Attrs& attrs, int, const Tensor& seed) {
    return apply_jacobian(in[0], normalized(in[0], attrs.scale, centred), seed, attrs.scale, centred);
  };
  p.jvp = recomputing;
  p.vjp = recomputing;
  // Rows are independent problems: a split along any axis but the last is kept.
  p.sharding = [](Inputs in, const Attrs& attrs, std::span<const Placement> from, int64_t ranks) {
    std::vector<int64_t> row_axes(static_cast<size_t>(in[0].dim() - 1));
    std::iota(row_axes.begin(), row_axes.end(), 0);
    return sharding::alike_along(std::move(row_axes))(in, attrs, from, ranks);
  };
  return register_primitive(std::move(p));
}

const Primitive& layer_normalize_p = normalize_primitive("layer_normalize", true);
const Primitive& rms_normalize_p = normalize_primitive("rms_normalize", false);

Tensor normalized(const Tensor& x, double eps, bool centred) {
  // 16-bit x (a bias-free projection under autocast): in float32, rounded once, as kernels compute.
  // Composed in 16 bits, each step rounded: a float16 square past 256 was inf, and the rows came
  // out all zeros (and their gradients), silently.
  if (is_half(x.dtype())) {
    return detail::in_float32(x, [&](const Tensor& wide) { return normalized(wide, eps, centred); });
  }
  const bool has_kernel = (x.dtype() == DType::f32 || x.dtype() == DType::f64) &&
                          device_has(x.device(), Backend::OptionalKernel::normalize_last_axis);
  if (!has_kernel) return composed(x, eps, centred);
  Attrs attrs;
  attrs.scale = eps;
  return dispatch(centred ? layer_normalize_p : rms_normalize_p, {x}, attrs);
}

}  // namespace

Tensor layer_normalize(const Tensor& x, double eps) { return normalized(x, eps, true); }
Tensor rms_normalize(const Tensor& x, double eps) { return normalized(x, eps, false); }
Tensor composed_layer_normalize(const Tensor& x, double eps) { return composed(x, eps, true); }
Tensor composed_rms_normalize(const Tensor& x, double eps) { return composed(x, eps, false); }

}  // namespace eddy::nn
