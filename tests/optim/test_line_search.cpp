// The strong-Wolfe line search (optim/line_search.h) on the six one-dimensional test functions of
// Moré and Thuente, "Line search algorithms with guaranteed sufficient decrease", ACM TOMS 20(3),
// 1994, each from their four first trials 1e-3, 1e-1, 1e1 and 1e3 and with their c1 and c2: every
// search must end at a point that meets both strong-Wolfe conditions, checked here from the
// function itself, within a bounded number of evaluations. A backtracking search, which never
// checks curvature, fails most of these.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numbers>
#include <string>
#include <vector>

#include "eddy/optim/line_search.h"

namespace eddy::optim {
namespace {

struct TestFunction {
  std::string name;
  std::function<double(double)> value, slope;
  double c1, c2;
};

double gamma_of(double beta) { return std::sqrt(1 + beta * beta) - beta; }

// Functions 4 to 6: gamma(b1) sqrt((1 - t)^2 + b2^2) + gamma(b2) sqrt(t^2 + b1^2).
TestFunction yanai(std::string name, double b1, double b2) {
  const double g1 = gamma_of(b1), g2 = gamma_of(b2);
  return {std::move(name),
          [=](double t) { return g1 * std::sqrt((1 - t) * (1 - t) + b2 * b2) + g2 * std::sqrt(t * t + b1 * b1); },
          [=](double t) {
            return g1 * (t - 1) / std::sqrt((1 - t) * (1 - t) + b2 * b2) + g2 * t / std::sqrt(t * t + b1 * b1);
          },
          1e-3, 1e-3};
}

std::vector<TestFunction> more_thuente_functions() {
  constexpr double pi = std::numbers::pi;
  std::vector<TestFunction> functions;
  functions.push_back({"1: -t / (t^2 + 2)", [](double t) { return -t / (t * t + 2); },
                       [](double t) { return (t * t - 2) / ((t * t + 2) * (t * t + 2)); }, 1e-3, 0.1});
  constexpr double b = 0.004;
  functions.push_back({"2: (t + 0.004)^5 - 2 (t + 0.004)^4",
                       [](double t) { return std::pow(t + b, 5) - 2 * std::pow(t + b, 4); },
                       [](double t) { return 5 * std::pow(t + b, 4) - 8 * std::pow(t + b, 3); }, 0.1, 0.1});
  constexpr double beta = 0.01, l = 39;
  auto base = [](double t) {
    if (t <= 1 - beta) return 1 - t;
    if (t >= 1 + beta) return t - 1;
    return (t - 1) * (t - 1) / (2 * beta) + beta / 2;
  };
  auto base_slope = [](double t) {
    if (t <= 1 - beta) return -1.0;
    if (t >= 1 + beta) return 1.0;
    return (t - 1) / beta;
  };
  functions.push_back({"3: wiggly, l = 39",
                       [=](double t) { return base(t) + 2 * (1 - beta) / (l * pi) * std::sin(l * pi * t / 2); },
                       [=](double t) { return base_slope(t) + (1 - beta) * std::cos(l * pi * t / 2); }, 0.1, 0.1});
  functions.push_back(yanai("4: b1 = 0.001, b2 = 0.001", 1e-3, 1e-3));
  functions.push_back(yanai("5: b1 = 0.01, b2 = 0.001", 1e-2, 1e-3));
  functions.push_back(yanai("6: b1 = 0.001, b2 = 0.01", 1e-3, 1e-2));
  return functions;
}

LinePoint evaluate(const TestFunction& f, double t) {
  LinePoint point;
  point.t = t;
  point.value = f.value(t);
  point.slope = f.slope(t);
  point.gradient = {point.slope};
  return point;
}

TEST(StrongWolfe, MeetsBothConditionsOnTheMoreThuenteFunctions) {
  for (const TestFunction& f : more_thuente_functions()) {
    const LinePoint start = evaluate(f, 0);
    ASSERT_LT(start.slope, 0) << f.name;
    for (double t_initial : {1e-3, 1e-1, 1e1, 1e3}) {
      SCOPED_TRACE(f.name + ", first trial " + std::to_string(t_initial));
      int64_t calls = 0;
      const LineFunction phi = [&](double t) {
        ++calls;
        return evaluate(f, t);
      };
      const LineSearchResult result = strong_wolfe(phi, start, t_initial, {.c1 = f.c1, .c2 = f.c2}, 50);
      EXPECT_EQ(result.status, LineSearchStatus::wolfe);
      const double t = result.point.t;
      EXPECT_GT(t, 0);
      // Both conditions, from the function rather than from what the search reports.
      EXPECT_LE(f.value(t), start.value + f.c1 * t * start.slope) << "sufficient decrease at t = " << t;
      EXPECT_LE(std::abs(f.slope(t)), f.c2 * std::abs(start.slope)) << "curvature at t = " << t;
      EXPECT_EQ(result.evaluations, calls);
      EXPECT_LE(calls, 30) << "evaluations to find t = " << t;
    }
  }
}

}  // namespace
}  // namespace eddy::optim
