// Elementwise fusion and code generation: every renderable primitive inside fused loops, the
// grouping rules, each way a kernel reads its inputs, the on-disk kernel cache, and the CUDA
// rendering compiled by NVRTC.

#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

#include "eddy/compiler/compile.h"
#include "eddy/compiler/fusion.h"
#include "eddy/compiler/kernel_cache.h"
#include "eddy/compiler/nvrtc.h"
#include "eddy/compiler/passes.h"
#include "eddy/eddy.h"
#include "support/disabled_passes.h"
#include "support/expect_error.h"

namespace eddy::compiler {
namespace {

using TensorList = std::vector<Tensor>;

// Uses every primitive that has a scalar expression, in chains long enough to fuse, reading a
// full operand, a row (bias-like), a column and a broadcast that needs materialising.
TensorList every_fusable_op(const TensorList& in) {
  const Tensor &a = in[0], &b = in[1], &row = in[2], &column = in[3], &outer = in[4];
  const DType d = a.dtype();
  Tensor t1 = tanh(a) * b + exp(-abs(a)) - sin(b) / (cos(a) + 2.0);
  Tensor t2 = sqrt(abs(b) + 1.0) + log(abs(a) + 1.0) + pow(abs(a) + 0.5, b * 0.5);
  Tensor t3 = maximum(a, b) - minimum(a, row) + sign(a) * column + outer;
  Tensor flags = cast(ge(a, zeros_like(a)), d) + cast(le(b, row), d) + cast(eq(a, a), d) + cast(ne(a, b), d);
  Tensor chosen = where(lt(a, b), t1, t2) + flags + cast(gt(a, column), d);
  return {chosen + t3, square(chosen) - 1.0};
}

TensorList inputs_for(DType dtype, Generator& gen, int64_t rows = 64, int64_t columns = 8) {
  return {randn({rows, columns}, dtype, &gen), randn({rows, columns}, dtype, &gen), randn({columns}, dtype, &gen),
          randn({rows, 1}, dtype, &gen),
          reshape(randn({1, 1, columns}, dtype, &gen), {1, columns}) * randn({rows, 1}, dtype, &gen)};
}

void expect_close(const TensorList& compiled, const TensorList& eager, double tolerance) {
  ASSERT_EQ(compiled.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    ASSERT_EQ(compiled[i].shape(), eager[i].shape());
    const double scale = 1 + cast(max(abs(eager[i])), DType::f64).item<double>();
    EXPECT_LE(cast(max(abs(compiled[i] - eager[i])), DType::f64).item<double>(), tolerance * scale) << "output " << i;
  }
}

TEST(Fusion, EveryRenderablePrimitiveRunsFusedAndMatchesEager) {
  for (DType dtype : {DType::f32, DType::f64}) {
    Generator gen(5);
    const TensorList traced_on = inputs_for(dtype, gen), replayed_on = inputs_for(dtype, gen);
    std::set<std::string_view> fused_names;
    const Trace traced = trace(every_fusable_op, traced_on);
    for (const FusionGroup& group : plan_fusion(traced.graph)) {
      for (size_t n : group.nodes) fused_names.insert(traced.graph.nodes[n].primitive->name);
    }
    for (std::string_view name : {"neg", "add", "sub", "mul", "div", "pow", "exp", "log", "sin", "cos", "tanh", "sqrt",
                                  "abs", "sign", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "where", "cast"}) {
      EXPECT_TRUE(fused_names.count(name)) << name << " never ran inside a fused kernel";
    }
    CompiledFunction compiled = compile(every_fusable_op);
    compiled(traced_on);
    expect_close(compiled(replayed_on), every_fusable_op(replayed_on), dtype == DType::f32 ? 1e-5 : 1e-12);
    EXPECT_GT(compiled.stats().last.fused_kernels, 0u);
  }
}

// Rows whose length is not a multiple of the vector width run in tiles of several rows, and the
// rows that do not fill a tile in the row loop (codegen.cpp, cpu_tiled_rows): 37 rows of 20 are 9
// tiles of 4 rows and one row left, 50 of 7 three tiles of 16 and two rows; 40 rows of 32 need
// no tiles.
// Without transcendental functions (glibc's vector variants in the loop, Eigen's eagerly) a fused
// loop rounds every operation as eager eddy does, so its results are equal bit for bit.
TensorList arithmetic(const TensorList& in) {
  const Tensor &a = in[0], &b = in[1], &row = in[2];
  Tensor y = a * b + row * a - b / (a * a + 1.0);
  Tensor chosen = where(lt(a, b), maximum(y, -abs(b)), minimum(y, square(a))) * sign(b);
  return {(1.0 - square(chosen)) * b + 2.0 * chosen * a - neg(row), cast(gt(y, row), a.dtype()) + y};
}

TEST(Fusion, FusedArithmeticEqualsEagerBitForBit) {
  for (DType dtype : {DType::f32, DType::f64}) {
    for (int64_t columns : {20, 64}) {  // 20: rows walked in tiles of whole vectors
      Generator gen(14);
      auto inputs = [&] {
        Tensor a = randn({50, columns}, dtype, &gen);
        a = where(lt(a, scalar(-1.5, dtype, a.device())), -zeros_like(a), a);  // some -0.0
        return TensorList{a, randn({50, columns}, dtype, &gen), randn({columns}, dtype, &gen)};
      };
      CompiledFunction compiled = compile(arithmetic);
      compiled(inputs());
      const TensorList replay = inputs();
      const TensorList fused = compiled(replay), eager = arithmetic(replay);
      ASSERT_GT(compiled.stats().last.fused_kernels, 0u);
      for (size_t k = 0; k < eager.size(); ++k) {
        ASSERT_EQ(fused[k].shape(), eager[k].shape());
        EXPECT_EQ(std::memcmp(fused[k].raw_data(), eager[k].raw_data(), fused[k].numel() * dtype_size(dtype)), 0)
            << "output " << k << ", " << columns << " columns, " << (dtype == DType::f32 ? "float32" : "float64");
      }
    }
  }
}

// GCC's vectoriser made x^0.5 a square root: NaN for -inf and -0 for -0 in loops long enough to
// vectorise, where eager eddy's pow gives +inf and +0 (kernel_cache.cpp's flags).
TEST(Fusion, PowerOfAConstantHalfKeepsPowsSpecialValues) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> values;
    for (int i = 0; i < 16; ++i) values.insert(values.end(), {-inf, -0.0, 4.0, inf});
    const Tensor x = cast(tensor<double>(values), dtype);
    CompiledFunction compiled = compile([](const TensorList& in) { return TensorList{pow(in[0] + 0.0, 0.5)}; });
    const Tensor fused = compiled({x})[0], eager = pow(x + 0.0, 0.5);
    ASSERT_GT(compiled.stats().last.fused_kernels, 0u);
    EXPECT_EQ(std::memcmp(fused.raw_data(), eager.raw_data(), x.numel() * dtype_size(dtype)), 0)
        << (dtype == DType::f32 ? "float32" : "float64") << ": " << fused << " against " << eager;
  }
}

