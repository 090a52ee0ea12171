// Space x time sampling of the conditions, and end-to-end solves on small problems with known
// solutions: each boundary-condition type, an
// error target within a CI-sized budget, resume equivalence, the outputs, the stop on a
// non-finite loss with the last good checkpoint kept, and the training aids (grad_norm and NTK loss
// weighting, causal weighting, residual-based refinement and distribution), and the compiled
// training step against the eager one.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <numbers>
#include <numeric>
#include <set>
#include <sstream>

#include "eddy/eddy.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/checkpoint.h"
#include "eddy/io/hdf5.h"
#include "eddy/io/safetensors.h"
#include "support/expect_error.h"
#include "solvers/pinn/problem.h"
#include "solvers/pinn/refinement.h"
#include "solvers/pinn/solver.h"
#include "solvers/pinn/training_step.h"
#include "solvers/pinn/weighting.h"

namespace eddy::pinn {
namespace {

namespace fs = std::filesystem;

class SolveTest : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("eddy_solve_" + std::to_string(::getpid()));
  void TearDown() override { fs::remove_all(dir); }

  Problem problem(const std::string& text, const std::vector<std::string>& overrides = {},
                  const std::map<std::string, EquationFunction>& functions = {}) {
    std::vector<std::string> all = overrides;
    all.push_back("output.dir=" + (dir / "run").string());
    config_ = io::Config::parse(text, "test.yaml", all);
    return read_problem(*config_, functions);
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

// Rows of `points` [N, columns] as vectors.
std::vector<std::vector<double>> rows_of(const Tensor& points) {
  const std::vector<double> flat = points.to_vector<double>();
  const int64_t columns = points.shape()[1];
  std::vector<std::vector<double>> rows;
  for (size_t r = 0; r * columns < flat.size(); ++r) rows.emplace_back(flat.begin() + r * columns, flat.begin() + (r + 1) * columns);
  return rows;
}

TEST_F(SolveTest, SpaceTimeSamplesStayInTheProductAndTheInitialSliceIsAtT0) {
  const Problem p = problem(R"(dtype: float64
seed: 12
geometry: {space: {type: disk, center: [0, 0], radius: 1}, time: {min: 0.5, max: 2}}
fields: [u]
conditions:
  pde: {type: interior, equation: u_t - laplacian(u), points: 2000}
  start: {type: initial, field: u, points: 500}
  rim: {type: dirichlet, field: u, points: 1000}
model: {width: 8, depth: 2}
)");
  PinnState state(p);
  state.sample(0);
  const std::vector<SampledCondition>& s = state.samples();
  ASSERT_EQ(s[0].points.shape(), (Shape{2000, 3}));
  int64_t early = 0;
  for (const auto& x : rows_of(s[0].points)) {
    EXPECT_TRUE(std::hypot(x[0], x[1]) <= 1 && x[2] >= 0.5 && x[2] <= 2) << x[0] << " " << x[1] << " " << x[2];
    early += x[2] < 1.25;
  }
  EXPECT_NEAR(early / 2000.0, 0.5, 0.03);
  ASSERT_EQ(s[1].points.shape(), (Shape{500, 3}));
  for (const auto& x : rows_of(s[1].points)) EXPECT_TRUE(x[2] == 0.5 && std::hypot(x[0], x[1]) <= 1);
  ASSERT_EQ(s[2].points.shape(), (Shape{1000, 3}));
  ASSERT_EQ(s[2].normals.shape(), (Shape{1000, 2}));
  const auto normals = rows_of(s[2].normals);
  const auto boundary = rows_of(s[2].points);
  for (size_t i = 0; i < boundary.size(); ++i) {
    const std::vector<double>& x = boundary[i];
    EXPECT_NEAR(std::hypot(x[0], x[1]), 1, 1e-12);
    EXPECT_TRUE(x[2] >= 0.5 && x[2] <= 2);
    EXPECT_NEAR(normals[i][0], x[0], 1e-12);  // the outward normal of the unit circle is the point
    EXPECT_NEAR(normals[i][1], x[1], 1e-12);
  }
}

// Boundary batches come face by face; a condition with fewer points than a batch once kept the
// first rows, so all of an interval's Dirichlet points sat at its left end and u(right) was free;
// then random rows, which put both points of a two-point condition on one end for a quarter of
// the seeds. Each face now keeps its share, to within one point.
TEST_F(SolveTest, FewBoundaryPointsAreSpreadOverEveryFace) {
  for (int seed = 0; seed < 8; ++seed) {
    const Problem p = problem(cat(R"(dtype: float64
seed: )", seed, R"(
geometry: {space: {type: interval, min: -2, max: 2}}
fields: [u]
conditions:
  pde: {type: interior, equation: u_xx, points: 10}
  two: {type: dirichlet, field: u, points: 2}
  two_selected: {type: dirichlet, field: u, on: x == -2 || x == 2, points: 2}
  ends: {type: dirichlet, field: u, points: 7}
  ends_selected: {type: dirichlet, field: u, on: x == -2 || x == 2, points: 9}
model: {width: 8, depth: 2}
)"));
    PinnState state(p);
    for (int64_t round = 0; round < 3; ++round) {
      state.sample(round);
      for (size_t condition : {1, 2, 3, 4}) {
        const Tensor x = state.samples()[condition].points;
        const double left = sum(cast(eq(x, scalar(-2.0, DType::f64)), DType::f64)).item<double>();
        const double right = sum(cast(eq(x, scalar(2.0, DType::f64)), DType::f64)).item<double>();
        EXPECT_EQ(left + right, static_cast<double>(x.shape()[0])) << "condition " << condition;
        EXPECT_LE(std::abs(left - right), 1) << "seed " << seed << ", condition " << condition << ", round " << round;
      }
    }
  }
}

// A Sobol or Halton batch is in sequence order, where one offset for every stretch (the first
// version of the spread above) kept points of one residue: every t in [0, 0.5) at both ends.
TEST_F(SolveTest, FewBoundaryPointsOfALowDiscrepancySequenceSpreadWithinTheirFace) {
  for (const char* method : {"sobol", "halton"}) {
    for (int seed = 0; seed < 4; ++seed) {
      const Problem p = problem(cat(R"(dtype: float64
seed: )", seed, R"(
geometry: {space: {type: interval, min: -2, max: 2}, time: {min: 0, max: 1}}
fields: [u]
conditions:
  pde: {type: interior, equation: u_t - u_xx, points: 10}
  ends: {type: dirichlet, field: u, points: 16}
sampling: {method: )", method, R"(}
model: {width: 8, depth: 2}
)"));
      PinnState state(p);
      state.sample(0);
      for (double end : {-2.0, 2.0}) {
        int early = 0, late = 0;
        for (const std::vector<double>& x : rows_of(state.samples()[1].points)) {
          if (x[0] == end) (x[1] < 0.5 ? early : late) += 1;
        }
        EXPECT_EQ(early + late, 8) << method << ", seed " << seed << ", end " << end;
        EXPECT_GE(early, 1) << method << ", seed " << seed << ", end " << end;
        EXPECT_GE(late, 1) << method << ", seed " << seed << ", end " << end;
      }
    }
  }
}

TEST_F(SolveTest, LatinHypercubeStratifiesSpaceAndTimeJointlyAndFacesSelect) {
  const Problem p = problem(R"(dtype: float64
seed: 13
geometry: {space: {type: rectangle, min: [0, 0], max: [1, 1]}, time: {min: 0, max: 1}}
fields: [u]
conditions:
  pde: {type: interior, equation: u_t - laplacian(u), points: 40}
  left: {type: dirichlet, faces: [left], field: u, points: 30}
sampling: {method: latin_hypercube}
model: {width: 8, depth: 2}
)");
  PinnState state(p);
  state.sample(0);
  const auto interior = rows_of(state.samples()[0].points);
  for (size_t axis = 0; axis < 3; ++axis) {
    std::set<int64_t> strata;
    for (const auto& x : interior) strata.insert(static_cast<int64_t>(std::floor(x[axis] * 40)));
    EXPECT_EQ(strata.size(), 40u) << "axis " << axis;
  }
  const auto left = rows_of(state.samples()[1].points);
  ASSERT_EQ(left.size(), 30u);
  for (const auto& x : left) EXPECT_TRUE(x[0] == 0 && x[2] >= 0 && x[2] < 1);
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

TEST_F(SolveTest, PointsConditionPinsAValueOrAResidualAtListedPoints) {
  // u(1) = 0 at the one listed point; then u'(1) = -pi there, a residual of a derivative.
  EXPECT_LT(solve_error(problem(poisson("{type: points, at: [1], field: u, value: 0}"))), 1e-3);
  EXPECT_LT(solve_error(problem(poisson("{type: points, at: [[1]], equation: u_x + pi}"))), 1e-2);
}

TEST_F(SolveTest, PointsAreUsedAsListedAtEveryResample) {
  Problem p = problem(poisson("{type: points, at: [1, 0.5], field: u, value: sin(pi*x)}"),
                      {"sampling.resample_every=1"});
  PinnState state(p);
  for (int64_t round : {0, 1, 7}) {
    state.sample(round);
    EXPECT_EQ(cast(state.samples()[2].points, DType::f64).to_vector<double>(), (std::vector<double>{1, 0.5}));
  }
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

// Burgers' u0 = -sin(pi x) on a PirateNet of one block, 32 Fourier features.
const char* const kPirateBurgers = R"(dtype: float64
geometry:
  space: {type: interval, min: -1, max: 1}
  time: {min: 0, max: 1}
fields: [u]
parameters: {nu: 0.0031831}
equations: {burgers: u_t + u*u_x - nu*u_xx}
conditions:
  pde: {type: interior, equation: burgers, points: 64}
  initial: {type: initial, field: u, value: -sin(pi*x), points: 128}
model: {architecture: pirate_net, width: 16, depth: 1, fourier_features: 32}
training: {adam: {steps: 0}, log_every: 0}
validation:
  reference: {expressions: {u: -sin(pi*x)}}
output: {grid: [17, 3], vtk: false, checkpoint_every: 0}
)";

// model.fit_initial_condition: before any step, a PirateNet (an affine function of its Fourier
// embedding at the start) is the least-squares fit of u0 repeated over time, so it is already
// close to u0 everywhere, where the random output layer is far from it.
TEST_F(SolveTest, FitInitialConditionStartsFromTheInitialValues) {
  EXPECT_LT(solve_error(problem(kPirateBurgers, {"model.fit_initial_condition=true"})), 0.03);
  EXPECT_GT(solve_error(problem(kPirateBurgers)), 0.5);
}

// The fit says how far from the values it starts: with a periodic embedding at fourier_scale 1
// (features cos and sin of 2 pi x B) the embedding is too high in frequency for a close fit, and
// training started about 70% off without a word; at 1 / (2 pi) it fits u0 closely.
TEST_F(SolveTest, FitInitialConditionReportsHowFarItStarts) {
  auto distance = [&](std::vector<std::string> overrides) {
    overrides.push_back("model.fit_initial_condition=true");
    const Problem fitted = problem(kPirateBurgers, overrides);  // the state keeps a reference
    PinnState state(fitted);
    return state.fit_initial_condition().at("u");
  };
  EXPECT_LT(distance({}), 0.03);
  EXPECT_GT(distance({"model.periodic={x: 2}"}), 0.3);
  EXPECT_LT(distance({"model.periodic={x: 2}", "model.fourier_scale=0.159"}), 1e-4);
}

// An MLP's fitted output layer is ridge-regularised: its exact fit weighed nearly collinear hidden
// features by about 6e4, and 300 Adam steps of the heat equation ended at 9.7 relative L2 (the
// error grew from the first step) where they reach 5e-3 now.
TEST_F(SolveTest, FitInitialConditionOfAnMlpTrainsWithoutBlowingUp) {
  const std::string text = R"(seed: 1
geometry:
  space: {type: interval, min: 0, max: 1}
  time: {min: 0, max: 0.5}
fields: [u]
parameters: {k: 0.1}
conditions:
  pde: {type: interior, equation: u_t - k*u_xx, points: 500}
  ic: {type: initial, field: u, value: sin(pi*x), points: 100}
  bc: {type: dirichlet, on: x == 0 || x == 1, field: u, points: 100}
model: {width: 20, depth: 3, fit_initial_condition: true}
training: {adam: {steps: 300, learning_rate: 5.0e-3}, log_every: 0}
validation:
  reference: {expressions: {u: exp(-pi^2*k*t)*sin(pi*x)}}
output: {grid: [17, 5], vtk: false, checkpoint_every: 0}
)";
  EXPECT_LT(solve_error(problem(text)), 0.05);
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

// From a run's solution.h5: each condition's last recorded loss weight, the pde points, and the
// history and metrics of every step.
struct RunSnapshot {
  std::vector<double> final_weights, points;
  std::map<std::string, std::vector<double>> history;
};

class ResumeTest : public SolveTest {
 protected:
  // Runs kHeat for 20 steps in one go, then in two halves (the first a run of 10 steps, the second
  // resumed from its checkpoint with the step count changed to 20), and expects identical
  // results, the history of the steps before the checkpoint included.
  void expect_resume_matches(const std::vector<std::string>& overrides, const std::string& text = kHeat,
                             const std::string& optimizer = "adam") {
    SolveResult whole = solve(problem(text, overrides), {});
    ASSERT_TRUE(whole.finished) << whole.message;
    const RunSnapshot uninterrupted = snapshot();
    fs::remove_all(dir / "run");
    std::vector<std::string> first_half = overrides;
    first_half.push_back("training." + optimizer + ".steps=10");
    ASSERT_TRUE(solve(problem(text, first_half), {}).finished);
    Problem rest = problem(text, overrides);
    SolveOptions options;
    options.resume = true;
    SolveResult resumed = solve(rest, options);
    ASSERT_TRUE(resumed.finished) << resumed.message;
    EXPECT_EQ(resumed.steps, whole.steps);
    EXPECT_EQ(resumed.loss, whole.loss);  // bit for bit: same points, weights, optimiser state
    const RunSnapshot after_resume = snapshot();
    EXPECT_EQ(after_resume.final_weights, uninterrupted.final_weights);
    EXPECT_EQ(after_resume.points, uninterrupted.points);
    for (const auto& [name, values] : uninterrupted.history) EXPECT_EQ(after_resume.history.at(name), values) << name;
  }

  RunSnapshot snapshot() const {
    const std::string h5 = (dir / "run/solution.h5").string();
    RunSnapshot s;
    for (const char* condition : {"pde", "start", "ends"}) {
      const Tensor weights = io::read_hdf5(h5, std::string("history/weight_") + condition);
      s.final_weights.push_back(weights.to_vector<double>().back());
    }
    s.points = io::read_hdf5(h5, "points/pde/coordinates").to_vector<double>();
    for (const char* name : {"history/step", "history/loss", "history/loss_pde", "history/loss_start",
                             "history/loss_ends", "history/weight_pde", "metrics/step", "metrics/u_relative_l2"}) {
      s.history[name] = io::read_hdf5(h5, name).to_vector<double>();
    }
    return s;
  }
};

TEST_F(ResumeTest, ResumedRunMatchesAnUninterruptedOne) { expect_resume_matches({}); }

TEST_F(ResumeTest, ResumeMatchesWithAdaptiveWeightsCausalWeightsAndRefinement) {
  // Weights change at 3, 6, 9 | 12, ...; points are added at 4, 8 | 12, 16, 20; the checkpoint
  // is at 10, and kHeat resamples every 5 steps.
  expect_resume_matches({"training.loss_weighting={scheme: grad_norm, every: 3, alpha: 0.5}",
                         "training.causal={chunks: 4, epsilon: 1}", "sampling.rar={every: 4, candidates: 40, add: 3}"});
}

TEST_F(ResumeTest, ResumeMatchesWithNtkWeightsAndRad) {
  // NTK weights change at 3, 6, 9 | 12, ...; RAD redraws the pde points at 4, 8 | 12, 16, 20 (from
  // the checkpoint on resume: they are not redrawn at 10, nor by the resampling at 15).
  expect_resume_matches({"training.loss_weighting={scheme: ntk, every: 3, alpha: 0.5, ntk_points: 10}",
                         "training.causal={chunks: 4, epsilon: 1}",
                         "sampling.rad={every: 4, candidates: 200, k: 2, c: 0.5}"});
}

// kHeat trained by SOAP, its bases refreshed at steps 1, 3, 6, 9 | 12, ... around the checkpoint at 10.
std::string heat_with_soap() {
  std::string text = kHeat;
  const std::string adam = "adam: {steps: 20, learning_rate: 0.01}";
  text.replace(text.find(adam), adam.size(),
               "optimizer: soap\n  soap: {steps: 20, learning_rate: 0.01, precondition_frequency: 3}");
  return text;
}

TEST_F(ResumeTest, ResumeMatchesWithSoap) { expect_resume_matches({}, heat_with_soap(), "soap"); }

// SOAP trains the Poisson problem without L-BFGS; Adam's error, with the same steps and rate, is printed beside it.
TEST_F(SolveTest, SoapTrainsAPinn) {
  const std::vector<std::string> first_order_only = {"training.lbfgs.iterations=0"};
  const double adam = solve_error(problem(poisson("{type: dirichlet, on: x == 1, field: u, value: 0, points: 1}"),
                                          first_order_only));
  std::string text = poisson("{type: dirichlet, on: x == 1, field: u, value: 0, points: 1}");
  const std::string adam_line = "adam: {steps: 300, learning_rate: 0.01}";
  text.replace(text.find(adam_line), adam_line.size(), "optimizer: soap\n  soap: {steps: 300, learning_rate: 0.01}");
  const double soap = solve_error(problem(text, first_order_only));
  std::cout << "relative L2 error after 300 steps: Adam " << adam << ", SOAP " << soap << "\n";
  EXPECT_LT(soap, 1e-2);  // the untrained network's is of order 1; docs/config.md compares the two
}

// A learnable parameter no equation, value or output transform reads ended the run at its initial
// value, reported as learned: refused before training, though a trained run's config that has
// one still reads (eval and export do not train).
TEST_F(SolveTest, ALearnableParameterNothingTrainsIsRefusedBeforeTraining) {
  const std::vector<std::string> base = {"parameters.kappa={learnable: true, initial: 0.2}",
                                         "validation.reference.expressions.u=exp(-0.1*pi^2*t)*sin(pi*x)",
                                         "training.adam.steps=2", "output.checkpoint_every=0"};
  std::vector<std::string> unread = base;
  unread.push_back("parameters.stiffness={learnable: true, initial: 2}");
  const Problem read = problem(kHeat, unread);
  expect_error([&] { refuse_untrainable(read); },
               {"parameters.stiffness: the learnable parameter 'stiffness' is read by no condition's equation"});
  expect_error([&] { solve(read, {}); }, {"'stiffness' is read by no condition's equation"});
  // An `on` predicate passes it no gradient.
  std::vector<std::string> predicate = base;
  predicate.push_back("parameters.edge={learnable: true, initial: 0.5}");
  predicate.push_back("conditions.ends={type: dirichlet, on: x < edge || x > 1 - edge, field: u, points: 16}");
  expect_error([&] { refuse_untrainable(problem(kHeat, predicate)); }, {"'edge' is read by no"});
  std::vector<std::string> in_a_value = base;
  in_a_value.push_back("parameters.level={learnable: true, initial: 0.5}");
  in_a_value.push_back("conditions.ends={type: dirichlet, faces: [left, right], field: u, value: level - 0.5, points: 16}");
  EXPECT_NO_THROW(refuse_untrainable(problem(kHeat, in_a_value)));
}

// A field that no condition reads or sets was written as the solution all the same: the untrained
// network's output. Refused before training; a field read through a derivative, or only set by a
// condition, is trained.
TEST_F(SolveTest, AFieldNothingConstrainsIsRefusedBeforeTraining) {
  const std::vector<std::string> two_fields = {"fields=[u, v]", "training.adam.steps=2", "output.checkpoint_every=0"};
  expect_error([&] { refuse_untrainable(problem(kHeat, two_fields)); },
               {"fields[1]: the field 'v' is read by no condition's equation or value, set by none"});
  std::vector<std::string> derivative = two_fields;
  derivative.push_back("conditions.pde.equation=u_t - kappa*u_xx + v_x");
  EXPECT_NO_THROW(refuse_untrainable(problem(kHeat, derivative)));
  std::vector<std::string> set = two_fields;
  set.push_back("conditions.v_start={type: initial, field: v, value: 0, points: 4}");
  EXPECT_NO_THROW(refuse_untrainable(problem(kHeat, set)));
}

// A run writes its resolved config as config.yaml: one there with comments (which eddy never
// writes), the config being read or another, lost them; one that is a link was written through,
// into the file it names. Refused, and replaced; the run's own config.yaml run again, with
// overrides or without, is neither.
TEST_F(SolveTest, ARunDoesNotWriteOverTheConfigItReads) {
  const fs::path folder = dir / "mine";
  fs::create_directories(folder);
  const std::string written = kHeat + "# notes on this run\n";
  std::ofstream(folder / "config.yaml") << written;
  const std::vector<std::string> into_folder = {"output.dir=" + folder.string(), "training.adam.steps=2",
                                                "output.checkpoint_every=0"};
  auto config = io::Config::load((folder / "config.yaml").string(), into_folder);
  const Problem own = read_problem(*config);
  expect_error([&] { solve(own, {}); }, {"holds a config.yaml with comments (the config being read)"});
  EXPECT_EQ(io::read_file((folder / "config.yaml").string()), written);
  // Another config run there; a comment at the end of a line.
  const std::string inline_comment = kHeat + "seed: 3   # the seed of the paper\n";
  std::ofstream(folder / "config.yaml") << inline_comment;
  auto another = [&] { return read_problem(*io::Config::parse(kHeat, "another.yaml", into_folder)); };
  expect_error([&] { solve(another(), {}); }, {"holds a config.yaml with comments, which a run"});
  EXPECT_EQ(io::read_file((folder / "config.yaml").string()), inline_comment);
  // A link is replaced; the file it names is left as it was.
  fs::remove(folder / "config.yaml");
  std::ofstream(dir / "elsewhere.yaml") << written;
  fs::create_symlink(dir / "elsewhere.yaml", folder / "config.yaml");
  EXPECT_TRUE(solve(another(), {}).finished);
  EXPECT_FALSE(fs::is_symlink(folder / "config.yaml"));
  EXPECT_EQ(io::read_file((dir / "elsewhere.yaml").string()), written);
  // The resolved config, as a run writes it, run again in its folder, then with an override.
  std::ofstream(folder / "config.yaml") << own.resolved_config;
  auto again = io::Config::load((folder / "config.yaml").string());
  EXPECT_TRUE(solve(read_problem(*again), {}).finished);
  auto longer = io::Config::load((folder / "config.yaml").string(), {"training.adam.steps=3"});
  EXPECT_TRUE(solve(read_problem(*longer), {}).finished);
}

// Likewise the results file: one at solution.h5 that no run wrote (a user's data, or any other
// file) was replaced by the run's results. The run's own is written over by the next run.
TEST_F(SolveTest, ARunDoesNotWriteOverAResultsFileItDidNotWrite) {
  const fs::path folder = dir / "data";
  fs::create_directories(folder);
  const std::string results = (folder / "solution.h5").string();
  {
    io::Hdf5Writer observations(results);
    observations.write("u", arange(0, 4, 1, DType::f64));
    observations.commit();
  }
  auto into_folder = [&] {
    return read_problem(*io::Config::parse(kHeat, "heat.yaml", {"output.dir=" + folder.string(),
                                                                 "training.adam.steps=2", "output.checkpoint_every=0"}));
  };
  expect_error([&] { solve(into_folder(), {}); }, {"holds a solution.h5 that no eddy run wrote", "another name"});
  EXPECT_EQ(io::read_hdf5(results, "u").to_vector<double>(), (std::vector<double>{0, 1, 2, 3}));
  std::ofstream(results) << "not HDF5\n";
  expect_error([&] { solve(into_folder(), {}); }, {"holds a solution.h5 that no eddy run wrote"});
  fs::remove(results);
  EXPECT_TRUE(solve(into_folder(), {}).finished);
  EXPECT_TRUE(io::hdf5_has_attribute(results, "/", "config_hash"));
  EXPECT_TRUE(solve(into_folder(), {}).finished);
}

// A reference file that gives each field at other points (NaN elsewhere, as Ghia's cavity table
// gives u and v on different lines) scores each field where it has values. Scored where both had,
// this one scored 0 for both at its one shared point.
TEST_F(SolveTest, AReferenceScoresEachFieldWhereItHasValues) {
  fs::create_directories(dir);
  std::ofstream(dir / "reference.csv") << "x,u,v\n0.1,2,\n0.2,2,\n0.3,3,\n0.4,4,\n0.5,5,5\n0.6,,6\n0.7,,7\n0.8,,0\n";
  const std::string text = cat(R"(dtype: float64
geometry: {space: {type: interval, min: 0, max: 1}}
fields: [u, v]
conditions:
  a: {type: interior, equation: u_x - 10, points: 16}
  b: {type: interior, equation: v_x - 10, points: 16}
model: {width: 8, depth: 2, output_transform: {u: 10*x + 0*net_u, v: 10*x + 0*net_v}}
training: {adam: {steps: 1}, log_every: 0}
validation:
  reference: {file: )", (dir / "reference.csv").string(), R"(, points: x, fields: {u: u, v: v}}
output: {grid: [11], vtk: false, checkpoint_every: 0}
)");
  const SolveResult result = solve(problem(text), {});
  ASSERT_TRUE(result.finished) << result.message;
  // u is 10 x exactly: off by 1 at x = 0.1 of the five u values; v off by 8 at x = 0.8 of its four.
  EXPECT_NEAR(result.metrics->relative_l2.at("u"), 1 / std::sqrt(4.0 + 4 + 9 + 16 + 25), 1e-12);
  EXPECT_NEAR(result.metrics->max_error.at("u"), 1.0, 1e-12);
  EXPECT_NEAR(result.metrics->relative_l2.at("v"), 8 / std::sqrt(25.0 + 36 + 49 + 0), 1e-12);
  EXPECT_NEAR(result.metrics->max_error.at("v"), 8.0, 1e-12);
  std::ofstream(dir / "reference.csv") << "x,u,v\n0.1,2,\n0.2,2,\n";
  expect_error([&] { problem(text); }, {"validation.reference.fields.v", "no finite values of v"});
}

TEST_F(SolveTest, WritesResultsThatReadBack) {
  Problem p = problem(kHeat);
  ASSERT_TRUE(solve(p, {}).finished);
  const std::string h5 = (dir / "run/solution.h5").string();
  Tensor u = io::read_hdf5(h5, "fields/u");
  EXPECT_EQ(u.shape(), (Shape{9, 5}));
  EXPECT_EQ(io::read_hdf5(h5, "coordinates/t").numel(), 5);
  EXPECT_EQ(io::read_hdf5(h5, "history/step").numel(), 21);  // steps 1..20 and the final
  EXPECT_EQ(io::read_hdf5(h5, "metrics/u_relative_l2").numel(), 2);  // steps 10 and 20, the final one
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

// ---- training aids ----

// The Poisson problem with the PDE residual scaled by `scale`, which scales its loss gradient.
std::string scaled_poisson(const std::string& scale) {
  return R"(dtype: float64
geometry: {space: {type: interval, min: 0, max: 1}}
fields: [u]
conditions:
  pde: {type: interior, equation: )" + scale + R"(*(u_xx + pi^2*sin(pi*x)), points: 64}
  ends: {type: dirichlet, faces: [left, right], field: u, value: 0, points: 2}
sampling: {method: sobol}
model: {width: 16, depth: 2}
training:
  adam: {steps: 20, learning_rate: 0.01}
  loss_weighting: {scheme: grad_norm, every: 5, alpha: 0.5}
  log_every: 1
output: {grid: [9], vtk: false, checkpoint_every: 0}
)";
}

// ||d loss / d network weights||.
double gradient_norm(PinnState& state, const Tensor& loss) {
  double squares = 0;
  for (const Tensor& g : grad({loss}, state.model().parameters())) squares += sum(square(g)).item<double>();
  return std::sqrt(squares);
}

// A learnable parameter is the run's guess, not the truth: a reference that reaches one, directly
// or through a helper, is refused when the config is read (solve scored the run against the
// initial guess, eval against the trained value).
TEST_F(SolveTest, AReferenceMayNotUseALearnableParameter) {
  const std::vector<std::string> learnable = {"parameters.kappa={learnable: true, initial: 0.2}",
                                              "training.adam.steps=2", "output.checkpoint_every=0"};
  expect_error([&] { solve(problem(kHeat, learnable), {}); },
               {"test.yaml:", "a reference may not use a learnable parameter (kappa)", "write the true value"});
  std::vector<std::string> through_a_helper = learnable;
  through_a_helper.push_back("helpers={rate: kappa*pi^2}");
  through_a_helper.push_back("validation.reference.expressions.u=exp(-rate*t)*sin(pi*x)");
  expect_error([&] { solve(problem(kHeat, through_a_helper), {}); }, {"may not use a learnable parameter (kappa)"});
  // Read from the text, not from values: kappa - kappa is 0 whatever kappa is.
  std::vector<std::string> cancelling = learnable;
  cancelling.push_back("validation.reference.expressions.u=exp(-(0.1 + kappa - kappa)*pi^2*t)*sin(pi*x)");
  expect_error([&] { problem(kHeat, cancelling); }, {"may not use a learnable parameter (kappa)"});
  std::vector<std::string> true_value = learnable;
  true_value.push_back("helpers={unused: 2*kappa}");
  true_value.push_back("validation.reference.expressions.u=exp(-0.1*pi^2*t)*sin(pi*x)");
  EXPECT_TRUE(solve(problem(kHeat, true_value), {}).finished);
}

TEST_F(SolveTest, GradNormWeightingFollowsTheGradientNorms) {
  Problem p = problem(scaled_poisson("1"));
  PinnState state(p);
  state.sample(0);
  const double pde = gradient_norm(state, state.condition_loss(0));
  const double ends = gradient_norm(state, state.condition_loss(1));
  update_adaptive_weights(state, 0);
  // lambda_i <- alpha * 1 + (1 - alpha) * (sum_j ||grad L_j||) / ||grad L_i||, alpha = 0.5.
  EXPECT_NEAR(state.adaptive_weights()[0], 0.5 + 0.5 * (pde + ends) / pde, 1e-9);
  EXPECT_NEAR(state.adaptive_weights()[1], 0.5 + 0.5 * (pde + ends) / ends, 1e-9);
}

TEST_F(SolveTest, AdaptiveWeightsKeepAConditionThatHoldsUpToRounding) {
  // The output transform makes u(0) and u(1) zero up to rounding (sin(pi) is 1.2e-16): the
  // ends' gradient and trace are rounding noise, and their weight stays where it was, where it
  // had become 1e28 and more.
  std::string text = scaled_poisson("1");
  const std::string plain = "model: {width: 16, depth: 2}";
  text.replace(text.find(plain), plain.size(),
               "model: {width: 16, depth: 2, output_transform: {u: sin(pi*x)*net_u}}");
  for (const std::string scheme :
       {"{scheme: grad_norm, every: 5, alpha: 0.5}", "{scheme: ntk, every: 5, alpha: 0.5}"}) {
    SCOPED_TRACE(scheme);
    std::string weighted = text;
    const std::string grad_norm = "{scheme: grad_norm, every: 5, alpha: 0.5}";
    weighted.replace(weighted.find(grad_norm), grad_norm.size(), scheme);
    const Problem p = problem(weighted);
    PinnState state(p);
    state.sample(0);
    ASSERT_LT(state.condition_loss(1).item<double>(), 1e-28);
    update_adaptive_weights(state, 5);
    EXPECT_EQ(state.adaptive_weights()[1], 1.0);
    EXPECT_GT(state.adaptive_weights()[0], 0.99);
  }
}

TEST_F(SolveTest, GradNormWeightingRaisesTheConditionWithTheWeakerGradient) {
  // A PDE loss with a tiny gradient gains weight over the boundary's; one with a huge gradient
  // leaves the boundary the larger weight.
  for (const auto& [scale, pde_gains] : {std::pair{"1e-3", true}, std::pair{"1e3", false}}) {
    SCOPED_TRACE(scale);
    std::ostringstream log;
    SolveOptions options;
    options.log = &log;
    ASSERT_TRUE(solve(problem(scaled_poisson(scale)), options).finished);
    const std::string h5 = (dir / "run/solution.h5").string();
    const std::vector<double> pde = io::read_hdf5(h5, "history/weight_pde").to_vector<double>();
    const std::vector<double> ends = io::read_hdf5(h5, "history/weight_ends").to_vector<double>();
    EXPECT_EQ(pde.front(), 1.0);  // step 1, before the first update (after step 5)
    EXPECT_EQ(ends.front(), 1.0);
    if (pde_gains) {
      EXPECT_GT(pde.back(), 100.0);
      EXPECT_LT(ends.back(), 2.0);
    } else {
      EXPECT_GT(ends.back(), 100.0);
      EXPECT_LT(pde.back(), 2.0);
    }
    EXPECT_NE(log.str().find("weights (pde "), std::string::npos) << log.str();
  }
}

// The Poisson problem of scaled_poisson with NTK weighting.
std::string ntk_poisson(const std::string& scale, const std::string& weighting) {
  std::string text = scaled_poisson(scale);
  const std::string grad_norm = "{scheme: grad_norm, every: 5, alpha: 0.5}";
  text.replace(text.find(grad_norm), grad_norm.size(), weighting);
  return text;
}

TEST_F(SolveTest, NtkWeightingEqualizesTheWeightedTraces) {
  // The paper's point: after an update without smoothing, lambda_i tr(K_i) is the same for every
  // condition (sum_j tr(K_j)). The PDE's trace is on a subset of 16 of its 64 points.
  Problem p = problem(ntk_poisson("1", "{scheme: ntk, every: 5, alpha: 0, ntk_points: 16}"));
  PinnState state(p);
  state.sample(0);
  update_adaptive_weights(state, 5);
  const std::vector<double> traces = ntk_traces(state, 5);
  ASSERT_EQ(traces.size(), 2u);
  const std::vector<double>& lambda = state.adaptive_weights();
  EXPECT_GT(std::abs(std::log(traces[0] / traces[1])), 1.0);  // the traces differ: the test has something to show
  EXPECT_NEAR(lambda[0] * traces[0], traces[0] + traces[1], 1e-12 * (traces[0] + traces[1]));
  EXPECT_NEAR(lambda[1] * traces[1], traces[0] + traces[1], 1e-12 * (traces[0] + traces[1]));
  // The subset is fixed by the step: another step takes other points, so another trace.
  EXPECT_EQ(ntk_traces(state, 5), traces);
  EXPECT_NE(ntk_traces(state, 10)[0], traces[0]);
}

TEST_F(SolveTest, NtkTraceMatchesABruteForceJacobian) {
  // With ntk_points above the point counts, the trace is over all of a condition's points:
  // the mean over them of ||d r(x_p) / d theta||^2, here with the Jacobian's columns taken by
  // central differences in each network weight.
  Problem p = problem(ntk_poisson("1", "{scheme: ntk, ntk_points: 1000}"));
  PinnState state(p);
  state.sample(0);
  const std::vector<double> traces = ntk_traces(state, 0);
  const std::vector<Tensor> network = state.model().parameters();
  for (size_t c = 0; c < 2; ++c) {
    SCOPED_TRACE(p.conditions[c].name);
    std::vector<int64_t> rows(static_cast<size_t>(state.all_samples()[c].points.shape()[0]));
    std::iota(rows.begin(), rows.end(), 0);
    double squares = 0;
    const double h = 1e-6;
    for (Tensor weight : network) {
      const std::vector<double> values = weight.to_vector<double>();
      for (size_t k = 0; k < values.size(); ++k) {
        auto residual_with = [&](double shift) {
          NoGradGuard no_grad;
          std::vector<double> moved = values;
          moved[k] += shift;
          weight.copy_(tensor(moved, weight.shape()));
          return state.residual_at_rows(c, rows).detach().to_vector<double>();
        };
        const std::vector<double> up = residual_with(h), down = residual_with(-h);
        for (size_t r = 0; r < up.size(); ++r) squares += std::pow((up[r] - down[r]) / (2 * h), 2);
        residual_with(0);
      }
    }
    const double expected = squares / static_cast<double>(rows.size());
    EXPECT_NEAR(traces[c], expected, 1e-6 * expected);
  }
}

TEST_F(SolveTest, NtkWeightingRaisesTheConditionWithTheSmallerKernel) {
  // Scaling the PDE residual by 1e-3 scales its kernel by 1e-6: its weight rises, and the log and
  // history show the weights as grad_norm's do.
  std::ostringstream log;
  SolveOptions options;
  options.log = &log;
  ASSERT_TRUE(solve(problem(ntk_poisson("1e-3", "{scheme: ntk, every: 5, alpha: 0.5, ntk_points: 8}")), options)
                  .finished);
  const std::string h5 = (dir / "run/solution.h5").string();
  const std::vector<double> pde = io::read_hdf5(h5, "history/weight_pde").to_vector<double>();
  const std::vector<double> ends = io::read_hdf5(h5, "history/weight_ends").to_vector<double>();
  EXPECT_EQ(pde.front(), 1.0);
  EXPECT_GT(pde.back(), 100.0);
  EXPECT_LT(ends.back(), 2.0);
  EXPECT_NE(log.str().find("weights (pde "), std::string::npos) << log.str();
}

// A problem far from unit scale gives gradients near Adam's eps, where its steps shrink and training
// stalls (a field of magnitude 1e-6 ended 1e3 times its size off, silently): said after the first
// step with the remedy; not at unit scale, nor once eps is below the gradients.
TEST_F(SolveTest, GradientsNearAdamsEpsAreWarnedOf) {
  for (const auto& [scale, eps, warned] : {std::tuple{"1", "1.0e-8", false}, {"1.0e-6", "1.0e-8", true},
                                           {"1.0e-6", "1.0e-30", false}}) {
    std::ostringstream log;
    SolveOptions options;
    options.log = options.warnings = &log;
    const Problem p = problem(scaled_poisson(scale), {cat("model.output_transform={u: ", scale, "*net_u}"),
                                                      cat("training.adam.eps=", eps), "training.adam.steps=2"});
    ASSERT_TRUE(solve(p, options).finished);
    EXPECT_EQ(log.str().find("the first step's gradients have an RMS of") != std::string::npos, warned)
        << scale << " " << eps << "\n" << log.str();
  }
}

TEST_F(SolveTest, ConfiguredWeightMultipliesTheAdaptiveOne) {
  Problem p = problem(scaled_poisson("1"), {"conditions.ends.weight=10"});
  PinnState state(p);
  state.sample(0);
  state.set_adaptive_weights({2.0, 3.0});
  EXPECT_EQ(state.effective_weight(0), 2.0);
  EXPECT_EQ(state.effective_weight(1), 30.0);
  std::vector<double> terms;
  const double loss = state.loss(&terms).item<double>();
  EXPECT_NEAR(loss, 2.0 * terms[0] + 30.0 * terms[1], 1e-12 * loss);
}

TEST_F(SolveTest, CausalWeightsStartAtOneAndDecayInTime) {
  Problem p = problem(kHeat, {"training.causal={chunks: 8, epsilon: 100}"});
  PinnState state(p);
  state.sample(0);
  const Tensor loss = state.condition_loss(0);
  const std::vector<double>& w = state.causal_weights(0);
  ASSERT_EQ(w.size(), 8u);
  EXPECT_EQ(w[0], 1.0);
  for (size_t k = 1; k < w.size(); ++k) {
    EXPECT_GT(w[k], 0.0);
    EXPECT_LT(w[k], w[k - 1]);  // every chunk's loss is positive
  }
  EXPECT_EQ(state.min_causal_weight(), w.back());
  EXPECT_TRUE(state.causal_weights(1).empty());  // the initial condition is not weighted in time
  // The points are sorted by time, so chunks are row blocks of 64 / 8 = 8 points.
  const std::vector<double> t = flatten(slice(state.samples()[0].points, 1, 1, 2)).to_vector<double>();
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
  // The loss is (1/M) sum_k w_k L_k, and its gradient treats the w_k as constants.
  Tensor squared = square(state.interior_residual(0, state.samples()[0].points));
  Tensor expected;
  for (int64_t k = 0; k < 8; ++k) {
    Tensor term = w[k] * mean(slice(squared, 0, 8 * k, 8 * (k + 1))) / 8.0;
    expected = expected.defined() ? expected + term : term;
  }
  EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-12);
  const std::vector<Tensor> network = state.model().parameters();
  const std::vector<Tensor> got = grad({loss}, network), want = grad({expected}, network);
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<double> a = got[i].to_vector<double>(), b = want[i].to_vector<double>();
    for (size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(a[j], b[j], 1e-12);
  }
}

TEST_F(SolveTest, CausalWeightingIsLoggedAndRecorded) {
  std::ostringstream log;
  SolveOptions options;
  options.log = &log;
  ASSERT_TRUE(solve(problem(kHeat, {"training.causal={chunks: 4, epsilon: 10}"}), options).finished);
  EXPECT_NE(log.str().find("causal_min "), std::string::npos) << log.str();
  const std::vector<double> smallest =
      io::read_hdf5((dir / "run/solution.h5").string(), "history/min_causal_weight").to_vector<double>();
  ASSERT_EQ(smallest.size(), 21u);
  for (double w : smallest) {
    EXPECT_GT(w, 0.0);
    EXPECT_LE(w, 1.0);
  }
}

TEST_F(SolveTest, RefinementAddsTheCandidatesWithTheLargestResidual) {
  Problem p = problem(scaled_poisson("1"), {"sampling.rar={every: 10, candidates: 200, add: 5}"});
  PinnState state(p);
  state.sample(0);
  const Tensor candidates = refinement_candidates(state, 0, 10);
  ASSERT_EQ(candidates.shape(), (Shape{200, 1}));
  std::vector<double> size = flatten(abs(state.interior_residual(0, candidates))).to_vector<double>();
  double average = 0;
  for (double s : size) average += s / static_cast<double>(size.size());
  std::sort(size.begin(), size.end());
  const double fifth_largest = size[size.size() - 5];

  refine(state, 10);
  const Tensor added = state.added_points(0);
  ASSERT_EQ(added.shape(), (Shape{5, 1}));
  for (double s : flatten(abs(state.interior_residual(0, added))).to_vector<double>()) {
    EXPECT_GT(s, average);
    EXPECT_GE(s, fifth_largest);
  }
  EXPECT_EQ(state.samples()[0].points.shape()[0], 64 + 5);
  EXPECT_EQ(state.samples()[1].points.shape()[0], 2);  // boundary conditions are not refined
  // Resampling redraws the original points and keeps the added ones.
  refine(state, 20);
  state.sample(1);
  EXPECT_EQ(state.samples()[0].points.shape()[0], 64 + 10);
  const Tensor last_rows = slice(state.samples()[0].points, 0, 64, 74);
  EXPECT_EQ(last_rows.to_vector<double>(), state.added_points(0).to_vector<double>());
}

TEST_F(SolveTest, RefinementDuringASolve) {
  // Refinements after steps 10 and 20 add 2 x 5 points to the pde condition.
  Problem p = problem(scaled_poisson("1"), {"sampling.rar={every: 10, candidates: 200, add: 5}"});
  ASSERT_TRUE(solve(p, {}).finished);
  EXPECT_EQ(io::read_hdf5((dir / "run/solution.h5").string(), "points/pde/coordinates").shape(), (Shape{74, 1}));
}

// Positions (j + 1/2) / n of n candidates in [0, 1], as rows of a [n, 1] tensor's values.
std::vector<double> unit_positions(int64_t n) {
  std::vector<double> x(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) x[j] = (static_cast<double>(j) + 0.5) / static_cast<double>(n);
  return x;
}

// The positions of the drawn candidates, with every index drawn once.
std::vector<double> drawn_positions(const std::vector<double>& x, const std::vector<int64_t>& drawn) {
  EXPECT_EQ(std::set<int64_t>(drawn.begin(), drawn.end()).size(), drawn.size()) << "an index drawn twice";
  std::vector<double> positions;
  for (int64_t j : drawn) positions.push_back(x[j]);
  return positions;
}

double fraction_above(const std::vector<double>& values, double threshold) {
  return static_cast<double>(std::count_if(values.begin(), values.end(), [&](double v) { return v >= threshold; })) /
         static_cast<double>(values.size());
}

TEST(RadDraw, DensityFollowsTheResidualToThePowerKPlusC) {
  // 100,000 candidates in [0, 1]; a residual of 1 on the right half and 0 on the left.
  const std::vector<double> x = unit_positions(100000);
  std::vector<double> step_residual;
  for (double v : x) step_residual.push_back(v >= 0.5 ? 1.0 : 0.0);
  auto right_fraction = [&](double k, double c) {
    Generator generator(7);
    return fraction_above(drawn_positions(x, rad_draw(step_residual, 2000, {1000, 100000, k, c}, generator)), 0.5);
  };
  // c = 0: a density of 0 where the residual is, so every point lands in the right half.
  EXPECT_EQ(right_fraction(1, 0), 1.0);
  // mean |r| = 1/2, so the densities are 2 + c on the right and c on the left: with c = 1 three
  // quarters of the points (standard error 0.01) land on the right; with c large, half.
  EXPECT_NEAR(right_fraction(1, 1), 0.75, 0.04);
  EXPECT_NEAR(right_fraction(1, 1e6), 0.5, 0.04);

  // A residual r = x, c = 0: the points have density (k + 1) x^k, whose mean is (k + 1)/(k + 2).
  for (double k : {1.0, 2.0}) {
    SCOPED_TRACE(cat("k = ", k));
    Generator generator(11);
    const std::vector<double> drawn = drawn_positions(x, rad_draw(x, 2000, {1000, 100000, k, 0}, generator));
    double mean = 0;
    for (double v : drawn) mean += v / static_cast<double>(drawn.size());
    EXPECT_NEAR(mean, (k + 1) / (k + 2), 0.02);  // standard error 0.005
  }
}

TEST(RadDraw, IsReproducibleAndNeverDrawsANonFiniteResidual) {
  std::vector<double> sizes = unit_positions(1000);
  for (size_t j = 0; j < sizes.size(); j += 10) sizes[j] = std::nan("");
  sizes[5] = std::numeric_limits<double>::infinity();
  const RadOptions options{1000, 1000, 1, 1};
  Generator first(3), again(3), other(4);
  const std::vector<int64_t> drawn = rad_draw(sizes, 500, options, first);
  EXPECT_EQ(rad_draw(sizes, 500, options, again), drawn);
  EXPECT_NE(rad_draw(sizes, 500, options, other), drawn);
  for (int64_t j : drawn) EXPECT_TRUE(std::isfinite(sizes[j])) << j;
  // With every residual 0 and c = 0 no candidate has a density: the draw is the first ones, which
  // are uniform points already.
  Generator zero(5);
  const std::vector<int64_t> first_ones = rad_draw(std::vector<double>(10, 0.0), 4, {1000, 10, 1, 0}, zero);
  EXPECT_EQ(first_ones, (std::vector<int64_t>{0, 1, 2, 3}));
  // With c = 0 and fewer nonzero residuals than points, those with none come next, and a
  // non-finite one only after them all (it was drawn among them).
  Generator few(6);
  const std::vector<double> mostly_zero{0, std::nan(""), 2, 0, 0, 1, std::numeric_limits<double>::infinity(), 0};
  std::vector<int64_t> drawn_few = rad_draw(mostly_zero, 6, {1000, 8, 1, 0}, few);
  std::sort(drawn_few.begin(), drawn_few.end());
  EXPECT_EQ(drawn_few, (std::vector<int64_t>{0, 2, 3, 4, 5, 7}));
}

TEST_F(SolveTest, RadReplacesTheInteriorPointsReproducibly) {
  const std::vector<std::string> rad{"sampling.rad={every: 10, candidates: 2000, k: 1, c: 0}"};
  Problem p = problem(scaled_poisson("1"), rad);
  PinnState state(p), twin(p);
  state.sample(0);
  twin.sample(0);
  const std::vector<double> uniform = state.samples()[0].points.to_vector<double>();
  const std::vector<double> boundary = state.samples()[1].points.to_vector<double>();
  redistribute(state, 10);
  const Tensor redistributed = state.samples()[0].points;
  ASSERT_EQ(redistributed.shape(), (Shape{64, 1}));
  EXPECT_NE(redistributed.to_vector<double>(), uniform);
  EXPECT_EQ(state.rad_points(0).to_vector<double>(), redistributed.to_vector<double>());
  EXPECT_EQ(state.samples()[1].points.to_vector<double>(), boundary);  // only interior conditions
  EXPECT_FALSE(state.rad_points(1).defined());

  // With c = 0 the draw favours large residuals: its mean |r| beats uniform points' (64 of them).
  auto mean_size = [&](const Tensor& points) { return mean(abs(state.interior_residual(0, points))).item<double>(); };
  Generator uniform_generator(9);
  EXPECT_GT(mean_size(redistributed), 1.2 * mean_size(state.interior_points(64, uniform_generator)));

  // The draw is fixed by (seed, step, condition), and resampling keeps it.
  redistribute(twin, 10);
  EXPECT_EQ(twin.samples()[0].points.to_vector<double>(), redistributed.to_vector<double>());
  redistribute(twin, 20);
  EXPECT_NE(twin.samples()[0].points.to_vector<double>(), redistributed.to_vector<double>());
  state.sample(1);
  EXPECT_EQ(state.samples()[0].points.to_vector<double>(), redistributed.to_vector<double>());
}

// ---- the compiled training step ----

// What a run leaves that the training step decides: the loss at every logged step, then the
// final loss and learned parameters.
struct Trajectory {
  std::vector<double> losses;
  std::map<std::string, double> learned;
  std::string log;
};

class CompiledStepTest : public SolveTest {
 protected:
  Trajectory run(const Problem& p, bool eager) {
    std::ostringstream log;
    SolveOptions options;
    options.eager = eager;
    options.log = &log;
    const SolveResult result = solve(p, options);
    EXPECT_TRUE(result.finished) << result.message;
    Trajectory t{io::read_hdf5((dir / "run/solution.h5").string(), "history/loss").to_vector<double>(),
                 result.learned, log.str()};
    t.losses.push_back(result.loss);
    fs::remove_all(dir / "run");
    return t;
  }

  // Runs `p` eagerly and compiled and expects the same losses and parameters, to `tolerance`
  // relative; returns the compiled run's log.
  std::string expect_compiled_matches_eager(const Problem& p, double tolerance) {
    const Trajectory eager = run(p, true), compiled = run(p, false);
    EXPECT_EQ(eager.log.find("compiled"), std::string::npos) << eager.log;
    EXPECT_EQ(eager.losses.size(), compiled.losses.size());
    for (size_t i = 0; i < std::min(eager.losses.size(), compiled.losses.size()); ++i) {
      EXPECT_NEAR(compiled.losses[i], eager.losses[i], tolerance * std::abs(eager.losses[i])) << "logged loss " << i;
    }
    for (const auto& [name, value] : eager.learned) {
      EXPECT_NEAR(compiled.learned.at(name), value, tolerance * std::abs(value)) << name;
    }
    // The losses changed, so matching ones are not two constant sequences.
    EXPECT_NE(eager.losses.front(), eager.losses.back());
    return compiled.log;
  }
};

// The compiled step's loss, terms and gradients are the eager step's, also once the parameters
// and weights have moved: parameters are captured by reference, weights are inputs. (Trajectories
// alone would not show a gradient off by a factor: Adam's steps do not depend on its scale.)
TEST_F(CompiledStepTest, TheCompiledStepGivesTheEagerGradientsAsParametersMove) {
  const Problem p = problem(kHeat, {"parameters.kappa={learnable: true, initial: 0.2}",
                                    "validation.reference.expressions.u=exp(-0.1*pi^2*t)*sin(pi*x)",
                                    "training.causal={chunks: 4, epsilon: 1}"});
  PinnState state(p);
  state.sample(0);
  const std::vector<Tensor> trainable = state.trainable();
  TrainingStep eager(state, false, {}), compiled(state, true, {});
  for (int move = 0; move < 3; ++move) {
    SCOPED_TRACE(cat("move ", move));
    const StepEvaluation a = eager.evaluate(), b = compiled.evaluate();
    EXPECT_NEAR(b.loss.item<double>(), a.loss.item<double>(), 1e-12 * a.loss.item<double>());
    for (size_t c = 0; c < a.terms.size(); ++c) EXPECT_NEAR(b.terms[c], a.terms[c], 1e-12 * a.terms[c]) << c;
    ASSERT_EQ(b.gradients.size(), trainable.size());
    for (size_t i = 0; i < trainable.size(); ++i) {
      const double scale = max(abs(a.gradients[i])).item<double>();
      EXPECT_GT(scale, 0.0) << "gradient " << i;
      EXPECT_LE(max(abs(b.gradients[i] - a.gradients[i])).item<double>(), 1e-12 * scale) << "gradient " << i;
    }
    NoGradGuard no_grad;
    for (size_t i = 0; i < trainable.size(); ++i) Tensor(trainable[i]).copy_(trainable[i] - 0.1 * a.gradients[i]);
    state.set_adaptive_weights({1.0 + move, 1.0, 0.5});
  }
}

// A whole training step (residuals with their derivatives, causal weights, every condition, the
// gradient of the loss) traced abstractly: no kernel runs, and the graph is the one the eager
// trace records, node for node, with the same captured parameters.
TEST_F(CompiledStepTest, AnAbstractTraceOfTheStepRunsNoKernelAndMatchesTheEagerTrace) {
  const Problem p = problem(kHeat, {"parameters.kappa={learnable: true, initial: 0.2}",
                                    "validation.reference.expressions.u=exp(-0.1*pi^2*t)*sin(pi*x)",
                                    "training.causal={chunks: 4, epsilon: 1}"});
  PinnState state(p);
  state.sample(0);
  const TrainingStep step(state, true, {});
  const std::vector<Tensor> inputs = step.inputs();
  const compiler::Trace eager = step.trace(inputs, compiler::Evaluation::concrete);
  const uint64_t kernels_before = kernel_evaluations();
  const compiler::Trace abstract = step.trace(inputs, compiler::Evaluation::abstract);
  EXPECT_EQ(kernel_evaluations(), kernels_before);

  EXPECT_GT(eager.graph.nodes.size(), 100u);
  EXPECT_EQ(abstract.graph.to_string(), eager.graph.to_string());
  ASSERT_EQ(abstract.graph.captured.size(), eager.graph.captured.size());
  for (size_t i = 0; i < eager.graph.captured.size(); ++i) {
    const compiler::CapturedTensor &a = abstract.graph.captured[i], &e = eager.graph.captured[i];
    EXPECT_EQ(a.id, e.id) << i;
    ASSERT_EQ(a.constant, e.constant) << i;
    // Parameters are the same tensors; constants made from host numbers are made anew each time.
    if (e.constant) {
      EXPECT_EQ(a.tensor.to_vector<double>(), e.tensor.to_vector<double>()) << i;
    } else {
      EXPECT_TRUE(a.tensor.same(e.tensor)) << i;
    }
  }
  EXPECT_EQ(abstract.graph.outputs, eager.graph.outputs);
  for (const Tensor& output : abstract.outputs) EXPECT_TRUE(output.is_abstract());
}

// The same runs, eager and compiled, with every input the step takes or holds: interior, initial
// and Dirichlet points resampled every 5 steps, points added by refinement (a new shape, so a
// second trace), grad_norm weights, causal weights and a learnable equation parameter. Adam in
// float32 to 1e-5; L-BFGS in float64, because in float32 its line searches turn last-place
// differences into different steps (a trial point where the loss jumps is accepted or not).
TEST_F(CompiledStepTest, AdamAndLbfgsMatchTheEagerStepInTime) {
  auto heat = [&](const std::string& dtype, int lbfgs_iterations) {
    return problem(kHeat, {"dtype=" + dtype, "parameters.kappa={learnable: true, initial: 0.2}",
                           "validation.reference.expressions.u=exp(-0.1*pi^2*t)*sin(pi*x)", "training.adam.steps=12", cat("training.lbfgs.iterations=", lbfgs_iterations),
                           "training.loss_weighting={scheme: grad_norm, every: 3, alpha: 0.5}",
                           "training.causal={chunks: 4, epsilon: 1}", "sampling.rar={every: 4, candidates: 40, add: 3}",
                           "validation.every=0", "output.checkpoint_every=0", "output.vtk=false"});
  };
  const std::string log = expect_compiled_matches_eager(heat("float32", 0), 1e-5);
  // One report, though refinement's new shapes traced the step again.
  const size_t report = log.find("training step compiled in ");
  EXPECT_NE(report, std::string::npos) << log;
  EXPECT_EQ(log.find("training step compiled in ", report + 1), std::string::npos) << log;
  expect_compiled_matches_eager(heat("float64", 5), 1e-9);
}

// Normals (Neumann), periodic partner points, and observations with their values (data), with the
// equation's coefficient learned from the observations: Adam in float32, L-BFGS in float64.
TEST_F(CompiledStepTest, NormalsPeriodicPartnersAndDataMatchTheEagerStep) {
  const double pi = std::numbers::pi;
  const Tensor x = linspace(0, 2 * pi, 24, DType::f64);
  fs::create_directories(dir);
  io::Hdf5Writer data((dir / "observations.h5").string());
  data.write("points", reshape(x, {-1, 1}));
  data.write("u", sin(x));
  data.commit();
  const std::string text = R"(dtype: float32
geometry: {space: {type: interval, min: 0, max: 6.283185307179586}}
fields: [u]
parameters: {k: {learnable: true, initial: 0.5}}
conditions:
  pde: {type: interior, equation: k*u_xx + sin(x), points: 64}
  slope: {type: neumann, faces: [left], field: u, value: 1, points: 1}
  wrap: {type: periodic, axis: x, points: 1}
  observed: {type: data, file: )" + (dir / "observations.h5").string() + R"(, points: points, fields: {u: u}}
model: {width: 16, depth: 2}
training:
  adam: {steps: 10, learning_rate: 0.01}
  lbfgs: {iterations: 5}
  log_every: 1
output: {grid: [9], vtk: false, checkpoint_every: 0}
)";
  const std::string log = expect_compiled_matches_eager(problem(text, {"training.lbfgs.iterations=0"}), 1e-5);
  EXPECT_NE(log.find("training step compiled in "), std::string::npos) << log;
  expect_compiled_matches_eager(problem(text, {"dtype=float64"}), 1e-9);
}

TEST_F(CompiledStepTest, AStepTheCompilerCannotCaptureRunsEagerlyAndSaysWhy) {
  // A supplied equation that checks a value on the host, which a captured graph cannot replay.
  EquationFunction checked = [](const Tensor& x, const Tensor& u, const std::map<std::string, Tensor>&) {
    EDDY_CHECK(std::isfinite(sum(u).item<double>()), "the network output is not finite");
    const Tensor u_x = grad({u}, {x}, {ones_like(u)}, true)[0];
    const Tensor u_xx = grad({u_x}, {x}, {ones_like(u_x)}, true)[0];
    return u_xx + std::numbers::pi * std::numbers::pi * sin(std::numbers::pi * x);
  };
  const Problem p = problem(poisson("{type: dirichlet, on: x == 1, field: u, value: 0, points: 1}"),
                            {"equations={}", "conditions.pde.equation=checked", "training.adam.steps=10",
                             "training.lbfgs.iterations=3", "training.log_every=1"},
                            {{"checked", checked}});
  const Trajectory eager = run(p, true);
  // A warning, on stderr whatever the log (--quiet dropped it with the progress notes).
  ::testing::internal::CaptureStderr();
  const Trajectory fallback = run(p, false);
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("warning: training step runs eagerly: compile: the traced function reads the elements"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(fallback.losses, eager.losses);  // the same eager code, bit for bit
}

}  // namespace
}  // namespace eddy::pinn
