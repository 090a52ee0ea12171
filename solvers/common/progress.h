#pragma once
// The progress line every training command shows: on a terminal a bar redrawn in place at most
// five times a second, elsewhere (logs, pipes) one plain line every `log_every` steps.

#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace eddy::solvers {

// How fast a phase goes and when it ends, from the steps this process took in it: a resumed run
// starts its phase at the checkpoint's step, and counting from 0 would credit it with the steps
// before the checkpoint.
struct Pace {
  double steps_per_second = 0;
  double eta_seconds = 0;  // for the steps left to `total`; 0 when none are left or none were taken
};
Pace pace(int64_t first_step, int64_t step, int64_t total, double elapsed_seconds);

class ProgressLine {
 public:
  // log null: silent. log_every 0: plain output only on forced reports. `warnings` receives warn()'s
  // lines (null: nowhere).
  ProgressLine(std::ostream* log, bool terminal, int64_t log_every, std::ostream* warnings);

  // "[bar] phase step/total  <details>  rate it/s  eta"; `force` prints regardless of timing.
  // `details` is built only when the line is shown.
  template <typename Details>
  void report(const std::string& phase, int64_t step, int64_t total, Details&& details, bool force) {
    if (due(step, force)) show(phase, step, total, details(), force);
  }
  // Ends a line a terminal was redrawing.
  void finish_line();
  // A line of its own about the run (what was compiled, say), below a bar being redrawn.
  void note(const std::string& text);
  // "warning: TEXT" on the warnings stream, also when the line is silent (--quiet): for what a user
  // must not miss, such as a run folder about to be written over.
  void warn(const std::string& text);
  // Rates and ETAs count from here and from `first_step` (one phase: Adam, L-BFGS, an epoch loop;
  // a resumed one starts at its checkpoint's step).
  void begin_phase(int64_t first_step = 0);
  // The log_every cadence counts steps from `origin` (a training stage's first step), so that the
  // lines fall where the solver's records do.
  void count_from(int64_t origin) { origin_ = origin; }
  // %.3e, the format of every loss and error on the line.
  static std::string format(double value);

 private:
  bool due(int64_t step, bool force);
  void show(const std::string& phase, int64_t step, int64_t total, const std::string& details, bool force);

  std::ostream* log_;
  std::ostream* warnings_;
  bool terminal_;
  int64_t log_every_;
  std::chrono::steady_clock::time_point start_;
  int64_t first_step_ = 0;
  int64_t origin_ = 0;
  double last_draw_ = -1;
  bool redrawing_ = false;  // the cursor is at the end of a bar that will be redrawn in place
};

// The warning callback of a step every rank runs alike (a compiled step falling back to eager):
// `progress`'s warn on rank 0, nothing elsewhere, so that a job prints it once.
inline std::function<void(const std::string&)> rank_0_warnings(ProgressLine& progress, bool rank_0) {
  return [&progress, rank_0](const std::string& line) {
    if (rank_0) progress.warn(line);
  };
}

}  // namespace eddy::solvers
