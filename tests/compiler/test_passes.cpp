// Graph passes: what each removes or rewrites, what each must leave alone, and that the graph
// still computes the same values, checked by running both graphs on fresh inputs.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>

#include "eddy/compiler/passes.h"
#include "eddy/compiler/trace.h"
#include "eddy/dist/collectives.h"
#include "eddy/eddy.h"
#include "support/disabled_passes.h"
#include "support/expect_error.h"

namespace eddy::compiler {
namespace {

using Tensors = std::vector<Tensor>;

// The reference interpreter: every node through its primitive's eval, in order.
Tensors run_graph(const Graph& graph, const Tensors& inputs) {
  std::vector<Tensor> values(graph.values.size());
  for (size_t i = 0; i < graph.inputs.size(); ++i) values[static_cast<size_t>(graph.inputs[i])] = inputs[i];
  for (const CapturedTensor& entry : graph.captured) values[static_cast<size_t>(entry.id)] = entry.tensor;
  for (const GraphNode& node : graph.nodes) {
    Tensors arguments;
    for (ValueId input : node.inputs) arguments.push_back(values[static_cast<size_t>(input)]);
    const ValueInfo& info = graph.value(node.output);
    values[static_cast<size_t>(node.output)] = node.primitive->eval(arguments, node.attrs, {info.shape, info.dtype});
  }
  Tensors outputs;
  for (ValueId output : graph.outputs) outputs.push_back(values[static_cast<size_t>(output)]);
  return outputs;
}

// Normal values with the floats that identities get wrong mixed in: signed zeros, Inf and NaN.
Tensor awkward_input(const Shape& shape, DType dtype) {
  if (is_integral(dtype)) return cast(randn(shape, DType::f64) * 1000.0, dtype);
  const double specials[] = {-0.0, 0.0, std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
  std::vector<double> values = randn(shape, DType::f64).to_vector<double>();
  for (size_t i = 0; i < values.size() && i < std::size(specials); ++i) values[i] = specials[i];
  Tensor real = tensor(values, shape);
  return is_complex(dtype) ? cast(complex(real, flip(real, {0})), dtype) : cast(real, dtype);
}

// Same bits up to NaN payloads, or within a relative `tolerance`.
bool same_number(double a, double b, double tolerance) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (tolerance == 0 || std::isinf(a) || std::isinf(b)) return a == b && std::signbit(a) == std::signbit(b);
  return std::abs(a - b) <= tolerance * std::max(1.0, std::abs(a));
}

void expect_same_values_on(const Graph& original, const Graph& optimized, const Tensors& inputs, double tolerance) {
  const Tensors want = run_graph(original, inputs), got = run_graph(optimized, inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].shape(), got[i].shape()) << "output " << i;
    ASSERT_EQ(want[i].dtype(), got[i].dtype()) << "output " << i;
    const std::vector<c128> a = want[i].to_vector<c128>(), b = got[i].to_vector<c128>();
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_TRUE(same_number(a[k].real(), b[k].real(), tolerance) && same_number(a[k].imag(), b[k].imag(), tolerance))
          << "output " << i << " element " << k << ": " << a[k] << " became " << b[k] << "\n"
          << optimized.to_string();
    }
  }
}

// On plain normal inputs, and on inputs with signed zeros, Inf and NaN in them.
void expect_same_values(const Graph& original, const Graph& optimized, double tolerance) {
  Tensors plain, awkward;
  for (ValueId id : original.inputs) {
    const ValueInfo& info = original.value(id);
    plain.push_back(is_integral(info.dtype) ? cast(randn(info.shape, DType::f64) * 1000.0, info.dtype)
                                            : cast(randn(info.shape, DType::f64), info.dtype));
    awkward.push_back(awkward_input(info.shape, info.dtype));
  }
  expect_same_values_on(original, optimized, plain, tolerance);
  expect_same_values_on(original, optimized, awkward, tolerance);
}

Graph capture(const TensorFunction& function, const std::vector<Shape>& shapes, DType dtype = DType::f64) {
  Tensors inputs;
  for (const Shape& shape : shapes) inputs.push_back(cast(randn(shape, DType::f64), dtype));
  return trace(function, inputs).graph;
}

std::vector<std::string_view> primitive_names(const Graph& graph) {
  std::vector<std::string_view> names;
  for (const GraphNode& node : graph.nodes) names.push_back(node.primitive->name);
  return names;
}

