// Reduction epilogues: which sums end a fused loop and which stay primitive calls, compiled sums
// against eager ones for every supported pattern in both float types (threaded, tiny and empty
// domains), gradients of a step whose backward sums over the batch, and the CUDA rendering.

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "eddy/compiler/compile.h"
#include "eddy/compiler/fusion.h"
#include "eddy/compiler/nvrtc.h"
#include "eddy/compiler/passes.h"
#include "eddy/eddy.h"
#include "support/disabled_passes.h"

namespace eddy::compiler {
namespace {

using TensorList = std::vector<Tensor>;

// The groups of the graph `function` captures on `inputs`, after the passes, as a Program sees it.
struct Planned {
  Graph graph;
  std::vector<FusionGroup> groups;
};

Planned plan(const TensorFunction& function, const TensorList& inputs, FusionOptions options = {}) {
  Planned planned{trace(function, inputs).graph, {}};
  optimize(planned.graph);
  planned.groups = plan_fusion(planned.graph, options);
  return planned;
}

std::multiset<Epilogue> epilogues(const std::vector<FusionGroup>& groups) {
  std::multiset<Epilogue> found;
  for (const FusionGroup& group : groups) found.insert(group.epilogue);
  return found;
}

bool runs_a_reduction(const Planned& planned) {
  for (const FusionGroup& group : planned.groups) {
    for (size_t n : group.nodes) {
      if (!planned.graph.nodes[n].primitive->elementwise) return true;
    }
  }
  return false;
}

// One supported sum pattern: the elementwise terms it sums, over which axes of a [N, C] domain.
// Each reads the inputs a different way: {a, b} dense [N, C], row [C], column [N, 1].
struct SumCase {
  std::vector<int64_t> axes;
  bool keepdims;
  Tensor (*terms)(const TensorList& in);
};

const std::vector<SumCase>& sum_cases() {
  static const std::vector<SumCase> cases = {
      {{}, false, [](const TensorList& in) { return square(in[0] - in[1]); }},                          // a loss
      {{}, true, [](const TensorList& in) { return square(tanh(in[0]) * in[2] + in[1]); }},             // rows
      {{0}, false, [](const TensorList& in) { return in[1] * (1.0 - square(sin(in[0]))); }},           // a bias gradient
      {{0}, true, [](const TensorList& in) { return exp(in[1] * 0.5) * in[3] - in[0]; }},                // as sum_to_shape
      {{1}, false, [](const TensorList& in) { return exp(in[0] * 0.5) * in[1] + in[3]; }},
      {{1}, true, [](const TensorList& in) { return cos(in[0]) * in[2]; }},
  };
  return cases;
}

TensorList every_sum(const TensorList& in) {
  TensorList sums;
  for (const SumCase& c : sum_cases()) sums.push_back(sum(c.terms(in), c.axes, c.keepdims));
  return sums;
}

// Each sum's float64 sum of |terms|: what its rounding error scales with, in either order of
// addition. A relative tolerance on the sum itself would fail where terms cancel.
TensorList magnitudes(const TensorList& in) {
  TensorList sums;
  for (const SumCase& c : sum_cases()) sums.push_back(sum(abs(cast(c.terms(in), DType::f64)), c.axes, c.keepdims));
  return sums;
}

TensorList sum_inputs(const Shape& shape, DType dtype, Generator& gen) {
  return {randn(shape, dtype, &gen), randn(shape, dtype, &gen), randn({shape[1]}, dtype, &gen),
          randn({shape[0], 1}, dtype, &gen)};
}

// |compiled - eager| <= tolerance * (1 + sum of |terms|), element by element.
void expect_sums_close(const TensorList& compiled, const TensorList& eager, const TensorList& scale, double tolerance,
                       const std::string& what) {
  ASSERT_EQ(compiled.size(), eager.size()) << what;
  for (size_t i = 0; i < eager.size(); ++i) {
    ASSERT_EQ(compiled[i].shape(), eager[i].shape()) << what << " sum " << i;
    if (eager[i].numel() == 0) continue;
    const Tensor excess = abs(cast(compiled[i], DType::f64) - cast(eager[i], DType::f64)) - tolerance * (1.0 + scale[i]);
    EXPECT_LE(max(excess).item<double>(), 0.0) << what << " sum " << i;
  }
}

TEST(ReductionEpilogue, EachSupportedSumEndsTheLoopThatComputesItsTerms) {
  Generator gen(1);
  const TensorList inputs = sum_inputs({16, 64}, DType::f32, gen);
  const Planned planned = plan(every_sum, inputs);
  EXPECT_EQ(epilogues(planned.groups),
            (std::multiset<Epilogue>{Epilogue::sum_all, Epilogue::sum_all, Epilogue::sum_leading, Epilogue::sum_leading,
                                     Epilogue::sum_trailing, Epilogue::sum_trailing}))
      << planned.graph.to_string();
  for (const FusionGroup& group : planned.groups) {
    EXPECT_EQ(planned.graph.nodes[group.nodes.back()].primitive->name, "sum");
    EXPECT_GE(group.nodes.size(), 3u) << "the terms' whole chain joins its sum";
  }
  EXPECT_FALSE(runs_a_reduction(plan(every_sum, inputs, {.reduction_epilogues = false})));
}

TEST(ReductionEpilogue, ASumToOneElementIsASumOfAll) {
  // [N, 1] over axis 0 (the last layer's bias gradient) and [1, C] over axis 1.
  const Planned planned = plan(
      [](const TensorList& in) {
        return TensorList{sum(exp(in[0]) * 2.0, {0}), sum(exp(in[1]) * 2.0, {1}, true)};
      },
      {randn({16, 1}), randn({1, 16})});
  EXPECT_EQ(epilogues(planned.groups), (std::multiset<Epilogue>{Epilogue::sum_all, Epilogue::sum_all}));
}

TEST(ReductionEpilogue, SumsOverShortRowsStaySeparate) {
  // Rows of 7 summed over axis 0 and of 63 along axis 1: one short of each threshold.
  const Planned planned = plan(
      [](const TensorList& in) {
        return TensorList{sum(exp(in[0]) * 2.0, {0}), sum(exp(in[1]) * 2.0, {1}, true)};
      },
      {randn({16, 7}), randn({16, 63})});
  EXPECT_FALSE(runs_a_reduction(planned)) << planned.graph.to_string();
  EXPECT_EQ(planned.groups.size(), 2u);
}

TEST(ReductionEpilogue, TermsUsedElsewhereAreStoredAndTheSumStaysAPrimitive) {
  // tanh is not recomputed for a second user, and a returned value is always stored.
  const Planned planned = plan(
      [](const TensorList& in) {
        Tensor shared = tanh(in[0] * 2.0);
        Tensor returned = in[1] * in[0] + 1.0;
        return TensorList{sum(shared), exp(shared) + in[1], sum(returned, {0}), returned};
      },
      {randn({16, 4}), randn({16, 4})}, {.multi_output = false});
  EXPECT_FALSE(runs_a_reduction(planned)) << planned.graph.to_string();
  EXPECT_EQ(planned.groups.size(), 3u);  // mul-tanh, exp-add, mul-add
}

TEST(ReductionEpilogue, OtherReductionsStaySeparate) {
  // Over a middle axis, over the last two, over the rows of a cube whose rows are short (6 < 8),
  // a max and a product.
  const Planned planned = plan(
      [](const TensorList& in) {
        const Tensor &cube = in[0], &matrix = in[1];  // [4, 5, 6] and [4, 5]
        return TensorList{sum(exp(cube) * 2.0, {0}), sum(sin(cube) * 3.0, {1, 2}), sum(cos(cube) + 1.0, {0, 1}, true),
                          max(exp(matrix) * 2.0, {0}), prod(sin(matrix) + 1.0)};
      },
      {randn({4, 5, 6}), randn({4, 5})}, {.multi_output = false});
  EXPECT_FALSE(runs_a_reduction(planned)) << planned.graph.to_string();
  EXPECT_EQ(epilogues(planned.groups).count(Epilogue::none), planned.groups.size());
  EXPECT_EQ(planned.groups.size(), 5u);
}

// A [B, T, C] value's sums along its rows and over them (a layer norm's row statistics and its
// weight's gradient in a language model) end their loops as a [B * T, C] value's do.
TEST(ReductionEpilogue, TheRowsAreEveryAxisButTheLast) {
  auto sums = [](const TensorList& in) {
    return TensorList{sum(exp(in[0]) * 2.0, {2}, true), sum(sin(in[0]) * in[1], {0, 1}, true)};
  };
  Generator gen(3);
  const TensorList inputs = {randn({3, 5, 70}, DType::f64, &gen), randn({3, 5, 70}, DType::f64, &gen)};
  const Planned planned = plan(sums, inputs, {.multi_output = false});
  EXPECT_EQ(epilogues(planned.groups), (std::multiset<Epilogue>{Epilogue::sum_trailing, Epilogue::sum_leading}))
      << planned.graph.to_string();
  CompiledFunction compiled = compile(sums);
  const TensorList got = compiled(inputs), want = sums(inputs);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].shape(), want[i].shape());
    EXPECT_LE(max(abs(got[i] - want[i])).item<double>(), 1e-12 * (1.0 + max(abs(want[i])).item<double>()));
  }
  EXPECT_EQ(compiled.stats().last.reduction_epilogues, 2u);
}

