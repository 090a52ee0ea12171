// Reduction primitives: sum, prod, max and min over any set of axes, with keepdims.

#include <algorithm>

#include "eddy/core/autograd.h"
#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"
#include "eddy/ops/sharding.h"

namespace eddy {
namespace {
using namespace detail;

Shape kept_shape(const Shape& in, const std::vector<int64_t>& axes) {
  Shape out = in;
  for (int64_t axis : axes) out[axis] = 1;
  return out;
}

Shape reduced_shape(const Shape& in, const std::vector<int64_t>& axes, bool keepdims) {
  if (keepdims) return kept_shape(in, axes);
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) out.push_back(in[d]);
  }
  return out;
}

// A cotangent or value of the reduced shape, brought back to the input's rank.
Tensor unreduce(const Tensor& g, const Tensor& x, const Attrs& attrs) {
  return expand(reshape(g, kept_shape(x.shape(), attrs.axes)), x.shape());
}

// The share of the cotangent each input element receives in max/min: ties split evenly. A NaN is
// the extremum (max and min propagate it), so the NaNs take the share, as in PyTorch; compared
// with ==, no entry equalled it and every share was 0 / 0.
Tensor extremum_weight(const Tensor& x, const Attrs& attrs, bool maximum) {
  Tensor extremum = maximum ? max(x, attrs.axes, true) : min(x, attrs.axes, true);
  Tensor hits = cast(eq(x, extremum), x.dtype()) + cast(ne(x, x), x.dtype());
  return hits / sum(hits, attrs.axes, true);
}

const Primitive& reduction(std::string_view name, ReduceKernel kernel, bool real_only,
                           Primitive::JvpRule jvp, Primitive::VjpRule vjp, bool linear = false) {
  Primitive p;
  p.name = name;
  p.cost = CostClass::reduction;
  p.additive_reduction = kernel == ReduceKernel::sum;
  p.linear = linear;
  // Partial results over a split axis combine by the reduction itself for sum and max; min has no
  // partial placement and prod none that derivatives could use, so those gather first.
  p.sharding = sharding::reduction(kernel == ReduceKernel::sum   ? std::optional(Placement::Kind::partial_sum)
                                   : kernel == ReduceKernel::max ? std::optional(Placement::Kind::partial_max)
                                                                 : std::nullopt);
  p.infer = [=](Inputs in, const Attrs& attrs) {
    check_dtype(name, in[0], in[0].dtype() != DType::b8, "a numeric (non-bool) tensor");
    if (real_only) require_real(name, in[0]);
    for (int64_t axis : attrs.axes) {
      EDDY_CHECK(!real_only || in[0].shape()[axis] > 0, name, ": cannot reduce over axis ", axis,
                 " of size 0 (shape ", in[0].shape(), ")");
    }
    return OutputSpec{reduced_shape(in[0].shape(), attrs.axes, attrs.keepdims), in[0].dtype()};
  };
  p.eval = [kernel](Inputs in, const Attrs& attrs, const OutputSpec& spec) {
    Shape kept = kept_shape(in[0].shape(), attrs.axes);
    Tensor out = Tensor::empty(kept, spec.dtype, in[0].device());
    backend_of(out).reduce(kernel, in[0], attrs.axes, out);
    return make_view(out, spec.shape, contiguous_strides(spec.shape), 0);
  };
  p.jvp = std::move(jvp);
  p.vjp = std::move(vjp);
  return register_primitive(std::move(p));
}

const Primitive& sum_p = reduction("sum", ReduceKernel::sum, false,
    [](Inputs, const Attrs& a, int, const Tensor& t) { return sum(t, a.axes, a.keepdims); },
    [](Inputs in, const Attrs& a, int, const Tensor& g) { return unreduce(g, in[0], a); }, true);

