#include "eddy/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "eddy/core/error.h"

namespace eddy::optim {
namespace {

void check_rate(double value, const char* who, const char* what) {
  EDDY_CHECK(std::isfinite(value) && value >= 0, who, ": ", what, " must be finite and >= 0, got ",
             value);
}

void check_gamma(double gamma, const char* who) {
  EDDY_CHECK(std::isfinite(gamma) && gamma > 0, who, ": gamma must be finite and > 0, got ", gamma);
}

void check_step(int64_t step, const char* who) {
  EDDY_CHECK(step >= 0, who, ": step must be >= 0, got ", step);
}

}  // namespace

ConstantSchedule::ConstantSchedule(double value) : value_(value) {
  check_rate(value, "ConstantSchedule", "value");
}

double ConstantSchedule::learning_rate(int64_t step) const {
  check_step(step, "ConstantSchedule");
  return value_;
}

StepSchedule::StepSchedule(double initial, int64_t period, double gamma)
    : initial_(initial), period_(period), gamma_(gamma) {
  check_rate(initial, "StepSchedule", "initial");
  EDDY_CHECK(period >= 1, "StepSchedule: period must be >= 1, got ", period);
  check_gamma(gamma, "StepSchedule");
}

double StepSchedule::learning_rate(int64_t step) const {
  check_step(step, "StepSchedule");
  return initial_ * std::pow(gamma_, static_cast<double>(step / period_));
}

ExponentialSchedule::ExponentialSchedule(double initial, double gamma)
    : initial_(initial), gamma_(gamma) {
  check_rate(initial, "ExponentialSchedule", "initial");
  check_gamma(gamma, "ExponentialSchedule");
}

double ExponentialSchedule::learning_rate(int64_t step) const {
  check_step(step, "ExponentialSchedule");
  return initial_ * std::pow(gamma_, static_cast<double>(step));
}

CosineWithWarmupSchedule::CosineWithWarmupSchedule(double peak, int64_t warmup, int64_t total,
                                                   double floor)
    : peak_(peak), warmup_(warmup), total_(total), floor_(floor) {
  check_rate(peak, "CosineWithWarmupSchedule", "peak");
  check_rate(floor, "CosineWithWarmupSchedule", "floor");
  EDDY_CHECK(floor <= peak, "CosineWithWarmupSchedule: floor (", floor, ") exceeds peak (", peak,
             ")");
  EDDY_CHECK(warmup >= 0 && warmup < total, "CosineWithWarmupSchedule: need 0 <= warmup < total, "
             "got warmup ", warmup, ", total ", total);
}

double CosineWithWarmupSchedule::learning_rate(int64_t step) const {
  check_step(step, "CosineWithWarmupSchedule");
  if (step < warmup_) return peak_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  if (step >= total_) return floor_;
  const double q = static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_);
  return floor_ + (peak_ - floor_) * 0.5 * (1 + std::cos(std::numbers::pi * q));
}

PiecewiseSchedule::PiecewiseSchedule(std::vector<int64_t> boundaries, std::vector<double> values)
    : boundaries_(std::move(boundaries)), values_(std::move(values)) {
  EDDY_CHECK(values_.size() == boundaries_.size() + 1, "PiecewiseSchedule: ", boundaries_.size(),
             " boundaries need ", boundaries_.size() + 1, " values, got ", values_.size());
  for (size_t i = 0; i < boundaries_.size(); ++i) {
    EDDY_CHECK(boundaries_[i] >= 1, "PiecewiseSchedule: boundary ", i, " is ", boundaries_[i],
               "; boundaries must be >= 1");
    EDDY_CHECK(i == 0 || boundaries_[i] > boundaries_[i - 1], "PiecewiseSchedule: boundaries must "
               "be strictly increasing, but boundary ", i, " (", boundaries_[i],
               ") follows ", boundaries_[i - 1]);
  }
  for (double v : values_) check_rate(v, "PiecewiseSchedule", "every value");
}

double PiecewiseSchedule::learning_rate(int64_t step) const {
  check_step(step, "PiecewiseSchedule");
  const auto piece = std::upper_bound(boundaries_.begin(), boundaries_.end(), step);
  return values_[static_cast<size_t>(piece - boundaries_.begin())];
}

std::unique_ptr<Schedule> make_schedule(const ScheduleSpec& spec, double learning_rate, int64_t total_steps) {
  switch (spec.type) {
    case ScheduleType::exponential:
      return std::make_unique<ExponentialSchedule>(learning_rate, std::pow(spec.gamma, 1.0 / spec.every));
    case ScheduleType::step:
      return std::make_unique<StepSchedule>(learning_rate, spec.every, spec.gamma);
    case ScheduleType::cosine:
      return std::make_unique<CosineWithWarmupSchedule>(learning_rate, spec.warmup,
                                                        std::max<int64_t>(total_steps, 1), spec.floor);
    case ScheduleType::constant:
      break;
  }
  return std::make_unique<ConstantSchedule>(learning_rate);
}

}  // namespace eddy::optim