TensorList sums_of_a_layer(const TensorList& in) {
  Tensor y = tanh(in[0]) * in[0];
  return TensorList{sum(y), sum(y, {0}, false), sum(y, {1}, false)};
}

// Compiled sums add their blocks' partial sums in block order, blocks cut by the domain's size
// alone (codegen.cpp): the same bits at every thread count.
TEST(Fusion, CompiledSumsAreTheSameAtEveryThreadCount) {
  const int threads_before = num_threads();
  for (const Shape& shape : {Shape{30011, 20}, Shape{1, 200003}}) {
    Generator gen(29);
    const TensorList inputs{randn(shape, DType::f32, &gen)};
    CompiledFunction compiled = compile(sums_of_a_layer);
    compiled(inputs);  // traced and compiled here; the calls below run the kernels
    set_num_threads(1);
    const TensorList one_thread = compiled(inputs);
    ASSERT_GT(compiled.stats().last.fused_kernels, 0u);
    for (int threads : {2, 3}) {
      set_num_threads(threads);
      const TensorList several = compiled(inputs);
      for (size_t k = 0; k < several.size(); ++k) {
        EXPECT_EQ(std::memcmp(several[k].raw_data(), one_thread[k].raw_data(), several[k].numel() * sizeof(float)), 0)
            << "sum " << k << " of [" << shape[0] << ", " << shape[1] << "] on " << threads << " threads";
      }
    }
  }
  set_num_threads(threads_before);
}

