// Complex values in fused loops: chains of complex64 and complex128 elementwise ops, chains that
// mix real and complex values, derivatives through complex intermediates, and a complex op without
// a complex spelling (Lowering::complex_form), which runs as a primitive call between loops.

#include <gtest/gtest.h>

#include <algorithm>
#include <complex>
#include <set>

#include "eddy/compiler/codegen.h"
#include "eddy/compiler/compile.h"
#include "eddy/compiler/fusion.h"
#include "eddy/compiler/passes.h"
#include "eddy/eddy.h"

namespace eddy::compiler {
namespace {

using TensorList = std::vector<Tensor>;

// The primitives that run inside a fused loop when `f` is traced on `inputs`.
std::set<std::string_view> fused_primitive_names(const TensorFunction& f, const TensorList& inputs) {
  const Trace traced = trace(f, inputs);
  std::set<std::string_view> names;
  for (const FusionGroup& group : plan_fusion(traced.graph)) {
    for (size_t n : group.nodes) names.insert(traced.graph.nodes[n].primitive->name);
  }
  return names;
}

// Runs `f` compiled (the first call traces it, the second runs the program) and eagerly on
// `inputs`, and checks they agree to `tolerance` relative to each output's largest magnitude.
CompileStats expect_compiled_equals_eager(const TensorFunction& f, const TensorList& inputs, double tolerance) {
  CompiledFunction compiled = compile(f);
  compiled(inputs);
  const TensorList fused = compiled(inputs), eager = f(inputs);
  EXPECT_EQ(compiled.stats().traces, 1);
  EXPECT_EQ(fused.size(), eager.size());
  for (size_t i = 0; i < std::min(fused.size(), eager.size()); ++i) {
    EXPECT_EQ(fused[i].dtype(), eager[i].dtype()) << "output " << i;
    EXPECT_EQ(fused[i].shape(), eager[i].shape()) << "output " << i;
    const double scale = 1 + cast(max(abs(eager[i])), DType::f64).item<double>();
    EXPECT_LE(cast(max(abs(fused[i] - eager[i])), DType::f64).item<double>(), tolerance * scale) << "output " << i;
  }
  return compiled.stats();
}

// Normally distributed real and imaginary parts; randn draws real values only.
Tensor complex_randn(const Shape& shape, DType dtype, Generator& gen) {
  return complex(randn(shape, real_dtype(dtype), &gen), randn(shape, real_dtype(dtype), &gen));
}

double tolerance_for(DType dtype) { return dtype == DType::c64 ? 2e-5 : 1e-12; }

// Every op with a complex spelling, on complex operands, with a complex constant.
TensorList complex_chain(const TensorList& in) {
  const Tensor &z = in[0], &w = in[1];
  const Tensor rotation = scalar(std::complex<double>(0.5, -2.0), z.dtype());
  Tensor u = exp(z) * conj(w) + sin(z) / (cos(w) + 2.0) - sqrt(z) * log(w + 3.0);
  Tensor v = square(u) * rotation - neg(pow(w + 2.0, 1.5)) + tanh(z) / w;
  Tensor parts = complex(real(v) * imag(u), abs(v) - angle(u));
  Tensor chosen = where(ne(u, v), v, u) + cast(eq(z, w), z.dtype());
  return {chosen + parts, abs(u - v)};
}

TEST(ComplexFusion, ElementwiseChainRunsInOneLoopAndMatchesEager) {
  for (DType dtype : {DType::c64, DType::c128}) {
    SCOPED_TRACE(dtype_name(dtype));
    Generator gen(21);
    const TensorList inputs = {complex_randn({40, 20}, dtype, gen), complex_randn({40, 20}, dtype, gen)};
    const std::set<std::string_view> fused = fused_primitive_names(complex_chain, inputs);
    for (std::string_view name : {"add", "sub", "mul", "div", "neg", "conj", "real", "imag", "abs", "angle", "exp",
                                  "log", "sin", "cos", "tanh", "sqrt", "pow", "complex", "eq", "ne", "where"}) {
      EXPECT_TRUE(fused.count(name)) << name << " never ran inside a fused loop";
    }
    const CompileStats stats = expect_compiled_equals_eager(complex_chain, inputs, tolerance_for(dtype));
    EXPECT_EQ(stats.last.fused_kernels, 1u);
    EXPECT_EQ(stats.last.steps, 1u) << "some op ran as a primitive call";
  }
}

TEST(ComplexFusion, ConstantsAreWrittenIntoTheCodeAndCudaRefusesComplexLoops) {
  Generator gen(25);
  Trace traced = trace(complex_chain, {complex_randn({4, 3}, DType::c128, gen), complex_randn({4, 3}, DType::c128, gen)});
  fold_constants(traced.graph);  // the scalars become constants, as in Program
  std::vector<KernelPlan> plans;
  for (const FusionGroup& group : plan_fusion(traced.graph)) {
    plans.push_back(plan_kernel(traced.graph, group, "eddy_fused_" + std::to_string(plans.size())));
  }
  ASSERT_FALSE(plans.empty());
  const std::string source = render_cpu_source(plans, 32768);
  EXPECT_NE(source.find("#include <complex>"), std::string::npos);
  EXPECT_NE(source.find("std::complex<double>(0x1p-1, -0x1p+1)"), std::string::npos) << source;
  EXPECT_THROW(render_cuda_source(plans), Error);
}

// Real and complex values in one loop: promotion casts (float64 to complex128, complex64 to
// complex128, a float32 row), casts back to real types, and complex values made from real ones.
TensorList mixed_chain(const TensorList& in) {
  const Tensor &x = in[0], &z = in[1], &row = in[2];
  Tensor u = z * x + row;
  Tensor v = real(u) * x - imag(u) / (abs(u) + 1.0);
  Tensor back = cast(u, DType::f32) + cast(v, DType::f32) + cast(cast(u, DType::b8), DType::f32);
  Tensor w = complex(x, v) * conj(u) + exp(complex(zeros_like(x), x));
  return {v, back, w};
}

TEST(ComplexFusion, RealAndComplexValuesMixInOneLoop) {
  Generator gen(22);
  const TensorList inputs = {randn({40, 20}, DType::f64, &gen), complex_randn({40, 20}, DType::c64, gen),
                             randn({20}, DType::f32, &gen)};
  EXPECT_TRUE(fused_primitive_names(mixed_chain, inputs).count("cast"));
  const CompileStats stats = expect_compiled_equals_eager(mixed_chain, inputs, 1e-12);
  EXPECT_EQ(stats.last.fused_kernels, 1u);
  // The row's cast to complex128 runs on its own, as a real one would: only values of the loop's
  // shape join it.
  EXPECT_EQ(stats.last.steps, 2u) << "some op ran as a primitive call";
}

// L = sum |e^{ix} z + w|^2 over the elements, for real x: its gradient passes through complex
// exp, multiplication, abs and the real-to-complex embedding, and their transposes.
Tensor phase_loss(const Tensor& x, const Tensor& z, const Tensor& w) {
  return sum(square(abs(exp(complex(zeros_like(x), x)) * z + w)));
}

TEST(ComplexFusion, GradientsThroughComplexIntermediatesMatchEager) {
  Generator gen(23);
  const Tensor x = randn({40, 20}, DType::f64, &gen);
  const Tensor z = complex_randn({40, 20}, DType::c128, gen), w = complex_randn({40, 20}, DType::c128, gen);
  const Tensor leaf = x.detach().requires_grad_();
  const Tensor eager_gradient = grad({phase_loss(leaf, z, w)}, {leaf}).at(0);
  // dL/dx = 2 Re(conj(u) i e^{ix} z) with u = e^{ix} z + w, which is -2 Im(conj(w) e^{ix} z).
  const Tensor analytic = -2.0 * imag(conj(w) * exp(complex(zeros_like(x), x)) * z);
  const double scale = 1 + max(abs(analytic)).item<double>();
  ASSERT_LE(max(abs(eager_gradient - analytic)).item<double>(), 1e-12 * scale);

  // Taken inside the compiled function: the backward pass is part of the program, and fused.
  const TensorFunction loss_and_gradient = [&](const TensorList& in) {
    const Tensor input = in[0].detach().requires_grad_();
    const Tensor loss = phase_loss(input, z, w);
    return TensorList{loss, grad({loss}, {input}).at(0)};
  };
  const std::set<std::string_view> fused = fused_primitive_names(loss_and_gradient, {x});
  for (std::string_view name : {"exp", "conj", "imag", "abs"}) {
    EXPECT_TRUE(fused.count(name)) << name << " never ran inside a fused loop";
  }
  EXPECT_GT(expect_compiled_equals_eager(loss_and_gradient, {x}, 1e-12).last.fused_kernels, 0u);

  // Taken of the compiled function: compiled_call's rules differentiate the program's graph.
  CompiledFunction loss_only = compile([&](const TensorList& in) { return TensorList{phase_loss(in[0], z, w)}; });
  loss_only({leaf});
  const Tensor outside = grad({loss_only({leaf}).at(0)}, {leaf}).at(0);
  EXPECT_EQ(loss_only.stats().traces, 1);
  EXPECT_GT(loss_only.stats().last.fused_kernels, 0u);
  EXPECT_LE(max(abs(outside - eager_gradient)).item<double>(), 1e-12 * scale);
}

// exp as it would be without a complex spelling: a copy of the primitive under another name.
const Primitive& exp_without_complex_spelling() {
  static const Primitive& primitive = [] () -> const Primitive& {
    const auto& all = all_primitives();
    Primitive copy = *std::find_if(all.begin(), all.end(), [](const Primitive& p) { return p.name == "exp"; });
    copy.name = "exp_without_complex_spelling";
    copy.lowering.complex_form = {};
    return register_primitive(std::move(copy));
  }();
  return primitive;
}

TensorList chain_around_unspelled_op(const TensorList& in) {
  Tensor u = dispatch(exp_without_complex_spelling(), {in[0] * in[1] + 1.0});
  return {conj(u) * in[1] - u};
}

TEST(ComplexFusion, AnOpWithoutAComplexSpellingRunsBetweenLoops) {
  Generator gen(24);
  for (DType dtype : {DType::c128, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const TensorList inputs = is_complex(dtype)
                                  ? TensorList{complex_randn({40, 20}, dtype, gen), complex_randn({40, 20}, dtype, gen)}
                                  : TensorList{randn({40, 20}, dtype, &gen), randn({40, 20}, dtype, &gen)};
    const bool complex_operands = is_complex(dtype);
    EXPECT_EQ(fused_primitive_names(chain_around_unspelled_op, inputs).count("exp_without_complex_spelling"),
              complex_operands ? 0u : 1u);
    const CompileStats stats = expect_compiled_equals_eager(chain_around_unspelled_op, inputs, tolerance_for(dtype));
    // Complex: a loop before the op, the op, a loop after it; real: one loop.
    EXPECT_EQ(stats.last.fused_kernels, complex_operands ? 2u : 1u);
    EXPECT_EQ(stats.last.steps, complex_operands ? 3u : 1u);
  }
}

}  // namespace
}  // namespace eddy::compiler
