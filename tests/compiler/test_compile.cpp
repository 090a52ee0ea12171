// compile(f) == f: every op-table row, values and first derivatives in both modes, replayed from
// the compiled program on inputs other than the traced ones; plus guards and retracing.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unistd.h>

#include "../ops/op_table.h"
#include "eddy/autodiff/checkpoint.h"
#include "eddy/compiler/compile.h"
#include "eddy/ops/autocast.h"
#include "support/expect_error.h"
#include "support/scoped_env.h"

namespace eddy {
namespace {

using testing::OpCase;
using TensorList = std::vector<Tensor>;

double max_difference(const Tensor& a, const Tensor& b) {
  if (a.dtype() == DType::b8) return max(abs(cast(a, DType::f64) - cast(b, DType::f64))).item<double>();
  if (!is_inexact(a.dtype())) return max(abs(cast(a, DType::f64) - cast(b, DType::f64))).item<double>();
  return cast(max(abs(a - b)), DType::f64).item<double>();
}

double tolerance(DType dtype) { return real_dtype(dtype) == DType::f32 ? 1e-5 : 1e-12; }

void expect_same(const TensorList& compiled, const TensorList& eager, const std::string& what) {
  ASSERT_EQ(compiled.size(), eager.size()) << what;
  for (size_t i = 0; i < eager.size(); ++i) {
    ASSERT_EQ(compiled[i].shape(), eager[i].shape()) << what << " output " << i;
    ASSERT_EQ(compiled[i].dtype(), eager[i].dtype()) << what << " output " << i;
    if (eager[i].numel() == 0) continue;
    const double scale = is_inexact(eager[i].dtype()) ? 1 + cast(max(abs(eager[i])), DType::f64).item<double>() : 1;
    EXPECT_LE(max_difference(compiled[i], eager[i]), tolerance(eager[i].dtype()) * scale) << what << " output " << i;
  }
}

// The op table exercises capture and replay; fused code generation has its own tests, so these
// compile no kernels and stay fast.
class CompileOpTableTest : public ::testing::TestWithParam<OpCase> {
 protected:
  void SetUp() override { setenv("EDDY_COMPILER_DISABLE", "fusion", 1); }
  void TearDown() override { unsetenv("EDDY_COMPILER_DISABLE"); }
};

TEST_P(CompileOpTableTest, ValuesMatchEager) {
  const OpCase& op = GetParam();
  for (DType dtype : op.dtypes) {
    Generator gen(11);
    const TensorList traced_on = op.make_inputs(dtype, gen), replayed_on = op.make_inputs(dtype, gen);
    CompiledFunction compiled = compile([&](const TensorList& in) { return TensorList{op.fn(in)}; });
    compiled(traced_on);
    expect_same(compiled(replayed_on), {op.fn(replayed_on)}, op.name + " " + std::string(dtype_name(dtype)));
    EXPECT_EQ(compiled.stats().traces, 1);
  }
}

// Reverse mode (a VJP with a cotangent input) and forward mode (a JVP with tangent inputs),
// captured inside the function, in the row's double-precision dtype.
class CompileOpDerivativeTest : public CompileOpTableTest {};

TEST_P(CompileOpDerivativeTest, DerivativesMatchEager) {
  const OpCase& op = GetParam();
  DType dtype = op.dtypes.back();
  Generator gen(12);
  const TensorList traced_on = op.make_inputs(dtype, gen), replayed_on = op.make_inputs(dtype, gen);
  const std::vector<size_t> diff = testing::differentiable_inputs(traced_on);
  const Tensor output = op.fn(traced_on);
  ASSERT_FALSE(diff.empty() || !is_inexact(output.dtype())) << op.name << " has no derivative in " << dtype_name(dtype);

  // Inputs, then one cotangent for the output, then one tangent per differentiable input.
  auto derivatives = [&](const TensorList& all) {
    const TensorList inputs(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(traced_on.size()));
    TensorList leaves = inputs, targets, tangents;
    for (size_t k = 0; k < diff.size(); ++k) {
      leaves[diff[k]] = inputs[diff[k]].detach().requires_grad_();
      targets.push_back(leaves[diff[k]]);
      tangents.push_back(all[traced_on.size() + 1 + k]);
    }
    TensorList results = grad({op.fn(leaves)}, targets, {all[traced_on.size()]});
    TensorList primals;
    for (size_t k : diff) primals.push_back(inputs[k]);
    results.push_back(jvp(testing::of_differentiable_inputs(op, inputs, diff), primals, tangents).second[0]);
    return results;
  };
  auto arguments = [&](const TensorList& inputs) {
    TensorList all = inputs;
    all.push_back(testing::random_like(output, gen));
    for (size_t k : diff) all.push_back(testing::random_like(inputs[k], gen));
    return all;
  };
  CompiledFunction compiled = compile(derivatives);
  compiled(arguments(traced_on));
  const TensorList replay = arguments(replayed_on);
  expect_same(compiled(replay), derivatives(replay), op.name + " derivatives");
}

std::string row_name(const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Ops, CompileOpTableTest, ::testing::ValuesIn(testing::op_table()), row_name);
// Comparisons have bool outputs and no derivatives; ValuesMatchEager covers them.
INSTANTIATE_TEST_SUITE_P(Ops, CompileOpDerivativeTest,
                         ::testing::ValuesIn(testing::rows_where([](const OpCase& op) { return op.max_order > 0; })),
                         row_name);

TEST(Compile, RetracesOnANewSignatureOnly) {
  CompiledFunction compiled = compile([](const TensorList& in) { return TensorList{sin(in[0]) * in[0]}; });
  compiled({randn({3, 4}, DType::f64)});
  compiled({randn({3, 4}, DType::f64)});
  EXPECT_EQ(compiled.stats().traces, 1);
  const TensorList other_shape = {randn({5}, DType::f64)};
  expect_same(compiled(other_shape), {sin(other_shape[0]) * other_shape[0]}, "new shape");
  EXPECT_EQ(compiled.stats().traces, 2);
  compiled({randn({3, 4}, DType::f32)});
  EXPECT_EQ(compiled.stats().traces, 3);
  compiled({randn({3, 4}, DType::f64).requires_grad_()});
  EXPECT_EQ(compiled.stats().traces, 4);
  EXPECT_EQ(compiled.stats().calls, 5);
}

// Inputs are checked at every call: an undefined one got "operation on an undefined tensor" (the
// signature read its shape first), and one tensor twice was refused only while tracing.
TEST(Compile, InputsAreCheckedAtEveryCallNamingTheInput) {
  CompiledFunction product = compile([](const TensorList& in) { return TensorList{in[0] * in[1]}; });
  const Tensor a = randn({3}, DType::f64), b = randn({3}, DType::f64);
  EXPECT_EQ(error_of([&] { product({Tensor(), b}); }), "compile: input 0 is an undefined tensor");
  product({a, b});
  EXPECT_EQ(error_of([&] { product({a, a}); }),
            "compile: input 1 is the same tensor as input 0; pass distinct tensors");
  EXPECT_EQ(product.stats().traces, 1);
}

// A program traced under autocast answers only calls under the same autocast.
TEST(Compile, AutocastIsPartOfTheSignature) {
  CompiledFunction product = compile([](const TensorList& in) { return TensorList{matmul(in[0], in[1])}; });
  const TensorList inputs = {randn({4, 4}, DType::f32), randn({4, 4}, DType::f32)};
  EXPECT_EQ(product(inputs)[0].dtype(), DType::f32);
  {
    AutocastScope autocast(DType::bf16);
    EXPECT_EQ(product(inputs)[0].dtype(), DType::bf16);
  }
  EXPECT_EQ(product(inputs)[0].dtype(), DType::f32);
  EXPECT_EQ(product.stats().traces, 2);
}

// EDDY_COMPILER_DUMP writes each traced program's graph and steps once, numbered in the order the
// process traced them: two compiled functions' first programs once shared a number, and the second
// overwrote the first (eddy lm train's evaluation program hid its training step).
TEST(Compile, DumpsEveryProgramOfTheProcessUnderItsOwnName) {
  const std::filesystem::path directory =
      std::filesystem::temp_directory_path() / ("eddy-compiler-dump-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(directory);
  {
    const ScopedEnv dump("EDDY_COMPILER_DUMP", directory.c_str());
    CompiledFunction sines = compile([](const TensorList& in) { return TensorList{sin(in[0])}; });
    CompiledFunction cosines = compile([](const TensorList& in) { return TensorList{cos(in[0])}; });
    sines({randn({4}, DType::f64)});
    cosines({randn({4}, DType::f64)});
  }
  std::vector<std::string> listings;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    if (entry.path().string().ends_with(".steps.txt")) {
      std::ifstream file(entry.path());
      listings.emplace_back(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    }
  }
  std::filesystem::remove_all(directory);
  ASSERT_EQ(listings.size(), 2u);
  const bool sine_first = listings[0].find("sin") != std::string::npos;
  EXPECT_NE(listings[sine_first ? 0 : 1].find("sin"), std::string::npos);
  EXPECT_NE(listings[sine_first ? 1 : 0].find("cos"), std::string::npos);
}

// EDDY_COMPILER_PROFILE: when a program goes, it reports where its runs spent their time, by
// operation (a primitive's calls together, fused kernels together) and by step, on standard error.
TEST(Compile, AProfiledProgramReportsEachOperationsShareOfItsRuns) {
  auto function = [](const TensorList& in) { return TensorList{sin(matmul(in[0], in[1])) * 2.0}; };
  const TensorList inputs = {randn({64, 32}, DType::f64), randn({32, 16}, DType::f64)};
  ::testing::internal::CaptureStderr();
  {
    const ScopedEnv profile("EDDY_COMPILER_PROFILE", "1");
    CompiledFunction compiled = compile(function);
    for (int run = 0; run < 3; ++run) compiled(inputs);
  }
  const std::string report = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(report.find("eddy compiler profile of program-"), std::string::npos) << report;
  EXPECT_NE(report.find(": 2 steps, 3 runs, "), std::string::npos) << report;
  EXPECT_NE(report.find(" ms a run after the first (the first, with one-time costs: "), std::string::npos) << report;
  EXPECT_NE(report.find("matmul\n"), std::string::npos) << report;
  EXPECT_NE(report.find("fused kernels\n"), std::string::npos) << report;
  EXPECT_NE(report.find("eddy_fused_0[sin mul]"), std::string::npos) << report;
  // The operations' shares add up to the whole (each printed to 0.1%).
  double shares = 0;
  std::istringstream lines(report.substr(report.find("by operation"), report.find("the slowest") -
                                                                          report.find("by operation")));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    if (line.find('%') != std::string::npos) shares += std::stod(line.substr(0, line.find('%')));
  }
  EXPECT_NEAR(shares, 100.0, 0.2) << report;

  ::testing::internal::CaptureStderr();
  {
    CompiledFunction unprofiled = compile(function);
    unprofiled(inputs);
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

// The first call records the function on abstract tensors (no kernel runs, no autodiff history
// is kept beside the capture) and gives the program's results, with their derivatives.
TEST(Compile, TheFirstCallTracesAbstractlyAndRunsTheProgram) {
  bool saw_values = false;
  CompiledFunction compiled = compile([&](const TensorList& in) {
    saw_values = saw_values || !in[0].is_abstract();
    return TensorList{sin(in[0]) * in[0]};
  });
  const Tensor x = randn({3, 4}, DType::f64).requires_grad_();
  const TensorList first = compiled({x});
  EXPECT_FALSE(saw_values);
  expect_same(first, {sin(x) * x}, "first call");
  const Tensor slope = grad({sum(first[0])}, {x})[0];
  expect_same({slope}, {cos(x) * x + sin(x)}, "its gradient");
}

// A graph above the node bound is refused before it is optimised or compiled, so that a caller
// can run the function eagerly instead (a high-order PINN step took minutes to compile).
TEST(Compile, AGraphAboveTheNodeBoundIsRefusedWithItsSize) {
  auto function = [](const TensorList& in) { return TensorList{sin(in[0]) * in[0] + in[0]}; };
  CompiledFunction bounded(function, CompileOptions{.max_graph_nodes = 2});
  const TensorList inputs = {randn({3}, DType::f64)};
  EXPECT_NE(error_of([&] { bounded(inputs); }).find("compile: the traced graph has 3 nodes, more than the 2"),
            std::string::npos);
  CompiledFunction within(function, CompileOptions{.max_graph_nodes = 3});
  expect_same(within(inputs), function(inputs), "within the bound");
  EXPECT_EQ(within.stats().traces, 1);
}

// Derivatives of a compiled function, with respect to its inputs and to a parameter it closes
// over, equal the eager function's, in reverse mode to order 3 and in forward mode; the op-table
// suites check every row this way too (Compiled/OpDerivativeTest).
TEST(Compile, GradOfACompiledFunctionIsTheEagerGradToOrderThree) {
  Generator gen(8);
  const Tensor weight = randn({4}, DType::f64, &gen).requires_grad_();
  auto function = [&](const TensorList& in) {
    return TensorList{tanh(in[0] * in[1]) + sum(exp(in[0]), {0}) * weight, in[0]};
  };
  CompiledFunction compiled = compile(function);
  const Tensor a = randn({3, 4}, DType::f64, &gen).requires_grad_(), b = randn({4}, DType::f64, &gen).requires_grad_();
  // Order k: the gradient of the sum of the order k-1 gradients.
  auto gradients = [&](const std::function<TensorList(const TensorList&)>& f, int order) {
    const TensorList outputs = f({a, b});
    Tensor scalar_value = sum(outputs[0] * outputs[1]);
    TensorList result;
    for (int k = 1; k <= order; ++k) {
      result = grad({scalar_value}, {a, b, weight}, {}, true);
      scalar_value = sum(result[0]) + sum(square(result[1])) + sum(result[2]);
    }
    return result;
  };
  for (int order = 1; order <= 3; ++order) {
    expect_same(gradients(std::ref(compiled), order), gradients(function, order), "reverse order " + std::to_string(order));
  }
  EXPECT_EQ(compiled.stats().traces, 1);
  const Tensor da = randn({3, 4}, DType::f64, &gen), db = randn({4}, DType::f64, &gen);
  auto first_output = [](const std::function<TensorList(const TensorList&)>& f) {
    return [f](const TensorList& in) { return TensorList{f(in)[0]}; };
  };
  expect_same(jvp(first_output(std::ref(compiled)), {a, b}, {da, db}).second, jvp(first_output(function), {a, b}, {da, db}).second,
              "forward");
}

// A detached handle names the same value in the graph, and a value computed under no_grad is a
// node like any other: without stop_gradient nodes, the compiled call's derivatives went through
// both (grad of sum(detach(a) * a) came out 2a instead of a).
TEST(Compile, DerivativesOfACompiledFunctionStopWhereEagerOnesDo) {
  Generator gen(9);
  const Tensor weight = randn({4}, DType::f64, &gen).requires_grad_();
  auto function = [&](const TensorList& in) {
    Tensor squared;
    {
      NoGradGuard no_grad;
      squared = in[0] * in[0];
    }
    return TensorList{sum(in[0].detach() * in[0] * weight) + sum(squared * in[0]) + sum(stop_gradient(weight) * in[0])};
  };
  CompiledFunction compiled = compile(function);
  const Tensor a = randn({4}, DType::f64, &gen).requires_grad_();
  expect_same(grad(compiled({a}), {a, weight}), grad(function({a}), {a, weight}), "reverse");
  const Tensor x = randn({4}, DType::f64, &gen), dx = randn({4}, DType::f64, &gen);
  auto detached_only = [](const TensorList& in) { return TensorList{sum(in[0].detach() * in[0])}; };
  CompiledFunction compiled_detached = compile(detached_only);
  expect_same(jvp(std::ref(compiled_detached), {x}, {dx}).second, jvp(detached_only, {x}, {dx}).second, "forward");
}

// Each output of a compiled call is a node of its own on the tape; the backward pass hands the
// cotangents of all it reached to one walk over the graph, where a walk per output repeated the
// function's reverse pass once per output. A checkpointed segment in the function counts them:
// one walk reruns it twice (the replay's forward value and its own recomputation).
TEST(Compile, DifferentiatesEveryOutputOfACallInOneWalk) {
  Generator gen(5);
  const Tensor weight = randn({4}, DType::f64, &gen).requires_grad_();
  int segment_runs = 0;
  auto function = [&](const TensorList& in) {
    const auto segment = [&](const TensorList& x) {
      ++segment_runs;
      return TensorList{tanh(x[0] * x[1])};
    };
    const Tensor h = checkpoint(segment, {in[0], weight})[0];
    const Tensor twice = h * 2.0;
    return TensorList{sum(h), twice, exp(h), twice};
  };
  const Tensor c1 = randn({4}, DType::f64, &gen), c3 = randn({4}, DType::f64, &gen);
  auto loss = [&](const TensorList& out) { return out[0] + sum(out[1] * c1) + sum(out[3] * c3); };
  CompiledFunction compiled = compile(function);
  const Tensor a = randn({4}, DType::f64, &gen).requires_grad_();
  const TensorList outputs = compiled({a});
  segment_runs = 0;
  const TensorList compiled_grads = grad({loss(outputs)}, {a, weight});
  EXPECT_EQ(segment_runs, 2) << "the backward pass walked the compiled graph more than once";
  expect_same(compiled_grads, grad({loss(function({a}))}, {a, weight}), "first derivatives");
  // Second derivatives through the group's rule: a Hessian-vector product.
  const Tensor v = randn({4}, DType::f64, &gen);
  auto hessian_times_v = [&](const TensorList& out) {
    const Tensor g = grad({loss(out)}, {a}, {}, true)[0];
    return grad({sum(g * v)}, {a, weight});
  };
  expect_same(hessian_times_v(compiled({a})), hessian_times_v(function({a})), "second derivatives");
  // Forward mode: every output asks for its tangent, and one replay gives them all. The segment
  // runs in the program, then twice in the replay (for its value and for its tangent).
  const Tensor x = randn({4}, DType::f64, &gen), dx = randn({4}, DType::f64, &gen);
  jvp(std::ref(compiled), {x}, {dx});  // traced for inputs that carry tangents
  segment_runs = 0;
  const TensorList compiled_tangents = jvp(std::ref(compiled), {x}, {dx}).second;
  EXPECT_EQ(segment_runs, 3) << "forward mode replayed the compiled graph more than once";
  expect_same(compiled_tangents, jvp(function, {x}, {dx}).second, "tangents");
}

// A gradient with respect to outputs alone runs no rule of the call, so a tensor the call read may
// be written since, as eager autodiff takes it (the rule refused it).
TEST(Compile, AGradientWithRespectToAnOutputRunsNoRuleOfTheCall) {
  Generator gen(13);
  const Tensor weight = randn({3}, DType::f64, &gen).requires_grad_();
  CompiledFunction compiled = compile([&](const TensorList& in) {
    const Tensor b = in[0] * weight;
    return TensorList{b, sum(b)};
  });
  const Tensor x = randn({3}, DType::f64, &gen).requires_grad_();
  const TensorList outputs = compiled({x});
  const Tensor c = randn({3}, DType::f64, &gen);
  const Tensor loss = sum(outputs[0] * c) + outputs[1];
  {
    NoGradGuard no_grad;
    Tensor(weight).copy_(weight.detach() * 2.0);
  }
  expect_same(grad({loss}, {outputs[0]}), {c}, "gradient with respect to the output");
}

TEST(Compile, SeesInPlaceUpdatesOfCapturedParameters) {
  Tensor weight = randn({4, 2}, DType::f64);
  CompiledFunction compiled = compile([&](const TensorList& in) { return TensorList{tanh(matmul(in[0], weight))}; });
  const Tensor x = randn({3, 4}, DType::f64);
  compiled({x});
  weight.copy_(weight * 2.0);  // what an optimiser step does
  expect_same(compiled({x}), {tanh(matmul(x, weight))}, "after the update");
}

TEST(Compile, CapturesATrainingStepWithSecondDerivatives) {
  // Loss of u_xx + u for a tanh network u(x), and its gradient with respect to the weights.
  Generator gen(3);
  Tensor w1 = randn({1, 16}, DType::f64, &gen).requires_grad_(), w2 = randn({16, 1}, DType::f64, &gen).requires_grad_();
  auto step = [&](const TensorList& in) {
    Tensor x = in[0].detach().requires_grad_();
    Tensor u = matmul(tanh(matmul(x, w1)), w2);
    Tensor u_x = grad({u}, {x}, {ones_like(u)}, true)[0];
    Tensor u_xx = grad({u_x}, {x}, {ones_like(u_x)}, true)[0];
    Tensor loss = mean(square(u_xx + u));
    TensorList grads = grad({loss}, {w1, w2});
    return TensorList{loss, grads[0], grads[1]};
  };
  CompiledFunction compiled = compile(step);
  compiled({randn({64, 1}, DType::f64, &gen)});
  const TensorList replay = {randn({64, 1}, DType::f64, &gen)};
  expect_same(compiled(replay), step(replay), "training step");
  EXPECT_GT(compiled.stats().last.fused_kernels, 0u);
  EXPECT_GT(compiled.stats().last.fused_nodes, compiled.stats().last.fused_kernels);
}

TEST(Compile, RunsEagerlyInsideAnotherCapture) {
  CompiledFunction inner = compile([](const TensorList& in) { return TensorList{exp(in[0])}; });
  CompiledFunction outer = compile([&](const TensorList& in) { return TensorList{inner({in[0] * 2.0})[0] + 1.0}; });
  outer({randn({4}, DType::f64)});
  const TensorList replay = {randn({4}, DType::f64)};
  expect_same(outer(replay), {exp(replay[0] * 2.0) + 1.0}, "nested");
}

}  // namespace
}  // namespace eddy
