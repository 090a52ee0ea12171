#pragma once
/// @file
/// Learning-rate schedules: pure functions from a step index (0, 1, 2, ...) to a learning rate.
/// They hold no state and do not touch an optimiser; a training loop applies one with
///
///     optimizer.set_learning_rate(schedule.learning_rate(step));
///
/// before the step-th update. Constructors throw eddy::Error on bad arguments, and
/// learning_rate() throws on a negative step.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace eddy::optim {

class Schedule {
 public:
  virtual ~Schedule() = default;
  /// The learning rate for update number `step` (counted from 0).
  virtual double learning_rate(int64_t step) const = 0;
};

/// lr(step) = value.
class ConstantSchedule : public Schedule {
 public:
  explicit ConstantSchedule(double value);
  double learning_rate(int64_t step) const override;

 private:
  double value_;
};

/// lr(step) = initial * gamma^floor(step / period): multiplied by gamma every `period` steps.
/// Needs initial >= 0, gamma > 0, period >= 1.
class StepSchedule : public Schedule {
 public:
  StepSchedule(double initial, int64_t period, double gamma);
  double learning_rate(int64_t step) const override;

 private:
  double initial_;
  int64_t period_;
  double gamma_;
};

/// lr(step) = initial * gamma^step. Needs initial >= 0, gamma > 0.
class ExponentialSchedule : public Schedule {
 public:
  ExponentialSchedule(double initial, double gamma);
  double learning_rate(int64_t step) const override;

 private:
  double initial_;
  double gamma_;
};

/// Linear warmup, then a half cosine from `peak` down to `floor`, then `floor`:
///
///     step < warmup:                 peak * (step + 1) / warmup
///     warmup <= step < total:        floor + (peak - floor) * (1 + cos(pi * q)) / 2,
///                                    q = (step - warmup) / (total - warmup)
///     step >= total:                 floor
///
/// So the first update already has a non-zero rate, the rate reaches `peak` at step warmup - 1
/// and again (the cosine's start) at step warmup, and `floor` at step total. Needs
/// 0 <= floor <= peak, 0 <= warmup < total.
class CosineWithWarmupSchedule : public Schedule {
 public:
  CosineWithWarmupSchedule(double peak, int64_t warmup, int64_t total, double floor = 0);
  double learning_rate(int64_t step) const override;

 private:
  double peak_;
  int64_t warmup_;
  int64_t total_;
  double floor_;
};

/// Piecewise constant: with boundaries b_0 < b_1 < ... < b_{n-1} and values v_0, ..., v_n,
///
///     lr(step) = v_0 for step < b_0,  v_i for b_{i-1} <= step < b_i,  v_n for step >= b_{n-1}.
///
/// Needs values.size() == boundaries.size() + 1, strictly increasing boundaries >= 1 and
/// values >= 0.
class PiecewiseSchedule : public Schedule {
 public:
  PiecewiseSchedule(std::vector<int64_t> boundaries, std::vector<double> values);
  double learning_rate(int64_t step) const override;

 private:
  std::vector<int64_t> boundaries_;
  std::vector<double> values_;
};

}  // namespace eddy::optim

namespace eddy::optim {

enum class ScheduleType { constant, exponential, step, cosine };

/// A schedule as configs describe one.
struct ScheduleSpec {
  ScheduleType type = ScheduleType::constant;
  double gamma = 0.1;             ///< exponential, step: the factor per `every` steps
  int64_t every = 1000;
  int64_t warmup = 0;             ///< cosine
  double floor = 0;               ///< cosine
};

/// The schedule `spec` describes, starting at `learning_rate`; a cosine reaches its floor at
/// `total_steps`.
std::unique_ptr<Schedule> make_schedule(const ScheduleSpec& spec, double learning_rate, int64_t total_steps);

}  // namespace eddy::optim
