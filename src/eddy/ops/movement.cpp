// Movement primitives: reshape, permute, expand, slice, pad, flip and concat, and stop_gradient.
// reshape (of dense data), permute, expand, slice and stop_gradient return views that share
// storage with their input.

#include <algorithm>
#include <numeric>

#include "eddy/core/tracing.h"
#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"
#include "eddy/ops/sharding.h"

namespace eddy {
namespace {
using namespace detail;

const Primitive& reshape_p = [] () -> const Primitive& {
  Primitive p;
  p.name = "reshape";
  p.cost = CostClass::movement;
  p.sharding = sharding::reshape();
  p.linear = true;
  p.infer = [](Inputs in, const Attrs& a) {
    EDDY_CHECK(numel(a.shape) == in[0].numel(), "reshape: cannot reshape tensor of shape ",
               in[0].shape(), " (", in[0].numel(), " elements) to ", a.shape);
    return OutputSpec{a.shape, in[0].dtype()};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec&) {
    Tensor source = dense(in[0]);
    return make_view(source, a.shape, contiguous_strides(a.shape), source.offset());
  };
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) { return reshape(t, a.shape); };
  p.vjp = [](Inputs in, const Attrs&, int, const Tensor& g) { return reshape(g, in[0].shape()); };
  return register_primitive(std::move(p));
}();

// Declared elementwise, fused as the identity, so a stopped value costs nothing inside a loop;
// with its input constant and no jvp or vjp, its output never carries a derivative.
const Primitive& stop_gradient_p = [] () -> const Primitive& {
  Primitive p;
  p.name = "stop_gradient";
  p.cost = CostClass::cheap;
  p.elementwise = true;
  p.lowering = Lowering{"$0", {}, "$0"};
  p.sharding = sharding::elementwise();
  p.constant_inputs = {0};
  p.infer = [](Inputs in, const Attrs&) { return OutputSpec{in[0].shape(), in[0].dtype()}; };
  p.eval = [](Inputs in, const Attrs&, const OutputSpec&) {
    return make_view(in[0], in[0].shape(), in[0].strides(), in[0].offset());
  };
  return register_primitive(std::move(p));
}();

const Primitive& permute_p = [] () -> const Primitive& {
  Primitive p;
  p.name = "permute";
  p.cost = CostClass::movement;
  p.sharding = sharding::permute();
  p.linear = true;
  p.moves_axes = true;
  p.infer = [](Inputs in, const Attrs& a) {
    const int64_t rank = in[0].dim();
    EDDY_CHECK(static_cast<int64_t>(a.axes.size()) == rank, "permute: permutation has ",
               a.axes.size(), " entries for a tensor of shape ", in[0].shape());
    std::vector<bool> seen(rank, false);
    Shape shape;
    for (int64_t axis : a.axes) {
      EDDY_CHECK(axis >= 0 && axis < rank && !seen[axis], "permute: ", to_string(a.axes),
                 " is not a permutation of the axes of a rank-", rank, " tensor");
      seen[axis] = true;
      shape.push_back(in[0].shape()[axis]);
    }
    return OutputSpec{shape, in[0].dtype()};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec& spec) {
    Shape strides;
    for (int64_t axis : a.axes) strides.push_back(in[0].strides()[axis]);
    return make_view(in[0], spec.shape, strides, in[0].offset());
  };
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) { return permute(t, a.axes); };
  p.vjp = [](Inputs, const Attrs& a, int, const Tensor& g) {
    std::vector<int64_t> inverse(a.axes.size());
    for (size_t i = 0; i < a.axes.size(); ++i) inverse[a.axes[i]] = static_cast<int64_t>(i);
    return permute(g, inverse);
  };
  return register_primitive(std::move(p));
}();

const Primitive& expand_p = [] () -> const Primitive& {
  Primitive p;
  p.name = "expand";
  p.cost = CostClass::movement;
  p.sharding = sharding::expand();
  p.linear = true;
  p.infer = [](Inputs in, const Attrs& a) {
    const Shape& from = in[0].shape();
    bool ok = a.shape.size() >= from.size();
    for (size_t i = 0; ok && i < from.size(); ++i) {
      int64_t target = a.shape[a.shape.size() - from.size() + i];
      ok = from[i] == target || from[i] == 1;
    }
    EDDY_CHECK(ok, "expand: cannot broadcast shape ", from, " to ", a.shape);
    // A size-1 axis took any target, -1 too: the result's numel() was negative.
    EDDY_CHECK(std::all_of(a.shape.begin(), a.shape.end(), [](int64_t size) { return size >= 0; }),
               "expand: the shape ", a.shape, " has a negative size");
    return OutputSpec{a.shape, in[0].dtype()};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec&) {
    Tensor view = broadcast_view(in[0], a.shape);
    return make_view(view, view.shape(), view.strides(), view.offset());
  };
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) { return expand(t, a.shape); };
  p.vjp = [](Inputs in, const Attrs&, int, const Tensor& g) { return sum_to_shape(g, in[0].shape()); };
  return register_primitive(std::move(p));
}();