TEST(ReductionEpilogue, CompiledSumsMatchEager) {
  // Large shapes run on threads (the one-row split, row blocks and per-thread column sums), with
  // uneven blocks; the rest are single-threaded edge cases. Both sum float32 in float32, in
  // different orders: at 2e6 terms each is about 2e-5 * sum|terms| from the exact sum (measured),
  // hence 1e-4. Float64 errors are below 1e-13 there, so 1e-12 still catches one term of the 2e6
  // dropped or added twice. `fused` counts the six sums that end a loop: the two over all
  // elements always; those over an axis when their rows are long enough, or when they sum to one
  // element.
  struct Domain {
    Shape shape;
    size_t fused;
  };
  const std::vector<Domain> domains = {{{30000, 70}, 6}, {{100000, 20}, 4}, {{1000, 37}, 4}, {{3, 100}, 6},
                                       {{7, 13}, 4},     {{3, 1}, 4},       {{1, 5}, 4},      {{1, 1}, 6},
                                       {{0, 64}, 6},     {{5, 0}, 2}};
  for (DType dtype : {DType::f32, DType::f64}) {
    for (const Domain& domain : domains) {
      const std::string what = std::string(dtype_name(dtype)) + to_string(domain.shape);
      Generator gen(7);
      CompiledFunction compiled = compile(every_sum);
      compiled(sum_inputs(domain.shape, dtype, gen));
      const TensorList replay = sum_inputs(domain.shape, dtype, gen);
      expect_sums_close(compiled(replay), every_sum(replay), magnitudes(replay), dtype == DType::f32 ? 1e-4 : 1e-12,
                        what);
      EXPECT_EQ(compiled.stats().last.reduction_epilogues, domain.fused) << what;
    }
  }
}

