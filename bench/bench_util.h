#pragma once
// Shapes and settings shared by the benchmark files.

#include <array>
#include <cstdint>

#include <Eigen/Core>

#include "eddy/eddy.h"

namespace eddy_bench {

// A PINN collocation batch and the hidden widths PINN MLPs typically use.
inline constexpr int64_t kPinnPoints = 10000;
inline constexpr std::array<int64_t, 3> kPinnWidths = {20, 50, 128};
inline constexpr std::array<int, 2> kThreadCounts = {1, 2};
// Seconds per benchmark: keeps the whole suite to a few minutes on a 2-core machine.
inline constexpr double kMinTime = 0.2;

// eddy's kernels, OpenBLAS and Eigen's own GEMM all get the same thread count.
inline void set_threads(int threads) {
  eddy::set_num_threads(threads);
  Eigen::setNbThreads(threads);
}

void register_gemm_benchmarks();
void register_elementwise_benchmarks();
void register_mlp_benchmarks();
// Times eddy::matmul against cblas_?gemm interleaved in this process and prints a markdown table.
void print_gemm_table();

}  // namespace eddy_bench