TEST(Fusion, ShortRowsRunInTilesAndTheRowsLeftOver) {
  for (DType dtype : {DType::f32, DType::f64}) {
    for (const auto& [rows, columns] : {std::pair<int64_t, int64_t>{37, 20}, {50, 7}, {40, 32}}) {
      Generator gen(11);
      const TensorList traced_on = inputs_for(dtype, gen, rows, columns);
      const TensorList replayed_on = inputs_for(dtype, gen, rows, columns);
      CompiledFunction compiled = compile(every_fusable_op);
      compiled(traced_on);
      SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " [" << rows << ", " << columns << "]");
      expect_close(compiled(replayed_on), every_fusable_op(replayed_on), dtype == DType::f32 ? 1e-5 : 1e-12);
    }
  }
}

// tanh(x + b) is used by the matmul and by the derivative.
TensorList layer_and_derivative(const TensorList& in) {
  Tensor y = tanh(in[0] + in[1]);
  Tensor h = matmul(y, in[2]);
  return TensorList{h, in[3] * (1.0 - square(y))};
}

TEST(Fusion, OnlyTheRootOfAGroupIsStored) {
  // Without multi-output groups y is stored by its own group and read by the matmul and by the
  // group of 1 - y^2 and its product with g.
  const Trace traced = trace(layer_and_derivative, {randn({16, 4}), randn({4}), randn({4, 4}), randn({16, 4})});
  const std::vector<FusionGroup> groups = plan_fusion(traced.graph, {.multi_output = false});
  ASSERT_EQ(groups.size(), 2u) << traced.graph.to_string();
  EXPECT_EQ(traced.graph.nodes[groups[0].nodes.back()].primitive->name, "tanh");
  EXPECT_EQ(groups[0].nodes.size(), 2u);  // add, tanh
  EXPECT_TRUE(groups[0].side_outputs.empty());
  EXPECT_EQ(groups[1].output, traced.graph.outputs[1]);
  EXPECT_EQ(groups[1].nodes.size(), 3u);  // square's mul, sub, mul; the constant 1 is inlined
}

TEST(Fusion, AGroupReadingAnotherGroupsValueJoinsIt) {
  // With them, the derivative's group reads y and merges into y's group: one loop stores y (for
  // the matmul) as a side output and the derivative as its root.
  const Trace traced = trace(layer_and_derivative, {randn({16, 4}), randn({4}), randn({4, 4}), randn({16, 4})});
  const std::vector<FusionGroup> groups = plan_fusion(traced.graph);
  ASSERT_EQ(groups.size(), 1u) << traced.graph.to_string();
  EXPECT_EQ(groups[0].nodes.size(), 5u);
  EXPECT_EQ(groups[0].output, traced.graph.outputs[1]);
  ASSERT_EQ(groups[0].side_outputs.size(), 1u);
  EXPECT_EQ(traced.graph.nodes[groups[0].nodes[1]].output, groups[0].side_outputs[0]);  // y = tanh(...)

  CompiledFunction compiled = compile(layer_and_derivative);
  Generator gen(3);
  const TensorList replay = {randn({16, 4}, DType::f64, &gen), randn({4}, DType::f64, &gen),
                             randn({4, 4}, DType::f64, &gen), randn({16, 4}, DType::f64, &gen)};
  compiled(replay);
  expect_close(compiled(replay), layer_and_derivative(replay), 1e-12);
  EXPECT_EQ(compiled.stats().last.fused_kernels, 1u);
}

// Two groups reading a matmul's result, neither depending on the other, share one loop; a
// product that reads the first group's value through a second matmul cannot join them.
TensorList siblings(const TensorList& in) {
  Tensor a = matmul(in[0], in[1]);
  Tensor first = a * 2.0 + in[2];
  Tensor second = exp(a) - in[2];
  return TensorList{first, second, matmul(first, in[1]) * a};
}

TEST(Fusion, GroupsReadingTheSameValueShareALoop) {
  Generator gen(6);
  auto inputs = [&] {
    return TensorList{randn({16, 4}, DType::f64, &gen), randn({4, 4}, DType::f64, &gen),
                      randn({16, 4}, DType::f64, &gen)};
  };
  const Trace traced = trace(siblings, inputs());
  const std::vector<FusionGroup> groups = plan_fusion(traced.graph);
  ASSERT_EQ(groups.size(), 1u) << traced.graph.to_string();
  std::vector<ValueId> stored = groups[0].side_outputs;
  stored.push_back(groups[0].output);
  std::sort(stored.begin(), stored.end());
  std::vector<ValueId> returned{traced.graph.outputs[0], traced.graph.outputs[1]};
  std::sort(returned.begin(), returned.end());
  EXPECT_EQ(stored, returned);
  EXPECT_EQ(plan_fusion(traced.graph, {.multi_output = false}).size(), 2u);

  CompiledFunction compiled = compile(siblings);
  const TensorList replay = inputs();
  compiled(inputs());
  expect_close(compiled(replay), siblings(replay), 1e-12);
}