// d prod / d x_i: the product over `axes` of every entry but x_i, built from multiplications
// alone, as exclusive prefix and suffix products (scans in log2(n) passes). prod(x) / x_i, the
// rule before, was NaN at a zero entry and 0 wherever the whole product underflowed; this is
// exact there, and so are its own derivatives, which are products again.
Tensor products_of_the_others(const Tensor& x, const std::vector<int64_t>& axes) {
  std::vector<int64_t> order;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) order.push_back(d);
  }
  const auto kept_axes = static_cast<int64_t>(order.size());
  order.insert(order.end(), axes.begin(), axes.end());
  const Tensor moved = permute(x, order);
  Shape flat_shape(moved.shape().begin(), moved.shape().begin() + kept_axes);
  int64_t n = 1;
  for (int64_t axis : axes) n *= x.shape()[axis];
  // x^0: ones still recorded as x's, so that a nested gradient through a prod over one entry is
  // 0 rather than refused for recording nothing.
  if (n <= 1) return pow(x, 0.0);
  flat_shape.push_back(n);
  const Tensor flat = reshape(moved, flat_shape);

  // v moved `by` places toward the end (or the start), the places it leaves filled with ones.
  auto shifted = [&](const Tensor& v, int64_t by, bool toward_end) {
    Shape fill_shape = flat_shape;
    fill_shape.back() = by;
    const Tensor fill = ones(fill_shape, v.dtype(), v.device());
    return toward_end ? concat({fill, slice(v, kept_axes, 0, n - by)}, kept_axes)
                      : concat({slice(v, kept_axes, by, n), fill}, kept_axes);
  };
  Tensor before = shifted(flat, 1, true), after = shifted(flat, 1, false);
  for (int64_t span = 1; span < n; span *= 2) {
    before = before * shifted(before, span, true);
    after = after * shifted(after, span, false);
  }
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return permute(reshape(before * after, moved.shape()), inverse);
}

const Primitive& prod_p = reduction("prod", ReduceKernel::prod, false,
    [](Inputs in, const Attrs& a, int, const Tensor& t) {
      return sum(t * products_of_the_others(in[0], a.axes), a.axes, a.keepdims);
    },
    [](Inputs in, const Attrs& a, int, const Tensor& g) {
      return unreduce(g, in[0], a) * conj(products_of_the_others(in[0], a.axes));
    });

const Primitive& max_p = reduction("max", ReduceKernel::max, true,
    [](Inputs in, const Attrs& a, int, const Tensor& t) {
      return sum(t * extremum_weight(in[0], a, true), a.axes, a.keepdims);
    },
    [](Inputs in, const Attrs& a, int, const Tensor& g) {
      return unreduce(g, in[0], a) * extremum_weight(in[0], a, true);
    });

const Primitive& min_p = reduction("min", ReduceKernel::min, true,
    [](Inputs in, const Attrs& a, int, const Tensor& t) {
      return sum(t * extremum_weight(in[0], a, false), a.axes, a.keepdims);
    },
    [](Inputs in, const Attrs& a, int, const Tensor& g) {
      return unreduce(g, in[0], a) * extremum_weight(in[0], a, false);
    });

Tensor reduce_with(const Primitive& p, const Tensor& x, const std::vector<int64_t>& axes,
                   bool keepdims) {
  Attrs attrs;
  attrs.axes = normalize_axes(axes, x.dim(), p.name);
  attrs.keepdims = keepdims;
  // Booleans are summed as counts.
  const Tensor& input = x.dtype() == DType::b8 && &p == &sum_p ? cast(x, DType::i64) : x;
  return dispatch(p, {input}, attrs);
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return reduce_with(sum_p, x, axes, keepdims);
}
Tensor prod(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return reduce_with(prod_p, x, axes, keepdims);
}
std::optional<std::vector<int64_t>> first_non_finite(const Tensor& x) {
  if (!is_inexact(x.dtype()) || x.numel() == 0) return std::nullopt;
  NoGradGuard no_grad;
  // x - x is 0 exactly where x is finite: one pass and a sum where all are, the common case.
  const Tensor differences = abs(x - x);
  if (sum(differences).item<double>() == 0) return std::nullopt;
  const std::vector<bool> flags = eq(differences, zeros_like(differences)).to_vector<bool>();
  auto flat = static_cast<int64_t>(std::find(flags.begin(), flags.end(), false) - flags.begin());
  std::vector<int64_t> index(x.shape().size());
  for (size_t axis = index.size(); axis-- > 0;) {
    index[axis] = flat % x.shape()[axis];
    flat /= x.shape()[axis];
  }
  return index;
}

Tensor max(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return reduce_with(max_p, x, axes, keepdims);
}
Tensor min(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return reduce_with(min_p, x, axes, keepdims);
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  require_inexact("mean", x);
  int64_t count = 1;
  for (int64_t axis : normalize_axes(axes, x.dim(), "mean")) count *= x.shape()[axis];
  return detail::in_float32(x, [&](const Tensor& v) { return sum(v, axes, keepdims) / static_cast<double>(count); });
}

}  // namespace eddy
