// Training in stages: time marching (training.time_marching) and parameter continuation
// (training.continuation). The stages run in order, each from the weights the one before ended
// with; a window's initial condition is the window before's solution at its start; the results,
// validation and export use each window's network in its window; and a run resumed in the middle
// of a stage ends exactly where an uninterrupted one does.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <numbers>
#include <sstream>

#include "eddy/eddy.h"
#include "eddy/io/hdf5.h"
#include "solvers/pinn/export.h"
#include "solvers/pinn/problem.h"
#include "solvers/pinn/solver.h"
#include "solvers/pinn/stages.h"
#include "support/expect_error.h"

namespace eddy::pinn {
namespace {

namespace fs = std::filesystem;

// u_t = kappa u_xx on [0, 1] x [0, 0.6], u = exp(-kappa pi^2 t) sin(pi x). Ten Adam steps per
// stage and a checkpoint every 15 steps, which falls inside the second stage.
const std::string kHeat = R"(dtype: float64
geometry:
  space: {type: interval, min: 0, max: 1}
  time: {min: 0, max: 0.6}
fields: [u]
parameters: {kappa: 0.1}
conditions:
  pde: {type: interior, equation: u_t - kappa*u_xx, points: 64}
  start: {type: initial, field: u, value: sin(pi*x), points: 16}
  ends: {type: dirichlet, faces: [left, right], field: u, points: 16}
sampling: {method: uniform, resample_every: 4}
model: {width: 8, depth: 2}
training:
  adam: {steps: 10, learning_rate: 0.01}
  log_every: 1
validation:
  every: 5
  reference: {expressions: {u: exp(-kappa*pi^2*t)*sin(pi*x)}}
  points: 50
output: {grid: [9, 7], vtk: false, checkpoint_every: 15}
)";

// A log that copies the run's checkpoint aside once a given text has been written to it: the
// checkpoint as it was at that point of the run, to resume from later.
class CheckpointCopier : public std::stringbuf {
 public:
  CheckpointCopier(fs::path run, std::string marker) : run_(std::move(run)), marker_(std::move(marker)) {}
  fs::path copy() const { return run_.parent_path() / "checkpoint_copy.safetensors"; }

 protected:
  // The progress lines end with a flush.
  int sync() override {
    if (!copied_ && str().find(marker_) != std::string::npos) {
      fs::copy_file(run_ / "checkpoint.safetensors", copy(), fs::copy_options::overwrite_existing);
      copied_ = true;
    }
    return 0;
  }

 private:
  fs::path run_;
  std::string marker_;
  bool copied_ = false;
};

class StagesTest : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("eddy_stages_" + std::to_string(::getpid()));
  fs::path run = dir / "run";
  void TearDown() override { fs::remove_all(dir); }

  Problem problem(const std::vector<std::string>& overrides, const std::string& text = kHeat) {
    std::vector<std::string> all = overrides;
    all.push_back("output.dir=" + run.string());
    configs_.push_back(io::Config::parse(text, "heat.yaml", all));
    return read_problem(*configs_.back());
  }

  std::vector<double> read(const std::string& name) const {
    return io::read_hdf5((run / "solution.h5").string(), name).to_vector<double>();
  }

  // Runs the problem uninterrupted, then again from the checkpoint it had written when its log
  // showed `marker`, and expects the same steps, loss, history and fields bit for bit.
  void expect_resume_matches(const std::vector<std::string>& overrides, const std::string& marker) {
    CheckpointCopier copier(run, marker);
    std::ostream log(&copier);
    SolveOptions options;
    options.log = &log;
    const Problem p = problem(overrides);
    const SolveResult whole = solve(p, options);
    ASSERT_TRUE(whole.finished) << whole.message;
    ASSERT_TRUE(fs::exists(copier.copy())) << "no line with '" << marker << "' in the log:\n" << copier.str();
    std::map<std::string, std::vector<double>> uninterrupted;
    const char* datasets[] = {"history/step", "history/stage", "history/loss", "history/loss_start", "metrics/step",
                              "metrics/u_relative_l2", "fields/u"};
    for (const char* name : datasets) uninterrupted[name] = read(name);

    fs::remove_all(run);
    fs::create_directories(run);
    fs::copy_file(copier.copy(), run / "checkpoint.safetensors");
    SolveOptions resume;
    resume.resume = true;
    const SolveResult resumed = solve(p, resume);
    ASSERT_TRUE(resumed.finished) << resumed.message;
    EXPECT_EQ(resumed.steps, whole.steps);
    EXPECT_EQ(resumed.loss, whole.loss);
    for (const char* name : datasets) EXPECT_EQ(read(name), uninterrupted.at(name)) << name;
  }