// Transpose of a strided slice along one axis: spread the m entries of g to positions
// start, start + step, ... of an axis of length `size`, zeros elsewhere.
Tensor unslice_axis(const Tensor& g, int64_t axis, int64_t size, int64_t start, int64_t step) {
  const int64_t m = g.shape()[axis];
  std::vector<int64_t> before(g.dim(), 0), after(g.dim(), 0);
  if (m == 0) {
    after[axis] = size;
    return pad(g, before, after);
  }
  Tensor spread = g;
  if (step > 1) {
    // [.., m, ..] -> [.., m, step] (zeros after each entry) -> [.., m * step, ..], then trim.
    Tensor widened = unsqueeze(g, axis + 1);
    std::vector<int64_t> wb(widened.dim(), 0), wa(widened.dim(), 0);
    wa[axis + 1] = step - 1;
    Shape merged = g.shape();
    merged[axis] = m * step;
    spread = slice(reshape(pad(widened, wb, wa), merged), axis, 0, (m - 1) * step + 1);
  }
  before[axis] = start;
  after[axis] = size - start - spread.shape()[axis];
  return pad(spread, before, after);
}

const Primitive& slice_p = [] () -> const Primitive& {
  Primitive p;
  p.name = "slice";
  p.cost = CostClass::movement;
  p.sharding = sharding::slice();
  p.linear = true;
  p.infer = [](Inputs in, const Attrs& a) {
    Shape shape = in[0].shape();
    for (size_t d = 0; d < shape.size(); ++d) {
      shape[d] = a.hi[d] <= a.lo[d] ? 0 : (a.hi[d] - a.lo[d] + a.step[d] - 1) / a.step[d];
    }
    return OutputSpec{shape, in[0].dtype()};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec& spec) {
    Shape strides = in[0].strides();
    int64_t offset = in[0].offset();
    for (size_t d = 0; d < strides.size(); ++d) {
      if (spec.shape[d] > 0) offset += a.lo[d] * strides[d];
      strides[d] *= a.step[d];
    }
    return make_view(in[0], spec.shape, strides, offset);
  };
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) {
    Tensor out = t;
    for (size_t d = 0; d < a.lo.size(); ++d) out = slice(out, d, a.lo[d], a.hi[d], a.step[d]);
    return out;
  };
  p.vjp = [](Inputs in, const Attrs& a, int, const Tensor& g) {
    Tensor out = g;
    for (size_t d = 0; d < a.lo.size(); ++d) {
      if (out.shape()[d] != in[0].shape()[d] || a.lo[d] != 0 || a.step[d] != 1) {
        out = unslice_axis(out, static_cast<int64_t>(d), in[0].shape()[d], a.lo[d], a.step[d]);
      }
    }
    return out;
  };
  return register_primitive(std::move(p));
}();

const Primitive& pad_p = [] () -> const Primitive& {
  Primitive p;
  p.name = "pad";
  p.cost = CostClass::movement;
  p.sharding = sharding::pad();
  p.linear = true;
  p.infer = [](Inputs in, const Attrs& a) {
    Shape shape = in[0].shape();
    EDDY_CHECK(a.lo.size() == shape.size() && a.hi.size() == shape.size(), "pad: got ",
               a.lo.size(), " 'before' and ", a.hi.size(), " 'after' widths for a tensor of shape ",
               shape);
    for (size_t d = 0; d < shape.size(); ++d) {
      EDDY_CHECK(a.lo[d] >= 0 && a.hi[d] >= 0, "pad: widths must be non-negative, got before ",
                 to_string(a.lo), " after ", to_string(a.hi));
      shape[d] += a.lo[d] + a.hi[d];
    }
    return OutputSpec{shape, in[0].dtype()};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec& spec) {
    Tensor out = new_output(spec, in[0]);
    backend_of(out).fill(out, 0.0);
    int64_t offset = 0;
    for (size_t d = 0; d < spec.shape.size(); ++d) offset += a.lo[d] * out.strides()[d];
    backend_of(out).copy(in[0], make_view(out, in[0].shape(), out.strides(), offset));
    return out;
  };
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) { return pad(t, a.lo, a.hi); };
  p.vjp = [](Inputs in, const Attrs& a, int, const Tensor& g) {
    Tensor out = g;
    for (size_t d = 0; d < a.lo.size(); ++d) {
      out = slice(out, d, a.lo[d], a.lo[d] + in[0].shape()[d]);
    }
    return out;
  };
  return register_primitive(std::move(p));
}();

