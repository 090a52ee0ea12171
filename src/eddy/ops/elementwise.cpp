// Elementwise primitives: arithmetic, transcendental functions, comparisons, where and cast.

#include <numbers>
#include <variant>

#include "eddy/core/gelu_constants.h"
#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"
#include "eddy/ops/sharding.h"

namespace eddy {
namespace detail {

Tensor dense(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
  backend_of(t).copy(t, out);
  return out;
}

void check_dtype(std::string_view op, const Tensor& t, bool accepted, std::string_view wanted) {
  EDDY_CHECK(accepted, op, ": needs ", wanted, ", got ", t.dtype(), " with shape ", t.shape());
}

std::pair<Tensor, Tensor> promote_pair(const Tensor& a, const Tensor& b) {
  // Left for dispatch to report, with the op's name.
  if (!a.defined() || !b.defined()) return {a, b};
  DType common = promote(a.dtype(), b.dtype());
  return {a.dtype() == common ? a : cast(a, common), b.dtype() == common ? b : cast(b, common)};
}

}  // namespace detail

namespace {
using namespace detail;

using JvpRule = Primitive::JvpRule;
using VjpRule = Primitive::VjpRule;

// What every elementwise primitive declares besides its rules. A unary kernel is the backend's
// tuned one or the primitive's own loops (an ArrayFunction, whose non-null dtypes are then the
// dtypes the primitive accepts).
struct UnaryBasics {
  std::string_view name;
  std::variant<UnaryKernel, ArrayFunction> kernel;
  CostClass cost;
  Lowering lowering;
};
struct BinaryBasics {
  std::string_view name;
  BinaryKernel kernel;
  CostClass cost;
  Lowering lowering;
};

// A spelling C++ reads alike for real and complex operands.
constexpr Lowering same_for_complex(std::string_view form) { return {form, {}, form}; }
// A spelling for complex operands, of an op that takes no others.
constexpr Lowering complex_only(std::string_view complex_form) { return {{}, {}, complex_form}; }

// Plain loops over float and double arrays applying the scalar function `F` (a captureless lambda).
template <typename F>
ArrayFunction real_functions(F) {
  return {[](const float* x, float* y, int64_t n) {
            for (int64_t i = 0; i < n; ++i) y[i] = F{}(x[i]);
          },
          [](const double* x, double* y, int64_t n) {
            for (int64_t i = 0; i < n; ++i) y[i] = F{}(x[i]);
          }};
}

// 16-bit floats go through the float32 loops, as every CPU kernel takes them (backends/cpu/half.h).
void check_array_function_dtype(std::string_view op, const Tensor& t, const ArrayFunction& f) {
  const DType d = t.dtype();
  const bool accepted = ((d == DType::f32 || is_half(d)) && f.f32) || (d == DType::f64 && f.f64) ||
                        (d == DType::c64 && f.c64) || (d == DType::c128 && f.c128);
  check_dtype(op, t, accepted, f.c64 ? "a floating or complex tensor" : "a floating tensor");
}

// Unary primitive whose output has the input's dtype (or `real_output`: the real dtype).
Primitive unary_declaration(const UnaryBasics& basics, void (*check)(std::string_view, const Tensor&), JvpRule jvp,
                            VjpRule vjp, bool real_output = false, bool linear = false) {
  Primitive p;
  p.name = basics.name;
  p.infer = [name = basics.name, kernel = basics.kernel, check, real_output](Inputs in, const Attrs&) {
    if (const ArrayFunction* own = std::get_if<ArrayFunction>(&kernel)) {
      check_array_function_dtype(name, in[0], *own);
    } else {
      check(name, in[0]);
    }
    return OutputSpec{in[0].shape(), real_output ? real_dtype(in[0].dtype()) : in[0].dtype()};
  };
  p.eval = [kernel = basics.kernel](Inputs in, const Attrs&, const OutputSpec& spec) {
    Tensor out = new_output(spec, in[0]);
    if (const ArrayFunction* own = std::get_if<ArrayFunction>(&kernel)) {
      backend_of(out).apply(*own, dense(in[0]), out);
    } else {
      backend_of(out).unary(std::get<UnaryKernel>(kernel), in[0], out);
    }
    return out;
  };
  p.jvp = std::move(jvp);
  p.vjp = std::move(vjp);
  p.linear = linear;
  p.elementwise = true;
  p.sharding = sharding::elementwise(linear ? sharding::PartialInputs::all : sharding::PartialInputs::none);
  p.cost = basics.cost;
  p.lowering = basics.lowering;
  return p;
}

// A holomorphic unary function of floating or complex tensors, from its derivative f'(x):
// jvp = t * f'(x), vjp = g * conj(f'(x)).
Primitive holomorphic(const UnaryBasics& basics, Tensor (*derivative)(const Tensor&)) {
  return unary_declaration(
      basics, require_inexact,
      [derivative](Inputs in, const Attrs&, int, const Tensor& t) { return t * derivative(in[0]); },
      [derivative](Inputs in, const Attrs&, int, const Tensor& g) { return g * conj(derivative(in[0])); });
}

// A holomorphic unary primitive whose derivative is also available from its output y = f(x):
// f'(x) = from_output(y). Both rule forms are given; the engine prefers the output form. With
// `curvature`, f''(x) = curvature(y, f'(x)) gives Taylor mode its second-order rule.
Primitive with_output_rules(const UnaryBasics& basics, Tensor (*derivative)(const Tensor&),
                            Tensor (*from_output)(const Tensor&),
                            Tensor (*curvature)(const Tensor&, const Tensor&) = nullptr) {
  Primitive p = holomorphic(basics, derivative);
  p.jvp_from_output = [from_output](Inputs, const Attrs&, const Tensor& y, const Tensor& t) { return t * from_output(y); };
  p.vjp_from_output = [from_output](Inputs, const Attrs&, const Tensor& y, const Tensor& g) {
    return g * conj(from_output(y));
  };
  if (curvature) {
    p.derivatives = [from_output, curvature](const Tensor&, const Tensor& y) {
      Tensor slope = from_output(y);
      return std::pair{slope, curvature(y, slope)};
    };
  }
  return p;
}

// sin and cos, whose second derivative is minus the function itself.
Primitive sinusoid(const UnaryBasics& basics, Tensor (*derivative)(const Tensor&)) {
  Primitive p = holomorphic(basics, derivative);
  p.derivatives = [derivative](const Tensor& x, const Tensor& y) { return std::pair{derivative(x), neg(y)}; };
  return p;
}

void check_numeric(std::string_view op, const Tensor& t) {
  check_dtype(op, t, t.dtype() != DType::b8, "a numeric (non-bool) tensor");
}
void check_complex(std::string_view op, const Tensor& t) {
  check_dtype(op, t, is_complex(t.dtype()), "a complex tensor");
}
void check_signed_real(std::string_view op, const Tensor& t) {
  check_dtype(op, t, !is_complex(t.dtype()) && t.dtype() != DType::b8, "a real numeric tensor");
}

Primitive real_unary(const UnaryBasics& basics, JvpRule jvp, VjpRule vjp) {
  return unary_declaration(basics, check_signed_real, std::move(jvp), std::move(vjp));
}

// numerator / denominator, and 0 where the denominator is 0. The division never sees 0, so no
// derivative of any order divides by it.
Tensor quotient_or_zero(const Tensor& numerator, const Tensor& denominator) {
  const Tensor at_zero = eq(denominator, zeros_like(denominator));
  return where(at_zero, zeros_like(numerator), numerator / where(at_zero, ones_like(denominator), denominator));
}

// x / |x| for complex x, and 0 where x is 0: abs's derivative there, as sign(0) = 0 is for real
// x (PyTorch's sgn).
Tensor complex_sign(const Tensor& x) { return quotient_or_zero(x, abs(x)); }

// |x|, real-valued for complex x.
Primitive absolute_value(const UnaryBasics& basics) {
  return unary_declaration(
      basics, check_numeric,
      [](Inputs in, const Attrs&, int, const Tensor& t) {
        const Tensor& x = in[0];
        if (is_complex(x.dtype())) return real(conj(complex_sign(x)) * t);
        return t * sign(x);
      },
      [](Inputs in, const Attrs&, int, const Tensor& g) {
        const Tensor& x = in[0];
        if (is_complex(x.dtype())) return g * complex_sign(x);
        return g * sign(x);
      },
      /*real_output=*/true);
}

// A real function of floating-point tensors from its first and second derivatives, written in
// ops so that derivatives of any order exist: the rules multiply by f'(x), and Taylor mode takes
// f''(x) as it is instead of differentiating the tangent rule once more.
Primitive smooth_real(const UnaryBasics& basics, Tensor (*derivative)(const Tensor&),
                      Tensor (*second_derivative)(const Tensor&)) {
  Primitive p = unary_declaration(
      basics, require_floating,
      [derivative](Inputs in, const Attrs&, int, const Tensor& t) { return t * derivative(in[0]); },
      [derivative](Inputs in, const Attrs&, int, const Tensor& g) { return g * derivative(in[0]); });
  p.derivatives = [derivative, second_derivative](const Tensor& x, const Tensor&) {
    return std::pair{derivative(x), second_derivative(x)};
  };
  return p;
}

// GELU's tanh approximation f(x) = x (1 + tanh u) / 2 with u = c (x + a x^3): its derivatives
// through t = tanh u and u' = c (1 + 3 a x^2), u'' = 6 a c x.

Tensor gelu_tanh(const Tensor& x) { return tanh(kGeluScale * (x + kGeluCubic * (x * x * x))); }
Tensor gelu_tanh_slope(const Tensor& x) { return kGeluScale * (1.0 + 3 * kGeluCubic * square(x)); }

// f' = (1 + t) / 2 + x (1 - t^2) u' / 2
Tensor gelu_derivative(const Tensor& x) {
  const Tensor t = gelu_tanh(x);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - square(t)) * gelu_tanh_slope(x);
}

// f'' = (1 - t^2) (u' + x (u'' - 2 t u'^2) / 2)
Tensor gelu_second_derivative(const Tensor& x) {
  const Tensor t = gelu_tanh(x), slope = gelu_tanh_slope(x);
  return (1.0 - square(t)) * (slope + x * (3 * kGeluCubic * kGeluScale * x - t * square(slope)));
}

enum class BinaryDTypes { numeric, inexact, real, any, floating };

Primitive binary_declaration(const BinaryBasics& basics, BinaryDTypes accepted, JvpRule jvp, VjpRule vjp,
                             bool linear = false) {
  const BinaryKernel kernel = basics.kernel;
  const std::string_view name = basics.name;
  const bool comparison = kernel == BinaryKernel::eq || kernel == BinaryKernel::ne ||
                          kernel == BinaryKernel::lt || kernel == BinaryKernel::le ||
                          kernel == BinaryKernel::gt || kernel == BinaryKernel::ge;
  Primitive p;
  p.name = name;
  p.arity = 2;
  p.infer = [=](Inputs in, const Attrs&) {
    require_same_dtype(name, in[0], in[1]);
    const DType d = in[0].dtype();
    switch (accepted) {
      case BinaryDTypes::numeric: check_numeric(name, in[0]); break;
      case BinaryDTypes::inexact: require_inexact(name, in[0]); break;
      // bool reached the backend, which has no ordering kernels for it, and named no op.
      case BinaryDTypes::real:
        check_dtype(name, in[0], !is_complex(d) && d != DType::b8, "real, non-bool tensors");
        break;
      case BinaryDTypes::floating: check_dtype(name, in[0], is_floating(d), "float32 or float64 tensors"); break;
      case BinaryDTypes::any: break;
    }
    DType out = comparison ? DType::b8 : kernel == BinaryKernel::complex ? complex_dtype(d) : d;
    return OutputSpec{broadcast_shapes(in[0].shape(), in[1].shape(), name), out};
  };
  p.eval = [kernel](Inputs in, const Attrs&, const OutputSpec& spec) {
    Tensor out = new_output(spec, in[0]);
    backend_of(out).binary(kernel, broadcast_view(in[0], spec.shape),
                           broadcast_view(in[1], spec.shape), out);
    return out;
  };
  p.jvp = std::move(jvp);
  p.vjp = std::move(vjp);
  p.linear = linear;
  p.elementwise = true;
  p.sharding = sharding::elementwise(linear ? sharding::PartialInputs::all : sharding::PartialInputs::none);
  p.cost = basics.cost;
  p.lowering = basics.lowering;
  return p;
}

const Primitive& binary(const BinaryBasics& basics, BinaryDTypes accepted, JvpRule jvp, VjpRule vjp,
                        bool linear = false) {
  return register_primitive(binary_declaration(basics, accepted, std::move(jvp), std::move(vjp), linear));
}

// a^b, holomorphic in both. In a the derivative b a^(b-1) is taken as 0 where a = b = 0, and in
// b the derivative log(a) a^b as 0 where a = 0 (its limit for b > 0): PyTorch's values, where the
// formulas give 0 * inf and log(0) * 0, NaN. Where a = b = 0 the unused branch also reads a base
// of 1, not a: its own derivatives, which the next order multiplies by a zero cotangent, would
// hold 0^(-k). So every derivative of an integer power is finite at a = 0. The mask is only where
// both are 0: masked wherever b = 0, b a^(b-1) lost its derivative in b there, so the mixed second
// derivative of a^b at b = 0 was 0 in one order and 1/a in the other, and a learned exponent that
// started at 0 never moved.
Primitive power(const BinaryBasics& basics) {
  auto derivative = [](Inputs in, int i) {
    const Tensor &a = in[0], &b = in[1];
    if (i == 0) {
      const Tensor magnitudes = abs(a) + abs(b);
      const Tensor both_zero = eq(magnitudes, zeros_like(magnitudes));
      const Tensor scaled = b * pow(where(both_zero, ones_like(a), a), b - 1.0);
      return where(both_zero, zeros_like(scaled), scaled);
    }
    return log(where(eq(a, zeros_like(a)), ones_like(a), a)) * pow(a, b);
  };
  return binary_declaration(
      basics, BinaryDTypes::inexact,
      [derivative](Inputs in, const Attrs&, int i, const Tensor& t) { return t * derivative(in, i); },
      [derivative](Inputs in, const Attrs&, int i, const Tensor& g) { return g * conj(derivative(in, i)); });
}

// Weight of each operand in maximum/minimum: 1 where it wins, 1/2 on ties.
Tensor selection_weight(const Tensor& mine, const Tensor& other, bool maximum) {
  Tensor wins = maximum ? gt(mine, other) : lt(mine, other);
  return cast(wins, mine.dtype()) + 0.5 * cast(eq(mine, other), mine.dtype());
}

Primitive extremum(const BinaryBasics& basics, bool maximum) {
  return binary_declaration(
      basics, BinaryDTypes::real,
      [maximum](Inputs in, const Attrs&, int i, const Tensor& t) { return t * selection_weight(in[i], in[1 - i], maximum); },
      [maximum](Inputs in, const Attrs&, int i, const Tensor& g) { return g * selection_weight(in[i], in[1 - i], maximum); });
}

#define EDDY_UNARY_FUNCTION(name, declaration) const Primitive& name##_p = register_primitive(declaration);
#define EDDY_BINARY_FUNCTION(name, declaration) const Primitive& name##_p = register_primitive(declaration);
#include "eddy/ops/math_functions.def"

const Primitive& unary(const UnaryBasics& basics, void (*check)(std::string_view, const Tensor&), JvpRule jvp,
                       VjpRule vjp, bool real_output = false, bool linear = false) {
  return register_primitive(unary_declaration(basics, check, std::move(jvp), std::move(vjp), real_output, linear));
}

const Primitive& neg_p = unary({"neg", UnaryKernel::neg, CostClass::cheap, same_for_complex("-$0")}, check_numeric,
    [](Inputs, const Attrs&, int, const Tensor& t) { return neg(t); },
    [](Inputs, const Attrs&, int, const Tensor& g) { return neg(g); }, false, true);

const Primitive& real_p = unary({"real", UnaryKernel::real, CostClass::cheap, complex_only("std::real($0)")}, check_complex,
    [](Inputs, const Attrs&, int, const Tensor& t) { return real(t); },
    [](Inputs in, const Attrs&, int, const Tensor& g) { return cast(g, in[0].dtype()); }, true, true);

const Primitive& imag_p = unary({"imag", UnaryKernel::imag, CostClass::cheap, complex_only("std::imag($0)")}, check_complex,
    [](Inputs, const Attrs&, int, const Tensor& t) { return imag(t); },
    [](Inputs, const Attrs&, int, const Tensor& g) { return complex(zeros_like(g), g); }, true, true);

const Primitive& conj_p = unary({"conj", UnaryKernel::conj, CostClass::cheap, complex_only("std::conj($0)")}, check_complex,
    [](Inputs, const Attrs&, int, const Tensor& t) { return conj(t); },
    [](Inputs, const Attrs&, int, const Tensor& g) { return conj(g); }, false, true);

// The angle's derivatives are Im(t / z) and i g / conj(z), taken as 0 at z = 0 (PyTorch's value)
// instead of 0 / 0. Written with |z|^2 (Im(conj(z) t) / |z|^2), they were i g z (the divisor
// taken as 1) wherever |z|^2 underflowed, below 1e-23 in complex64.
const Primitive& angle_p = unary({"angle", UnaryKernel::angle, CostClass::cheap, complex_only("std::arg($0)")}, check_complex,
    [](Inputs in, const Attrs&, int, const Tensor& t) { return imag(quotient_or_zero(t, in[0])); },
    [](Inputs in, const Attrs&, int, const Tensor& g) {
      return quotient_or_zero(complex(zeros_like(g), g), conj(in[0]));
    },
    true);

const Primitive& add_p = binary({"add", BinaryKernel::add, CostClass::cheap, same_for_complex("$0 + $1")}, BinaryDTypes::numeric,
    [](Inputs, const Attrs&, int, const Tensor& t) { return t; },
    [](Inputs, const Attrs&, int, const Tensor& g) { return g; }, true);

const Primitive& sub_p = binary({"sub", BinaryKernel::sub, CostClass::cheap, same_for_complex("$0 - $1")}, BinaryDTypes::numeric,
    [](Inputs, const Attrs&, int i, const Tensor& t) { return i == 0 ? t : neg(t); },
    [](Inputs, const Attrs&, int i, const Tensor& g) { return i == 0 ? g : neg(g); }, true);

const Primitive& mul_p = []() -> const Primitive& {
  Primitive p = binary_declaration({"mul", BinaryKernel::mul, CostClass::cheap, same_for_complex("$0 * $1")}, BinaryDTypes::numeric,
      [](Inputs in, const Attrs&, int i, const Tensor& t) { return t * in[1 - i]; },
      [](Inputs in, const Attrs&, int i, const Tensor& g) { return g * conj(in[1 - i]); });
  p.bilinear = true;
  p.sharding = sharding::elementwise(sharding::PartialInputs::any_one);
  return register_primitive(std::move(p));
}();

const Primitive& div_p = []() -> const Primitive& {
  Primitive p = binary_declaration({"div", BinaryKernel::div, CostClass::cheap, same_for_complex("$0 / $1")}, BinaryDTypes::numeric,
      // The denominator's derivative -t a / b^2 as -(t / b) (a / b): divided by square(b), each
      // further derivative squared the power of b again (b^(2^n) at order n), which overflowed to
      // inf in float32 from the 6th derivative of 1/x at 0.1; this form takes b^(n+1).
      [](Inputs in, const Attrs&, int i, const Tensor& t) {
        return i == 0 ? t / in[1] : neg(t / in[1] * (in[0] / in[1]));
      },
      [](Inputs in, const Attrs&, int i, const Tensor& g) {
        return i == 0 ? g / conj(in[1]) : neg(g / conj(in[1]) * conj(in[0] / in[1]));
      });
  p.sharding = sharding::elementwise(sharding::PartialInputs::first_only);
  return register_primitive(std::move(p));
}();

const Primitive& eq_p = binary({"eq", BinaryKernel::eq, CostClass::cheap, same_for_complex("$0 == $1")}, BinaryDTypes::any, nullptr, nullptr);
const Primitive& ne_p = binary({"ne", BinaryKernel::ne, CostClass::cheap, same_for_complex("$0 != $1")}, BinaryDTypes::any, nullptr, nullptr);
const Primitive& lt_p = binary({"lt", BinaryKernel::lt, CostClass::cheap, {"$0 < $1"}}, BinaryDTypes::real, nullptr, nullptr);
const Primitive& le_p = binary({"le", BinaryKernel::le, CostClass::cheap, {"$0 <= $1"}}, BinaryDTypes::real, nullptr, nullptr);
const Primitive& gt_p = binary({"gt", BinaryKernel::gt, CostClass::cheap, {"$0 > $1"}}, BinaryDTypes::real, nullptr, nullptr);
const Primitive& ge_p = binary({"ge", BinaryKernel::ge, CostClass::cheap, {"$0 >= $1"}}, BinaryDTypes::real, nullptr, nullptr);

const Primitive& complex_p = binary({"complex", BinaryKernel::complex, CostClass::cheap, {"$T($0, $1)"}}, BinaryDTypes::floating,
    [](Inputs, const Attrs&, int i, const Tensor& t) {
      return i == 0 ? complex(t, zeros_like(t)) : complex(zeros_like(t), t);
    },
    [](Inputs, const Attrs&, int i, const Tensor& g) { return i == 0 ? real(g) : imag(g); }, true);

const Primitive& where_p = []() -> const Primitive& {
  Primitive p;
  p.name = "where";
  p.elementwise = true;
  p.cost = CostClass::cheap;
  p.lowering = same_for_complex("$0 ? $1 : $2");
  p.arity = 3;
  p.constant_inputs = {0};
  p.linear = true;
  p.sharding = sharding::elementwise();
  p.infer = [](Inputs in, const Attrs&) {
    check_dtype("where", in[0], in[0].dtype() == DType::b8, "a bool condition");
    require_same_dtype("where", in[1], in[2]);
    Shape shape = broadcast_shapes(broadcast_shapes(in[0].shape(), in[1].shape(), "where"),
                                   in[2].shape(), "where");
    return OutputSpec{shape, in[1].dtype()};
  };
  p.eval = [](Inputs in, const Attrs&, const OutputSpec& spec) {
    Tensor out = new_output(spec, in[1]);
    backend_of(out).where(broadcast_view(in[0], spec.shape), broadcast_view(in[1], spec.shape),
                          broadcast_view(in[2], spec.shape), out);
    return out;
  };
  auto select = [](Inputs in, int i, const Tensor& v) {
    Tensor zero = zeros_like(v);
    return i == 1 ? where(in[0], v, zero) : where(in[0], zero, v);
  };
  p.jvp = [select](Inputs in, const Attrs&, int i, const Tensor& t) { return select(in, i, t); };
  p.vjp = [select](Inputs in, const Attrs&, int i, const Tensor& g) { return select(in, i, g); };
  return register_primitive(std::move(p));
}();

const Primitive& cast_p = []() -> const Primitive& {
  Primitive p;
  p.name = "cast";
  p.linear = true;
  p.elementwise = true;
  // Not summed through: a partial sum of integers cast to float, or of floats rounded to
  // float32, is not the cast of the sum.
  p.sharding = sharding::elementwise();
  p.cost = CostClass::cheap;
  p.lowering = {"($T)$0", {}, "complex_cast<$T>($0)"};
  p.infer = [](Inputs in, const Attrs& attrs) { return OutputSpec{in[0].shape(), attrs.dtype}; };
  p.eval = [](Inputs in, const Attrs&, const OutputSpec& spec) {
    Tensor out = new_output(spec, in[0]);
    backend_of(out).copy(in[0], out);
    return out;
  };
  p.jvp = [](Inputs, const Attrs& attrs, int, const Tensor& t) { return cast(t, attrs.dtype); };
  // complex -> real keeps the real part, so the transpose embeds back with zero imaginary part.
  p.vjp = [](Inputs in, const Attrs&, int, const Tensor& g) {
    if (!is_inexact(in[0].dtype())) return Tensor();
    return cast(g, in[0].dtype());
  };
  return register_primitive(std::move(p));
}();

// The one primitive that moves values between devices. Linear, and its own transpose: the
// cotangent goes back to the input's device.
const Primitive& to_device_p = []() -> const Primitive& {
  Primitive p;
  p.name = "to_device";
  p.linear = true;
  p.sharding = sharding::elementwise(sharding::PartialInputs::all);
  p.cost = CostClass::cheap;
  p.infer = [](Inputs in, const Attrs& attrs) { return OutputSpec{in[0].shape(), in[0].dtype(), attrs.device}; };
  p.eval = [](Inputs in, const Attrs& attrs, const OutputSpec&) { return device_copy(in[0], attrs.device); };
  p.jvp = [](Inputs, const Attrs& attrs, int, const Tensor& t) { return to(t, attrs.device); };
  p.vjp = [](Inputs in, const Attrs&, int, const Tensor& g) { return to(g, in[0].device()); };
  return register_primitive(std::move(p));
}();

Tensor same_dtype_scalar(double value, const Tensor& like) {
  return scalar(value, is_inexact(like.dtype()) ? like.dtype() : DType::f32, like.device());
}

}  // namespace