 private:
  std::vector<std::unique_ptr<io::Config>> configs_;
};

TEST_F(StagesTest, WindowsSplitTheTimeIntervalEvenly) {
  const Problem p = problem({"training.time_marching={windows: 3}"});
  EXPECT_EQ(stage_count(p), 3);
  EXPECT_EQ(stage_steps(p), 10);
  EXPECT_EQ(time_window(p, 0).first, 0.0);
  EXPECT_DOUBLE_EQ(time_window(p, 0).second, 0.2);
  EXPECT_EQ(time_window(p, 1).first, time_window(p, 0).second);  // no gap, no overlap
  EXPECT_EQ(time_window(p, 2).second, 0.6);
  EXPECT_EQ(describe_stage(p, 1), "window 2/3 (t from 0.2 to 0.4)");
  EXPECT_EQ(stage_count(problem({})), 1);
}

// In window 2 the points lie in its interval, the initial condition at its start, and the initial
// condition's target is window 1's residual there: with the model still at window 1's weights, the
// term is zero. The solution is window 1's network before t = 0.3 and the model's after it.
TEST_F(StagesTest, AWindowStartsFromThePreviousWindowsWeightsAndSolution) {
  const Problem p = problem({"training.time_marching={windows: 2}", "sampling.resample_every=0"});
  PinnState state(p);
  state.enter_stage(0);
  state.sample(0);
  std::vector<double> terms;
  state.loss(&terms);
  EXPECT_GT(terms[1], 1e-3);  // an untrained network is far from sin(pi x) at t = 0

  state.enter_stage(1);
  state.sample(1);
  const std::vector<double> pde = state.all_samples()[0].points.to_vector<double>();
  for (size_t i = 1; i < pde.size(); i += 2) {
    EXPECT_GE(pde[i], 0.3);
    EXPECT_LE(pde[i], 0.6);
  }
  const Tensor start = state.all_samples()[1].points;
  for (size_t i = 1; i < 32; i += 2) EXPECT_EQ(start.to_vector<double>()[i], 0.3);
  const Tensor window1 = state.predict(start);
  const Tensor expected = window1 - sin(slice(start, 1, 0, 1) * std::numbers::pi);
  EXPECT_LT(max(abs(state.all_samples()[1].targets - expected)).item<double>(), 1e-12);
  state.loss(&terms);
  EXPECT_LT(terms[1], 1e-24);

  const Tensor points = tensor(std::vector<double>{0.5, 0.1, 0.5, 0.29, 0.5, 0.3, 0.5, 0.5}, {4, 2});
  const std::vector<double> before = state.predict(points).to_vector<double>();
  {
    NoGradGuard no_grad;
    for (Tensor& weight : state.model().parameters()) weight.copy_(weight + 0.05);
  }
  const std::vector<double> after = state.predict(points).to_vector<double>();
  EXPECT_EQ(after[0], before[0]);
  EXPECT_EQ(after[1], before[1]);
  EXPECT_NE(after[2], before[2]);
  EXPECT_NE(after[3], before[3]);
}