const Primitive& flip_p = [] () -> const Primitive& {
  Primitive p;
  p.name = "flip";
  p.cost = CostClass::movement;
  p.linear = true;
  p.infer = [](Inputs in, const Attrs&) { return OutputSpec{in[0].shape(), in[0].dtype()}; };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec& spec) {
    Shape strides = in[0].strides();
    int64_t offset = in[0].offset();
    for (int64_t axis : a.axes) {
      if (spec.shape[axis] > 0) offset += (spec.shape[axis] - 1) * strides[axis];
      strides[axis] = -strides[axis];
    }
    Tensor out = new_output(spec, in[0]);
    backend_of(out).copy(make_view(in[0], spec.shape, strides, offset), out);
    return out;
  };
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) { return flip(t, a.axes); };
  p.vjp = [](Inputs, const Attrs& a, int, const Tensor& g) { return flip(g, a.axes); };
  return register_primitive(std::move(p));
}();

// Offset of input i along the concat axis.
int64_t concat_offset(Inputs in, int64_t axis, int i) {
  int64_t offset = 0;
  for (int k = 0; k < i; ++k) offset += in[k].shape()[axis];
  return offset;
}

const Primitive& concat_p = [] () -> const Primitive& {
  Primitive p;
  p.name = "concat";
  p.cost = CostClass::movement;
  p.sharding = sharding::concat();
  p.arity = -1;
  p.linear = true;
  p.infer = [](Inputs in, const Attrs& a) {
    Shape shape = in[0].shape();
    for (size_t i = 1; i < in.size(); ++i) {
      require_same_dtype("concat", in[0], in[i]);
      bool ok = in[i].dim() == in[0].dim();
      for (int64_t d = 0; ok && d < in[0].dim(); ++d) {
        ok = d == a.axis || in[i].shape()[d] == shape[d];
      }
      EDDY_CHECK(ok, "concat: tensor ", i, " has shape ", in[i].shape(), ", incompatible with ",
                 in[0].shape(), " along axis ", a.axis);
      shape[a.axis] += in[i].shape()[a.axis];
    }
    return OutputSpec{shape, in[0].dtype()};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec& spec) {
    Tensor out = new_output(spec, in[0]);
    for (size_t i = 0; i < in.size(); ++i) {
      int64_t offset = concat_offset(in, a.axis, static_cast<int>(i)) * out.strides()[a.axis];
      backend_of(out).copy(in[i], make_view(out, in[i].shape(), out.strides(), offset));
    }
    return out;
  };
  p.jvp = [](Inputs in, const Attrs& a, int i, const Tensor& t) {
    std::vector<int64_t> before(t.dim(), 0), after(t.dim(), 0);
    before[a.axis] = concat_offset(in, a.axis, i);
    after[a.axis] = concat_offset(in, a.axis, static_cast<int>(in.size())) - before[a.axis] -
                    t.shape()[a.axis];
    return pad(t, before, after);
  };
  p.vjp = [](Inputs in, const Attrs& a, int i, const Tensor& g) {
    int64_t start = concat_offset(in, a.axis, i);
    return slice(g, a.axis, start, start + in[i].shape()[a.axis]);
  };
  return register_primitive(std::move(p));
}();

}  // namespace

Tensor reshape(const Tensor& x, const Shape& requested) {
  Shape shape = requested;
  int64_t known = 1, unknown = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      EDDY_CHECK(unknown < 0, "reshape: more than one -1 in ", requested);
      unknown = static_cast<int64_t>(d);
    } else {
      EDDY_CHECK(shape[d] >= 0, "reshape: negative dimension in ", requested);
      known *= shape[d];
    }
  }
  if (unknown >= 0) {
    EDDY_CHECK(known > 0 && x.numel() % known == 0, "reshape: cannot reshape tensor of shape ",
               x.shape(), " to ", requested);
    shape[unknown] = x.numel() / known;
  }
  if (shape == x.shape()) return x;
  Attrs attrs;
  attrs.shape = shape;
  return dispatch(reshape_p, {x}, attrs);
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& perm) {
  Attrs attrs;
  for (int64_t axis : perm) attrs.axes.push_back(axis < 0 ? axis + x.dim() : axis);
  return dispatch(permute_p, {x}, attrs);
}