// Taylor mode's tanh layer: the value, two tangents and the second-order term leave the loop for
// the next layer's matmuls, and a term that reads a matmul of the layer's own value cannot join
// it (the matmul would have to run both after and before the loop).
TensorList taylor_layer(const TensorList& in) {
  const Tensor &z = in[0], &bias = in[1], &tangent_x = in[2], &tangent_t = in[3], &second = in[4], &weight = in[5];
  Tensor y = tanh(z + bias);
  Tensor slope = 1.0 - square(y);
  Tensor curvature = -2.0 * y * slope;
  Tensor next = matmul(y, weight);
  return TensorList{next, slope * tangent_x, slope * tangent_t, slope * second + curvature * tangent_x * tangent_x,
                    exp(next) * slope};
}

TEST(Fusion, ATaylorLayerIsOneLoopWithSeveralOutputs) {
  Generator gen(4);
  auto inputs = [&](DType dtype) {
    return TensorList{randn({37, 20}, dtype, &gen), randn({20}, dtype, &gen), randn({37, 20}, dtype, &gen),
                      randn({37, 20}, dtype, &gen), randn({37, 20}, dtype, &gen), randn({20, 20}, dtype, &gen)};
  };
  const Trace traced = trace(taylor_layer, inputs(DType::f32));
  const std::vector<FusionGroup> groups = plan_fusion(traced.graph);
  ASSERT_EQ(groups.size(), 2u) << traced.graph.to_string();
  // The layer: y for the matmul, slope for the last output, and the three returned terms.
  EXPECT_EQ(groups[0].side_outputs.size(), 4u);
  EXPECT_EQ(traced.graph.nodes[groups[1].nodes.back()].primitive->name, "mul");  // exp(next) * slope
  for (DType dtype : {DType::f32, DType::f64}) {
    CompiledFunction compiled = compile(taylor_layer);
    const TensorList replay = inputs(dtype);
    compiled(inputs(dtype));
    expect_close(compiled(replay), taylor_layer(replay), dtype == DType::f32 ? 1e-5 : 1e-12);
    EXPECT_EQ(compiled.stats().last.fused_kernels, 2u);
  }
}

// A backward-like loop after a matmul reads y, and tanh'(z) = 1 - y*y, which the forward loop
// computes too: it recomputes the slope from y rather than have the forward loop store it.
TensorList slope_read_after_a_matmul(const TensorList& in) {
  const Tensor &z = in[0], &bias = in[1], &weight = in[2], &tangent = in[3];
  Tensor y = tanh(z + bias);
  Tensor slope = 1.0 - square(y);
  Tensor back = matmul(matmul(y, weight), weight);
  return TensorList{slope * tangent, back * slope + y};
}

ValueId value_of(const Graph& graph, std::string_view primitive) {
  for (const GraphNode& node : graph.nodes) {
    if (node.primitive->name == primitive) return node.output;
  }
  ADD_FAILURE() << "no " << primitive << " in\n" << graph.to_string();
  return -1;
}

TEST(Fusion, ALoopRecomputesACheapValueFromWhatItReadsAnyway) {
  Generator gen(7);
  auto inputs = [&](DType dtype) {
    return TensorList{randn({40, 16}, dtype, &gen), randn({16}, dtype, &gen), randn({16, 16}, dtype, &gen) * 0.25,
                      randn({40, 16}, dtype, &gen)};
  };
  Trace traced = trace(slope_read_after_a_matmul, inputs(DType::f32));
  fold_constants(traced.graph);  // the 1 of 1 - y*y becomes a constant a loop reads, as in Program
  const ValueId y = value_of(traced.graph, "tanh"), slope = value_of(traced.graph, "sub");

  const std::vector<FusionGroup> stored = plan_fusion(traced.graph, {.rematerialize = false});
  ASSERT_EQ(stored.size(), 2u) << traced.graph.to_string();
  EXPECT_EQ(stored[0].side_outputs.size(), 2u);  // y and the slope
  EXPECT_NE(std::find(stored[1].inputs.begin(), stored[1].inputs.end(), slope), stored[1].inputs.end());

  const std::vector<FusionGroup> groups = plan_fusion(traced.graph);
  ASSERT_EQ(groups.size(), 2u) << traced.graph.to_string();
  EXPECT_EQ(groups[0].side_outputs, std::vector<ValueId>{y});
  EXPECT_EQ(std::find(groups[1].inputs.begin(), groups[1].inputs.end(), slope), groups[1].inputs.end());
  EXPECT_NE(std::find(groups[1].inputs.begin(), groups[1].inputs.end(), y), groups[1].inputs.end());

  for (DType dtype : {DType::f32, DType::f64}) {
    CompiledFunction compiled = compile(slope_read_after_a_matmul);
    const TensorList replay = inputs(dtype);
    compiled(inputs(dtype));
    expect_close(compiled(replay), slope_read_after_a_matmul(replay), dtype == DType::f32 ? 1e-5 : 1e-12);
  }
}

