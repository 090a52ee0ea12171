// End-to-end solves on small problems with known solutions: each boundary-condition type, an
// error target within a CI-sized budget, resume equivalence, the outputs, and the stop on a
// non-finite loss with the last good checkpoint kept.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "eddy/eddy.h"
#include "eddy/io/checkpoint.h"
#include "eddy/io/hdf5.h"
#include "eddy/io/safetensors.h"
#include "solvers/pinn/problem.h"
#include "solvers/pinn/solver.h"

namespace eddy::pinn {
namespace {

namespace fs = std::filesystem;

class SolveTest : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("eddy_solve_" + std::to_string(::getpid()));
  void TearDown() override { fs::remove_all(dir); }

  Problem problem(const std::string& text, const std::vector<std::string>& overrides = {}) {
    std::vector<std::string> all = overrides;
    all.push_back("output.dir=" + (dir / "run").string());
    config_ = io::Config::parse(text, "test.yaml", all);
    return read_problem(*config_);
  }

 private:
  std::unique_ptr<io::Config> config_;
};

// -u'' = pi^2 sin(pi x) on [0, 1]; u = sin(pi x). The boundary at x = 1 varies by test.
std::string poisson(const std::string& right_condition) {
  return R"(dtype: float64
geometry: {space: {type: interval, min: 0, max: 1}}
fields: [u]
equations: {poisson: u_xx + pi^2*sin(pi*x)}
conditions:
  pde: {type: interior, equation: poisson, points: 64}
  left: {type: dirichlet, on: x == 0, field: u, value: 0, points: 1}
  right: )" + right_condition + R"(
sampling: {method: sobol}
model: {width: 16, depth: 2}
training:
  adam: {steps: 300, learning_rate: 0.01}
  lbfgs: {iterations: 300}
  log_every: 0
validation:
  reference: {expressions: {u: sin(pi*x)}}
  points: 200
output: {grid: [33], vtk: false, checkpoint_every: 0}
)";
}

double solve_error(const Problem& p) {
  SolveResult result = solve(p, {});
  EXPECT_TRUE(result.finished) << result.message;
  return result.metrics->relative_l2.at("u");
}

TEST_F(SolveTest, DirichletReachesItsErrorTarget) {
  EXPECT_LT(solve_error(problem(poisson("{type: dirichlet, on: x == 1, field: u, value: 0, points: 1}"))), 1e-3);
}

TEST_F(SolveTest, NeumannCondition) {
  // u'(1) = pi cos(pi) = -pi.
  EXPECT_LT(solve_error(problem(poisson("{type: neumann, faces: [right], field: u, value: -pi, points: 1}"))), 1e-2);
}

TEST_F(SolveTest, RobinCondition) {
  // u(1) + 2 u'(1) = -2 pi.
  EXPECT_LT(solve_error(problem(poisson("{type: robin, on: x == 1, field: u, alpha: 1, beta: 2, value: -2*pi, points: 1}"))),
            1e-2);
}

TEST_F(SolveTest, PeriodicCondition) {
  // -u'' = sin(x) on [0, 2 pi], periodic, u(0) = 0: u = sin(x).
  const std::string text = R"(dtype: float64
geometry: {space: {type: interval, min: 0, max: 6.283185307179586}}
fields: [u]
conditions:
  pde: {type: interior, equation: u_xx + sin(x), points: 128}
  pin: {type: dirichlet, on: x == 0, field: u, value: 0, points: 1}
  wrap: {type: periodic, axis: x, points: 1}
sampling: {method: sobol}
model: {width: 16, depth: 2}
training:
  adam: {steps: 300, learning_rate: 0.01}
  lbfgs: {iterations: 300}
  log_every: 0
validation:
  reference: {expressions: {u: sin(x)}}
  points: 200
output: {grid: [33], vtk: false, checkpoint_every: 0}
)";
  EXPECT_LT(solve_error(problem(text)), 1e-2);
}

TEST_F(SolveTest, HardConstraintHoldsExactly) {
  // u = x (1 - x) net_u satisfies both Dirichlet conditions by construction: no boundary terms.
  const std::string text = R"(dtype: float64
geometry: {space: {type: interval, min: 0, max: 1}}
fields: [u]
equations: {poisson: u_xx + pi^2*sin(pi*x)}
conditions:
  pde: {type: interior, equation: poisson, points: 64}
sampling: {method: sobol}
model: {width: 16, depth: 2, output_transform: {u: x*(1 - x)*net_u}}
training:
  adam: {steps: 300, learning_rate: 0.01}
  lbfgs: {iterations: 300}
  log_every: 0
validation:
  reference: {expressions: {u: sin(pi*x)}}
output: {grid: [33], vtk: false, checkpoint_every: 0}
)";
  Problem p = problem(text);
  EXPECT_LT(solve_error(p), 1e-2);
  Tensor u = io::read_hdf5((dir / "run/solution.h5").string(), "fields/u");
  auto values = u.to_vector<double>();
  EXPECT_EQ(values.front(), 0.0);
  EXPECT_NEAR(values.back(), 0.0, 1e-15);  // x = 1 - 1 in float64
}

