// Elementwise ops and reductions at the PINN activation shapes (10000 x w, f32), with a
// single-threaded Eigen loop over the same buffers as the peer. Reported as memory bandwidth.

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include "eddy/backends/cpu/eigen_core.h"

#include "bench_util.h"

namespace eddy_bench {
namespace {

using Array = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowArray = Eigen::Array<float, 1, Eigen::Dynamic>;

struct Activations {
  explicit Activations(int64_t width)
      : rows(kPinnPoints),
        cols(width),
        x(eddy::randn({rows, cols})),
        y(eddy::randn({rows, cols})),
        bias(eddy::randn({cols})),
        out(eddy::zeros({rows, cols})),
        out_row(eddy::zeros({cols})) {}

  Eigen::Map<const Array> x_map() const { return {x.data<float>(), rows, cols}; }
  Eigen::Map<const Array> y_map() const { return {y.data<float>(), rows, cols}; }
  Eigen::Map<const RowArray> bias_map() const { return {bias.data<float>(), cols}; }
  Eigen::Map<Array> out_map() const { return {out.data<float>(), rows, cols}; }
  Eigen::Map<RowArray> out_row_map() const { return {out_row.data<float>(), cols}; }

  int64_t rows, cols;
  eddy::Tensor x, y, bias;
  eddy::Tensor out, out_row;  // where the Eigen peer writes
};

struct ElementwiseCase {
  std::string name;
  // Elements read plus written, for a (rows x cols) input.
  std::function<double(double rows, double cols)> elements_moved;
  std::function<eddy::Tensor(const Activations&)> eddy_op;
  std::function<void(const Activations&)> eigen_op;
};

std::vector<ElementwiseCase> elementwise_cases() {
  return {
      {"add_bias", [](double r, double c) { return 2 * r * c + c; },
       [](const Activations& a) { return a.x + a.bias; },
       [](const Activations& a) { a.out_map() = a.x_map().rowwise() + a.bias_map(); }},
      {"mul", [](double r, double c) { return 3 * r * c; },
       [](const Activations& a) { return a.x * a.y; },
       [](const Activations& a) { a.out_map() = a.x_map() * a.y_map(); }},
      {"tanh", [](double r, double c) { return 2 * r * c; },
       [](const Activations& a) { return eddy::tanh(a.x); },
       [](const Activations& a) { a.out_map() = a.x_map().tanh(); }},
      {"exp", [](double r, double c) { return 2 * r * c; },
       [](const Activations& a) { return eddy::exp(a.x); },
       [](const Activations& a) { a.out_map() = a.x_map().exp(); }},
      {"sum_axis0", [](double r, double c) { return r * c + c; },
       [](const Activations& a) { return eddy::sum(a.x, {0}); },
       [](const Activations& a) { a.out_row_map() = a.x_map().colwise().sum(); }},
      {"sum_all", [](double r, double c) { return r * c; },
       [](const Activations& a) { return eddy::sum(a.x); },
       [](const Activations& a) { benchmark::DoNotOptimize(a.x_map().sum()); }},
  };
}

void register_case(const ElementwiseCase& op, int64_t width, int threads, bool eigen_peer) {
  const std::string name = "elementwise/" + op.name + "/" + std::to_string(kPinnPoints) + "x" +
                           std::to_string(width) + "/threads:" + std::to_string(threads) + "/" +
                           (eigen_peer ? "eigen" : "eddy");
  benchmark::RegisterBenchmark(name.c_str(), [op, width, threads,
                                              eigen_peer](benchmark::State& state) {
    set_threads(threads);
    const Activations activations(width);
    for (auto _ : state) {
      if (eigen_peer) {
        op.eigen_op(activations);
      } else {
        benchmark::DoNotOptimize(op.eddy_op(activations));
      }
      benchmark::ClobberMemory();
    }
    const double bytes = op.elements_moved(kPinnPoints, width) * sizeof(float);
    state.counters["bytes"] = benchmark::Counter(bytes * state.iterations(),
                                                 benchmark::Counter::kIsRate);
  })
      ->MinTime(kMinTime)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace

void register_elementwise_benchmarks() {
  for (const ElementwiseCase& op : elementwise_cases()) {
    for (int64_t width : kPinnWidths) {
      for (int threads : kThreadCounts) register_case(op, width, threads, false);
      // Eigen does not thread elementwise work, so one run of it is the whole peer.
      register_case(op, width, 1, true);
    }
  }
}

void print_elementwise_table() {
  std::printf("\n| op | shape | threads | eddy GB/s | Eigen GB/s (1 thread) | eddy/Eigen |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const ElementwiseCase& op : elementwise_cases()) {
    for (int64_t width : kPinnWidths) {
      const Activations activations(width);
      const double bytes = op.elements_moved(kPinnPoints, width) * sizeof(float);
      for (int threads : kThreadCounts) {
        set_threads(threads);
        const std::vector<double> seconds = interleaved_median_seconds(
            {[&] { op.eigen_op(activations); }, [&] { benchmark::DoNotOptimize(op.eddy_op(activations)); }});
        const double eigen_gbs = bytes / seconds[0] / 1e9, eddy_gbs = bytes / seconds[1] / 1e9;
        std::printf("| %s | %lldx%lld | %d | %.1f | %.1f | %.2f |\n", op.name.c_str(),
                    static_cast<long long>(kPinnPoints), static_cast<long long>(width), threads, eddy_gbs,
                    eigen_gbs, eddy_gbs / eigen_gbs);
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace eddy_bench
