// Matrix multiplication: batched, broadcasting over batch axes, for real and complex types.

#include "eddy/ops/autocast.h"
#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"
#include "eddy/ops/sharding.h"

namespace eddy {
namespace {
using namespace detail;

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// The shape and dtype of a @ b, for `op`.
OutputSpec product_spec(std::string_view op, const Tensor& a, const Tensor& b) {
  require_same_dtype(op, a, b);
  require_inexact(op, a);
  EDDY_CHECK(a.dim() >= 2 && b.dim() >= 2, op, ": operands need rank >= 2, got shapes ", a.shape(), " and ",
             b.shape());
  EDDY_CHECK(a.shape().back() == b.shape()[b.dim() - 2], op, ": inner dimensions differ: ", a.shape(), " @ ",
             b.shape());
  Shape shape = broadcast_shapes(batch_of(a), batch_of(b), cat(op, " (batch axes)"));
  shape.push_back(a.shape()[a.dim() - 2]);
  shape.push_back(b.shape().back());
  return OutputSpec{shape, a.dtype()};
}

// out (+)= a @ b, the operands broadcast to out's batch axes.
void multiply_into(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  auto with_batch = [&](const Tensor& t) {
    Shape shape = batch;
    shape.push_back(t.shape()[t.dim() - 2]);
    shape.push_back(t.shape().back());
    return broadcast_view(t, shape);
  };
  backend_of(out).matmul(with_batch(a), with_batch(b), out, accumulate);
}

Tensor product_tangent(Inputs in, int i, const Tensor& t) { return i == 0 ? matmul(t, in[1]) : matmul(in[0], t); }
Tensor product_cotangent(Inputs in, int i, const Tensor& g) {
  return i == 0 ? matmul(g, conj(transpose(in[1]))) : matmul(conj(transpose(in[0])), g);
}

// a @ b + c, with c broadcast to the product's shape: the addend is copied into the output and
// the GEMM sums onto it, where matmul then add write the product and read it back in a pass of
// their own. matmul names it as its plus_addend, and the compiler rewrites such pairs into it
// (fuse_gemm_addends, compiler/passes.h).
const Primitive& matmul_add_p = []() -> const Primitive& {
  Primitive p;
  p.name = "matmul_add";
  p.cost = CostClass::gemm;
  p.arity = 3;
  p.sharding = sharding::matmul_add();
  p.infer = [](Inputs in, const Attrs&) {
    OutputSpec spec = product_spec("matmul_add", in[0], in[1]);
    require_same_dtype("matmul_add", in[0], in[2]);
    EDDY_CHECK(broadcast_shapes(in[2].shape(), spec.shape, "matmul_add (addend)") == spec.shape,
               "matmul_add: the addend's shape ", in[2].shape(), " does not broadcast to the product's ", spec.shape);
    return spec;
  };
  p.eval = [](Inputs in, const Attrs&, const OutputSpec& spec) {
    Tensor out = new_output(spec, in[0]);
    backend_of(out).copy(broadcast_view(in[2], spec.shape), out);
    multiply_into(in[0], in[1], out, true);
    return out;
  };
  p.jvp = [](Inputs in, const Attrs&, int i, const Tensor& t) { return i == 2 ? t : product_tangent(in, i, t); };
  p.vjp = [](Inputs in, const Attrs&, int i, const Tensor& g) { return i == 2 ? g : product_cotangent(in, i, g); };
  return register_primitive(std::move(p));
}();

const Primitive& matmul_p = []() -> const Primitive& {
  Primitive p;
  p.name = "matmul";
  p.cost = CostClass::gemm;
  p.bilinear = true;
  p.arity = 2;
  p.sharding = sharding::matmul();
  p.plus_addend = &matmul_add_p;
  p.infer = [](Inputs in, const Attrs&) { return product_spec("matmul", in[0], in[1]); };
  p.eval = [](Inputs in, const Attrs&, const OutputSpec& spec) {
    Tensor out = new_output(spec, in[0]);
    multiply_into(in[0], in[1], out, false);
    return out;
  };
  p.jvp = [](Inputs in, const Attrs&, int i, const Tensor& t) { return product_tangent(in, i, t); };
  p.vjp = [](Inputs in, const Attrs&, int i, const Tensor& g) { return product_cotangent(in, i, g); };
  return register_primitive(std::move(p));
}();

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  EDDY_CHECK(a.defined() && b.defined(), "matmul: undefined operand");
  EDDY_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: scalars are not matrices (shapes ", a.shape(),
             " and ", b.shape(), "); use mul");
  auto [x, y] = promote_pair(a, b);
  if (const std::optional<DType> low = autocast_dtype(); low && x.dtype() == DType::f32) {
    x = cast(x, *low);
    y = cast(y, *low);
  }
  const bool vector_left = x.dim() == 1, vector_right = y.dim() == 1;
  if (vector_left) x = unsqueeze(x, 0);
  if (vector_right) y = unsqueeze(y, 1);
  Tensor out = dispatch(matmul_p, {x, y});
  if (vector_right) out = squeeze(out, -1);
  if (vector_left) out = squeeze(out, vector_right ? -1 : -2);
  return out;
}

Tensor matmul_add(const Tensor& a, const Tensor& b, const Tensor& c) {
  EDDY_CHECK(a.defined() && b.defined() && c.defined(), "matmul_add: undefined operand");
  return dispatch(matmul_add_p, {a, b, c});
}

}  // namespace eddy
