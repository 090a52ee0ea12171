// Capture: what the recorder keeps of a function, and what it refuses.

#include <gtest/gtest.h>

#include "eddy/compiler/trace.h"
#include "eddy/eddy.h"
#include "support/expect_error.h"

namespace eddy::compiler {
namespace {

TEST(Trace, RecordsEveryPrimitiveInOrder) {
  Tensor x = randn({4, 3}, DType::f64);
  Trace t = trace([](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(in[0]) * 2.0}; }, {x});
  ASSERT_EQ(t.graph.nodes.size(), 2u);
  EXPECT_EQ(t.graph.nodes[0].primitive->name, "tanh");
  EXPECT_EQ(t.graph.nodes[1].primitive->name, "mul");
  EXPECT_EQ(t.graph.nodes[0].inputs[0], t.graph.inputs[0]);
  EXPECT_EQ(t.graph.outputs[0], t.graph.nodes[1].output);
  // The scalar 2 was made inside the function and nothing else holds it: a constant.
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
  }, {"random numbers", "rand"});
}

}  // namespace
}  // namespace eddy::compiler
