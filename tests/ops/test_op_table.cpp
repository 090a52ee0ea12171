// Runs every row of the op table: forward values in each dtype, derivatives of orders 1 to 3 in
// reverse mode, forward mode and both mixtures, against central differences in random
// directions (float64 / complex128), and the transpose identity for linear ops.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "eddy/compiler/compile.h"
#include "op_table.h"
#include "support/scoped_env.h"

namespace eddy::testing {
namespace {

using TensorList = std::vector<Tensor>;
constexpr double kStep = 1e-5;       // central-difference step
constexpr double kTolerance = 1e-6;  // relative, for derivative checks

bool double_precision(DType d) { return d == DType::f64 || d == DType::c128; }

// Re <a, b> = Re sum(conj(a) * b): the real inner product under which eddy's complex gradients
// (dL/dx + i dL/dy) are adjoint to directions.
double real_dot(const Tensor& a, const Tensor& b) {
  return sum(real(conj(a) * b)).item<double>();
}
Tensor real_dot_tensor(const Tensor& a, const Tensor& b) { return sum(real(conj(a) * b)); }

class OpTableTest : public ::testing::TestWithParam<OpCase> {
 protected:
  // Fresh leaves at inputs + h * directions (directions only on differentiable inputs).
  static TensorList shifted(const TensorList& inputs, const std::vector<size_t>& diff,
                            const TensorList& directions, double h, bool leaves) {
    TensorList out = inputs;
    for (size_t k = 0; k < diff.size(); ++k) {
      Tensor x = h == 0 ? inputs[diff[k]] : inputs[diff[k]] + h * directions[k];
      out[diff[k]] = leaves ? x.detach().requires_grad_() : x.detach();
    }
    return out;
  }

