// GEMM: eddy::matmul against raw OpenBLAS and oneDNN (what eddy calls underneath: oneDNN for the
// large float32 products, OpenBLAS for the rest) and Eigen's own GEMM, on the same buffers, at
// square sizes, at the PINN layer shapes (10000 x w) @ (w x w), at their weight gradients'
// (w x 10000) @ (10000 x w), and at the language-model example's projections.

#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include <benchmark/benchmark.h>
#include <cblas.h>
#include <dnnl.h>
#include "eddy/backends/cpu/eigen_core.h"

#include "bench_util.h"

namespace eddy_bench {
namespace {

struct GemmShape {
  int64_t n, k, m;  // (n x k) @ (k x m)
  double flops() const { return 2.0 * n * k * m; }
  std::string label() const {
    char text[64];
    if (n == k && k == m) {
      std::snprintf(text, sizeof text, "%ld^3", static_cast<long>(n));
    } else {
      std::snprintf(text, sizeof text, "(%ldx%ld)@(%ldx%ld)", static_cast<long>(n),
                    static_cast<long>(k), static_cast<long>(k), static_cast<long>(m));
    }
    return text;
  }
};

std::vector<GemmShape> gemm_shapes() {
  std::vector<GemmShape> shapes;
  for (int64_t size : {64, 128, 256, 512, 1024}) shapes.push_back({size, size, size});
  for (int64_t width : kPinnWidths) shapes.push_back({kPinnPoints, width, width});
  // Their weight gradients, which sum over the points.
  for (int64_t width : kPinnWidths) shapes.push_back({width, kPinnPoints, width});
  // A PINN's input and output layers: an inner or output dimension of at most 4.
  shapes.push_back({kPinnPoints, 2, 20});
  shapes.push_back({kPinnPoints, 20, 1});
  // examples/lm/fortunes_gpt.yaml's projections over its 2048 tokens a step: q, k and v, the MLP
  // in and out, the output head.
  for (const auto& [k, m] : {std::pair<int64_t, int64_t>{320, 960}, {320, 1280}, {1280, 320}, {320, 4096}}) {
    shapes.push_back({2048, k, m});
  }
  return shapes;
}

enum class GemmImpl { eddy, openblas, onednn, eigen };
constexpr const char* impl_name(GemmImpl impl) {
  switch (impl) {
    case GemmImpl::eddy: return "eddy";
    case GemmImpl::openblas: return "openblas";
    case GemmImpl::onednn: return "onednn";
    case GemmImpl::eigen: return "eigen";
  }
  return "";
}

template <typename T>
constexpr bool has_onednn = std::is_same_v<T, float>;

template <typename T>
constexpr const char* type_name() {
  return std::is_same_v<T, float> ? "f32" : "f64";
}

// Operands live in eddy tensors so the peers read exactly the memory eddy reads.
template <typename T>
struct GemmOperands {
  explicit GemmOperands(const GemmShape& shape)
      : shape(shape),
        a(eddy::randn({shape.n, shape.k}, eddy::dtype_of<T>())),
        b(eddy::randn({shape.k, shape.m}, eddy::dtype_of<T>())),
        c(eddy::zeros({shape.n, shape.m}, eddy::dtype_of<T>())) {}

  // eddy allocates its result on every call, as a user's matmul does; the peers write into c.
  void run(GemmImpl impl) const {
    switch (impl) {
      case GemmImpl::eddy:
        benchmark::DoNotOptimize(eddy::matmul(a, b));
        break;
      case GemmImpl::openblas:
        openblas_gemm();
        break;
      case GemmImpl::onednn:
        onednn_gemm();
        break;
      case GemmImpl::eigen:
        eigen_gemm();
        break;
    }
    benchmark::ClobberMemory();
  }

