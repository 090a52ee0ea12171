#include "solvers/common/thread_tuner.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "eddy/backends/backend.h"

namespace eddy::solvers {
namespace {
// The first steps compile kernels and fault pages in; probes start after them.
constexpr int64_t kWarmupSteps = 10;
// Steps timed per count in a probe; their median is compared, so a validation step or another
// slow one does not decide.
constexpr size_t kProbeSteps = 7;
// Steps between probes: a probe at a slower count then costs a few percent at most.
constexpr int64_t kProbeEvery = 200;
// A count replaces the current one only when this much faster, so noise does not flip it.
constexpr double kGain = 0.97;

bool adapting_allowed() {
  const char* setting = std::getenv("EDDY_ADAPT_THREADS");
  return !(setting && std::strcmp(setting, "0") == 0);
}
}  // namespace

ThreadTuner::ThreadTuner()
    : max_threads_(num_threads()),
      threads_(max_threads_),
      enabled_(max_threads_ > 1 && adapting_allowed()),
      thread_dependent_runs_(thread_dependent_kernel_runs()) {}

ThreadTuner::~ThreadTuner() {
  if (enabled_) set_num_threads(max_threads_);
}

std::vector<int> ThreadTuner::neighbours() const {
  std::vector<int> counts;
  if (threads_ > 1) counts.push_back(threads_ / 2);
  if (threads_ < max_threads_) counts.push_back(std::min(max_threads_, threads_ * 2));
  return counts;
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
  if (trials_.empty()) {
    settled_.push_back(seconds);
    if (settled_.size() > kProbeSteps) settled_.erase(settled_.begin());
    const bool probe_due = steps_ == kWarmupSteps + static_cast<int64_t>(kProbeSteps) ||
                           (steps_ - kWarmupSteps) % kProbeEvery == 0;
    if (probe_due && settled_.size() == kProbeSteps) {
      trials_ = neighbours();
      best_seconds_ = median(settled_);
      best_threads_ = threads_;
      use(trials_.front());
    }
    return "";
  }
  trial_times_.push_back(seconds);
  if (trial_times_.size() < kProbeSteps) return "";
  const double trial = median(trial_times_);
  if (trial < kGain * best_seconds_) {
    best_seconds_ = trial;
    best_threads_ = trials_.front();
  }
  trial_times_.clear();
  trials_.erase(trials_.begin());
  if (!trials_.empty()) {
    use(trials_.front());
    return "";
  }
  const int before = threads_;
  const double before_seconds = median(settled_);
  threads_ = best_threads_;
  use(threads_);
  settled_.clear();
  if (threads_ == before) return "";
  char note[160];
  std::snprintf(note, sizeof(note), "threads: %d -> %d (a step took %.3g ms on %d, %.3g ms on %d)", before, threads_,
                before_seconds * 1e3, before, best_seconds_ * 1e3, threads_);
  return note;
}

}  // namespace eddy::solvers