Tensor neg(const Tensor& x) { return dispatch(neg_p, {x}); }
Tensor real(const Tensor& z) { return is_complex(z.dtype()) ? dispatch(real_p, {z}) : z; }
Tensor imag(const Tensor& z) { return is_complex(z.dtype()) ? dispatch(imag_p, {z}) : zeros_like(z); }
Tensor conj(const Tensor& z) { return is_complex(z.dtype()) ? dispatch(conj_p, {z}) : z; }
Tensor angle(const Tensor& z) {
  if (!is_floating(z.dtype())) return dispatch(angle_p, {z});
  // A real number's argument, as PyTorch takes it: pi below 0, else 0 (-0 included), NaN kept,
  // with derivative 0 everywhere: the NaN as z * 0, which keeps the result recorded (PyTorch's
  // requires grad) where passing z through gave it derivative 1.
  const Tensor zero = zeros_like(z);
  return where(ne(z, z), z * 0, where(lt(z, zero), full_like(z, std::numbers::pi), zero));
}

#define EDDY_PROMOTING_BINARY(fn, prim)              \
  Tensor fn(const Tensor& a, const Tensor& b) {      \
    auto [x, y] = promote_pair(a, b);                \
    return dispatch(prim, {x, y});                   \
  }
EDDY_PROMOTING_BINARY(add, add_p)
EDDY_PROMOTING_BINARY(sub, sub_p)
EDDY_PROMOTING_BINARY(mul, mul_p)
EDDY_PROMOTING_BINARY(div, div_p)
EDDY_PROMOTING_BINARY(eq, eq_p)
EDDY_PROMOTING_BINARY(ne, ne_p)
EDDY_PROMOTING_BINARY(lt, lt_p)
EDDY_PROMOTING_BINARY(le, le_p)
EDDY_PROMOTING_BINARY(gt, gt_p)
EDDY_PROMOTING_BINARY(ge, ge_p)

