// A solver's step function: compiled, it runs its program once a call, the first included, and
// gives the eager function's values.

#include "solvers/common/step_function.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "eddy/eddy.h"
#include "support/scoped_env.h"

namespace eddy::solvers {
namespace {

// The first call traced and compiled, threw the program's results away and ran it again: every
// training run paid one step twice (EDDY_COMPILER_PROFILE counted 4 runs for 3 steps).
TEST(StepFunction, RunsItsProgramOnceACallTheFirstIncluded) {
  const compiler::TensorFunction function = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sin(matmul(in[0], in[0])) * 2.0};
  };
  const std::vector<Tensor> inputs = {randn({8, 8}, DType::f64)};
  const Tensor eager = function(inputs)[0];
  ::testing::internal::CaptureStderr();
  {
    const ScopedEnv profile("EDDY_COMPILER_PROFILE", "1");
    StepFunction step("test step", function, /*compiled=*/true, nullptr);
    for (int call = 0; call < 3; ++call) {
      EXPECT_LE(max(abs(step(inputs)[0] - eager)).item<double>(), 1e-12) << "call " << call;
    }
    EXPECT_TRUE(step.runs_compiled());
  }
  const std::string report = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(report.find(" 3 runs"), std::string::npos) << report;
}

}  // namespace
}  // namespace eddy::solvers
