// Generated CUDA kernels run on a GPU and agree with eager eddy: one fused loop per case, over the
// traced function's own inputs, covering every epilogue, every way a kernel reads an input,
// several outputs and an empty domain. Without a GPU (or without the CUDA toolkit) the GPU tests
// skip and say why; the error paths are checked everywhere.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

#include "eddy/compiler/cuda_runner.h"
#include "eddy/compiler/fusion.h"
#include "eddy/compiler/nvrtc.h"
#include "eddy/compiler/passes.h"
#include "eddy/compiler/trace.h"
#include "eddy/eddy.h"
#include "support/expect_error.h"

namespace eddy::compiler {
namespace {

using TensorList = std::vector<Tensor>;

struct Case {
  std::string name;
  std::function<TensorList(const TensorList&)> function;
  std::function<TensorList(DType)> inputs;
};

std::vector<Case> cases() {
  auto normal = [](Shape shape) {
    return [shape](DType dtype) {
      Generator gen(11);
      return TensorList{randn(shape, dtype, &gen), randn(shape, dtype, &gen)};
    };
  };
  return {
      {"every access and transcendental",
       [](const TensorList& in) {
         const Tensor &a = in[0], &b = in[1], &row = in[2], &column = in[3], &scale = in[4];
         return TensorList{tanh(a) * b + exp(-abs(a)) - sin(b) / (cos(a) + 2.0) + sqrt(abs(b) + 1.0) +
                           log(abs(a) + 1.0) + pow(abs(a) + 0.5, b * 0.5) + where(lt(a, b), row, column) * scale +
                           cast(ge(a, b), a.dtype())};
       },
       [](DType dtype) {
         Generator gen(12);
         return TensorList{randn({37, 20}, dtype, &gen), randn({37, 20}, dtype, &gen), randn({20}, dtype, &gen),
                           randn({37, 1}, dtype, &gen), randn({1}, dtype, &gen)};
       }},
      {"an input expanded before the loop",
       [](const TensorList& in) { return TensorList{exp(in[0] * in[1] + in[2])}; },
       [](DType dtype) {
         Generator gen(13);
         return TensorList{randn({3, 5, 8}, dtype, &gen), randn({5, 8}, dtype, &gen), randn({8}, dtype, &gen)};
       }},
      {"a side output", [](const TensorList& in) {
         Tensor slope = 1.0 - square(tanh(in[0]));
         return TensorList{slope * in[1], slope};
       },
       normal({33, 16})},
      {"a sum over rows", [](const TensorList& in) { return TensorList{sum(in[0] * in[1] + 1.0, {0})}; },
       normal({300, 20})},
      {"a sum along rows", [](const TensorList& in) { return TensorList{sum(exp(in[0]) * in[1], {1})}; },
       normal({30, 64})},
      {"a sum of everything", [](const TensorList& in) { return TensorList{sum(square(in[0] - in[1]))}; },
       normal({1000, 3})},
      {"an empty domain", [](const TensorList& in) { return TensorList{sum(in[0] * in[1] + 1.0, {0})}; },
       normal({0, 20})},
  };
}

Case case_named(const std::string& name) {
  for (const Case& c : cases()) {
    if (c.name == name) return c;
  }
  throw std::logic_error("no case " + name);
}

// The one fused loop of a traced case, and its inputs in the order the kernel takes them: the
// function's inputs and the constants it made (creation nodes folded to constants first, as
// Program does before fusing; value ids stay what they were).
std::pair<KernelPlan, TensorList> only_kernel(const Trace& traced, const TensorList& inputs) {
  Graph graph = traced.graph;
  fold_constants(graph);
  const std::vector<FusionGroup> groups = plan_fusion(graph);
  EXPECT_EQ(groups.size(), 1u) << graph.to_string();
  KernelPlan plan = plan_kernel(graph, groups.at(0), "eddy_fused_0");
  TensorList operands;
  for (const KernelInput& input : plan.inputs) {
    const auto position = std::find(graph.inputs.begin(), graph.inputs.end(), input.value);
    if (position != graph.inputs.end()) {
      operands.push_back(inputs.at(static_cast<size_t>(position - graph.inputs.begin())));
    } else {
      const CapturedTensor* captured = graph.find_captured(input.value);
      EXPECT_NE(captured, nullptr) << "kernel input %" << input.value << " is computed outside the loop in\n"
                                   << graph.to_string();
      operands.push_back(captured ? captured->tensor : Tensor());
    }
  }
  return {std::move(plan), std::move(operands)};
}

// What the GPU test relies on, checked where there is no GPU too: each case is one loop over the
// function's inputs and compiles to PTX with an entry of its name, and together the cases cover
// every epilogue and every way a kernel reads an input.
TEST(CudaRunner, EveryCaseIsOneKernelThatNvrtcCompiles) {
  std::vector<Epilogue> epilogues;
  std::vector<Access> accesses;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const TensorList inputs = c.inputs(DType::f64);
    const auto [plan, operands] = only_kernel(trace(c.function, inputs), inputs);
    epilogues.push_back(plan.epilogue);
    for (const KernelInput& input : plan.inputs) accesses.push_back(input.access);
    if (!nvrtc_available()) continue;
    EXPECT_NE(compile_cuda_to_ptx(render_cuda_source({plan})).find(".entry eddy_fused_0"), std::string::npos);
  }
  for (Epilogue e : {Epilogue::none, Epilogue::sum_all, Epilogue::sum_leading, Epilogue::sum_trailing}) {
    EXPECT_NE(std::find(epilogues.begin(), epilogues.end(), e), epilogues.end()) << static_cast<int>(e);
  }
  for (Access a : {Access::dense, Access::scalar, Access::repeated_row, Access::repeated_column, Access::materialised}) {
    EXPECT_NE(std::find(accesses.begin(), accesses.end(), a), accesses.end()) << static_cast<int>(a);
  }
}

TEST(CudaRunner, GeneratedKernelsMatchEagerResultsOnTheGpu) {
  if (const std::string why = device_unavailable_reason(Device::cuda(0)); !why.empty()) GTEST_SKIP() << "no GPU to run on: " << why;
  const std::string architecture = cuda_device_architecture();
  for (const Case& c : cases()) {
    for (DType dtype : {DType::f32, DType::f64}) {
      SCOPED_TRACE(c.name + (dtype == DType::f32 ? ", float32" : ", float64"));
      const TensorList inputs = c.inputs(dtype);
      const Trace traced = trace(c.function, inputs);
      const auto [plan, operands] = only_kernel(traced, inputs);
      const std::string ptx = compile_cuda_to_ptx(render_cuda_source({plan}), architecture);
      const TensorList outputs = run_cuda_kernel(plan, ptx, operands);
      ASSERT_EQ(outputs.size(), 1 + plan.side_outputs.size());
      // The root, then the side outputs, each against the eager value of the same graph value.
      std::vector<ValueId> stored{plan.output};
      for (const KernelSideOutput& side : plan.side_outputs) stored.push_back(side.value);
      for (size_t k = 0; k < stored.size(); ++k) {
        const auto returned = std::find(traced.graph.outputs.begin(), traced.graph.outputs.end(), stored[k]);
        ASSERT_NE(returned, traced.graph.outputs.end()) << "stored value %" << stored[k] << " is not returned";
        const Tensor& eager = traced.outputs[static_cast<size_t>(returned - traced.graph.outputs.begin())];
        ASSERT_EQ(outputs[k].shape(), eager.shape());
        if (eager.numel() == 0) continue;
        const double scale = 1 + cast(max(abs(eager)), DType::f64).item<double>();
        const double tolerance = (dtype == DType::f32 ? 1e-4 : 1e-11) * scale;
        EXPECT_LE(cast(max(abs(outputs[k] - eager)), DType::f64).item<double>(), tolerance) << "output " << k;
      }
    }
  }
}

TEST(CudaRunner, SaysWhyNoKernelCanRunAndRefusesToTry) {
  if (device_unavailable_reason(Device::cuda(0)).empty()) GTEST_SKIP() << "a GPU is present: the refusal cannot be seen here";
  const Case sum_over_rows = case_named("a sum over rows");
  const TensorList inputs = sum_over_rows.inputs(DType::f32);
  const Trace traced = trace(sum_over_rows.function, inputs);
  const auto [plan, operands] = only_kernel(traced, inputs);
  expect_error([&] { run_cuda_kernel(plan, "", operands); }, {"cuda:0: ", device_unavailable_reason(Device::cuda(0))});
  expect_error([] { cuda_device_architecture(); }, {"cuda:0: ", device_unavailable_reason(Device::cuda(0))});
}

TEST(CudaRunner, ChecksTheInputCountBeforeTouchingTheGpu) {
  const Case sum_over_rows = case_named("a sum over rows");
  const TensorList inputs = sum_over_rows.inputs(DType::f32);
  const Trace traced = trace(sum_over_rows.function, inputs);
  const auto [plan, operands] = only_kernel(traced, inputs);
  if (!nvrtc_available()) GTEST_SKIP() << "built without the CUDA toolkit";
  expect_error([&] { run_cuda_kernel(plan, "", {operands[0]}); }, {"eddy_fused_0", "takes 2 inputs, got 1"});
}

}  // namespace
}  // namespace eddy::compiler