  void openblas_gemm() const {
    const int64_t n = shape.n, k = shape.k, m = shape.m;
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, m, k, 1.0f, a.data<T>(), k,
                  b.data<T>(), m, 0.0f, c.data<T>(), m);
    } else {
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, m, k, 1.0, a.data<T>(), k,
                  b.data<T>(), m, 0.0, c.data<T>(), m);
    }
  }

  // float32 only: oneDNN has no float64 GEMM (has_onednn).
  void onednn_gemm() const {
    if constexpr (std::is_same_v<T, float>) {
      const int64_t n = shape.n, k = shape.k, m = shape.m;
      dnnl_sgemm('N', 'N', n, m, k, 1.0f, a.data<T>(), k, b.data<T>(), m, 0.0f, c.data<T>(), m);
    }
  }

  void eigen_gemm() const {
    using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const Matrix> a_map(a.data<T>(), shape.n, shape.k);
    Eigen::Map<const Matrix> b_map(b.data<T>(), shape.k, shape.m);
    Eigen::Map<Matrix> c_map(c.data<T>(), shape.n, shape.m);
    c_map.noalias() = a_map * b_map;
  }

  GemmShape shape;
  eddy::Tensor a, b, c;
};

template <typename T>
void register_gemm(const GemmShape& shape, int threads, GemmImpl impl) {
  const std::string name = std::string("gemm/") + type_name<T>() + "/" + shape.label() +
                           "/threads:" + std::to_string(threads) + "/" + impl_name(impl);
  benchmark::RegisterBenchmark(name.c_str(), [shape, threads, impl](benchmark::State& state) {
    set_threads(threads);
    GemmOperands<T> operands(shape);
    for (auto _ : state) operands.run(impl);
    state.counters["flops"] =
        benchmark::Counter(shape.flops() * state.iterations(), benchmark::Counter::kIsRate);
  })
      ->MinTime(kMinTime)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

template <typename T>
void register_gemm_cases() {
  for (const GemmShape& shape : gemm_shapes()) {
    for (int threads : kThreadCounts) {
      for (GemmImpl impl : {GemmImpl::eddy, GemmImpl::openblas, GemmImpl::onednn, GemmImpl::eigen}) {
        if (impl != GemmImpl::onednn || has_onednn<T>) register_gemm<T>(shape, threads, impl);
      }
    }
  }
}

template <typename T>
void print_gemm_rows() {
  for (const GemmShape& shape : gemm_shapes()) {
    for (int threads : kThreadCounts) {
      set_threads(threads);
      const GemmOperands<T> operands(shape);
      std::vector<std::function<void()>> sides = {[&] { operands.run(GemmImpl::openblas); },
                                                  [&] { operands.run(GemmImpl::eddy); }};
      if (has_onednn<T>) sides.push_back([&] { operands.run(GemmImpl::onednn); });
      const std::vector<double> seconds = interleaved_median_seconds(sides);
      const double openblas_gflops = shape.flops() / seconds[0] / 1e9;
      const double eddy_gflops = shape.flops() / seconds[1] / 1e9;
      char onednn[32] = "-";
      if (has_onednn<T>) std::snprintf(onednn, sizeof onednn, "%.1f", shape.flops() / seconds[2] / 1e9);
      std::printf("| %s %s | %d | %.1f | %.1f | %s | %.2f |\n", type_name<T>(), shape.label().c_str(), threads,
                  eddy_gflops, openblas_gflops, onednn, eddy_gflops / openblas_gflops);
    }
  }
}

}  // namespace

void register_gemm_benchmarks() {
  register_gemm_cases<float>();
  register_gemm_cases<double>();
}

void print_gemm_table() {
  std::printf("\n| case | threads | eddy GFLOP/s | OpenBLAS GFLOP/s | oneDNN GFLOP/s (none for float64) | "
              "eddy / OpenBLAS |\n");
  std::printf("|---|---|---|---|---|---|\n");
  print_gemm_rows<float>();
  print_gemm_rows<double>();
  std::fflush(stdout);
}

}  // namespace eddy_bench
