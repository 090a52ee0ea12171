#include "solvers/common/thread_tuner.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "eddy/backends/backend.h"
#include "solvers/common/cpu_load.h"

namespace eddy::solvers {
namespace {
// The first steps compile kernels and fault pages in; probes start after them.
constexpr int64_t kWarmupSteps = 10;
// Steps timed per count in a probe; their median is compared, so a validation step or another
// slow one does not decide.
constexpr size_t kProbeSteps = 7;
// A probe ends after this many steps per count when one count is faster than every other by
// kClearly: the steps at a count that loses that much are the probe's cost.
constexpr size_t kFewestProbeSteps = 3;
constexpr double kClearly = 1.25;
// Steps between probes. A change of count is checked again after kConfirmAfter steps, and each
// probe that keeps the count doubles the wait, up to kLongestProbeInterval: a probe at a slower
// count then costs a few percent at most, while a change made during a passing slow stretch of
// a shared machine (seen on a VM: both counts timed alike for a few dozen steps) is undone soon.
// While other programs hold the cores a larger count needs, a probe only reads the load.
constexpr int64_t kFirstProbeInterval = 200;
constexpr int64_t kLongestProbeInterval = 1600;
constexpr int64_t kConfirmAfter = 25;
// A larger count is kept only when its steps take at most this fraction of a smaller one's, so
// noise does not buy a thread.
constexpr double kGain = 0.97;

bool adapting_allowed() {
  const char* setting = std::getenv("EDDY_ADAPT_THREADS");
  return !(setting && std::strcmp(setting, "0") == 0);
}
}  // namespace

ThreadTuner::ThreadTuner(FreeCores free_cores)
    : free_cores_(std::move(free_cores)),
      max_threads_(num_threads()),
      threads_(max_threads_),
      enabled_(max_threads_ > 1 && adapting_allowed()),
      thread_dependent_runs_(thread_dependent_kernel_runs()),
      next_probe_(kWarmupSteps + 1),
      probe_interval_(kFirstProbeInterval / 2) {  // doubled by a first probe that keeps the count
  if (enabled_ && !free_cores_) {
    free_cores_ = [load = std::make_shared<OtherProgramsLoad>()] { return load->free_cores(); };
  }
}

ThreadTuner::~ThreadTuner() {
  if (enabled_) set_num_threads(max_threads_);
}

std::vector<int> ThreadTuner::probe_counts(int room) const {
  std::vector<int> counts;
  if (threads_ > 1) counts.push_back(threads_ / 2);
  counts.push_back(threads_);
  if (threads_ < room) counts.push_back(std::min(room, threads_ * 2));
  return counts;
}

std::string ThreadTuner::start_probe() {
  const std::optional<int> free = free_cores_();
  const int room = std::clamp(free.value_or(max_threads_), 1, max_threads_);
  if (threads_ > room) {
    const int before = threads_;
    threads_ = room;
    use(threads_);
    probe_interval_ = kConfirmAfter;
    next_probe_ = steps_ + probe_interval_;
    char note[120];
    std::snprintf(note, sizeof(note), "threads: %d -> %d (other programs leave %d core%s free)", before, threads_,
                  *free, *free == 1 ? "" : "s");
    return note;
  }
  probed_ = probe_counts(room);
  if (probed_.size() == 1) {  // nothing else fits: no probe
    probed_.clear();
    probe_interval_ = std::min(2 * probe_interval_, kLongestProbeInterval);
    next_probe_ = steps_ + probe_interval_;
    return "";
  }
  timings_.assign(probed_.size(), {});
  probe_step_ = 0;
  use(probed_.front());
  return "";
}

void ThreadTuner::use(int threads) {
  if (threads != num_threads()) set_num_threads(threads);
}

double ThreadTuner::median(std::vector<double> seconds) {
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

void ThreadTuner::begin_step() {
  if (!enabled_) return;
  step_start_ = std::chrono::steady_clock::now();
}

std::string ThreadTuner::end_step() {
  if (!enabled_) return "";
  if (thread_dependent_kernel_runs() != thread_dependent_runs_) {
    // This step ran a kernel whose bits depend on the count: changing it would change the results.
    enabled_ = false;
    use(max_threads_);
    return "";
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
  if (++steps_ <= kWarmupSteps) return "";
  if (probed_.empty()) return steps_ < next_probe_ ? "" : start_probe();
  timings_[probe_step_ % probed_.size()].push_back(seconds);
  ++probe_step_;
  const size_t rounds = probe_step_ / probed_.size();
  const bool round_done = probe_step_ % probed_.size() == 0;
  if (round_done && (rounds == kProbeSteps || (rounds >= kFewestProbeSteps && one_clearly_fastest()))) {
    return settle();
  }
  use(probed_[probe_step_ % probed_.size()]);
  return "";
}

std::vector<double> ThreadTuner::probe_medians() const {
  std::vector<double> medians;
  for (const std::vector<double>& times : timings_) medians.push_back(median(times));
  return medians;
}

bool ThreadTuner::one_clearly_fastest() const {
  const std::vector<double> medians = probe_medians();
  const double fastest = *std::min_element(medians.begin(), medians.end());
  return std::count_if(medians.begin(), medians.end(), [&](double m) { return m < kClearly * fastest; }) == 1;
}

std::string ThreadTuner::settle() {
  const std::vector<double> medians = probe_medians();
  size_t best = 0;  // probed_ ascends: a larger count must clearly beat the best smaller one
  for (size_t i = 1; i < probed_.size(); ++i) {
    if (medians[i] < kGain * medians[best]) best = i;
  }
  const int before = threads_;
  const double before_seconds = medians[std::find(probed_.begin(), probed_.end(), before) - probed_.begin()];
  threads_ = probed_[best];
  use(threads_);
  probed_.clear();
  probe_interval_ = threads_ == before ? std::min(2 * probe_interval_, kLongestProbeInterval) : kConfirmAfter;
  next_probe_ = steps_ + probe_interval_;
  if (threads_ == before) return "";
  char note[160];
  std::snprintf(note, sizeof(note), "threads: %d -> %d (a step took %.3g ms on %d, %.3g ms on %d)", before, threads_,
                before_seconds * 1e3, before, medians[best] * 1e3, threads_);
  return note;
}

}  // namespace eddy::solvers