using Names = std::vector<std::string_view>;

int64_t count_of(const Graph& graph, std::string_view primitive) {
  const Names names = primitive_names(graph);
  return std::count(names.begin(), names.end(), primitive);
}

// Runs `pass` on a copy of `original`, checks the copy is valid and computes the same values.
template <typename Pass>
Graph after(const Graph& original, Pass pass, double tolerance = 0) {
  Graph optimized = original;
  pass(optimized);
  verify(optimized);
  expect_same_values(original, optimized, tolerance);
  return optimized;
}

const Primitive& primitive_named(std::string_view name) { return registered_primitive(name); }

TEST(DeadCode, DropsUnusedBranchesAndTheConstantsOnlyTheyUsed) {
  const Graph original = capture([](const Tensors& in) {
    Tensor unused = exp(in[0]) * tensor<double>({3.0});
    return Tensors{sin(in[0])};
  }, {{4, 3}});
  ASSERT_EQ(original.captured.size(), 1u);
  Graph optimized = after(original, eliminate_dead_code);
  EXPECT_EQ(primitive_names(optimized), Names{"sin"});
  EXPECT_TRUE(optimized.captured.empty());
  EXPECT_EQ(optimized.inputs, original.inputs);
  EXPECT_FALSE(eliminate_dead_code(optimized)) << "a second sweep has nothing left to drop";
}

TEST(DeadCode, KeepsWhatAnyOutputNeeds) {
  Graph graph = capture([](const Tensors& in) {
    Tensor shared = tanh(in[0]);
    return Tensors{shared * in[1], sum(shared)};
  }, {{3}, {3}});
  const std::string before = graph.to_string();
  EXPECT_FALSE(eliminate_dead_code(graph));
  EXPECT_EQ(graph.to_string(), before);
}

TEST(CommonSubexpressions, MergesRepeatedNodesAndThenTheirUsers) {
  const Graph original = capture([](const Tensors& in) {
    return Tensors{exp(sin(in[0])) * exp(sin(in[0]))};
  }, {{5}});
  Graph optimized = after(original, eliminate_common_subexpressions);
  EXPECT_EQ(primitive_names(optimized), (Names{"sin", "exp", "mul"})) << optimized.to_string();
  const GraphNode& product = optimized.nodes.back();
  EXPECT_EQ(product.inputs[0], product.inputs[1]);
}

TEST(CommonSubexpressions, KeepsNodesWhoseAttrsDiffer) {
  const Graph original = capture([](const Tensors& in) {
    const Tensor& x = in[0];
    return Tensors{sum(x, {0}) + sum(x, {1}) + sum(x, {0}, true) + sum(x, {0})};
  }, {{3, 3}});
  Graph optimized = after(original, eliminate_common_subexpressions);
  EXPECT_EQ(count_of(optimized, "sum"), 3)
      << optimized.to_string();
}

// Host data is captured; creation ops are nodes, merged when their Attrs are equal bytes.
TEST(CommonSubexpressions, MergesSmallConstantsWithIdenticalBytesOnly) {
  const Graph original = capture([](const Tensors& in) {
    const Tensor &x = in[0], &y = in[1];
    auto host = [](int64_t n, double value) { return tensor(std::vector<double>(static_cast<size_t>(n), value)); };
    Tensor twos = x * host(1, 2.0) + y * host(1, 2.0);      // one 2.0 left
    Tensor zeros = x * host(1, 0.0) + x * host(1, -0.0);    // -0 and +0 differ in their bytes
    Tensor small = x * host(64, 3.0) + x * host(64, 3.0);
    Tensor total = sum(x);
    Tensor large = total * host(65, 3.0) + total * host(65, 3.0);
    return Tensors{twos, zeros, small, large};
  }, {{64}, {64}});
  ASSERT_EQ(original.captured.size(), 8u);
  Graph optimized = after(original, eliminate_common_subexpressions);
  // Left: one 2, both zeros, one small block and both large blocks.
  EXPECT_EQ(optimized.captured.size(), 6u) << optimized.to_string();
  // x * small is merged into one node, the rest stay: 2 + 2 + 1 + 2 products.
  EXPECT_EQ(count_of(optimized, "mul"), 7)
      << optimized.to_string();
}

