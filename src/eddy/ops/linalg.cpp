// Matrix multiplication: batched, broadcasting over batch axes, for real and complex types.

#include "eddy/ops/autocast.h"
#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"
#include "eddy/ops/sharding.h"

namespace eddy {
namespace {
using namespace detail;

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

const Primitive& matmul_p = []() -> const Primitive& {
  Primitive p;
  p.name = "matmul";
  p.cost = CostClass::gemm;
  p.bilinear = true;
  p.arity = 2;
  p.sharding = sharding::matmul();
  p.infer = [](Inputs in, const Attrs&) {
    const Tensor &a = in[0], &b = in[1];
    require_same_dtype("matmul", a, b);
    require_inexact("matmul", a);
    EDDY_CHECK(a.dim() >= 2 && b.dim() >= 2, "matmul: operands need rank >= 2, got shapes ",
               a.shape(), " and ", b.shape());
    EDDY_CHECK(a.shape().back() == b.shape()[b.dim() - 2], "matmul: inner dimensions differ: ",
               a.shape(), " @ ", b.shape());
    Shape shape = broadcast_shapes(batch_of(a), batch_of(b), "matmul (batch axes)");
    shape.push_back(a.shape()[a.dim() - 2]);
    shape.push_back(b.shape().back());
    return OutputSpec{shape, a.dtype()};
  };
  p.eval = [](Inputs in, const Attrs&, const OutputSpec& spec) {
    Shape batch(spec.shape.begin(), spec.shape.end() - 2);
    auto with_batch = [&](const Tensor& t) {
      Shape shape = batch;
      shape.push_back(t.shape()[t.dim() - 2]);
      shape.push_back(t.shape().back());
      return broadcast_view(t, shape);
    };
    Tensor out = new_output(spec, in[0]);
    backend_of(out).matmul(with_batch(in[0]), with_batch(in[1]), out);
    return out;
  };
  p.jvp = [](Inputs in, const Attrs&, int i, const Tensor& t) {
    return i == 0 ? matmul(t, in[1]) : matmul(in[0], t);
  };
  p.vjp = [](Inputs in, const Attrs&, int i, const Tensor& g) {
    return i == 0 ? matmul(g, conj(transpose(in[1]))) : matmul(conj(transpose(in[0])), g);
  };
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

}  // namespace eddy
