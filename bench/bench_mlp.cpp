// The PINN hot path: one step of u, u_xx and the weight gradient for a tanh MLP
// (x, t) -> 3 hidden layers of 50 -> u on 10000 collocation points.

#include <cstdio>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "tanh_mlp.h"

namespace eddy_bench {
namespace {

// loss = mean(u_xx^2) + mean(u^2); returns d(loss)/d(parameters).
std::vector<eddy::Tensor> pinn_step(const TanhMlp& mlp, const eddy::Tensor& x,
                                    const eddy::Tensor& t) {
  const eddy::Tensor u = mlp(eddy::concat({x, t}, 1));
  const eddy::Tensor seed = eddy::ones_like(u);
  const eddy::Tensor u_x = eddy::grad({u}, {x}, {seed}, /*create_graph=*/true)[0];
  const eddy::Tensor u_xx = eddy::grad({u_x}, {x}, {seed}, /*create_graph=*/true)[0];
  const eddy::Tensor loss = eddy::mean(eddy::square(u_xx)) + eddy::mean(eddy::square(u));
  return eddy::grad({loss}, mlp.parameters());
}

// A network, its collocation points and one step, ready to time.
struct PinnProblem {
  explicit PinnProblem(eddy::DType dtype)
      : mlp({2, 50, 50, 50, 1}, dtype),
        x(eddy::rand({kPinnPoints, 1}, dtype).requires_grad_()),
        t(eddy::rand({kPinnPoints, 1}, dtype).requires_grad_()) {}
  void step() const { benchmark::DoNotOptimize(pinn_step(mlp, x, t)); }

  TanhMlp mlp;
  eddy::Tensor x, t;
};

void register_pinn_step(eddy::DType dtype, int threads) {
  const std::string name = "pinn_step/" + std::string(eddy::dtype_name(dtype)) +
                           "/mlp_2-50-50-50-1/points:" + std::to_string(kPinnPoints) +
                           "/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(name.c_str(), [dtype, threads](benchmark::State& state) {
    set_threads(threads);
    const PinnProblem problem(dtype);
    // A step takes long enough that the run may be one iteration: warm the allocator first.
    problem.step();
    for (auto _ : state) problem.step();
    state.counters["points"] =
        benchmark::Counter(static_cast<double>(kPinnPoints) * state.iterations(),
                           benchmark::Counter::kIsRate);
  })
      ->MinTime(kMinTime)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

void register_mlp_benchmarks() {
  for (eddy::DType dtype : {eddy::DType::f32, eddy::DType::f64}) {
    for (int threads : kThreadCounts) register_pinn_step(dtype, threads);
  }
}

void print_pinn_table() {
  std::printf("\n| dtype | threads | ms per step | points/s |\n");
  std::printf("|---|---|---|---|\n");
  for (eddy::DType dtype : {eddy::DType::f32, eddy::DType::f64}) {
    const PinnProblem problem(dtype);
    problem.step();  // warms the allocator
    // Both thread counts in one interleaved timing, so load from other tenants hits both alike.
    std::vector<std::function<void()>> runs;
    for (int threads : kThreadCounts) {
      runs.push_back([&problem, threads] {
        set_threads(threads);
        problem.step();
      });
    }
    const std::vector<double> seconds = interleaved_median_seconds(runs, 0.2);
    const std::string dtype_name(eddy::dtype_name(dtype));
    for (size_t i = 0; i < kThreadCounts.size(); ++i) {
      std::printf("| %s | %d | %.1f | %.0f k |\n", dtype_name.c_str(), kThreadCounts[i], seconds[i] * 1e3,
                  static_cast<double>(kPinnPoints) / seconds[i] / 1e3);
      std::fflush(stdout);
    }
  }
}

}  // namespace eddy_bench