TEST(Fusion, TheRematerialisationSwitchTurnsItOff) {
  Generator gen(8);
  auto inputs = [&] {
    return TensorList{randn({40, 16}, DType::f64, &gen), randn({16}, DType::f64, &gen),
                      randn({16, 16}, DType::f64, &gen) * 0.25, randn({40, 16}, DType::f64, &gen)};
  };
  auto fused_nodes = [&] {
    CompiledFunction compiled = compile(slope_read_after_a_matmul);
    compiled(inputs());
    const TensorList replay = inputs();
    expect_close(compiled(replay), slope_read_after_a_matmul(replay), 1e-12);
    return compiled.stats().last.fused_nodes;
  };
  const size_t with_copies = fused_nodes();
  DisabledPasses off("rematerialize");
  EXPECT_EQ(fused_nodes() + 2, with_copies);  // the copy of 1 - y*y: its multiply and subtraction
}

// A value the reading loop could only recompute from an input it does not read stays stored.
TEST(Fusion, ALoopDoesNotRecomputeFromValuesItWouldHaveToReadAnew) {
  const Trace traced = trace(
      [](const TensorList& in) {
        Tensor y = tanh(in[0] + in[3]);
        Tensor slope = 1.0 - square(y);
        return TensorList{slope * in[1], matmul(y, in[2]) * slope + in[1]};
      },
      {randn({40, 16}), randn({40, 16}), randn({16, 16}), randn({16})});
  const ValueId slope = value_of(traced.graph, "sub");
  const std::vector<FusionGroup> groups = plan_fusion(traced.graph);
  ASSERT_EQ(groups.size(), 2u) << traced.graph.to_string();
  EXPECT_NE(std::find(groups[1].inputs.begin(), groups[1].inputs.end(), slope), groups[1].inputs.end());
}

TEST(Fusion, AGraphOutputAndAValueOfAnotherShapeStayOutsideTheirConsumersGroup) {
  const Trace traced = trace(
      [](const TensorList& in) {
        Tensor small = exp(in[1]) * 2.0;     // [4]: a different shape from its consumer's [16, 4]
        Tensor exposed = sin(in[0]) * 3.0;   // also returned
        return TensorList{exposed, cos(exposed) + small};
      },
      {randn({16, 4}), randn({4})});
  for (const FusionGroup& group : plan_fusion(traced.graph)) {
    for (size_t n : group.nodes) {
      if (n == group.nodes.back()) continue;
      const ValueId value = traced.graph.nodes[n].output;
      if (value == traced.graph.outputs[0]) {
        EXPECT_NE(std::find(group.side_outputs.begin(), group.side_outputs.end(), value), group.side_outputs.end())
            << "a returned value was fused away";
      }
      EXPECT_EQ(traced.graph.value(traced.graph.nodes[n].output).shape, traced.graph.value(group.output).shape);
    }
  }
}

TEST(Fusion, ReadsNonContiguousInputs) {
  auto f = [](const TensorList& in) { return TensorList{tanh(transpose(in[0])) * 2.0 + 1.0}; };
  CompiledFunction compiled = compile(f);
  Generator gen(8);
  compiled({randn({8, 5}, DType::f64, &gen)});
  const TensorList replay = {randn({8, 5}, DType::f64, &gen)};
  expect_close(compiled(replay), f(replay), 1e-12);
}

// EDDY_KERNEL_CACHE set to a folder of the test's own while it lives; then unset, the folder removed.
class ScratchKernelCache {
 public:
  explicit ScratchKernelCache(const std::string& name)
      : directory_(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    setenv("EDDY_KERNEL_CACHE", directory_.c_str(), 1);
  }
  ~ScratchKernelCache() {
    unsetenv("EDDY_KERNEL_CACHE");
    std::filesystem::remove_all(directory_);
  }
  const std::filesystem::path& directory() const { return directory_; }

