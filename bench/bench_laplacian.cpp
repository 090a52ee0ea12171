// The PINN Laplacian workload, by Taylor mode against nested reverse mode: u and laplacian(u) of
// a tanh MLP 3 -> 4 hidden layers of 64 -> 1 on 10000 float32 points, on one thread, forward
// only and with the weight gradient of mean(laplacian^2) + mean(u^2).

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "eddy/compiler/taylor.h"
#include "tanh_mlp.h"

namespace eddy_bench {
namespace {

constexpr int64_t kDimensions = 3;

// The network, its points and both ways to the Laplacian, ready to time.
class LaplacianProblem {
 public:
  LaplacianProblem()
      : mlp_({kDimensions, 64, 64, 64, 64, 1}, eddy::DType::f32),
        x_(eddy::rand({kPinnPoints, kDimensions}, eddy::DType::f32)),
        taylor_([this](const eddy::Tensor& x) { return mlp_(x); }, eddy::TaylorOptions{{}, true, {}}) {}

  // (u, laplacian(u)) in one forward pass over the traced network.
  std::pair<eddy::Tensor, eddy::Tensor> taylor() {
    eddy::TaylorJets jets = taylor_(x_);
    return {jets.value, jets.laplacian};
  }

  // (u, laplacian(u)) by reverse over reverse: one backward pass for grad u, one per coordinate
  // for its divergence. create_graph keeps the last passes differentiable for the weight gradient.
  std::pair<eddy::Tensor, eddy::Tensor> nested_reverse(bool create_graph) const {
    const eddy::Tensor x = x_.detach().requires_grad_();
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

  std::vector<eddy::Tensor> weight_gradient(const std::pair<eddy::Tensor, eddy::Tensor>& u_and_laplacian) const {
    const auto& [u, laplacian] = u_and_laplacian;
    const eddy::Tensor loss = eddy::mean(eddy::square(laplacian)) + eddy::mean(eddy::square(u));
    return eddy::grad({loss}, mlp_.parameters());
  }

  void run(bool taylor_mode, bool with_weight_gradient) {
    if (with_weight_gradient) {
      benchmark::DoNotOptimize(weight_gradient(taylor_mode ? taylor() : nested_reverse(true)));
    } else if (taylor_mode) {
      // Forward only: nothing records the reverse graph.
      eddy::NoGradGuard no_grad;
      benchmark::DoNotOptimize(taylor());
    } else {
      benchmark::DoNotOptimize(nested_reverse(false));
    }
  }

 private:
  TanhMlp mlp_;
  eddy::Tensor x_;
  eddy::TaylorOperator taylor_;
};

std::string workload_name(bool with_weight_gradient) {
  return with_weight_gradient ? "laplacian_and_weight_gradient" : "laplacian_forward";
}

void register_laplacian(bool taylor_mode, bool with_weight_gradient) {
  const std::string name = "laplacian_taylor_vs_nested_reverse/" + workload_name(with_weight_gradient) + "/" +
                           (taylor_mode ? "taylor" : "nested_reverse") +
                           "/f32/mlp_3-64x4-1/points:" + std::to_string(kPinnPoints) + "/threads:1";
  benchmark::RegisterBenchmark(name.c_str(), [taylor_mode, with_weight_gradient](benchmark::State& state) {
    set_threads(1);
    LaplacianProblem problem;
    problem.run(taylor_mode, with_weight_gradient);  // traces once and warms the allocator
    for (auto _ : state) problem.run(taylor_mode, with_weight_gradient);
  })
      ->MinTime(kMinTime)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

void register_laplacian_benchmarks() {
  for (bool with_weight_gradient : {false, true}) {
    for (bool taylor_mode : {true, false}) register_laplacian(taylor_mode, with_weight_gradient);
  }
}

void print_laplacian_table() {
  set_threads(1);
  LaplacianProblem problem;
  std::printf("\n| laplacian, f32, 3 -> 64x4 -> 1 tanh, %lld points, 1 thread | nested reverse ms | Taylor ms | "
              "speed-up |\n",
              static_cast<long long>(kPinnPoints));
  std::printf("|---|---|---|---|\n");
  for (bool with_weight_gradient : {false, true}) {
    // Interleaved, so load from other tenants hits both alike; thread CPU time for the same reason.
    const std::vector<double> seconds = interleaved_median_seconds(
        {[&] { problem.run(false, with_weight_gradient); }, [&] { problem.run(true, with_weight_gradient); }}, 0.2,
        9, Timing::thread_cpu);
    std::printf("| %s | %.1f | %.1f | %.2fx |\n", workload_name(with_weight_gradient).c_str(), seconds[0] * 1e3,
                seconds[1] * 1e3, seconds[0] / seconds[1]);
    std::fflush(stdout);
  }
}

}  // namespace eddy_bench
