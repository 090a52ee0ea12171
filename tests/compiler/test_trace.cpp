// Capture: what the recorder keeps of a function, and what it refuses.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "eddy/compiler/compile.h"
#include "eddy/compiler/trace.h"
#include "eddy/eddy.h"
#include "support/expect_error.h"

namespace eddy::compiler {
namespace {

TEST(Trace, RecordsEveryPrimitiveInOrder) {
  Tensor x = randn({4, 3}, DType::f64);
  Trace t = trace([](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(in[0]) * 2.0}; }, {x});
  ASSERT_EQ(t.graph.nodes.size(), 3u);
  EXPECT_EQ(t.graph.nodes[0].primitive->name, "tanh");
  // The scalar 2 is a creation op, made through dispatch like every op.
  EXPECT_EQ(t.graph.nodes[1].primitive->name, "full");
  EXPECT_TRUE(t.graph.nodes[1].inputs.empty());
  EXPECT_EQ(t.graph.nodes[1].attrs.value, std::complex<double>(2.0));
  EXPECT_EQ(t.graph.nodes[2].primitive->name, "mul");
  EXPECT_EQ(t.graph.nodes[0].inputs[0], t.graph.inputs[0]);
  EXPECT_EQ(t.graph.nodes[2].inputs[1], t.graph.nodes[1].output);
  EXPECT_EQ(t.graph.outputs[0], t.graph.nodes[2].output);
  EXPECT_TRUE(t.graph.captured.empty());
}

// Constants made from host numbers are captured; nothing else holds them, so they may be folded.
TEST(Trace, CapturesHostConstants) {
  Trace t = trace([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * tensor<double>({1, 2, 3})}; },
                  {randn({3}, DType::f64)});
  ASSERT_EQ(t.graph.captured.size(), 1u);
  EXPECT_TRUE(t.graph.captured[0].constant);
}

TEST(Trace, CapturesOutsideTensorsByReference) {
  Tensor weight = randn({3, 2}, DType::f64).requires_grad_();
  Trace t = trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], weight)}; },
                  {randn({4, 3}, DType::f64)});
  ASSERT_EQ(t.graph.captured.size(), 1u);
  EXPECT_TRUE(t.graph.captured[0].tensor.same(weight));
  EXPECT_FALSE(t.graph.captured[0].constant);
}

TEST(Trace, RecordsTheOpsOfReverseModeInsideTheFunction) {
  Tensor x = randn({5}, DType::f64);
  Trace t = trace(
      [](const std::vector<Tensor>& in) {
        Tensor leaf = in[0].detach().requires_grad_();
        Tensor y = sum(sin(leaf));
        return std::vector<Tensor>{grad({y}, {leaf})[0]};
      },
      {x});
  bool has_cos = false;
  for (const GraphNode& node : t.graph.nodes) has_cos = has_cos || node.primitive->name == "cos";
  EXPECT_TRUE(has_cos) << t.graph.to_string();
  // The gradient is computed from the input, not captured as a constant.
  EXPECT_EQ(t.graph.value(t.graph.outputs[0]).source, ValueSource::node);
}

TEST(Trace, RefusesValueDependentControlFlow) {
  expect_error(
      [] {
        trace(
            [](const std::vector<Tensor>& in) {
              Tensor s = sum(in[0]);
              return std::vector<Tensor>{s.item<double>() > 0 ? in[0] : -in[0]};
            },
            {randn({3}, DType::f64)});
      },
      {"reads the elements", "where()"});
}

TEST(Trace, RefusesHostReadsOfParameters) {
  Tensor weight = randn({1}, DType::f64).requires_grad_();
  expect_error(
      [&] {
        trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * weight.item<double>()}; },
              {randn({3}, DType::f64)});
      },
      {"parameter", "optimiser"});
}

TEST(Trace, RefusesInPlaceWritesAndRandomDraws) {
  expect_error([] {
    trace([](const std::vector<Tensor>& in) { Tensor y = in[0] * 2.0; y.fill_(1.0); return std::vector<Tensor>{y}; },
          {randn({3})});
  }, {"writes in place", "fill_"});
  expect_error([] {
    trace([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + rand({3})}; }, {randn({3})});
  }, {"random numbers", "rand", "random_key"});
}

