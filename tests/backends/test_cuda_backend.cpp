// The CUDA backend. Everywhere the toolkit is: every kernel instantiation compiles with NVRTC, and
// a cuda device that cannot be used is refused with the reason. On a GPU (label `gpu`; skipped,
// saying why, where there is none): every row of the op table against the CPU, values and
// reverse-mode derivatives to order 3; random draws; products in every layout cuBLAS takes; bad
// indices; the allocator's cache.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "eddy/backends/cuda/cuda_backend.h"
#include "eddy/backends/cuda/driver.h"
#include "eddy/backends/cuda/dynamic_library.h"
#include "eddy/backends/cuda/kernel_source.h"
#include "eddy/backends/cuda/nvrtc.h"
#include "eddy/compiler/compile.h"
#include "eddy/compiler/program.h"
#include "eddy/compiler/taylor.h"
#include "eddy/compiler/trace.h"
#include "eddy/eddy.h"
#include "eddy/nn/layers.h"
#include "ops/op_table.h"
#include "support/expect_error.h"
#include "support/scoped_env.h"

namespace eddy {
namespace {

using TensorList = std::vector<Tensor>;
using testing::OpCase;

#define EDDY_SKIP_WITHOUT_GPU()                                                                   \
  if (const std::string why = cuda::unavailable_reason(0); !why.empty()) GTEST_SKIP() << "no GPU: " << why

TensorList on(const TensorList& tensors, Device device) {
  TensorList moved;
  for (const Tensor& t : tensors) moved.push_back(to(t, device));
  return moved;
}

// The largest difference between `gpu` (brought back) and `cpu`, relative to cpu's largest entry.
double relative_difference(const Tensor& on_gpu, const Tensor& on_cpu) {
  EXPECT_EQ(on_gpu.device(), Device::cuda(0));
  EXPECT_EQ(on_gpu.shape(), on_cpu.shape());
  EXPECT_EQ(on_gpu.dtype(), on_cpu.dtype());
  if (on_cpu.numel() == 0) return 0;
  const Tensor back = cast(to(on_gpu, cpu()), is_complex(on_cpu.dtype()) ? DType::c128 : DType::f64);
  const Tensor expected = cast(on_cpu, back.dtype());
  const double scale = 1 + max(abs(expected)).item<double>();
  return max(abs(back - expected)).item<double>() / scale;
}

double tolerance(DType dtype) { return dtype == DType::f32 || dtype == DType::c64 ? 2e-5 : 1e-11; }

TEST(CudaKernels, EveryInstantiationCompilesWithNvrtc) {
  const std::vector<std::string> names = cuda::all_kernel_names();
  EXPECT_GT(names.size(), 200u);
  const cuda::CompiledSource compiled = cuda::compile_to_ptx(cuda::kKernelSource, "compute_90", names);
  ASSERT_EQ(compiled.lowered_names.size(), names.size());
  for (const std::string& lowered : compiled.lowered_names) {
    EXPECT_NE(compiled.ptx.find(".entry " + lowered), std::string::npos) << lowered;
  }
}

// cuBLAS, cuFFT and NVRTC are opened when first used; a missing library or function says which,
// and only when the feature that needs it runs.
TEST(CudaLibraries, AMissingLibraryOrFunctionIsNamedWhenNeeded) {
  const cuda::DynamicLibrary missing("libeddy_absent.so.1", "/nonexistent");
  expect_error([&] { missing.require("a product"); },
               {"a product needs the CUDA toolkit's libeddy_absent.so.1", "cannot be opened"});
  cuda::DynamicLibrary math("libm.so.6");
  double (*cosine)(double) = nullptr;
  math.bind(cosine, "cos");
  ASSERT_NE(cosine, nullptr);
  EXPECT_EQ(cosine(0.0), 1.0);
  math.require("a cosine");  // all there
  void (*absent)() = nullptr;
  math.bind(absent, "eddy_absent_function");
  EXPECT_EQ(absent, nullptr);
  expect_error([&] { math.require("a product"); }, {"libm.so.6 has no eddy_absent_function"});
}

TEST(CudaDevice, NamesParseAndBadOnesAreRefused) {
  EXPECT_EQ(parse_device("cpu"), cpu());
  EXPECT_EQ(parse_device("cuda"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:3"), Device::cuda(3));
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x"}) {
    expect_error([&] { parse_device(bad); }, {"unknown device '", bad, "'", "cpu, cuda or cuda:N"});
  }
}

TEST(CudaDevice, AnUnusableDeviceIsRefusedWithTheReason) {
  const int missing = cuda::driver().devices;  // one past the last device there is
  expect_error([&] { zeros({2}, DType::f32, Device::cuda(missing)); }, {"cuda:" + std::to_string(missing)});
  if (!cuda::unavailable_reason(0).empty()) {
    expect_error([] { to(ones({2}), Device::cuda(0)); }, {"cuda:0: ", cuda::unavailable_reason(0)});
  }
}

TensorList fused_step(const TensorList& x) {
  const Tensor hidden = tanh(x[0] * x[1]);
  return {sum(hidden * exp(-x[0])), hidden + x[0], sum(square(hidden), {0})};
}

TEST(CudaPrograms, AProgramForAGpuBuildsItsKernelsWithoutOne) {
  Generator gen(3);
  const TensorList inputs{randn({64, 8}, DType::f32, &gen), randn({8}, DType::f32, &gen)};
  const compiler::Trace traced = compiler::trace(fused_step, inputs);
  const compiler::Program program(traced.graph, Device::cuda(0));
  EXPECT_GT(program.stats().fused_kernels, 0u);
  EXPECT_NE(program.cuda_source().find("__global__"), std::string::npos);
  EXPECT_TRUE(program.cpu_source().empty());
  expect_error([&] { program.run(inputs); }, {"input 0 is on cpu:0 but the program was built for cuda:0"});
}

// A Burgers PINN step as eddy_peers' compiled one (bench/peers): value, u_x, u_t and u_xx of a
// tanh MLP by Taylor mode, the residual's mean square and the weights' gradient, traced
// abstractly on cuda:0 tensors (nothing runs) and lowered for the GPU: every fused kernel of a
// real training step has a CUDA spelling and compiles. Constant folding evaluates creation ops on
// the device, which is not there, so it is off: the constants stay graph nodes.
TEST(CudaPrograms, APinnTrainingStepBuildsItsGpuKernelsWithoutAGpu) {
  const ScopedEnv no_folding("EDDY_COMPILER_DISABLE", "fold");
  const Device gpu = Device::cuda(0);
  const std::vector<int64_t> widths = {2, 20, 20, 20, 1};
  TensorList inputs;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    inputs.push_back(Tensor::abstract({widths[l], widths[l + 1]}, DType::f32, gpu).requires_grad_());
    inputs.push_back(Tensor::abstract({widths[l + 1]}, DType::f32, gpu).requires_grad_());
  }
  inputs.push_back(Tensor::abstract({512, 2}, DType::f32, gpu));
  auto step = [](const TensorList& x) {
    const TensorList weights(x.begin(), x.end() - 1);
    auto mlp = [&](const Tensor& points) {
      Tensor z = points;
      for (size_t l = 0; l < weights.size(); l += 2) {
        z = matmul(z, weights[l]) + weights[l + 1];
        if (l + 2 < weights.size()) z = tanh(z);
      }
      return z;
    };
    const TaylorJets jets = taylor_jets(mlp, x.back(), TaylorOptions{{0}, false, {}});
    const Tensor residual = jets.first[1] + jets.value * jets.first[0] - 0.01 * jets.second[0];
    const Tensor loss = mean(square(residual));
    TensorList outputs = grad({loss}, weights);
    outputs.insert(outputs.begin(), loss);
    return outputs;
  };
  const compiler::Trace traced = compiler::trace(step, inputs, compiler::Evaluation::abstract);
  const compiler::Program program(traced.graph, gpu);
  EXPECT_GE(program.stats().fused_kernels, 5u);
  EXPECT_NE(program.cuda_source().find("__global__"), std::string::npos);
}

// ---- on a GPU ----

class CudaOpTable : public ::testing::TestWithParam<OpCase> {};

Tensor real_dot(const Tensor& a, const Tensor& b) { return sum(real(conj(a) * b)); }

// What the GPU does not run yet: the distributed FFT's slab transforms (FFTW plans on host
// memory). Their rows must fail with an error.
bool gpu_lacks(const OpCase& op) {
  for (const std::string& primitive : op.primitives) {
    if (primitive.starts_with("dist_")) return true;
  }
  return false;
}

TEST_P(CudaOpTable, ValuesAndDerivativesToOrder3MatchTheCpu) {
  EDDY_SKIP_WITHOUT_GPU();
  const OpCase& op = GetParam();
  for (DType dtype : op.dtypes) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    Generator gen(31);
    const TensorList inputs = op.make_inputs(dtype, gen);
    if (gpu_lacks(op)) {
      EXPECT_THROW(op.fn(on(inputs, Device::cuda(0))), Error);
      continue;
    }
    const Tensor cpu_out = op.fn(inputs);
    const Tensor gpu_out = op.fn(on(inputs, Device::cuda(0)));
    if (is_inexact(cpu_out.dtype())) {
      EXPECT_LE(relative_difference(gpu_out, cpu_out), tolerance(cpu_out.dtype()));
    } else {
      EXPECT_EQ(to(gpu_out, cpu()).to_vector<double>(), cpu_out.to_vector<double>());
    }
    if (op.max_order == 0 || !is_inexact(cpu_out.dtype()) || (dtype != DType::f64 && dtype != DType::c128)) continue;
    // G_0 = Re<w, f(x)>, G_k = sum_i Re<p_k,i, dG_{k-1}/dx_i>: the same probes on both devices.
    const std::vector<size_t> diff = testing::differentiable_inputs(inputs);
    const Tensor w = testing::random_like(cpu_out, gen);
    std::vector<TensorList> probes(op.max_order + 1);
    for (int k = 1; k <= op.max_order; ++k) {
      for (size_t i : diff) probes[k].push_back(testing::random_like(inputs[i], gen));
    }
    auto probe_values = [&](Device device) {
      TensorList x = on(inputs, device);
      for (size_t i : diff) x[i] = x[i].detach().requires_grad_();
      TensorList targets;
      for (size_t i : diff) targets.push_back(x[i]);
      Tensor level = real_dot(to(w, device), op.fn(x));
      std::vector<double> values;
      for (int k = 1; k <= op.max_order; ++k) {
        const TensorList grads = grad({level}, targets, {}, k < op.max_order);
        Tensor total = zeros({}, DType::f64, device);
        for (size_t j = 0; j < diff.size(); ++j) total = total + real_dot(to(probes[k][j], device), grads[j]);
        values.push_back(total.item<double>());
        level = total;
      }
      return values;
    };
    const std::vector<double> on_cpu = probe_values(cpu()), on_gpu = probe_values(Device::cuda(0));
    for (size_t k = 0; k < on_cpu.size(); ++k) {
      EXPECT_NEAR(on_gpu[k], on_cpu[k], 1e-9 * (1 + std::abs(on_cpu[k]))) << "order " << k + 1;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaOpTable, ::testing::ValuesIn(testing::op_table()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           std::string name = info.param.name;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(CudaRandom, DrawsAreTheCpusNumbers) {
  EDDY_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor cpu_key = random_key(7, 1000), gpu_key = to(cpu_key, Device::cuda(0));
    // The same Philox words: uniform draws agree to the bit.
    EXPECT_EQ(uniform(gpu_key, {513, 3}, dtype).to_vector<double>(), uniform(cpu_key, {513, 3}, dtype).to_vector<double>());
    EXPECT_LE(relative_difference(normal(gpu_key, {1025}, dtype), normal(cpu_key, {1025}, dtype)), 1e-5);
  }
}

TEST(CudaMatmul, EveryLayoutMatchesTheCpu) {
  EDDY_SKIP_WITHOUT_GPU();
  Generator gen(5);
  for (DType dtype : {DType::f32, DType::f64, DType::c64, DType::c128}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    auto draw = [&](Shape shape) { return testing::random_like(zeros(shape, dtype), gen); };
    const std::vector<std::pair<Tensor, Tensor>> cases = {
        {draw({7, 5}), draw({5, 3})},                              // plain
        {transpose(draw({5, 7})), draw({5, 3})},                   // a transposed
        {draw({7, 5}), transpose(draw({3, 5}))},                   // b transposed
        {draw({4, 7, 5}), draw({5, 3})},                           // b broadcast over a batch
        {draw({2, 1, 7, 5}), draw({3, 5, 6})},                     // batches broadcast both ways
        {slice(draw({7, 10}), 1, 0, 10, 2), draw({5, 3})},        // a strided, copied dense
        {draw({1, 5}), draw({5, 1})},                              // vectors
        {draw({3, 0}), draw({0, 4})},                              // k = 0: zeros
    };
    for (const auto& [a, b] : cases) {
      SCOPED_TRACE(::testing::Message() << to_string(a.shape()) << " @ " << to_string(b.shape()));
      EXPECT_LE(relative_difference(matmul(to(a, Device::cuda(0)), to(b, Device::cuda(0))), matmul(a, b)),
                tolerance(dtype));
    }
  }
}

TEST(CudaIndexing, AnIndexOutOfRangeIsAnError) {
  EDDY_SKIP_WITHOUT_GPU();
  const Tensor x = to(reshape(arange(0, 12, 1, DType::f32), {3, 4}), Device::cuda(0));
  const Tensor good = to(tensor<int64_t>({2, -1, 0}), Device::cuda(0));
  EXPECT_EQ(index_select(x, 0, good).to_vector<float>(),
            (std::vector<float>{8, 9, 10, 11, 8, 9, 10, 11, 0, 1, 2, 3}));
  const Tensor bad = to(tensor<int64_t>({1, 3}), Device::cuda(0));
  expect_error([&] { index_select(x, 0, bad); }, {"index_select: index 3 is out of range for a dimension of size 3"});
  const Tensor bad_rows = to(tensor<int64_t>({0, 1, 2, 4, 0, 0}, {3, 2}), Device::cuda(0));
  expect_error([&] { gather(x, 1, bad_rows); }, {"gather: index 4 is out of range for a dimension of size 4"});
}

TEST(CudaDevices, MixingDevicesNamesBoth) {
  EDDY_SKIP_WITHOUT_GPU();
  expect_error([] { ones({2}) + to(ones({2}), Device::cuda(0)); }, {"is on cuda:0 but input 0 is on cpu:0"});
}

TEST(CudaDevices, GradientsFlowBackThroughTo) {
  EDDY_SKIP_WITHOUT_GPU();
  Tensor x = tensor<double>({0.5, -1.0, 2.0}).requires_grad_();
  const Tensor loss = sum(square(sin(to(x, Device::cuda(0)))));
  const TensorList g = grad({loss}, {x});
  EXPECT_EQ(g[0].device(), cpu());
  const std::vector<double> values = g[0].to_vector<double>();
  for (size_t i = 0; i < values.size(); ++i) {
    const double xi = x.to_vector<double>()[i];
    EXPECT_NEAR(values[i], 2 * std::sin(xi) * std::cos(xi), 1e-14);
  }
}

TEST(CudaAllocator, BlocksAreCachedAndCounted) {
  EDDY_SKIP_WITHOUT_GPU();
  Allocator& allocator = cuda::device_allocator(0);
  allocator.empty_cache();
  const AllocatorStats before = allocator.stats();
  { Tensor a = zeros({1000}, DType::f32, Device::cuda(0)); }  // 4000 bytes: a 4 KiB block, then cached
  const AllocatorStats freed = allocator.stats();
  EXPECT_EQ(freed.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(freed.bytes_cached, before.bytes_cached + 4096);
  EXPECT_EQ(freed.system_allocations, before.system_allocations + 1);
  Tensor b = zeros({1024}, DType::f32, Device::cuda(0));  // the same block again
  const AllocatorStats reused = allocator.stats();
  EXPECT_EQ(reused.cache_hits, freed.cache_hits + 1);
  EXPECT_EQ(reused.system_allocations, freed.system_allocations);
  EXPECT_EQ(reused.bytes_in_use, before.bytes_in_use + 4096);
}

TEST(CudaPrograms, ACompiledFunctionRunsOnTheGpuAsOnTheCpu) {
  EDDY_SKIP_WITHOUT_GPU();
  Generator gen(4);
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const TensorList inputs{randn({300, 20}, dtype, &gen), randn({20}, dtype, &gen)};
    CompiledFunction compiled(fused_step);
    const TensorList on_gpu = on(inputs, Device::cuda(0));
    compiled(on_gpu);  // the first call traces (and runs eagerly)
    const TensorList results = compiled(on_gpu);  // this one runs the program's kernels
    EXPECT_EQ(compiled.stats().traces, 1);
    EXPECT_GT(compiled.stats().last.fused_kernels, 0u);
    const TensorList expected = fused_step(inputs);
    ASSERT_EQ(results.size(), expected.size());
    for (size_t k = 0; k < results.size(); ++k) {
      EXPECT_LE(relative_difference(results[k], expected[k]), 10 * tolerance(dtype)) << "output " << k;
    }
  }
}

TEST(CudaModules, AModuleMovedToTheGpuComputesAsOnTheCpuAndStillTrains) {
  EDDY_SKIP_WITHOUT_GPU();
  Generator g(6);
  nn::Sequential net(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(2, 16, g, DType::f64), std::make_shared<nn::Activation>(nn::ActivationKind::tanh),
      std::make_shared<nn::Linear>(16, 1, g, DType::f64)});
  const Tensor x = randn({50, 2}, DType::f64, &g);
  const Tensor on_cpu = net(x);
  const std::vector<Tensor> cpu_grads = grad({sum(square(on_cpu))}, net.parameters());
  net.to(Device::cuda(0));
  for (const Tensor& p : net.parameters()) {
    EXPECT_EQ(p.device(), Device::cuda(0));
    EXPECT_TRUE(p.requires_grad() && p.is_leaf());
  }
  const Tensor on_gpu = net(to(x, Device::cuda(0)));
  EXPECT_LE(relative_difference(on_gpu, on_cpu), 1e-12);
  const std::vector<Tensor> gpu_grads = grad({sum(square(on_gpu))}, net.parameters());
  for (size_t i = 0; i < gpu_grads.size(); ++i) EXPECT_LE(relative_difference(gpu_grads[i], cpu_grads[i]), 1e-12);
}

}  // namespace
}  // namespace eddy