TEST(ReductionEpilogue, TheSwitchTurnsItOffAndLeavesElementwiseFusion) {
  DisabledPasses off("reduction_epilogue");
  CompiledFunction compiled = compile(every_sum);
  Generator gen(9);
  compiled(sum_inputs({50, 6}, DType::f64, gen));
  const TensorList replay = sum_inputs({50, 6}, DType::f64, gen);
  expect_sums_close(compiled(replay), every_sum(replay), magnitudes(replay), 1e-12, "without epilogues");
  EXPECT_EQ(compiled.stats().last.reduction_epilogues, 0u);
  EXPECT_GT(compiled.stats().last.fused_kernels, 0u);
}

TEST(ReductionEpilogue, DisablingFusionDisablesEpiloguesToo) {
  DisabledPasses off("fusion");
  CompiledFunction compiled = compile(every_sum);
  Generator gen(10);
  compiled(sum_inputs({50, 64}, DType::f64, gen));
  const TensorList replay = sum_inputs({50, 64}, DType::f64, gen);
  expect_sums_close(compiled(replay), every_sum(replay), magnitudes(replay), 1e-12, "without fusion");
  EXPECT_EQ(compiled.stats().last.fused_kernels, 0u);
  EXPECT_EQ(compiled.stats().last.reduction_epilogues, 0u);
}

