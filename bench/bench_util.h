#pragma once
// Shapes and settings shared by the benchmark files.

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <cstdint>
#include <functional>
#include <vector>

#include "eddy/backends/cpu/eigen_core.h"

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

// What a timing counts. Wall time is what a user waits; the calling thread's CPU time leaves out
// the time other jobs on a shared machine hold the core, which is the fairer measure of
// single-threaded work there (it would miss the work of other threads, so only for 1 thread).
enum class Timing { wall, thread_cpu };

inline double now_seconds(Timing timing) {
  if (timing == Timing::wall) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Seconds per call of each of `runs` in each of `repetitions` rounds, in which every run times one
// batch in turn: interleaving makes drift on a shared machine hit all runs alike. A batch is as
// many calls as runs[0] (the reference) needs to fill `batch_seconds`. Result: [run][round].
inline std::vector<std::vector<double>> interleaved_round_seconds(const std::vector<std::function<void()>>& runs,
                                                                  double batch_seconds, int repetitions,
                                                                  Timing timing) {
  auto batch = [timing](const std::function<void()>& run, int calls) {
    const double start = now_seconds(timing);
    for (int i = 0; i < calls; ++i) run();
    return (now_seconds(timing) - start) / calls;
  };
  int calls = 1;
  while (batch(runs[0], calls) * calls < batch_seconds) calls *= 2;
  std::vector<std::vector<double>> times(runs.size());
  for (int r = 0; r < repetitions; ++r) {
    for (size_t i = 0; i < runs.size(); ++i) times[i].push_back(batch(runs[i], calls));
  }
  return times;
}

inline double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

// Median seconds per call of each of `runs`, timed in interleaved rounds.
inline std::vector<double> interleaved_median_seconds(const std::vector<std::function<void()>>& runs,
                                                      double batch_seconds = 0.02, int repetitions = 9,
                                                      Timing timing = Timing::wall) {
  std::vector<double> medians;
  for (const std::vector<double>& run_times : interleaved_round_seconds(runs, batch_seconds, repetitions, timing)) {
    medians.push_back(median(run_times));
  }
  return medians;
}

// The median over interleaved rounds of candidate time / reference time within the round. Each
// ratio compares two batches timed back to back, so drift that lasts longer than a round (another
// job starting, the clock changing) cancels in it, where it can skew a ratio of two medians.
inline double median_ratio(const std::vector<double>& candidate_rounds, const std::vector<double>& reference_rounds) {
  std::vector<double> ratios;
  for (size_t r = 0; r < candidate_rounds.size(); ++r) ratios.push_back(candidate_rounds[r] / reference_rounds[r]);
  return median(ratios);
}

void register_gemm_benchmarks();
void register_elementwise_benchmarks();
void register_mlp_benchmarks();
void register_laplacian_benchmarks();
void register_fft_benchmarks();
// Times eddy::matmul against cblas_?gemm interleaved in this process and prints a markdown table.
void print_gemm_table();
// Times eddy's elementwise ops and reductions against Eigen, interleaved, and prints a markdown table.
void print_elementwise_table();
// Times the PINN step at each thread count, interleaved, and prints a markdown table.
void print_pinn_table();
// Times the PINN Laplacian by Taylor mode and by nested reverse mode, interleaved, on one thread,
// and prints a markdown table with the speed-up.
void print_laplacian_table();
// Times eddy's 2-D FFTs against FFTW's own plans, interleaved in this process, and prints a
// markdown table.
void print_fft_table();
// Times an FNO layer, its spectral_conv and the transforms that runs, interleaved, and prints a
// markdown table.
void print_fno_table();

}  // namespace eddy_bench
