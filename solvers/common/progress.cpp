#include "solvers/common/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace eddy::solvers {

using Clock = std::chrono::steady_clock;

Pace pace(int64_t first_step, int64_t step, int64_t total, double elapsed_seconds) {
  Pace p;
  p.steps_per_second = static_cast<double>(step - first_step) / std::max(elapsed_seconds, 1e-9);
  if (total > step && p.steps_per_second > 0) p.eta_seconds = static_cast<double>(total - step) / p.steps_per_second;
  return p;
}

ProgressLine::ProgressLine(std::ostream* log, bool terminal, int64_t log_every, std::ostream* warnings)
    : log_(log), warnings_(warnings), terminal_(terminal), log_every_(log_every), start_(Clock::now()) {}

bool ProgressLine::due(int64_t step, bool force) {
  if (!log_) return false;
  if (force || (log_every_ > 0 && (step - origin_) % log_every_ == 0)) return true;
  return terminal_ && std::chrono::duration<double>(Clock::now() - start_).count() - last_draw_ > 0.2;
}

void ProgressLine::show(const std::string& phase, int64_t step, int64_t total, const std::string& details,
                        bool force) {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  last_draw_ = elapsed;
  const Pace measured = pace(first_step_, step, total, elapsed);
  const double rate = measured.steps_per_second;
  std::string line;
  if (terminal_ && total > 0) {
    const int filled = static_cast<int>(20.0 * step / total);
    line += "\r[" + std::string(filled, '#') + std::string(20 - filled, '-') + "] ";
  }
  // Slow steps (operator epochs) read better as seconds per step.
  char rate_text[32];
  if (rate >= 10) {
    std::snprintf(rate_text, sizeof(rate_text), "%.0f it/s", rate);
  } else if (rate >= 1 || rate == 0) {
    std::snprintf(rate_text, sizeof(rate_text), "%.1f it/s", rate);
  } else {
    std::snprintf(rate_text, sizeof(rate_text), "%.1f s/it", 1 / rate);
  }
  line += phase + " " + std::to_string(step) + "/" + std::to_string(total) + "  " + details + "  " + rate_text;
  if (total > step && rate > 0) line += "  eta " + std::to_string(static_cast<int64_t>(measured.eta_seconds)) + "s";
  redrawing_ = terminal_ && !force;
  *log_ << line << (redrawing_ ? "" : "\n") << std::flush;
}

void ProgressLine::finish_line() {
  if (log_ && terminal_) *log_ << "\n";
  redrawing_ = false;
}

void ProgressLine::note(const std::string& text) {
  if (!log_) return;
  *log_ << (redrawing_ ? "\n" : "") << text << "\n" << std::flush;
  redrawing_ = false;
}

void ProgressLine::warn(const std::string& text) {
  if (log_ && redrawing_) *log_ << "\n" << std::flush;
  redrawing_ = false;
  if (warnings_) *warnings_ << "warning: " << text << "\n" << std::flush;
}

void ProgressLine::begin_phase(int64_t first_step) {
  start_ = Clock::now();
  first_step_ = first_step;
  last_draw_ = -1;
}

std::string ProgressLine::format(double value) {
  if (std::isnan(value)) return "NaN";  // "-nan" where the sign bit was set, as loss_text says
  char text[32];
  std::snprintf(text, sizeof(text), "%.3e", value);
  return text;
}

}  // namespace eddy::solvers