const std::string kHeat = R"(dtype: float64
geometry:
  space: {type: interval, min: 0, max: 1}
  time: {min: 0, max: 0.5}
fields: [u]
parameters: {kappa: 0.1}
conditions:
  pde: {type: interior, equation: u_t - kappa*u_xx, points: 64}
  start: {type: initial, field: u, value: sin(pi*x), points: 16}
  ends: {type: dirichlet, faces: [left, right], field: u, points: 16}
sampling: {method: uniform, resample_every: 5}
model: {width: 8, depth: 2}
training:
  adam: {steps: 20, learning_rate: 0.01}
  log_every: 1
validation:
  every: 10
  reference: {expressions: {u: exp(-kappa*pi^2*t)*sin(pi*x)}}
  points: 50
output: {grid: [9, 5], checkpoint_every: 10}
)";

TEST_F(SolveTest, ResumedRunMatchesAnUninterruptedOne) {
  SolveResult whole = solve(problem(kHeat), {});
  ASSERT_TRUE(whole.finished);
  fs::remove_all(dir / "run");
  // Stop after 10 steps (the checkpoint), then resume to 20 with the same config.
  Problem first = problem(kHeat, {"training.adam.steps=10"});
  ASSERT_TRUE(solve(first, {}).finished);
  Problem rest = problem(kHeat);
  // The step count is part of the config hash, so the resumed run's config is the full one:
  // rewrite the checkpoint's hash as a user would by resuming the same file.
  io::SafetensorsContents saved = io::load_safetensors((dir / "run/checkpoint.safetensors").string());
  saved.metadata["eddy.config_hash"] = rest.config_hash;
  io::save_safetensors((dir / "run/checkpoint.safetensors").string(), saved.tensors, saved.metadata);
  SolveOptions options;
  options.resume = true;
  SolveResult resumed = solve(rest, options);
  ASSERT_TRUE(resumed.finished) << resumed.message;
  EXPECT_EQ(resumed.steps, whole.steps);
  EXPECT_EQ(resumed.loss, whole.loss);  // bit for bit: same points, same optimiser state
}

TEST_F(SolveTest, WritesResultsThatReadBack) {
  Problem p = problem(kHeat);
  ASSERT_TRUE(solve(p, {}).finished);
  const std::string h5 = (dir / "run/solution.h5").string();
  Tensor u = io::read_hdf5(h5, "fields/u");
  EXPECT_EQ(u.shape(), (Shape{9, 5}));
  EXPECT_EQ(io::read_hdf5(h5, "coordinates/t").numel(), 5);
  EXPECT_EQ(io::read_hdf5(h5, "history/step").numel(), 21);  // steps 1..20 and the final
  EXPECT_EQ(io::read_hdf5(h5, "metrics/u_relative_l2").numel(), 3);  // steps 10, 20 and the final
  EXPECT_EQ(io::read_hdf5(h5, "points/pde/coordinates").shape(), (Shape{64, 2}));
  EXPECT_TRUE(fs::exists(dir / "run/solution.vti"));
  EXPECT_TRUE(fs::exists(dir / "run/points.vtp"));
  EXPECT_TRUE(fs::exists(dir / "run/config.yaml"));
  // eval re-reads the run folder and measures the same model.
  Metrics again = evaluate_run((dir / "run").string());
  EXPECT_GT(again.relative_l2.at("u"), 0.0);
}

TEST_F(SolveTest, StopsOnANonFiniteLossKeepingTheLastGoodCheckpoint) {
  // The learnable lam is pulled towards -1; once negative, sqrt(lam) is NaN.
  const std::string text = R"(dtype: float64
geometry: {space: {type: interval, min: 0, max: 1}}
fields: [u]
parameters: {lam: {learnable: true, initial: 0.35}}
conditions:
  pull: {type: interior, equation: lam + 1 + 0*u, points: 8}
  root: {type: interior, equation: sqrt(lam) + 0*u, points: 8}
model: {width: 4, depth: 1}
training:
  adam: {steps: 100, learning_rate: 0.1}
  log_every: 0
output: {grid: [5], vtk: false, checkpoint_every: 1}
)";
  Problem p = problem(text);
  SolveResult result = solve(p, {});
  EXPECT_FALSE(result.finished);
  EXPECT_NE(result.message.find("the loss is NaN"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("the last good checkpoint is"), std::string::npos) << result.message;
  io::SafetensorsContents saved = io::load_safetensors((dir / "run/checkpoint.safetensors").string());
  // The checkpoint is from before the stop, at parameters whose loss was seen to be finite.
  EXPECT_LT(std::stoll(saved.metadata.at("eddy.step")), result.steps);
  EXPECT_GT(std::stoll(saved.metadata.at("eddy.step")), 0);
  const double lam = saved.tensors.at("optimizer.learnable.lam").item<double>();
  EXPECT_GE(lam, 0.0);  // the last good state, not the poisoned one
}

}  // namespace
}  // namespace eddy::pinn