TEST(CommonSubexpressions, MergesCreationNodesWithEqualAttrsOnly) {
  const Graph original = capture([](const Tensors& in) {
    const Tensor& x = in[0];
    return Tensors{x * 2.0 + x * 2.0, x * 0.0 + x * -0.0, x * full({64}, 3.0, DType::f64) + x * full({64}, 3.0, DType::f64)};
  }, {{64}});
  EXPECT_EQ(count_of(original, "full"), 6);
  Graph optimized = after(original, eliminate_common_subexpressions);
  // One 2, both zeros (-0 and +0 are different fill values), one block of 3s.
  EXPECT_EQ(count_of(optimized, "full"), 4) << optimized.to_string();
}

// A payload is state no comparison sees into (a checkpoint's closure); built by hand because a
// traced graph gives each payload to one node only.
TEST(CommonSubexpressions, NeverMergesOrFoldsNodesWithAPayload) {
  Graph graph;
  const ValueId x = graph.add_value({3}, DType::f64, ValueSource::captured);
  graph.captured.push_back(CapturedTensor{x, randn({3}, DType::f64), true});
  Attrs with_payload;
  with_payload.payload = std::make_shared<int>(0);
  for (int copy = 0; copy < 2; ++copy) {
    const ValueId out = graph.add_value({3}, DType::f64, ValueSource::node);
    graph.nodes.push_back(GraphNode{&primitive_named("sin"), with_payload, {x}, out});
    graph.outputs.push_back(out);
  }
  Graph merged = graph;
  EXPECT_FALSE(eliminate_common_subexpressions(merged));
  EXPECT_FALSE(fold_constants(merged));
  EXPECT_EQ(merged.nodes.size(), 2u);
  // The same graph without the payload does merge and fold: the payload alone stopped it.
  for (GraphNode& node : graph.nodes) node.attrs.payload = nullptr;
  EXPECT_TRUE(eliminate_common_subexpressions(graph));
  EXPECT_TRUE(fold_constants(graph));
  EXPECT_TRUE(graph.nodes.empty());
}

TEST(FoldConstants, EvaluatesWhatOnlyDependsOnConstants) {
  const Graph original = capture([](const Tensors& in) {
    return Tensors{exp(scalar(2.0, DType::f64)) * in[0] + sin(exp(scalar(1.0, DType::f64)))};
  }, {{4}});
  Graph optimized = after(original, fold_constants);
  EXPECT_EQ(primitive_names(optimized), (Names{"mul", "add"})) << optimized.to_string();
  const CapturedTensor* factor = optimized.find_captured(optimized.nodes[0].inputs[0]);
  ASSERT_NE(factor, nullptr);
  EXPECT_TRUE(factor->constant);
  EXPECT_DOUBLE_EQ(factor->tensor.item<double>(), std::exp(2.0));
  EXPECT_EQ(optimized.value(factor->id).source, ValueSource::captured);
}

TEST(FoldConstants, LeavesParametersAndLargeConstants) {
  Tensor weight = randn({4}, DType::f64).requires_grad_();
  const Graph original = capture([&](const Tensors& in) {
    Tensor large = sum(sin(full({300, 300}, 0.5, DType::f64)));
    return Tensors{exp(weight) * in[0] + large};
  }, {{4}});
  Graph optimized = original;
  EXPECT_FALSE(fold_constants(optimized));
  EXPECT_EQ(optimized.to_string(), original.to_string());
}

TEST(Simplify, RemovesExactIdentities) {
  const std::vector<std::pair<std::string, TensorFunction>> cases = {
      {"x * 1", [](const Tensors& in) { return Tensors{in[0] * 1.0}; }},
      {"1 * x", [](const Tensors& in) { return Tensors{1.0 * in[0]}; }},
      {"x / 1", [](const Tensors& in) { return Tensors{in[0] / 1.0}; }},
      {"x - (+0)", [](const Tensors& in) { return Tensors{in[0] - 0.0}; }},
      {"x + (-0)", [](const Tensors& in) { return Tensors{in[0] + -0.0}; }},
      {"-0 + x", [](const Tensors& in) { return Tensors{-0.0 + in[0]}; }},
      {"pow(x, 1)", [](const Tensors& in) { return Tensors{pow(in[0], 1.0)}; }},
      {"neg(neg(x))", [](const Tensors& in) { return Tensors{-(-in[0])}; }},
      {"reshape of reshape back", [](const Tensors& in) { return Tensors{reshape(reshape(in[0], {6}), {2, 3})}; }},
      {"expand to the same shape",
       [](const Tensors& in) {
         Attrs attrs;
         attrs.shape = in[0].shape();
         return Tensors{dispatch(primitive_named("expand"), {in[0]}, attrs)};
       }},
      {"cast to the same dtype",
       [](const Tensors& in) {
         Attrs attrs;
         attrs.dtype = in[0].dtype();
         return Tensors{dispatch(primitive_named("cast"), {in[0]}, attrs)};
       }},
  };
  for (const auto& [label, function] : cases) {
    SCOPED_TRACE(label);
    const Graph original = capture(function, {{2, 3}});
    ASSERT_FALSE(original.nodes.empty());
    // Rewrites leave the nodes they looked through (the inner neg) for dead-code elimination.
    Graph optimized = after(original, [](Graph& g) { simplify_algebra(g); eliminate_dead_code(g); });
    EXPECT_TRUE(optimized.nodes.empty()) << optimized.to_string();
    EXPECT_EQ(optimized.outputs[0], optimized.inputs[0]);
  }
}