TEST_F(StagesTest, TimeMarchingTrainsTheWindowsInTurnAndLogsThem) {
  std::ostringstream log;
  SolveOptions options;
  options.log = &log;
  const SolveResult result = solve(problem({"training.time_marching={windows: 3}"}), options);
  ASSERT_TRUE(result.finished) << result.message;
  EXPECT_EQ(result.steps, 30);
  for (const char* window : {"window 1/3 (t from 0 to 0.2)", "window 2/3 (t from 0.2 to 0.4): from the weights",
                             "adam window 3/3 (t from 0.4 to 0.6) 30/30"}) {
    EXPECT_NE(log.str().find(window), std::string::npos) << window << "\n" << log.str();
  }
  const std::vector<double> steps = read("history/step"), stages = read("history/stage");
  const std::vector<double> start = read("history/loss_start");
  ASSERT_EQ(steps.size(), 31u);  // every step, and the closing record
  for (size_t r = 0; r < 30; ++r) {
    EXPECT_EQ(steps[r], static_cast<double>(r + 1));
    EXPECT_EQ(stages[r], static_cast<double>(r / 10));
  }
  // The loss of a window's first step is taken at the weights the window before ended with,
  // whose solution is its initial condition: the initial term starts at zero.
  EXPECT_GT(start[0], 1e-3);
  EXPECT_LT(start[10], 1e-20);
  EXPECT_LT(start[20], 1e-20);
  EXPECT_EQ(read("fields/u").size(), 63u);

  // Re-evaluating the run (which loads every window's network) gives the closing metrics, and
  // the exported predictor gives the solver's values in every window.
  EXPECT_DOUBLE_EQ(evaluate_run(run.string()).relative_l2.at("u"), result.metrics->relative_l2.at("u"));
  auto config = io::Config::load((run / "config.yaml").string(), {}, io::Config::RelativePaths::working_directory);
  const Problem loaded = read_problem(*config);
  PinnState state(loaded);
  load_trained(state, run.string());
  EXPECT_EQ(state.stage(), 2);
  const Tensor points = tensor(std::vector<double>{0.3, 0.05, 0.3, 0.25, 0.7, 0.45, 0.7, 0.6}, {4, 2});
  export_run(run.string(), (dir / "export").string(), 4);
  const Predictor predictor = Predictor::load((dir / "export").string());
  const std::vector<double> exported = predictor.predict({points}).at(0).to_vector<double>();
  const std::vector<double> solved = state.predict(points).to_vector<double>();
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(exported[i], solved[i], 1e-12) << i;
}

TEST_F(StagesTest, TimeMarchingResumesInTheRightWindow) {
  // The checkpoint of step 15 is written at step 16's update, in window 2.
  expect_resume_matches({"training.time_marching={windows: 3}", "training.lbfgs.iterations=3"}, " 17/23");
}

TEST_F(StagesTest, ContinuationStepsTheParameterThroughItsValues) {
  std::ostringstream log;
  SolveOptions options;
  options.log = &log;
  const Problem p = problem({"training.continuation={parameter: kappa, values: [0.4, 0.2, 0.1]}"});
  PinnState state(p);
  state.enter_stage(1);
  EXPECT_EQ(state.parameter_values().at("kappa").item<double>(), 0.2);

  const SolveResult result = solve(p, options);
  ASSERT_TRUE(result.finished) << result.message;
  EXPECT_EQ(result.steps, 30);
  for (const char* stage : {"stage 1/3 (kappa = 0.4)", "stage 2/3 (kappa = 0.2): from the weights",
                            "adam stage 3/3 (kappa = 0.1) 30/30"}) {
    EXPECT_NE(log.str().find(stage), std::string::npos) << stage << "\n" << log.str();
  }
  const std::vector<double> kappa = read("history/kappa"), loss = read("history/loss");
  EXPECT_EQ(kappa[0], 0.4);
  EXPECT_EQ(kappa[9], 0.4);
  EXPECT_EQ(kappa[10], 0.2);
  EXPECT_EQ(kappa[29], 0.1);
  // A stage goes on from the weights the one before ended with, not from a fresh network: its
  // first loss is that of a trained network.
  EXPECT_LT(loss[10], 0.5 * loss[0]);
  EXPECT_LT(loss[20], 0.5 * loss[0]);
  // Validation takes the configured value, whichever stage the state is in.
  EXPECT_DOUBLE_EQ(evaluate_run(run.string()).relative_l2.at("u"), result.metrics->relative_l2.at("u"));
}