#define EDDY_UNARY_FUNCTION(name, declaration) \
  Tensor name(const Tensor& x) { return dispatch(name##_p, {x}); }
#define EDDY_BINARY_FUNCTION(name, declaration) EDDY_PROMOTING_BINARY(name, name##_p)
#include "eddy/ops/math_functions.def"
#undef EDDY_PROMOTING_BINARY

std::span<const MathFunction> math_functions() {
  static const std::vector<MathFunction> list = {
#define EDDY_UNARY_FUNCTION(name, declaration) {#name, 1, &name, nullptr},
#define EDDY_BINARY_FUNCTION(name, declaration) \
  {#name, 2, nullptr, static_cast<Tensor (*)(const Tensor&, const Tensor&)>(&name)},
#include "eddy/ops/math_functions.def"
  };
  return list;
}

const MathFunction* math_function_named(std::string_view name) {
  for (const MathFunction& function : math_functions()) {
    if (function.name == name) return &function;
  }
  return nullptr;
}


Tensor complex(const Tensor& re, const Tensor& im) {
  auto [x, y] = promote_pair(re, im);
  return dispatch(complex_p, {x, y});
}

Tensor pow(const Tensor& a, double exponent) { return pow(a, same_dtype_scalar(exponent, a)); }

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  auto [x, y] = promote_pair(a, b);
  return dispatch(where_p, {condition, x, y});
}

Tensor to(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  Attrs attrs;
  attrs.device = device;
  return dispatch(to_device_p, {x}, attrs);
}

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Attrs attrs;
  attrs.dtype = dtype;
  return dispatch(cast_p, {x}, attrs);
}

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, same_dtype_scalar(b, a)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, same_dtype_scalar(b, a)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, same_dtype_scalar(b, a)); }
Tensor operator/(const Tensor& a, double b) { return div(a, same_dtype_scalar(b, a)); }
Tensor operator+(double a, const Tensor& b) { return add(same_dtype_scalar(a, b), b); }
Tensor operator-(double a, const Tensor& b) { return sub(same_dtype_scalar(a, b), b); }
Tensor operator*(double a, const Tensor& b) { return mul(same_dtype_scalar(a, b), b); }
Tensor operator/(double a, const Tensor& b) { return div(same_dtype_scalar(a, b), b); }

}  // namespace eddy