TEST(Simplify, IntegerZerosAreIdentitiesWhicheverTheirSide) {
  const Graph original = capture([](const Tensors& in) {
    const Tensor zero = scalar(0, DType::i64);
    return Tensors{add(zero, in[0]), add(in[0], zero), in[0] * scalar(1, DType::i64)};
  }, {{5}}, DType::i64);
  // The creation nodes of the constants are left for dead-code elimination.
  Graph optimized = after(original, [](Graph& g) { simplify_algebra(g); eliminate_dead_code(g); });
  EXPECT_TRUE(optimized.nodes.empty()) << optimized.to_string();
}

TEST(Simplify, RewritesToCheaperNodes) {
  const Graph negated = capture([](const Tensors& in) { return Tensors{in[0] * -1.0 + -1.0 * in[0]}; }, {{4}});
  // Here and below, the creation nodes of the constants are left for dead-code elimination.
  Graph optimized = after(negated, [](Graph& g) { simplify_algebra(g); eliminate_dead_code(g); });
  EXPECT_EQ(primitive_names(optimized), (Names{"neg", "neg", "add"})) << optimized.to_string();

  // pow's libm result may be an ulp away from the correctly rounded x * x.
  const Graph squared = capture([](const Tensors& in) { return Tensors{pow(in[0], 2.0)}; }, {{4}});
  optimized = after(squared, [](Graph& g) { simplify_algebra(g); eliminate_dead_code(g); }, 1e-15);
  ASSERT_EQ(primitive_names(optimized), Names{"mul"});
  EXPECT_EQ(optimized.nodes[0].inputs, (std::vector<ValueId>{optimized.inputs[0], optimized.inputs[0]}));

  const Graph reshaped = capture([](const Tensors& in) { return Tensors{reshape(reshape(in[0], {6}), {3, 2})}; },
                                 {{2, 3}});
  optimized = after(reshaped, [](Graph& g) { simplify_algebra(g); eliminate_dead_code(g); });
  ASSERT_EQ(primitive_names(optimized), Names{"reshape"});
  EXPECT_EQ(optimized.nodes[0].inputs[0], optimized.inputs[0]);
}

TEST(Simplify, KeepsWhatIsNotAnIdentity) {
  const std::vector<std::pair<std::string, TensorFunction>> cases = {
      // -0 + (+0) is +0: the awkward inputs include -0, so removing it would show.
      {"x + (+0)", [](const Tensors& in) { return Tensors{in[0] + 0.0}; }},
      {"+0 + x", [](const Tensors& in) { return Tensors{0.0 + in[0]}; }},
      {"x - (-0)", [](const Tensors& in) { return Tensors{in[0] - -0.0}; }},
      {"x - x", [](const Tensors& in) { return Tensors{in[0] - in[0]}; }},
      {"x * 0", [](const Tensors& in) { return Tensors{in[0] * 0.0}; }},
      {"x * 1 broadcast to a larger shape",
       [](const Tensors& in) { return Tensors{in[0] * full({1, 1, 1}, 1.0, DType::f64)}; }},
      {"complex x * 1", [](const Tensors& in) { return Tensors{complex(in[0], in[0]) * 1.0}; }},
      {"complex x * -1", [](const Tensors& in) { return Tensors{complex(in[0], in[0]) * -1.0}; }},
  };
  for (const auto& [label, function] : cases) {
    SCOPED_TRACE(label);
    Graph graph = capture(function, {{2, 3}});
    const std::string before = graph.to_string();
    EXPECT_FALSE(simplify_algebra(graph));
    EXPECT_EQ(graph.to_string(), before);
  }
}

