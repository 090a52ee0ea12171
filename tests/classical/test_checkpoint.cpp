// Checkpointed rollouts: the same gradients as plain backpropagation through time, with memory
// that stays flat as the rollout grows (measured on the allocator's peak counter).

#include <gtest/gtest.h>

#include "eddy/core/allocator.h"
#include "eddy/eddy.h"
#include "solvers/classical/grf.h"
#include "solvers/classical/navier_stokes.h"

namespace eddy::classical {
namespace {

constexpr int64_t kN = 32;

Tensor initial_vorticity() {
  GaussianRandomField field;
  field.resolution = kN;
  Generator generator(9);
  return squeeze(field.sample(1, generator), 0);
}

TEST(CheckpointedRollout, GradientsEqualPlainBackpropagationThroughTime) {
  const Tensor w0 = initial_vorticity();
  const Tensor weights = randn({kN, kN}, DType::f64);
  auto gradients = [&](int64_t checkpoint_every) {
    Tensor w = w0.detach().requires_grad_(), nu = scalar(1e-3, DType::f64).requires_grad_();
    NavierStokes2d solver(kN, 0.01, nu, NavierStokes2d::fno_forcing(kN));
    // Two recorded states, and segments that do not divide the steps evenly.
    std::vector<Tensor> states = solver.solve(w, {7, 10}, checkpoint_every);
    return grad({sum(states[0] * weights) + sum(square(states[1]))}, {w, nu});
  };
  std::vector<Tensor> plain = gradients(0), checkpointed = gradients(3);
  EXPECT_LT(max(abs(checkpointed[0] - plain[0])).item<double>(), 1e-12 * max(abs(plain[0])).item<double>());
  EXPECT_NEAR(checkpointed[1].item<double>(), plain[1].item<double>(), 1e-12 * std::abs(plain[1].item<double>()));
}

// Bytes allocated at the peak of one forward and backward pass, above what was in use before.
int64_t peak_bytes(int64_t steps, int64_t checkpoint_every) {
  const Tensor w0 = initial_vorticity();
  NavierStokes2d solver(kN, 0.01, scalar(1e-3, DType::f64), NavierStokes2d::fno_forcing(kN));
  Allocator& allocator = cpu_allocator();
  const int64_t before = allocator.stats().bytes_in_use;
  allocator.reset_peak();
  {
    Tensor w = w0.detach().requires_grad_();
    Tensor final_state = solver.solve(w, {steps}, checkpoint_every)[0];
    Tensor g = grad({sum(square(final_state))}, {w})[0];
  }
  return allocator.stats().peak_bytes_in_use - before;
}

TEST(CheckpointedRollout, MemoryStaysFlatWhilePlainBackpropagationGrowsWithSteps) {
  const int64_t plain_short = peak_bytes(8, 0), plain_long = peak_bytes(32, 0);
  const int64_t checkpointed_short = peak_bytes(8, 4), checkpointed_long = peak_bytes(32, 4);
  std::printf("peak bytes, 8 / 32 steps: plain %lld / %lld, checkpointed every 4 steps %lld / %lld\n",
              static_cast<long long>(plain_short), static_cast<long long>(plain_long),
              static_cast<long long>(checkpointed_short), static_cast<long long>(checkpointed_long));
  EXPECT_GT(static_cast<double>(plain_long) / static_cast<double>(plain_short), 3.0);
  EXPECT_LT(static_cast<double>(checkpointed_long) / static_cast<double>(checkpointed_short), 1.5);
  EXPECT_LT(static_cast<double>(checkpointed_long), 0.25 * static_cast<double>(plain_long));
}

}  // namespace
}  // namespace eddy::classical
