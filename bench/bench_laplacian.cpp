// The PINN Laplacian workload, by Taylor mode against nested reverse mode: u and laplacian(u) of
// a tanh MLP 3 -> 4 hidden layers of 64 -> 1 on 10000 float32 points, on one thread, forward
// only and with the weight gradient of mean(laplacian^2) + mean(u^2); each eagerly and as one
// compiled (fused) function.

#include <cstdio>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "eddy/compiler/compile.h"
#include "eddy/compiler/taylor.h"
#include "tanh_mlp.h"

namespace eddy_bench {
namespace {

constexpr int64_t kDimensions = 3;

enum class Method { nested_reverse, taylor };
enum class Workload { forward, weight_gradient };

const char* method_name(Method method) { return method == Method::taylor ? "taylor" : "nested_reverse"; }
const char* workload_name(Workload workload) {
  return workload == Workload::weight_gradient ? "laplacian_and_weight_gradient" : "laplacian_forward";
}

// The network, its points and both ways to the Laplacian, ready to time.
class LaplacianProblem {
 public:
  LaplacianProblem()
      : mlp_({kDimensions, 64, 64, 64, 64, 1}, eddy::DType::f32),
        x_(eddy::rand({kPinnPoints, kDimensions}, eddy::DType::f32)),
        taylor_([this](const eddy::Tensor& x) { return mlp_(x); }, eddy::TaylorOptions{{}, true, {}}) {
    for (Method method : {Method::nested_reverse, Method::taylor}) {
      for (Workload workload : {Workload::forward, Workload::weight_gradient}) {
        compiled_.push_back(eddy::compile(
            [this, method, workload](const std::vector<eddy::Tensor>& in) { return step(method, workload, in[0]); }));
      }
    }
  }

  void run(Method method, Workload workload, bool compiled) {
    if (compiled) {
      benchmark::DoNotOptimize(compiled_[2 * static_cast<size_t>(method) + static_cast<size_t>(workload)]({x_}));
    } else {
      benchmark::DoNotOptimize(step(method, workload, x_));
    }
  }

 private:
  // (u, laplacian(u)) in one forward pass over the traced network.
  std::vector<eddy::Tensor> taylor(const eddy::Tensor& x) {
    eddy::TaylorJets jets = taylor_(x);
    return {jets.value, jets.laplacian};
  }

  // (u, laplacian(u)) by reverse over reverse: one backward pass for grad u, one per coordinate
  // for its divergence. create_graph keeps the last passes differentiable for the weight gradient.
  std::vector<eddy::Tensor> nested_reverse(const eddy::Tensor& points, bool create_graph) const {
    const eddy::Tensor x = points.detach().requires_grad_();
    const eddy::Tensor u = mlp_(x);
    const eddy::Tensor gradient = eddy::grad({u}, {x}, {eddy::ones_like(u)}, true)[0];
    eddy::Tensor laplacian;
    for (int64_t i = 0; i < kDimensions; ++i) {
      const eddy::Tensor u_i = eddy::slice(gradient, 1, i, i + 1);
      const eddy::Tensor u_ii =
          eddy::slice(eddy::grad({u_i}, {x}, {eddy::ones_like(u_i)}, create_graph)[0], 1, i, i + 1);
      laplacian = laplacian.defined() ? laplacian + u_ii : u_ii;
    }
    return {u, laplacian};
  }

  std::vector<eddy::Tensor> step(Method method, Workload workload, const eddy::Tensor& x) {
    if (workload == Workload::weight_gradient) {
      const std::vector<eddy::Tensor> u_and_laplacian = method == Method::taylor ? taylor(x) : nested_reverse(x, true);
      const eddy::Tensor loss = eddy::mean(eddy::square(u_and_laplacian[1])) + eddy::mean(eddy::square(u_and_laplacian[0]));
      return eddy::grad({loss}, mlp_.parameters());
    }
    if (method == Method::nested_reverse) return nested_reverse(x, false);
    // Forward only: nothing records the reverse graph.
    eddy::NoGradGuard no_grad;
    return taylor(x);
  }

  TanhMlp mlp_;
  eddy::Tensor x_;
  eddy::TaylorOperator taylor_;
  std::vector<eddy::CompiledFunction> compiled_;  // by method, then workload
};

void register_laplacian(Method method, Workload workload, bool compiled) {
  const std::string name = std::string("laplacian_taylor_vs_nested_reverse/") + workload_name(workload) + "/" +
                           method_name(method) + (compiled ? "/compiled" : "/eager") +
                           "/f32/mlp_3-64x4-1/points:" + std::to_string(kPinnPoints) + "/threads:1";
  benchmark::RegisterBenchmark(name.c_str(), [method, workload, compiled](benchmark::State& state) {
    set_threads(1);
    LaplacianProblem problem;
    problem.run(method, workload, compiled);  // traces (and compiles) once, warms the allocator
    for (auto _ : state) problem.run(method, workload, compiled);
  })
      ->MinTime(kMinTime)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

void register_laplacian_benchmarks() {
  for (Workload workload : {Workload::forward, Workload::weight_gradient}) {
    for (bool compiled : {false, true}) {
      for (Method method : {Method::taylor, Method::nested_reverse}) register_laplacian(method, workload, compiled);
    }
  }
}

void print_laplacian_table() {
  set_threads(1);
  LaplacianProblem problem;
  std::printf("\n| laplacian, f32, 3 -> 64x4 -> 1 tanh, %lld points, 1 thread | nested reverse ms | Taylor ms | "
              "speed-up | compiled: nested reverse ms | Taylor ms | speed-up |\n",
              static_cast<long long>(kPinnPoints));
  std::printf("|---|---|---|---|---|---|---|\n");
  for (Workload workload : {Workload::forward, Workload::weight_gradient}) {
    std::vector<std::function<void()>> runs;
    for (bool compiled : {false, true}) {
      for (Method method : {Method::nested_reverse, Method::taylor}) {
        runs.push_back([&problem, method, workload, compiled] { problem.run(method, workload, compiled); });
        runs.back()();  // traces and compiles outside the timing
      }
    }
    // Interleaved, so load from other tenants hits all alike; thread CPU time for the same reason.
    const std::vector<double> s = interleaved_median_seconds(runs, 0.2, 9, Timing::thread_cpu);
    std::printf("| %s | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx |\n", workload_name(workload), s[0] * 1e3, s[1] * 1e3,
                s[0] / s[1], s[2] * 1e3, s[3] * 1e3, s[2] / s[3]);
    std::fflush(stdout);
  }
}

}  // namespace eddy_bench