// A training step with second derivatives in it, as a PINN residual loss makes.
Tensors pinn_step(const Tensors& in) {
  Tensor x = in[0].detach().requires_grad_();
  Tensor w1 = in[1].detach().requires_grad_(), w2 = in[2].detach().requires_grad_();
  Tensor u = matmul(tanh(matmul(x, w1) * 1.0), w2);
  Tensor du = grad({sum(u)}, {x}, {}, true)[0];
  Tensor d2u = grad({sum(du)}, {x}, {}, true)[0];
  Tensor residual = d2u + sin(x) * exp(scalar(0.5, DType::f64));
  Tensor loss = mean(pow(residual, 2.0)) + mean(pow(u - 1.0, 2.0));
  Tensors grads = grad({loss}, {w1, w2});
  return {loss, grads[0], grads[1]};
}

TEST(Optimize, ShrinksATrainingStepAndKeepsItsValues) {
  const Graph original = capture(pinn_step, {{8, 1}, {1, 16}, {16, 1}});
  Graph optimized = after(original, optimize, 1e-12);
  EXPECT_LT(optimized.nodes.size(), original.nodes.size());
  const std::string once = optimized.to_string();
  optimize(optimized);
  EXPECT_EQ(optimized.to_string(), once) << "optimize reached a fixed point the first time";
}

TEST(Optimize, RunsThePassesTogether) {
  const Graph original = capture([](const Tensors& in) {
    Tensor unused = cos(in[0]);
    Tensor scale = exp(scalar(0.0, DType::f64));  // folds to 1, which simplify then removes
    return Tensors{-(-(sin(in[0]) * scale)) + sin(in[0])};
  }, {{3}});
  Graph optimized = after(original, optimize);
  EXPECT_EQ(primitive_names(optimized), (Names{"sin", "add"})) << optimized.to_string();
}

TEST(Optimize, DisabledPassesChangeNothing) {
  const Graph original = capture([](const Tensors& in) {
    // One statement per step: the order of operands' evaluation, and so of nodes, is unspecified.
    Tensor unused = cos(in[0]);
    Tensor scaled = sin(in[0]) * 1.0;
    Tensor total = scaled + sin(in[0]);
    Tensor constant = exp(scalar(1.0, DType::f64));
    return Tensors{total + constant};
  }, {{3}});
  {
    DisabledPasses all(" simplify, fold ,cse,dce,");
    Graph graph = original;
    optimize(graph);
    EXPECT_EQ(graph.to_string(), original.to_string());
  }
  {
    DisabledPasses some("simplify,fold");
    Graph graph = after(original, optimize);
    EXPECT_EQ(primitive_names(graph), (Names{"sin", "full", "mul", "add", "exp", "add"})) << graph.to_string();
  }
  Graph graph = after(original, optimize);
  EXPECT_EQ(primitive_names(graph), (Names{"sin", "add", "add"})) << graph.to_string();
}

// The pass, then dce for the pads and sums it leaves unused.
void concatenate_and_clean(Graph& graph) {
  concatenate_padded_sums(graph);
  eliminate_dead_code(graph);
}

// The cotangent of a [3, 6] value split into three [3, 2] slices (an attention's q, k and v):
// reverse mode pads each slice's cotangent back to [3, 6] and sums them, in any order.
TEST(PaddedSums, ThatTileAnAxisBecomeOneConcat) {
  const Graph original = capture([](const Tensors& in) {
    Tensor first_two = pad(in[0], {0, 0}, {0, 4}) + pad(in[1], {0, 2}, {0, 2});
    return Tensors{first_two + pad(in[2], {0, 4}, {0, 0})};
  }, {{3, 2}, {3, 2}, {3, 2}});
  // Tolerance only for the sign of zero: -0 + 0 was +0, the concatenation keeps -0.
  const Graph fused = after(original, concatenate_and_clean, 1e-300);
  ASSERT_EQ(primitive_names(fused), (Names{"concat"})) << fused.to_string();
  EXPECT_EQ(fused.nodes[0].attrs.axis, 1);
  EXPECT_EQ(fused.nodes[0].inputs, original.inputs);

  const Graph last_first = capture([](const Tensors& in) {
    Tensor outer = pad(in[2], {4, 0}, {0, 0}) + pad(in[0], {0, 0}, {4, 0});
    return Tensors{outer + pad(in[1], {2, 0}, {2, 0})};
  }, {{2, 5}, {2, 5}, {2, 5}});
  const Graph reordered = after(last_first, concatenate_and_clean, 1e-300);
  ASSERT_EQ(primitive_names(reordered), (Names{"concat"})) << reordered.to_string();
  EXPECT_EQ(reordered.nodes[0].inputs, last_first.inputs);
}