  static void expect_close(double ad, double fd, const std::string& what) {
    EXPECT_NEAR(ad, fd, kTolerance * (1 + std::abs(fd))) << what;
  }
};

TEST_P(OpTableTest, ForwardValues) {
  const OpCase& op = GetParam();
  for (DType dtype : op.dtypes) {
    Generator gen(11);
    TensorList inputs = op.make_inputs(dtype, gen);
    Tensor out = op.fn(inputs);
    // Every dtype agrees with the double-precision run on the same (rounded) inputs.
    TensorList wide;
    for (const Tensor& x : inputs) {
      wide.push_back(is_inexact(x.dtype()) ? cast(x, is_complex(x.dtype()) ? DType::c128 : DType::f64) : x);
    }
    Tensor expected = op.fn(wide);
    ASSERT_EQ(out.shape(), expected.shape()) << dtype;
    const double tolerance = double_precision(dtype) || !is_inexact(out.dtype()) ? 1e-12 : 2e-5;
    auto got = out.to_vector<c128>();
    auto want = expected.to_vector<c128>();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(std::abs(got[i] - want[i]), 0.0, tolerance * (1 + std::abs(want[i])))
          << op.name << " " << dtype << " element " << i;
    }
    if (!op.reference) continue;
    // Elementwise rows: against an independent scalar reference on broadcast operands.
    std::vector<std::vector<c128>> operands;
    for (const Tensor& x : wide) operands.push_back(expand(x, out.shape()).to_vector<c128>());
    for (size_t i = 0; i < want.size(); ++i) {
      std::vector<c128> args;
      for (const auto& operand : operands) args.push_back(operand[i]);
      c128 ref = op.reference(args);
      EXPECT_NEAR(std::abs(want[i] - ref), 0.0, 1e-12 * (1 + std::abs(ref)))
          << op.name << " reference, element " << i;
    }
  }
}

// Reverse mode, order k: the derivative of G_{k-1} along a random direction, where
// G_0 = Re<w, f(x)> and G_j = sum_i Re<u_ji, grad_i G_{j-1}>, against central differences.
class OpDerivativeTest : public OpTableTest {};
class OpMixedModeTest : public OpTableTest {};
class OpLinearTest : public OpTableTest {};

TEST_P(OpDerivativeTest, ReverseModeOrders1To3) {
  const OpCase& op = GetParam();
  for (DType dtype : op.dtypes) {
    if (!double_precision(dtype)) continue;
    Generator gen(23);
    TensorList inputs = op.make_inputs(dtype, gen);
    auto diff = differentiable_inputs(inputs);
    Tensor w = random_like(op.fn(inputs), gen);
    std::vector<TensorList> probes(op.max_order + 1);
    for (int k = 1; k <= op.max_order; ++k) {
      for (size_t i : diff) probes[k].push_back(random_like(inputs[i], gen));
    }
    // G_level at the given (leaf) inputs, differentiable when `keep_graph`.
    std::function<Tensor(const TensorList&, int, bool)> probe = [&](const TensorList& x, int level,
                                                                    bool keep_graph) {
      if (level == 0) return real_dot_tensor(w, op.fn(x));
      Tensor inner = probe(x, level - 1, true);
      TensorList targets;
      for (size_t i : diff) targets.push_back(x[i]);
      TensorList grads = grad({inner}, targets, {}, keep_graph);
      Tensor total = scalar(0.0, DType::f64);
      for (size_t k = 0; k < diff.size(); ++k) total = total + real_dot_tensor(probes[level][k], grads[k]);
      return total;
    };
    for (int order = 1; order <= op.max_order; ++order) {
      TensorList direction;
      for (size_t i : diff) direction.push_back(random_like(inputs[i], gen));
      TensorList at = shifted(inputs, diff, direction, 0, true);
      Tensor g_prev = probe(at, order - 1, true);
      TensorList targets;
      for (size_t i : diff) targets.push_back(at[i]);
      TensorList grads = grad({g_prev}, targets, {}, false);
      double ad = 0;
      for (size_t k = 0; k < diff.size(); ++k) ad += real_dot(grads[k], direction[k]);
      double plus = probe(shifted(inputs, diff, direction, kStep, true), order - 1, false).item<double>();
      double minus = probe(shifted(inputs, diff, direction, -kStep, true), order - 1, false).item<double>();
      expect_close(ad, (plus - minus) / (2 * kStep), op.name + " " + std::string(dtype_name(dtype)) +
                                                         " reverse order " + std::to_string(order));
    }
  }
}

// Forward mode, order k: T_k = jvp(T_{k-1}, v_k) with T_0 = f, checked as Re<w, T_k> against
// central differences of Re<w, T_{k-1}> along v_k.
TEST_P(OpDerivativeTest, ForwardModeOrders1To3) {
  const OpCase& op = GetParam();
  for (DType dtype : op.dtypes) {
    if (!double_precision(dtype)) continue;
    Generator gen(37);
    TensorList inputs = op.make_inputs(dtype, gen);
    auto diff = differentiable_inputs(inputs);
    Tensor w = random_like(op.fn(inputs), gen);
    std::vector<TensorList> directions(op.max_order + 1);
    for (int k = 1; k <= op.max_order; ++k) {
      for (size_t i : diff) directions[k].push_back(random_like(inputs[i], gen));
    }
    std::function<Tensor(const TensorList&, int)> tangent = [&](const TensorList& x, int order) {
      if (order == 0) return op.fn(x);
      MultiFunction f = [&, order](const TensorList& xs) {
        TensorList full = x;
        for (size_t k = 0; k < diff.size(); ++k) full[diff[k]] = xs[k];
        return TensorList{tangent(full, order - 1)};
      };
      TensorList primals;
      for (size_t i : diff) primals.push_back(x[i]);
      return jvp(f, primals, directions[order]).second[0];
    };
    for (int order = 1; order <= op.max_order; ++order) {
      double ad = real_dot(w, tangent(inputs, order));
      double plus = real_dot(w, tangent(shifted(inputs, diff, directions[order], kStep, false), order - 1));
      double minus = real_dot(w, tangent(shifted(inputs, diff, directions[order], -kStep, false), order - 1));
      expect_close(ad, (plus - minus) / (2 * kStep), op.name + " " + std::string(dtype_name(dtype)) +
                                                         " forward order " + std::to_string(order));
    }
  }
}

// Second order through both mixtures: jvp of a gradient (forward-over-reverse) and the gradient
// of a jvp (reverse-over-forward).
TEST_P(OpMixedModeTest, MixedModesOrder2) {
  const OpCase& op = GetParam();
  for (DType dtype : op.dtypes) {
    if (!double_precision(dtype)) continue;
    Generator gen(41);
    TensorList inputs = op.make_inputs(dtype, gen);
    auto diff = differentiable_inputs(inputs);
    Tensor w = random_like(op.fn(inputs), gen);
    TensorList v, u;
    for (size_t i : diff) v.push_back(random_like(inputs[i], gen));
    for (size_t i : diff) u.push_back(random_like(inputs[i], gen));
    auto with = [&](const TensorList& base, const TensorList& xs) {
      TensorList full = base;
      for (size_t k = 0; k < diff.size(); ++k) full[diff[k]] = xs[k];
      return full;
    };
    TensorList primals;
    for (size_t i : diff) primals.push_back(inputs[i]);
    // sum_i Re<u_i, grad_i Re<w, f(x)>>, as a function of the differentiable inputs.
    auto grad_probe = [&](const TensorList& xs) {
      TensorList leaves;
      for (const Tensor& x : xs) leaves.push_back(x.detach().requires_grad_());
      Tensor objective = real_dot_tensor(w, op.fn(with(inputs, leaves)));
      return grad({objective}, leaves, {}, true);
    };
    // Forward-over-reverse.
    MultiFunction gradient = [&](const TensorList& xs) {
      TensorList targets;
      for (const Tensor& x : xs) targets.push_back(x);
      auto result = vjp([&](const TensorList& ys) { return TensorList{real_dot_tensor(w, op.fn(with(inputs, ys)))}; },
                        targets, {scalar(1.0, DType::f64)});
      return result.second;
    };
    TensorList hv = jvp(gradient, primals, v).second;
    double ad = 0;
    for (size_t k = 0; k < diff.size(); ++k) ad += real_dot(u[k], hv[k]);
    auto shifted_primals = [&](double h) {
      TensorList xs;
      for (size_t k = 0; k < diff.size(); ++k) xs.push_back(primals[k] + h * v[k]);
      return xs;
    };
    auto g_plus = grad_probe(shifted_primals(kStep)), g_minus = grad_probe(shifted_primals(-kStep));
    double fd = 0;
    for (size_t k = 0; k < diff.size(); ++k) {
      fd += (real_dot(u[k], g_plus[k]) - real_dot(u[k], g_minus[k])) / (2 * kStep);
    }
    expect_close(ad, fd, op.name + " forward-over-reverse");

    // Reverse-over-forward: grad of Re<w, J v> along u.
    TensorList leaves;
    for (const Tensor& x : primals) leaves.push_back(x.detach().requires_grad_());
    MultiFunction f = [&](const TensorList& xs) { return TensorList{op.fn(with(inputs, xs))}; };
    Tensor directional = real_dot_tensor(w, jvp(f, leaves, v).second[0]);
    TensorList rv = grad({directional}, leaves, {}, false);
    double ad2 = 0;
    for (size_t k = 0; k < diff.size(); ++k) ad2 += real_dot(rv[k], u[k]);
    auto jv_at = [&](double h) {
      TensorList xs;
      for (size_t k = 0; k < diff.size(); ++k) xs.push_back(primals[k] + h * u[k]);
      return real_dot(w, jvp(f, xs, v).second[0]);
    };
    expect_close(ad2, (jv_at(kStep) - jv_at(-kStep)) / (2 * kStep), op.name + " reverse-over-forward");
  }
}

// Linear ops: <A x, y> = <x, A^T y>, with A^T from the VJP rule, and jvp(A, x, t) = A t.
TEST_P(OpLinearTest, TransposeIdentity) {
  const OpCase& op = GetParam();
  for (DType dtype : op.dtypes) {
    if (!double_precision(dtype)) continue;
    Generator gen(53);
    TensorList inputs = op.make_inputs(dtype, gen);
    auto diff = differentiable_inputs(inputs);
    TensorList leaves = shifted(inputs, diff, {}, 0, true);
    Tensor out = op.fn(leaves);
    Tensor y = random_like(out, gen);
    TensorList targets;
    for (size_t i : diff) targets.push_back(leaves[i]);
    TensorList transposed = grad({out}, targets, {y}, false);
    double lhs = real_dot(y, out), rhs = 0;
    for (size_t k = 0; k < diff.size(); ++k) rhs += real_dot(transposed[k], inputs[diff[k]]);
    EXPECT_NEAR(lhs, rhs, 1e-12 * (1 + std::abs(lhs))) << op.name << " " << dtype;

    MultiFunction f = of_differentiable_inputs(op, inputs, diff);
    TensorList primals;
    for (size_t i : diff) primals.push_back(inputs[i]);
    Tensor jv = jvp(f, primals, primals).second[0];
    auto got = jv.to_vector<c128>(), want = out.to_vector<c128>();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(std::abs(got[i] - want[i]), 0.0, 1e-12);
  }
}

std::string row_name(const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; }

// The rows again with their functions compiled (eddy::compile): derivatives of a compiled
// function come from the compiled-call primitive's rules and must pass the checks the eager
// function passes. Fusion is off because the rules differentiate the graph, not the kernels, and
// each row would otherwise wait for the system compiler.
std::vector<OpCase> compiled(std::vector<OpCase> rows) {
  for (OpCase& op : rows) {
    auto function = std::make_shared<CompiledFunction>([fn = op.fn](const TensorList& x) { return TensorList{fn(x)}; });
    op.fn = [function](const TensorList& x) {
      const ScopedEnv no_fusion("EDDY_COMPILER_DISABLE", "fusion");
      return (*function)(x)[0];
    };
    op.name = "compiled_" + op.name;
  }
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTableTest, ::testing::ValuesIn(op_table()), row_name);
// Comparisons have bool outputs and so no derivatives; they are covered by ForwardValues.
INSTANTIATE_TEST_SUITE_P(Ops, OpDerivativeTest,
                         ::testing::ValuesIn(rows_where([](const OpCase& op) { return op.max_order > 0; })),
                         row_name);
INSTANTIATE_TEST_SUITE_P(Ops, OpMixedModeTest,
                         ::testing::ValuesIn(rows_where([](const OpCase& op) { return op.max_order >= 2; })),
                         row_name);
INSTANTIATE_TEST_SUITE_P(Compiled, OpDerivativeTest,
                         ::testing::ValuesIn(compiled(rows_where([](const OpCase& op) { return op.max_order > 0; }))),
                         row_name);
INSTANTIATE_TEST_SUITE_P(Compiled, OpMixedModeTest,
                         ::testing::ValuesIn(compiled(rows_where([](const OpCase& op) { return op.max_order >= 2; }))),
                         row_name);
INSTANTIATE_TEST_SUITE_P(Ops, OpLinearTest,
                         ::testing::ValuesIn(rows_where([](const OpCase& op) { return op.linear; })),
                         row_name);

// Every registered primitive has at least one row.
TEST(OpTable, CoversEveryPrimitive) {
  std::set<std::string> covered;
  for (const OpCase& op : op_table()) covered.insert(op.primitives.begin(), op.primitives.end());
  for (const Primitive& primitive : all_primitives()) {
    EXPECT_TRUE(covered.count(std::string(primitive.name))) << "no op-table row covers " << primitive.name;
  }
}

// The compiler's choices read each primitive's cost class; a primitive that forgot it would be
// treated as neither cheap nor anything else.
TEST(OpTable, EveryPrimitiveDeclaresItsCostClass) {
  for (const Primitive& primitive : all_primitives()) {
    EXPECT_NE(primitive.cost, CostClass::unset) << primitive.name << " declares no cost class";
  }
}

// Whether the primitive maps float64 operands (bool ones where it takes conditions) to a real value.
bool has_real_form(const Primitive& primitive) {
  std::vector<Tensor> inputs;
  for (int i = 0; i < std::max(primitive.arity, 1); ++i) {
    inputs.push_back(primitive.differentiable_input(i) ? zeros({2}, DType::f64) : zeros({2}, DType::b8));
  }
  Attrs attrs;
  attrs.dtype = DType::f64;  // what cast is asked for
  try {
    return !is_complex(primitive.infer(inputs, attrs).dtype);
  } catch (const Error&) {
    return false;
  }
}

// Every elementwise primitive that takes real operands needs its scalar code for them, so that
// fused float32/float64 loops hold it (the spellings for complex operands are checked by
// tests/compiler/test_complex_fusion.cpp).
TEST(OpTable, EveryRealElementwisePrimitiveHasScalarCode) {
  int lowered = 0;
  for (const Primitive& primitive : all_primitives()) {
    if (!primitive.elementwise || !has_real_form(primitive)) continue;
    EXPECT_TRUE(primitive.lowering.defined()) << primitive.name << " has no scalar code (Primitive::lowering)";
    lowered += primitive.lowering.defined();
  }
  EXPECT_GE(lowered, 20);
}

// Every math function is a primitive of the same name, which is what the expression language's
// and Python's names refer to.
TEST(OpTable, MathFunctionsAreThePrimitivesOfTheirName) {
  for (const MathFunction& function : math_functions()) {
    const auto same_name = [&](const Primitive& p) { return p.name == function.name; };
    const auto& primitives = all_primitives();
    const auto found = std::find_if(primitives.begin(), primitives.end(), same_name);
    ASSERT_NE(found, primitives.end()) << "no primitive named " << function.name;
    EXPECT_EQ(found->arity, function.arity) << function.name;
    EXPECT_TRUE(found->elementwise) << function.name;
  }
}

// Taylor mode's closed-form f' and f'' (Primitive::derivatives) agree with forward over forward
// mode through the primitive's tangent rules.
TEST(OpTable, SecondOrderRulesMatchForwardOverForward) {
  Generator generator(5);
  const Tensor x = rand({16}, DType::f64, &generator) + 0.2;
  int checked = 0;
  for (const Primitive& primitive : all_primitives()) {
    if (!primitive.derivatives) continue;
    ++checked;
    const Function f = [&](const Tensor& t) { return dispatch(primitive, {t}); };
    const Function slope = [&](const Tensor& t) { return jvp(f, t, ones_like(t)).second; };
    const auto [first, second] = primitive.derivatives(x, f(x));
    EXPECT_LE(max(abs(first - slope(x))).item<double>(), 1e-12) << primitive.name;
    EXPECT_LE(max(abs(second - jvp(slope, x, ones_like(x)).second)).item<double>(), 1e-12) << primitive.name;
  }
  EXPECT_GE(checked, 4);  // exp, sin, cos, tanh
}

}  // namespace
}  // namespace eddy::testing
