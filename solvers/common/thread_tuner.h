#pragma once
// The number of threads a training run steps with, chosen by timing steps as it trains.
//
// On a machine where another program holds a core, the thread that shares that core gets a part
// of its time slices, and at every parallel region the other threads wait for it: a Burgers step
// on two threads could then be slower than on one (docs/benchmarks.md, "A busy machine"). The
// tuner times steps at the current count and its neighbours (half and double, within 1 to the
// threads eddy was given) from time to time, and keeps the fewest threads that no larger count
// clearly beats. The counts take turns step by step within a probe, so a slow stretch of a shared
// machine lands on all of them alike instead of deciding for one. Ties go to fewer threads: a
// thread that does not pay for itself only adds risk on a busy machine. A probe's steps at a
// losing count are its cost, so a probe ends early when one count clearly wins, and probes come
// less often while they keep confirming the count (a change is checked again soon).
//
// The count changes only the speed: eddy's own kernels give the same results at every thread
// count (backends/cpu/loops.h). A step that runs one whose results depend on it (a large GEMM on
// OpenBLAS's threads, a multi-threaded FFTW plan: thread_dependent_kernel_runs()) turns the tuner
// off for the rest of the run, back at the count it was given; a training step's kernels show in
// its first steps, which always run at that count. One that first runs later, in a validation
// every few hundred steps, has run once at the tuned count by then: that validation's figures can
// differ in their last bits from a run at a fixed count, while training goes on as it would.
//
// Timing is not the only guide: before each probe the tuner asks how many cores other programs
// leave free (cpu_load.h), runs on no more threads than that without timing anything, and probes
// only counts that fit. A core another program holds then costs no probe steps at the slower
// count, and the tuner comes back to more threads at the first probe after the core is freed.
//
// EDDY_ADAPT_THREADS=0 keeps the given count throughout (for measuring scaling).

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace eddy::solvers {

class ThreadTuner {
 public:
  // The cores other programs leave free, before each probe; nullopt: unknown, no limit.
  using FreeCores = std::function<std::optional<int>()>;

  // Tunes between 1 and the threads eddy has now (num_threads()), which it restores at the end.
  // `free_cores`: by default this machine's (OtherProgramsLoad).
  explicit ThreadTuner(FreeCores free_cores = {});
  ~ThreadTuner();
  ThreadTuner(const ThreadTuner&) = delete;
  ThreadTuner& operator=(const ThreadTuner&) = delete;

  // Around each step. end_step returns a note when the count just changed ("2 -> 1 threads ...").
  void begin_step();
  std::string end_step();

  int threads() const { return threads_; }

 private:
  // The counts a probe from `threads_` compares, ascending: it, half and double, within [1, room].
  std::vector<int> probe_counts(int room) const;
  // At a probe's time: fewer threads at once when other programs took cores, else the probe.
  std::string start_probe();
  std::vector<double> probe_medians() const;
  // Whether one count's median beats every other's by a wide margin (the probe can end early).
  bool one_clearly_fastest() const;
  // The probe's verdict; a note when the count changed.
  std::string settle();
  void use(int threads);
  static double median(std::vector<double> seconds);

  FreeCores free_cores_;
  int max_threads_;
  int threads_;
  bool enabled_;
  int64_t thread_dependent_runs_;  // thread_dependent_kernel_runs() when the tuner started
  std::chrono::steady_clock::time_point step_start_;
  int64_t steps_ = 0;                        // steps timed so far
  int64_t next_probe_;                       // the step after which the next probe starts
  int64_t probe_interval_;                   // steps from the end of one probe to the next
  std::vector<int> probed_;                  // the counts of the probe under way; empty between probes
  std::vector<std::vector<double>> timings_; // step times of each of probed_
  size_t probe_step_ = 0;                    // steps of the probe so far; the next runs at probed_[it % size]
};

}  // namespace eddy::solvers