TEST(PaddedSums, WithGapsOverlapsOrSeveralPaddedAxesStaySums) {
  const Graph gap = capture([](const Tensors& in) { return Tensors{pad(in[0], {0, 0}, {0, 4}) + pad(in[1], {0, 4}, {0, 0})}; },
                            {{3, 2}, {3, 2}});
  const Graph overlap = capture([](const Tensors& in) { return Tensors{pad(in[0], {0, 0}, {0, 2}) + pad(in[1], {0, 1}, {0, 1})}; },
                                {{3, 3}, {3, 3}});
  const Graph two_axes = capture([](const Tensors& in) { return Tensors{pad(in[0], {0, 0}, {1, 2}) + pad(in[1], {1, 2}, {0, 0})}; },
                                 {{3, 2}, {3, 2}});
  for (const Graph* graph : {&gap, &overlap, &two_axes}) {
    Graph unchanged = *graph;
    EXPECT_FALSE(concatenate_padded_sums(unchanged));
    EXPECT_EQ(unchanged.to_string(), graph->to_string());
  }
}

// The cotangent of a gather (a cross-entropy's picked logits) summed with the rest of its
// value's cotangent: scattered onto that term, without the zero-filled array.
TEST(ScatterSums, AddTheScatterOntoTheOtherTerm) {
  const Tensor index = tensor(std::vector<int64_t>{1, 4, 0, 0, 3, 2, 4, 1}, {4, 2});
  const Graph original = capture([&](const Tensors& in) {
    Tensor scattered = scatter_add(zeros({4, 5}, DType::f64), 1, index, in[1]);
    Tensor term = in[0] * in[0];
    return Tensors{term + scattered};
  }, {{4, 5}, {4, 2}});
  auto scatter_and_clean = [](Graph& graph) {
    scatter_into_sums(graph);
    eliminate_dead_code(graph);
  };
  const Graph fused = after(original, scatter_and_clean, 1e-300);  // the sign of zero only
  EXPECT_EQ(primitive_names(fused), (Names{"mul", "scatter_add"})) << fused.to_string();
  EXPECT_EQ(fused.nodes[1].inputs[0], fused.nodes[0].output);
}

TEST(ScatterSums, LeaveScattersOntoOtherBasesOrUsedElsewhere) {
  const Tensor index = tensor(std::vector<int64_t>{1, 4, 0, 0, 3, 2, 4, 1}, {4, 2});
  const Graph onto_ones = capture([&](const Tensors& in) {
    return Tensors{in[0] + scatter_add(ones({4, 5}, DType::f64), 1, index, in[1])};
  }, {{4, 5}, {4, 2}});
  const Graph used_twice = capture([&](const Tensors& in) {
    Tensor scattered = scatter_add(zeros({4, 5}, DType::f64), 1, index, in[1]);
    return Tensors{in[0] + scattered, scattered};
  }, {{4, 5}, {4, 2}});
  // The other term broadcasts: the scatter's base would need the sum's shape.
  const Graph broadcast = capture([&](const Tensors& in) {
    return Tensors{in[0] + scatter_add(zeros({4, 5}, DType::f64), 1, index, in[1])};
  }, {{5}, {4, 2}});
  // The scatter broadcasts over the other term's rows: it cannot scatter onto that term.
  const Graph scatter_broadcast = capture([&](const Tensors& in) {
    return Tensors{scatter_add(zeros({5}, DType::f64), 0, tensor(std::vector<int64_t>{0, 1, 1}, {3}), in[1]) + in[0]};
  }, {{3, 5}, {3}});
  // A sum with a created operand (x + ones_like(x) past the folding limit): read past the end
  // of the creation's inputs, and crashed.
  const Graph created = capture([&](const Tensors& in) { return Tensors{in[0] + ones({4, 5}, DType::f64)}; },
                                {{4, 5}});
  for (const Graph* graph : {&onto_ones, &used_twice, &broadcast, &scatter_broadcast, &created}) {
    Graph unchanged = *graph;
    EXPECT_FALSE(scatter_into_sums(unchanged));
    EXPECT_EQ(unchanged.to_string(), graph->to_string());
  }
}

