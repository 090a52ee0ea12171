// Causal attention, composed and fused. The fused primitive `causal_attention` gives its output
// and each row's log-sum-exp packed as [B, H, T, D + 1] (the backward kernel needs both, and a
// primitive has one output); causal_attention() returns the first D columns. Its reverse rule is
// the primitive `causal_attention_backward`, one kernel for all three inputs' cotangents. That
// primitive's own reverse rule is the composed form's second derivative, written in ops as every
// rule is, so reverse derivatives of any order exist; only the first, the one training takes,
// runs fused. Eager forward mode, as for checkpoint(), goes through the composed form; forward
// mode over a compiled reverse pass replays the backward primitive's tangent rule.

#include "eddy/nn/attention.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

#include "eddy/autodiff/forward.h"
#include "eddy/autodiff/tape.h"
#include "eddy/core/autograd.h"
#include "eddy/core/backend.h"
#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"
#include "eddy/ops/primitive.h"
#include "eddy/ops/sharding.h"

namespace eddy::nn {
namespace {

// The query heads that share one key/value head, and the shapes the functions check.
struct HeadGroups {
  int64_t batch, heads, kv_heads, time, keys;
};

HeadGroups check_attention(std::string_view where, const Tensor& per_query, const Tensor& per_key,
                           std::string_view query_name, std::string_view key_name) {
  EDDY_CHECK(per_query.dim() == 4 && per_key.dim() == 4, where, ": ", query_name, " and ", key_name,
             " must be rank 4, got shapes ", per_query.shape(), " and ", per_key.shape());
  const DType dtype = per_query.dtype();
  EDDY_CHECK(dtype == DType::f32 || dtype == DType::f64, where, ": dtype must be float32 or float64, got ", dtype);
  EDDY_CHECK(per_query.dtype() == per_key.dtype(), where, ": ", query_name, " and ", key_name,
             " have dtypes ", per_query.dtype(), " and ", per_key.dtype());
  const Shape &q = per_query.shape(), &k = per_key.shape();
  EDDY_CHECK(q[0] == k[0], where, ": ", query_name, " ", q, " and ", key_name, " ", k, " differ in batch");
  EDDY_CHECK(k[1] > 0 && q[1] % k[1] == 0, where, ": ", key_name, " ", k, " has ", k[1],
             " heads, which does not divide the ", q[1], " heads of ", query_name, " ", q);
  return {q[0], q[1], k[1], q[2], k[2]};
}

HeadGroups check_scores(std::string_view where, const Tensor& queries, const Tensor& keys) {
  const HeadGroups g = check_attention(where, queries, keys, "queries", "keys");
  EDDY_CHECK(keys.shape()[3] == queries.shape()[3], where, ": queries ", queries.shape(), " and keys ",
             keys.shape(), " differ in head_dim");
  EDDY_CHECK(g.keys >= g.time, where, ": ", g.time, " queries need at least as many keys, got ", g.keys);
  return g;
}

void check_values(std::string_view where, const Tensor& keys, const Tensor& values) {
  EDDY_CHECK(values.shape() == keys.shape() && values.dtype() == keys.dtype(), where, ": values ", values.dtype(),
             values.shape(), " must have the keys' dtype and shape, ", keys.dtype(), keys.shape());
}

double scale_of(const Tensor& queries) { return 1.0 / std::sqrt(double(queries.shape()[3])); }

// a [B, H, T, D] against b [B, Hkv, S, D], grouped as attention groups heads, times the scale:
// [B, H, T, S]. The heads of a group stacked along time meet their shared keys in one product,
// not a copy of the keys per head.
Tensor grouped_scores(const HeadGroups& g, const Tensor& a, const Tensor& b) {
  const int64_t group = g.heads / g.kv_heads, head_dim = a.shape()[3];
  Tensor grouped = reshape(a, {g.batch, g.kv_heads, group * g.time, head_dim});
  return reshape(matmul(grouped, transpose(b)) * scale_of(a), {g.batch, g.heads, g.time, g.keys});
}

// The exponentials of the visible scores less their row's visible maximum (zero where masked),
// and that maximum. Masked scores are zeroed after the exp rather than set to the lowest float
// before it: glibc's vectorised exp hands every lane far below its range to the scalar exp, whose
// underflow path (errno) then ran for half of all the scores (in perf of a language model's
// training step, exp took 7.4% of the samples). Here every exp sees a score minus its row's
// visible maximum (the shift, detached: it cancels, as in softmax), times the mask as numbers (0
// where masked), and its result is multiplied by the mask again. Selects (where) around the exp
// kept GCC from vectorising the fused loop: it read the boolean mask, and called exp one element
// at a time.
struct ShiftedExponentials {
  Tensor exponentials, shift;
};

ShiftedExponentials shifted_exponentials(const HeadGroups& g, const Tensor& scores) {
  const DType dtype = scores.dtype();
  const Device device = scores.device();
  Tensor query_positions = reshape(arange(double(g.keys - g.time), double(g.keys), 1, dtype, device), {g.time, 1});
  Tensor visible = le(arange(0, double(g.keys), 1, dtype, device), query_positions);
  const double lowest = dtype == DType::f32 ? double(std::numeric_limits<float>::lowest())
                                            : std::numeric_limits<double>::lowest();
  const Tensor shift = max(where(visible, scores, scalar(lowest, dtype, device)), {-1}, true).detach();
  const Tensor mask = cast(visible, dtype);
  return {exp((scores - shift) * mask) * mask, shift};
}

// The fused primitive's value in composed form: the output and the log-sum-exp, packed.
Tensor composed_packed(const Tensor& queries, const Tensor& keys, const Tensor& values) {
  const HeadGroups g = check_scores("causal_attention", queries, keys);
  const auto [exponentials, shift] = shifted_exponentials(g, grouped_scores(g, queries, keys));
  const Tensor denominators = sum(exponentials, {-1}, true);
  const Tensor output = attend(exponentials / denominators, values);
  return concat({output, log(denominators) + shift}, -1);
}

// The gradients of composed_packed with respect to q, k and v for the cotangent `d_packed`: what
// causal_attention_backward computes, in composed form and differentiable again.
std::vector<Tensor> composed_gradients(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& d_packed) {
  GradModeGuard recording(true);
  return grad({composed_packed(q, k, v)}, {q, k, v}, {d_packed}, true);
}

// The flat concatenation of tensors shaped as `like`, split back into them.
std::vector<Tensor> unflatten(const Tensor& flat, Inputs like) {
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (const Tensor& shape_of : like) {
    parts.push_back(reshape(slice(flat, 0, start, start + shape_of.numel()), shape_of.shape()));
    start += shape_of.numel();
  }
  return parts;
}

// The composed form's second derivatives: the gradient of <seed, composed_gradients> for the
// backward primitive's inputs `in` (seed: flat, as its output). With recording on (a higher
// derivative to come) the result must stay differentiable in the inputs, so it is taken through
// them; otherwise through detached copies, which stop the inner backward pass here instead of
// walking the graph upstream, and keep the inputs' forward-mode tangents.
std::vector<Tensor> second_derivatives(Inputs in, const Tensor& seed, const std::vector<bool>& wanted) {
  const bool create_graph = GradMode::enabled();
  std::vector<Tensor> arguments;
  for (int i : {0, 1, 2, 4}) {
    const bool through_input = create_graph && in[i].requires_grad();
    arguments.push_back(through_input ? in[i] : detach_keeping_tangents(in[i]).requires_grad_());
  }
  std::vector<Tensor> gradients = composed_gradients(arguments[0], arguments[1], arguments[2], arguments[3]);
  std::vector<Tensor> second = grad(gradients, arguments, unflatten(seed, in.first(3)), create_graph);
  std::vector<Tensor> result(in.size());
  for (int i : {0, 1, 2, 4}) {
    if (wanted[static_cast<size_t>(i)]) result[static_cast<size_t>(i)] = second[i == 4 ? 3 : static_cast<size_t>(i)];
  }
  return result;
}

// Inputs: q, k, v, the forward's packed value and its cotangent. Output: dq, dk and dv, flat
// and concatenated. The packed value is the forward's, kept to save recomputing it: as a
// function it adds nothing (it is a function of q, k and v), so it is a constant input.
const Primitive& attention_backward_p = []() -> const Primitive& {
  Primitive p;
  p.name = "causal_attention_backward";
  p.arity = 5;
  p.cost = CostClass::gemm;
  p.constant_inputs = {3};
  p.infer = [](Inputs in, const Attrs&) {
    return OutputSpec{{in[0].numel() + in[1].numel() + in[2].numel()}, in[0].dtype()};
  };
  p.eval = [](Inputs in, const Attrs&, const OutputSpec& spec) {
    Tensor flat = Tensor::empty(spec.shape, spec.dtype, in[0].device());
    const int64_t q_size = in[0].numel(), k_size = in[1].numel();
    auto part = [&](int64_t start, const Tensor& like) {
      return make_view(flat, like.shape(), contiguous_strides(like.shape()), start);
    };
    backend_for(flat.device())
        .causal_attention_backward(in[0], in[1], in[2],
                                   scale_of(in[0]), detail::dense(in[3]), detail::dense(in[4]), part(0, in[0]),
                                   part(q_size, in[1]), part(q_size + k_size, in[2]));
    return flat;
  };
  p.vjp_all = [](Inputs in, const Attrs&, const Tensor&, const Tensor& cotangent, const std::vector<bool>& wanted) {
    return second_derivatives(in, cotangent, wanted);
  };
  // Forward mode over a compiled function's reverse pass replays this rule. The output is the
  // gradient of <packed(q, k, v), d> in q, k and v: linear in d, so its tangent along d is this
  // primitive again; along q, k or v it is that scalar's Hessian times the tangent, and a Hessian
  // is symmetric, so the reverse rule gives it with the tangent as the seed.
  p.jvp = [](Inputs in, const Attrs&, int input, const Tensor& tangent) {
    if (input == 4) return dispatch(attention_backward_p, {in[0], in[1], in[2], in[3], tangent});
    std::vector<Tensor> seed;
    for (int i : {0, 1, 2}) {
      seed.push_back(i == input ? reshape(tangent, {-1})
                                : zeros({in[i].numel()}, tangent.dtype(), tangent.device()));
    }
    const std::vector<Tensor> second = second_derivatives(in, concat(seed, 0), {true, true, true, false, false});
    return concat({reshape(second[0], {-1}), reshape(second[1], {-1}), reshape(second[2], {-1})}, 0);
  };
  return register_primitive(std::move(p));
}();

const Primitive& attention_p = []() -> const Primitive& {
  Primitive p;
  p.name = "causal_attention";
  p.arity = 3;
  p.cost = CostClass::gemm;
  p.infer = [](Inputs in, const Attrs&) {
    check_scores("causal_attention", in[0], in[1]);
    check_values("causal_attention", in[1], in[2]);
    Shape shape = in[0].shape();
    shape[3] += 1;
    return OutputSpec{shape, in[0].dtype()};
  };
  p.eval = [](Inputs in, const Attrs&, const OutputSpec& spec) {
    Tensor packed = Tensor::empty(spec.shape, spec.dtype, in[0].device());
    backend_for(packed.device())
        .causal_attention(in[0], in[1], in[2], scale_of(in[0]), packed);
    return packed;
  };
  // Batches and heads are independent problems; the backward primitive needs no rule, since the
  // distributed interpreter runs this one on each rank's parts and autodiff records that.
  p.sharding = sharding::alike_along({0, 1});
  // Forward mode on a compiled function replays this rule (eager forward mode takes the composed
  // form, causal_attention()). With P the weights and S the scores: dS = (dq k^T + q dk^T) scale,
  // d(output) = P (dS - rowsum(P dS)) v + P dv and d(log-sum-exp) = rowsum(P dS).
  p.jvp = [](Inputs in, const Attrs&, int input, const Tensor& tangent) {
    const Tensor &q = in[0], &k = in[1], &v = in[2];
    const HeadGroups g = check_scores("causal_attention", q, k);
    const Tensor weights = causal_attention_weights(q, k);
    if (input == 2) return concat({attend(weights, tangent), zeros_like(slice(q, -1, 0, 1))}, -1);
    const Tensor d_scores = input == 0 ? grouped_scores(g, tangent, k) : grouped_scores(g, q, tangent);
    const Tensor d_log_sum = sum(weights * d_scores, {-1}, true);
    return concat({attend(weights * (d_scores - d_log_sum), v), d_log_sum}, -1);
  };
  p.vjp_all = [](Inputs in, const Attrs&, const Tensor& packed, const Tensor& cotangent, const std::vector<bool>&) {
    // The packed value is alive whenever the output is (causal_attention's slice holds it); a
    // compiled call's replay hands it over too.
    const Tensor value = packed.defined() ? packed : dispatch(attention_p, {in[0], in[1], in[2]});
    std::vector<Tensor> gradients = unflatten(dispatch(attention_backward_p, {in[0], in[1], in[2], value, cotangent}), in);
    return gradients;
  };
  return register_primitive(std::move(p));
}();

// 16-bit operands (the projections' products under autocast): attention computed in float32 and
// rounded once to their dtype, as every kernel computes 16-bit values. They were refused; and the
// causal mask's positions, built in the scores' dtype, repeat past 256 in bfloat16 (256, 256,
// 258), which would have let queries see later keys.
std::optional<DType> half_dtype_among(std::initializer_list<Tensor> operands) {
  for (const Tensor& x : operands) {
    if (is_half(x.dtype())) return x.dtype();
  }
  return std::nullopt;
}

using detail::widened_if_half;

}  // namespace

Tensor causal_attention_weights(const Tensor& queries, const Tensor& keys) {
  if (const auto half = half_dtype_among({queries, keys})) {
    return cast(causal_attention_weights(widened_if_half(queries), widened_if_half(keys)), *half);
  }
  const HeadGroups g = check_scores("causal_attention_weights", queries, keys);
  const ShiftedExponentials shifted = shifted_exponentials(g, grouped_scores(g, queries, keys));
  return shifted.exponentials / sum(shifted.exponentials, {-1}, true);
}

Tensor attend(const Tensor& weights, const Tensor& values) {
  if (const auto half = half_dtype_among({weights, values})) {
    return cast(attend(widened_if_half(weights), widened_if_half(values)), *half);
  }
  const HeadGroups g = check_attention("attend", weights, values, "weights", "values");
  EDDY_CHECK(weights.shape()[3] == g.keys, "attend: weights ", weights.shape(), " cover ", weights.shape()[3],
             " positions but values ", values.shape(), " have ", g.keys);
  const int64_t group = g.heads / g.kv_heads, head_dim = values.shape()[3];
  Tensor grouped = reshape(weights, {g.batch, g.kv_heads, group * g.time, g.keys});
  return reshape(matmul(grouped, values), {g.batch, g.heads, g.time, head_dim});
}

Tensor composed_causal_attention(const Tensor& queries, const Tensor& keys, const Tensor& values) {
  return attend(causal_attention_weights(queries, keys), values);
}

Tensor causal_attention(const Tensor& queries, const Tensor& keys, const Tensor& values) {
  if (const auto half = half_dtype_among({queries, keys, values})) {
    const Tensor attended = causal_attention(widened_if_half(queries), widened_if_half(keys), widened_if_half(values));
    return cast(attended, *half);
  }
  // The composed form where the fused one cannot serve: eager forward mode, as in checkpoint()
  // (the fused primitives' tangent rule serves compiled functions only), and devices without the
  // kernels.
  bool composed = !device_has(queries.device(), Backend::OptionalKernel::causal_attention);
  for (const Tensor& x : {queries, keys, values}) composed = composed || innermost_level(x) >= 0;
  if (composed) return composed_causal_attention(queries, keys, values);
  const Tensor packed = dispatch(attention_p, {queries, keys, values});
  return slice(packed, -1, 0, queries.shape()[3]);
}

}  // namespace eddy::nn