Tensor transpose(const Tensor& x, int64_t a, int64_t b) {
  std::vector<int64_t> perm(x.dim());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[normalize_axis(a, x.dim(), "transpose")], perm[normalize_axis(b, x.dim(), "transpose")]);
  return permute(x, perm);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  if (shape == x.shape()) return x;
  Attrs attrs;
  attrs.shape = shape;
  return dispatch(expand_p, {x}, attrs);
}

Tensor squeeze(const Tensor& x, int64_t axis) {
  axis = normalize_axis(axis, x.dim(), "squeeze");
  EDDY_CHECK(x.shape()[axis] == 1, "squeeze: axis ", axis, " of shape ", x.shape(), " has size ",
             x.shape()[axis], ", not 1");
  Shape shape = x.shape();
  shape.erase(shape.begin() + axis);
  return reshape(x, shape);
}

Tensor unsqueeze(const Tensor& x, int64_t axis) {
  axis = normalize_axis(axis, x.dim() + 1, "unsqueeze");
  Shape shape = x.shape();
  shape.insert(shape.begin() + axis, 1);
  return reshape(x, shape);
}

Tensor flatten(const Tensor& x) { return reshape(x, {x.numel()}); }

Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t stop, int64_t step) {
  axis = normalize_axis(axis, x.dim(), "slice");
  EDDY_CHECK(step > 0, "slice: step must be positive, got ", step, " (use flip to reverse)");
  const int64_t size = x.shape()[axis];
  auto clamp = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  Attrs attrs;
  attrs.lo.assign(x.dim(), 0);
  attrs.hi = x.shape();
  attrs.step.assign(x.dim(), 1);
  attrs.lo[axis] = clamp(start);
  attrs.hi[axis] = std::max(clamp(stop), attrs.lo[axis]);
  attrs.step[axis] = step;
  if (attrs.lo[axis] == 0 && attrs.hi[axis] == size && step == 1) return x;
  return dispatch(slice_p, {x}, attrs);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& before, const std::vector<int64_t>& after) {
  Attrs attrs;
  attrs.lo = before;
  attrs.hi = after;
  return dispatch(pad_p, {x}, attrs);
}

Tensor flip(const Tensor& x, const std::vector<int64_t>& axes) {
  Attrs attrs;
  attrs.axes = normalize_axes(axes, x.dim(), "flip");
  return dispatch(flip_p, {x}, attrs);
}

Tensor concat(const std::vector<Tensor>& tensors, int64_t axis) {
  EDDY_CHECK(!tensors.empty(), "concat: needs at least one tensor");
  Attrs attrs;
  attrs.axis = normalize_axis(axis, tensors[0].dim(), "concat");
  if (tensors.size() == 1) return tensors[0];
  return dispatch(concat_p, Inputs(tensors.data(), tensors.size()), attrs);
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t axis) {
  EDDY_CHECK(!tensors.empty(), "stack: needs at least one tensor");
  axis = normalize_axis(axis, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (const Tensor& t : tensors) {
    EDDY_CHECK(t.shape() == tensors[0].shape(), "stack: tensors have shapes ", tensors[0].shape(),
               " and ", t.shape());
    expanded.push_back(unsqueeze(t, axis));
  }
  return concat(expanded, axis);
}

Tensor roll(const Tensor& x, int64_t shift, int64_t axis) {
  axis = normalize_axis(axis, x.dim(), "roll");
  const int64_t n = x.shape()[axis];
  if (n == 0) return x;
  const int64_t split = n - ((shift % n) + n) % n;
  if (split == n) return x;
  return concat({slice(x, axis, split, n), slice(x, axis, 0, split)}, axis);
}

// Under a trace always a call, even on dense data (where reshape's eval makes a view, not a
// copy): a graph must not depend on a layout, which an abstract trace does not know. Elsewhere
// dense data is returned as it is, without the dispatch's microsecond, which hot loops over small
// tensors felt (the PINN solver's fused pass, per chunk of points).
Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous() && !active_trace_recorder()) return x;
  Attrs attrs;
  attrs.shape = x.shape();
  return dispatch(reshape_p, {x}, attrs);  // reshape of strided data makes a dense copy
}

Tensor identity(const Tensor& x) {
  Attrs attrs;
  attrs.shape = x.shape();
  return dispatch(reshape_p, {x}, attrs);
}

Tensor stop_gradient(const Tensor& x) { return dispatch(stop_gradient_p, {x}); }

Tensor sum_to_shape(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  EDDY_CHECK(lead >= 0, "sum_to_shape: cannot reduce ", x.shape(), " to ", shape);
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && x.shape()[d] != 1)) axes.push_back(d);
  }
  return reshape(sum(x, axes, true), shape);
}

}  // namespace eddy