// A linear layer's product and bias before a reshape (the attention's projections): one GEMM
// that sums onto the bias as it writes.
TEST(GemmAddends, FuseAProductIntoTheSumNothingElementwiseReads) {
  const Graph original = capture([](const Tensors& in) {
    Tensor layer = matmul(in[0], in[1]) + in[2];
    return Tensors{reshape(layer, {2, 3, 4})};
  }, {{6, 5}, {5, 4}, {4}});
  Graph fused = after(original, fuse_gemm_addends, 1e-12);
  EXPECT_EQ(primitive_names(fused), (Names{"matmul_add", "reshape"})) << fused.to_string();
  EXPECT_EQ(fused.nodes[0].inputs, (std::vector<ValueId>{original.inputs[0], original.inputs[1], original.inputs[2]}));

  // Either side of the sum, and in float32 too.
  const Graph addend_first = capture([](const Tensors& in) { return Tensors{in[2] + matmul(in[0], in[1])}; },
                                     {{6, 5}, {5, 4}, {6, 4}}, DType::f32);
  EXPECT_EQ(primitive_names(after(addend_first, fuse_gemm_addends, 1e-5)), (Names{"matmul_add"}));
}

// A sum of two products (a gradient reaching a value along two paths): one product becomes the
// other's addend.
TEST(GemmAddends, MakeOneOfTwoProductsTheOthersAddend) {
  const Graph original = capture([](const Tensors& in) {
    return Tensors{matmul(matmul(in[0], in[1]) + matmul(in[2], in[3]), in[1])};
  }, {{3, 4}, {4, 4}, {3, 2}, {2, 4}});
  EXPECT_EQ(primitive_names(after(original, fuse_gemm_addends, 1e-12)), (Names{"matmul", "matmul_add", "matmul"}));
}

TEST(GemmAddends, LeaveSumsFusionTakesAndProductsUsedElsewhere) {
  // A bias before an activation: fusion's loop reads the product and writes the activation.
  const Graph activated = capture([](const Tensors& in) { return Tensors{tanh(matmul(in[0], in[1]) + in[2])}; },
                                  {{6, 5}, {5, 4}, {4}});
  // The product is an output too, so it is written anyway.
  const Graph kept = capture([](const Tensors& in) {
    Tensor product = matmul(in[0], in[1]);
    return Tensors{product + in[2], product};
  }, {{6, 5}, {5, 4}, {4}});
  // The sum broadcasts the product: a GEMM cannot write the larger output.
  const Graph broadcast = capture([](const Tensors& in) { return Tensors{matmul(in[0], in[1]) + in[2]}; },
                                  {{1, 5}, {5, 4}, {6, 4}});
  for (const Graph* graph : {&activated, &kept, &broadcast}) {
    Graph unchanged = *graph;
    EXPECT_FALSE(fuse_gemm_addends(unchanged));
    EXPECT_EQ(unchanged.to_string(), graph->to_string());
  }
}

TEST(GemmAddends, RunInOptimizeUnlessDisabled) {
  const Graph original = capture([](const Tensors& in) { return Tensors{reshape(matmul(in[0], in[1]) + in[2], {24})}; },
                                 {{6, 5}, {5, 4}, {4}});
  EXPECT_EQ(count_of(after(original, optimize, 1e-12), "matmul_add"), 1);
  DisabledPasses off("gemm_addend");
  EXPECT_EQ(count_of(after(original, optimize), "matmul_add"), 0);
}

TEST(Optimize, PassEnabledReadsTheVariableOnEveryCall) {
  EXPECT_TRUE(pass_enabled("fusion"));
  {
    DisabledPasses fusion("fusion");
    EXPECT_FALSE(pass_enabled("fusion"));
    EXPECT_TRUE(pass_enabled("buffer_reuse"));
  }
  EXPECT_TRUE(pass_enabled("fusion"));
}