// A key passed in as an input makes draws a graph can replay: the compiled function draws what
// the eager one draws from each key, and a new key gives new numbers.
TEST(Trace, KeyedDrawsAreReplayedFromTheirInputKey) {
  auto noisy = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + normal(in[1], {5}, DType::f64)}; };
  CompiledFunction compiled = compile(noisy);
  const Tensor x = randn({5}, DType::f64);
  for (uint64_t offset : {0u, 5u, 1000u}) {
    const Tensor key = random_key(42, offset);
    EXPECT_EQ(compiled({x, key})[0].to_vector<double>(), noisy({x, key})[0].to_vector<double>()) << offset;
  }
  EXPECT_EQ(compiled.stats().traces, 1);
  EXPECT_NE(compiled({x, random_key(42, 0)})[0].to_vector<double>(),
            compiled({x, random_key(42, 5)})[0].to_vector<double>());
  // The generator's draws are these keyed ones.
  Generator generator(42);
  EXPECT_EQ(randn({5}, DType::f64, &generator).to_vector<double>(),
            normal(random_key(42, 0), {5}, DType::f64).to_vector<double>());
}

// The function of a training step: a gradient taken inside, creation ops, a reduction.
std::vector<Tensor> step(const std::vector<Tensor>& in, const Tensor& weight) {
  const Tensor loss = sum(square(tanh(matmul(in[0], weight)) - in[1])) / 2.0;
  return {loss, grad({loss}, {weight}, {}, true)[0] + zeros({3, 2}, DType::f64)};
}

TEST(Trace, AbstractlyRunsNoKernelAndRecordsTheConcreteGraph) {
  const Tensor weight = randn({3, 2}, DType::f64).requires_grad_();
  const std::vector<Tensor> inputs{randn({4, 3}, DType::f64), randn({4, 2}, DType::f64)};
  auto function = [&](const std::vector<Tensor>& in) { return step(in, weight); };
  const Trace concrete = trace(function, inputs);
  const uint64_t before = kernel_evaluations();
  const Trace abstract = trace(function, inputs, Evaluation::abstract);
  EXPECT_EQ(kernel_evaluations(), before);
  EXPECT_GT(kernel_evaluations(), 0u);  // the concrete trace ran kernels, which the counter saw
  EXPECT_EQ(abstract.graph.to_string(), concrete.graph.to_string());
  ASSERT_EQ(abstract.outputs.size(), 2u);
  EXPECT_TRUE(abstract.outputs[0].is_abstract());
  EXPECT_EQ(abstract.outputs[1].shape(), (Shape{3, 2}));
  EXPECT_FALSE(concrete.outputs[0].is_abstract());
}

TEST(Trace, AbstractValuesCannotBeRead) {
  expect_error(
      [] {
        trace([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * sum(in[0]).item<double>()}; },
              {randn({3}, DType::f64)}, Evaluation::abstract);
      },
      {"reads the elements", "computed from its inputs"});
  expect_error([] { Tensor::abstract({2, 3}).to_vector<float>(); }, {"abstract", "[2, 3]", "no values"});
  expect_error([] { Tensor::abstract({2}).fill_(1.0); }, {"abstract", "fill_"});
}

// The interpreters pushed on a thread's stack see every op below autodiff, last pushed first.
class Counting final : public Interpreter {
 public:
  std::vector<std::string> seen;
  Tensor interpret(const OpCall& call) override {
    seen.emplace_back(call.primitive.name);
    return interpret_below(*this, call);
  }
};

TEST(InterpreterStack, PushedInterpretersSeeEveryOpBelowAutodiff) {
  Counting outer, inner;
  const Tensor x = randn({3}, DType::f64).requires_grad_();
  Tensor y;
  {
    InterpreterScope outer_scope(outer);
    {
      InterpreterScope inner_scope(inner);
      y = sum(sin(x));
    }
    backward(y);
  }
  EXPECT_EQ(inner.seen, (std::vector<std::string>{"sin", "sum"}));
  // The backward pass ran with only the outer one pushed: its ops (cos among them) reach it.
  ASSERT_GE(outer.seen.size(), 3u);
  EXPECT_NE(std::find(outer.seen.begin(), outer.seen.end(), "cos"), outer.seen.end());
  EXPECT_EQ(std::vector<std::string>(outer.seen.begin(), outer.seen.begin() + 2), inner.seen);
  EXPECT_TRUE(x.grad().defined());
}

}  // namespace
}  // namespace eddy::compiler