// A tanh layer with a learnt output gain: the gain's gradient sums a product over the batch that
// nothing else reads (a leading-axis epilogue), the loss is a mean of squares (a full one), and
// the bias gradient sums a cotangent the weight gradient reads too (a primitive sum).
TensorList loss_and_gradients(const TensorList& in, const TensorList& parameters) {
  TensorList leaves;
  for (const Tensor& p : parameters) leaves.push_back(p.detach().requires_grad_());
  const Tensor u = tanh(matmul(in[0], leaves[0]) + leaves[1]) * leaves[2];
  const Tensor loss = mean(square(u - in[1]));
  TensorList out = grad({loss}, leaves);
  out.insert(out.begin(), loss);
  return out;
}

TEST(ReductionEpilogue, GradientsOfAStepWithBatchSumsMatchEager) {
  for (DType dtype : {DType::f32, DType::f64}) {
    Generator gen(4);
    const TensorList parameters = {randn({3, 20}, dtype, &gen), randn({20}, dtype, &gen), randn({1, 20}, dtype, &gen)};
    auto step = [&](const TensorList& in) { return loss_and_gradients(in, parameters); };
    auto batch = [&](int64_t n) { return TensorList{randn({n, 3}, dtype, &gen), randn({n, 20}, dtype, &gen)}; };

    const Planned planned = plan(step, batch(64));
    const std::multiset<Epilogue> found = epilogues(planned.groups);
    EXPECT_EQ(found.count(Epilogue::sum_all), 1u) << planned.graph.to_string();
    EXPECT_EQ(found.count(Epilogue::sum_leading), 1u) << planned.graph.to_string();

    // At n = 1 the gain's sum is over an axis of length 1, which simplify turns into a reshape.
    for (int64_t n : {int64_t{5000}, int64_t{1}}) {
      CompiledFunction compiled = compile(step);
      compiled(batch(n));
      const TensorList replay = batch(n), eager = step(replay), result = compiled(replay);
      ASSERT_EQ(result.size(), eager.size());
      for (size_t i = 0; i < eager.size(); ++i) {
        const double scale = 1 + cast(max(abs(eager[i])), DType::f64).item<double>();
        EXPECT_LE(cast(max(abs(result[i] - eager[i])), DType::f64).item<double>(),
                  (dtype == DType::f32 ? 1e-5 : 1e-12) * scale)
            << dtype_name(dtype) << " n=" << n << " output " << i;
      }
      EXPECT_EQ(compiled.stats().last.reduction_epilogues, n > 1 ? 2u : 1u);
    }
  }
}

TEST(ReductionEpilogue, CudaKernelsWithEpiloguesCompileThroughNvrtc) {
  for (DType dtype : {DType::f32, DType::f64}) {
    Generator gen(2);
    const Planned planned = plan(every_sum, sum_inputs({64, 64}, dtype, gen));
    std::vector<KernelPlan> plans;
    for (const FusionGroup& group : planned.groups) {
      plans.push_back(plan_kernel(planned.graph, group, "eddy_fused_" + std::to_string(plans.size())));
    }
    ASSERT_EQ(plans.size(), sum_cases().size());
    const std::string source = render_cuda_source(plans);
    EXPECT_NE(source.find("atomicAdd(out, acc)"), std::string::npos);
    EXPECT_NE(source.find("out[j] = acc"), std::string::npos);
    EXPECT_NE(source.find("out[r] = acc"), std::string::npos);
    if (!nvrtc_available()) GTEST_SKIP() << "built without NVRTC: the CUDA source is rendered but not compiled";
    const std::string ptx = compile_cuda_to_ptx(source);
    for (const KernelPlan& kernel : plans) {
      EXPECT_NE(ptx.find(".entry " + kernel.name), std::string::npos) << kernel.name << " missing from the PTX";
    }
  }
}

}  // namespace
}  // namespace eddy::compiler
