// Indexing primitives: gather, index_select and scatter_add. Indices carry no derivative.

#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"
#include "eddy/ops/sharding.h"

namespace eddy {
namespace {
using namespace detail;

void check_index(std::string_view op, const Tensor& index) {
  EDDY_CHECK(index.dtype() == DType::i32 || index.dtype() == DType::i64, op,
             ": index tensor must be int32 or int64, got ", index.dtype());
}

// index must have x's rank and fit inside x on every axis but `axis`.
void check_index_fits(std::string_view op, const Tensor& x, int64_t axis, const Tensor& index) {
  check_index(op, index);
  EDDY_CHECK(index.dim() == x.dim(), op, ": index has shape ", index.shape(),
             " but the tensor has shape ", x.shape(), " (ranks must match)");
  for (int64_t d = 0; d < x.dim(); ++d) {
    EDDY_CHECK(d == axis || index.shape()[d] <= x.shape()[d], op, ": index shape ", index.shape(),
               " exceeds tensor shape ", x.shape(), " on axis ", d);
  }
}

const Primitive& gather_p = []() -> const Primitive& {
  Primitive p;
  p.name = "gather";
  p.sharding = sharding::gather();
  p.cost = CostClass::movement;
  p.arity = 2;
  p.constant_inputs = {1};
  p.linear = true;
  p.infer = [](Inputs in, const Attrs& a) {
    check_index_fits("gather", in[0], a.axis, in[1]);
    return OutputSpec{in[1].shape(), in[0].dtype()};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec& spec) {
    Tensor out = new_output(spec, in[0]);
    backend_of(out).gather(dense(in[0]), a.axis, dense(in[1]), out);
    return out;
  };
  p.jvp = [](Inputs in, const Attrs& a, int, const Tensor& t) { return gather(t, a.axis, in[1]); };
  p.vjp = [](Inputs in, const Attrs& a, int, const Tensor& g) {
    return scatter_add(zeros_like(in[0]), a.axis, in[1], g);
  };
  return register_primitive(std::move(p));
}();

const Primitive& index_select_p = []() -> const Primitive& {
  Primitive p;
  p.name = "index_select";
  p.cost = CostClass::movement;
  p.sharding = sharding::index_select();
  p.arity = 2;
  p.constant_inputs = {1};
  p.linear = true;
  p.infer = [](Inputs in, const Attrs& a) {
    check_index("index_select", in[1]);
    EDDY_CHECK(in[1].dim() == 1, "index_select: index must be 1-D, got shape ", in[1].shape());
    Shape shape = in[0].shape();
    shape[a.axis] = in[1].numel();
    return OutputSpec{shape, in[0].dtype()};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec& spec) {
    Tensor out = new_output(spec, in[0]);
    backend_of(out).index_select(dense(in[0]), a.axis, dense(in[1]), out);
    return out;
  };
  p.jvp = [](Inputs in, const Attrs& a, int, const Tensor& t) {
    return index_select(t, a.axis, in[1]);
  };
  p.vjp = [](Inputs in, const Attrs& a, int, const Tensor& g) {
    Shape index_shape(g.dim(), 1);
    index_shape[a.axis] = in[1].numel();
    Tensor index = expand(reshape(in[1], index_shape), g.shape());
    return scatter_add(zeros_like(in[0]), a.axis, index, g);
  };
  return register_primitive(std::move(p));
}();

const Primitive& scatter_add_p = []() -> const Primitive& {
  Primitive p;
  p.name = "scatter_add";
  p.cost = CostClass::movement;
  p.adds_onto_first_input = true;
  p.arity = 3;
  p.constant_inputs = {1};
  p.linear = true;
  p.infer = [](Inputs in, const Attrs& a) {
    require_same_dtype("scatter_add", in[0], in[2]);
    check_index_fits("scatter_add", in[0], a.axis, in[1]);
    EDDY_CHECK(in[1].shape() == in[2].shape(), "scatter_add: index shape ", in[1].shape(),
               " differs from source shape ", in[2].shape());
    return OutputSpec{in[0].shape(), in[0].dtype()};
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec& spec) {
    Tensor out = new_output(spec, in[0]);
    backend_of(out).copy(in[0], out);
    backend_of(out).scatter_add(out, a.axis, dense(in[1]), dense(in[2]));
    return out;
  };
  p.jvp = [](Inputs in, const Attrs& a, int i, const Tensor& t) {
    return i == 0 ? t : scatter_add(zeros_like(in[0]), a.axis, in[1], t);
  };
  p.vjp = [](Inputs in, const Attrs& a, int i, const Tensor& g) {
    return i == 0 ? g : gather(g, a.axis, in[1]);
  };
  return register_primitive(std::move(p));
}();

}  // namespace

Tensor gather(const Tensor& x, int64_t axis, const Tensor& index) {
  Attrs attrs;
  attrs.axis = normalize_axis(axis, x.dim(), "gather");
  return dispatch(gather_p, {x, index}, attrs);
}

Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  Attrs attrs;
  attrs.axis = normalize_axis(axis, x.dim(), "index_select");
  return dispatch(index_select_p, {x, index}, attrs);
}

Tensor scatter_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) {
  Attrs attrs;
  attrs.axis = normalize_axis(axis, base.dim(), "scatter_add");
  auto [b, s] = promote_pair(base, src);
  return dispatch(scatter_add_p, {b, index, s}, attrs);
}

}  // namespace eddy