// The console's lines count a stage's steps from its first, as the records do: with L-BFGS after
// Adam a stage's first step is not a multiple of log_every, and the lines fell elsewhere.
TEST_F(StagesTest, LogLinesFallOnTheRecordedSteps) {
  std::ostringstream log;
  SolveOptions options;
  options.log = &log;
  const SolveResult result = solve(problem({"training.continuation={parameter: kappa, values: [0.2, 0.1]}",
                                            "training.lbfgs.iterations=3", "training.log_every=5"}),
                                   options);
  ASSERT_TRUE(result.finished) << result.message;
  for (const char* line : {"(kappa = 0.1) 18/23", "(kappa = 0.1) 23/23"}) {
    EXPECT_NE(log.str().find(line), std::string::npos) << line << "\n" << log.str();
  }
  EXPECT_EQ(log.str().find("(kappa = 0.1) 15/23"), std::string::npos) << log.str();
  const std::vector<double> steps = read("history/step");
  for (double step : {18.0, 23.0}) EXPECT_NE(std::find(steps.begin(), steps.end(), step), steps.end()) << step;
}

// L-BFGS's lines count its iterations against lbfgs.iterations: they counted loss evaluations
// against the evaluation budget (1.25 x iterations + 1), which the run stops short of.
TEST_F(StagesTest, LbfgsLinesCountIterations) {
  std::ostringstream log;
  SolveOptions options;
  options.log = &log;
  const SolveResult result = solve(problem({"training.lbfgs.iterations=3", "training.log_every=1"}), options);
  ASSERT_TRUE(result.finished) << result.message;
  for (const char* line : {"lbfgs 1/3", "lbfgs 2/3", "lbfgs 3/3"}) {
    EXPECT_NE(log.str().find(line), std::string::npos) << line << "\n" << log.str();
  }
  EXPECT_EQ(log.str().find("lbfgs 1/4"), std::string::npos) << log.str();
}

TEST_F(StagesTest, ContinuationResumesInTheRightStage) {
  expect_resume_matches({"training.continuation={parameter: kappa, values: [0.4, 0.2, 0.1]}"}, " 17/20");
}

TEST_F(StagesTest, AnOnPredicateThatSelectsNothingInALaterWindowFailsBeforeTraining) {
  // The ends exist only before t = 0.3: the second of two windows (t from 0.3) has none. The run
  // failed once the first window had trained; the check names the window before any step.
  std::ostringstream log;
  SolveOptions options;
  options.log = &log;
  const std::string early_ends = "conditions.ends={type: dirichlet, on: t < 0.25, field: u, points: 16}";
  expect_error([&] { solve(problem({"training.time_marching={windows: 2}", early_ends}), options); },
               {"conditions.ends.on", "selects no points", "in time-marching window 2 of 2 (t from 0.3 to 0.6)"});
  EXPECT_EQ(log.str().find("adam "), std::string::npos) << log.str();
}

TEST_F(StagesTest, KeysAreRefusedWhereTheyCannotApply) {
  const std::string steady = R"(geometry: {space: {type: interval, min: 0, max: 1}}
fields: [u]
conditions:
  pde: {type: interior, equation: u_xx + 1, points: 8}
training: {time_marching: {windows: 2}}
)";
  expect_error([&] { problem({}, steady); },
               {"heat.yaml:5:27: training.time_marching: time marching needs geometry.time"});
  std::string no_start = kHeat;
  no_start.erase(no_start.find("  start:"), no_start.find("  ends:") - no_start.find("  start:"));
  expect_error([&] { problem({"training.time_marching={windows: 2}"}, no_start); },
               {"training.time_marching: time marching needs an initial condition"});
  expect_error(
      [&] {
        problem({"training.time_marching={windows: 2}",
                 "conditions.gauge={type: points, at: [[0.5, 0.1]], field: u, value: 0.9}"});
      },
      {"training.time_marching: conditions.gauge lists its points"});
}

}  // namespace
}  // namespace eddy::pinn