 private:
  std::filesystem::path directory_;
};

TEST(KernelCache, CompilesOnceThenLoadsFromDisk) {
  const ScratchKernelCache cache("eddy-kernel-cache-test");
  auto f = [](const TensorList& in) { return TensorList{exp(in[0]) * 3.0 - 1.0}; };
  const Trace traced = trace(f, {randn({10})});
  const Program first(traced.graph);
  const Program second(traced.graph);
  EXPECT_FALSE(first.stats().kernels_from_cache);
  EXPECT_GT(first.stats().compile_seconds, 0.0);
  EXPECT_TRUE(second.stats().kernels_from_cache);
  EXPECT_EQ(second.stats().compile_seconds, 0.0);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(cache.directory()), std::filesystem::directory_iterator()),
            1);
}

// Without HOME the cache is the user's home folder from the password database (it was /tmp, where
// any user could leave libraries), and a library another user owns is not loaded.
TEST(KernelCache, StaysInTheUsersHomeAndLoadsOnlyTheUsersLibraries) {
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  unsetenv("HOME");
  const std::filesystem::path without_home = kernel_cache_directory();
  if (!home.empty()) setenv("HOME", home.c_str(), 1);
  const passwd* user = getpwuid(geteuid());
  ASSERT_NE(user, nullptr);
  if (!std::getenv("XDG_CACHE_HOME") && !std::getenv("EDDY_KERNEL_CACHE")) {
    EXPECT_EQ(without_home, std::filesystem::path(user->pw_dir) / ".cache" / "eddy" / "kernels");
  }

  const ScratchKernelCache cache("eddy-kernel-owner-test");
  auto f = [](const TensorList& in) { return TensorList{exp(in[0]) * 5.0 - 2.0}; };
  const Trace traced = trace(f, {randn({10})});
  const Program first(traced.graph);
  const std::filesystem::path library = std::filesystem::directory_iterator(cache.directory())->path();
  if (::chown(library.c_str(), 65534, 65534) != 0) {
    GTEST_SKIP() << "giving the library to another user needs root; the ownership check is not exercised";
  }
  expect_error([&] { Program second(traced.graph); }, {"belongs to another user (uid 65534)", "EDDY_KERNEL_CACHE"});
}

// The kernel plans of a graph using every renderable primitive.
std::vector<KernelPlan> plans_of_every_fusable_op() {
  Generator gen(5);
  const Trace traced = trace(every_fusable_op, inputs_for(DType::f32, gen));
  std::vector<KernelPlan> plans;
  for (const FusionGroup& group : plan_fusion(traced.graph)) {
    plans.push_back(plan_kernel(traced.graph, group, "eddy_fused_" + std::to_string(plans.size())));
  }
  return plans;
}

// A flat loop's threads depend on its size, its vectorisation must not: an unqualified if clause on
// `parallel for simd` also turns off `simd` below the grain (OpenMP 5.0), which left every kernel
// of fewer than 32768 elements scalar (a compiled step on 500 points took longer than on 1000).
TEST(CpuCodegen, OnlyTheThreadsOfALoopDependOnItsSize) {
  const std::vector<KernelPlan> plans = plans_of_every_fusable_op();
  ASSERT_FALSE(plans.empty());
  const std::string source = render_cpu_source(plans, 32768);
  std::istringstream lines(source);
  int combined = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("#pragma omp parallel for simd") == std::string::npos) continue;
    ++combined;
    EXPECT_NE(line.find("if (parallel : "), std::string::npos) << line;
  }
  EXPECT_GT(combined, 0);
}

TEST(CudaCodegen, RendersKernelsThatNvrtcCompiles) {
  const std::vector<KernelPlan> plans = plans_of_every_fusable_op();
  ASSERT_FALSE(plans.empty());
  const std::string source = render_cuda_source(plans);
  EXPECT_NE(source.find("__global__ void eddy_fused_0"), std::string::npos);
  if (!nvrtc_available()) GTEST_SKIP() << "built without NVRTC: the CUDA source is rendered but not compiled";
  const std::string ptx = compile_cuda_to_ptx(source);
  for (size_t k = 0; k < plans.size(); ++k) {
    EXPECT_NE(ptx.find(".entry " + plans[k].name), std::string::npos) << plans[k].name << " missing from the PTX";
  }
}

}  // namespace
}  // namespace eddy::compiler