TEST(Optimize, UnknownPassNamesAreErrors) {
  {
    DisabledPasses typo("cse,fusoin");
    Graph graph = capture([](const Tensors& in) { return Tensors{sin(in[0])}; }, {{3}});
    expect_error([&] { optimize(graph); },
                 {"EDDY_COMPILER_DISABLE", "'fusoin'", "did you mean 'fusion'",
                  "dce, cse, fold, simplify, pad_sum, scatter_sum, gemm_addend, fusion, reduction_epilogue, multi_output, rematerialize, buffer_reuse, "
                  "replicated_collectives"});
  }
  expect_error([] { pass_enabled("inline"); },
               {"'inline'",
                "dce, cse, fold, simplify, pad_sum, scatter_sum, gemm_addend, fusion, reduction_epilogue, multi_output, rematerialize, buffer_reuse, "
                "replicated_collectives"});
}

// Every collective by the name it is registered under: a rank must make each call whatever its
// graph does with the result, so none may be dropped, merged or run at compile time.
TEST(Collectives, AreNeverDroppedMergedOrFolded) {
  std::unique_ptr<dist::Communicator> comm = dist::make_single_process_communicator();
  const Graph original = capture([&](const Tensors& in) {
    const Tensor& x = in[0];
    const Tensor two = full({2, 3}, 2.0, DType::f64);
    Tensors unused = {dist::all_reduce(x, dist::ReduceOp::max, *comm), dist::all_gather(x, *comm),
                      dist::reduce_scatter(x, *comm), dist::broadcast(x, 0, *comm), dist::reduce(x, 0, *comm),
                      dist::all_reduce(two, dist::ReduceOp::sum, *comm)};
    return Tensors{dist::all_reduce(x, dist::ReduceOp::sum, *comm) + dist::all_reduce(x, dist::ReduceOp::sum, *comm)};
  }, {{2, 3}});
  Graph optimized = after(original, optimize);
  EXPECT_EQ(primitive_names(optimized), (Names{"allreduce_max", "allgather", "reduce_scatter", "broadcast_from_root",
                                               "reduce_to_root", "allreduce_sum", "allreduce_sum", "allreduce_sum",
                                               "add"}))
      << optimized.to_string();
}

// On one rank every value is every rank's: a sum over the ranks is the value, computed where it
// lies. The other collectives stay, and so do the derivatives' collectives.
TEST(Collectives, SumsOfValuesEveryRankHoldsNeedNoCommunication) {
  std::unique_ptr<dist::Communicator> comm = dist::make_single_process_communicator();
  Graph graph = capture([&](const Tensors& in) {
    return Tensors{dist::all_reduce(in[0], dist::ReduceOp::sum, *comm), dist::all_gather(in[0], *comm)};
  }, {{2, 3}});
  EXPECT_TRUE(drop_collectives_of_replicated_values(graph));
  EXPECT_EQ(primitive_names(graph), (Names{"allreduce_sum_of_replicated", "allgather"})) << graph.to_string();
  EXPECT_FALSE(drop_collectives_of_replicated_values(graph));

  const Tensor x = full({2, 3}, 1.5, DType::f64).requires_grad_();
  const Tensor y = dist::all_reduce_of_replicated(x, *comm);
  EXPECT_EQ(max(abs(y - x)).item<double>(), 0.0);
  EXPECT_EQ(max(abs(grad({sum(y * y)}, {x})[0] - 2.0 * x)).item<double>(), 0.0);
}

TEST(ReplaceUses, RedirectsNodeInputsAndOutputsAndRefusesChains) {
  Graph graph = capture([](const Tensors& in) { return Tensors{sin(in[0]), cos(in[0]) + in[1]}; }, {{3}, {3}});
  std::vector<ValueId> replacement(graph.values.size());
  std::iota(replacement.begin(), replacement.end(), ValueId{0});
  replacement[static_cast<size_t>(graph.inputs[0])] = graph.inputs[1];
  replace_uses(graph, replacement);
  EXPECT_EQ(graph.nodes[0].inputs[0], graph.inputs[1]);
  EXPECT_EQ(graph.nodes[1].inputs[0], graph.inputs[1]);
  EXPECT_EQ(graph.nodes[2].inputs, (std::vector<ValueId>{graph.nodes[1].output, graph.inputs[1]}));
  replacement[static_cast<size_t>(graph.nodes[0].output)] = graph.inputs[0];
  expect_error([&] { replace_uses(graph, replacement); }, {"replace_uses", "itself replaced"});
}

}  // namespace
}  // namespace eddy::compiler
