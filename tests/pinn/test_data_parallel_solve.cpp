// Data-parallel `eddy solve`: on N ranks the loss at every Adam step, the final loss after
// L-BFGS and the learned equation parameters are those of a single process on the same points,
// to float64 rounding; the training aids that read the loss (grad_norm and NTK weights, causal
// weights, refinement and RAD) agree too; and a run checkpointed on N ranks resumes on M. ctest
// runs this binary as a plain process and under `mpirun -np 2`; on every rank the reference is a
// single-process solve of its own.

#include <gtest/gtest.h>
#include <unistd.h>
#include <vtkDataArray.h>
#include <vtkImageData.h>
#include <vtkNew.h>
#include <vtkPointData.h>
#include <vtkXMLImageDataReader.h>
#include <vtkXMLPImageDataReader.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "eddy/dist/communicator.h"
#include "eddy/eddy.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/hdf5.h"
#include "solvers/pinn/problem.h"
#include "solvers/pinn/solver.h"
#include "support/job_directory.h"

namespace eddy::pinn {
namespace {

namespace fs = std::filesystem;

// Heat equation with a learnable diffusivity (an inverse problem's set-up) and point counts that
// two ranks share unevenly.
const std::string kHeat = R"(dtype: float64
geometry:
  space: {type: interval, min: 0, max: 1}
  time: {min: 0, max: 0.5}
fields: [u]
parameters: {kappa: {learnable: true, initial: 0.3}}
conditions:
  pde: {type: interior, equation: u_t - kappa*u_xx, points: 63}
  start: {type: initial, field: u, value: sin(pi*x), points: 15}
  ends: {type: dirichlet, faces: [left, right], field: u, points: 17}
sampling: {method: uniform, resample_every: 5}
model: {width: 8, depth: 2}
training:
  adam: {steps: 16, learning_rate: 0.01}
  lbfgs: {iterations: 8}
  log_every: 1
output: {grid: [9, 5], vtk: false, checkpoint_every: 0}
)";

// 2-D heat in time, validated against its analytic solution: the results are a .pvd series of
// images, and validation is shared out over the ranks too.
const std::string kHeat2d = R"(dtype: float64
geometry:
  space: {type: rectangle, min: [0, 0], max: [1, 1]}
  time: {min: 0, max: 1}
fields: [u]
parameters: {kappa: 0.05}
conditions:
  pde: {type: interior, equation: u_t - kappa*laplacian(u), points: 61}
  start: {type: initial, field: u, value: sin(pi*x)*sin(pi*y), points: 21}
  walls: {type: dirichlet, field: u, value: 0, points: 23}
model: {width: 8, depth: 2}
training:
  adam: {steps: 4, learning_rate: 0.01}
  lbfgs: {iterations: 0}
  log_every: 1
validation:
  every: 2
  points: 101
  reference: {expressions: {u: exp(-2*kappa*pi^2*t)*sin(pi*x)*sin(pi*y)}}
output: {grid: [7, 5, 3], checkpoint_every: 0}
)";

// The values of field `name` of a VTK image, in VTK's point order.
std::vector<double> image_values(vtkImageData* image, const char* name) {
  vtkDataArray* array = image->GetPointData()->GetArray(name);
  std::vector<double> values;
  if (!array) return values;
  for (vtkIdType i = 0; i < array->GetNumberOfTuples(); ++i) values.push_back(array->GetTuple1(i));
  return values;
}

// What a run leaves: the loss and weights at every logged step (rank 0, from solution.h5), the
// final loss and the learned parameters (every rank).
struct Trajectory {
  std::vector<double> losses, pde_weights;
  double final_loss = 0;
  std::map<std::string, double> learned;
};

class DataParallelSolve : public ::testing::Test {
 protected:
  Problem problem(const std::string& run, std::vector<std::string> overrides = {},
                  const std::string& text = kHeat) {
    overrides.push_back("output.dir=" + (dir_ / run).string());
    configs_.push_back(io::Config::parse(text, "heat.yaml", overrides));
    return read_problem(*configs_.back());
  }

  // A run on `comm`'s ranks; a null communicator is all of the job's.
  Trajectory run(const Problem& p, dist::Communicator* comm, bool resume = false) {
    SolveOptions options;
    options.communicator = comm;
    options.resume = resume;
    const SolveResult result = solve(p, options);
    EXPECT_TRUE(result.finished) << result.message;
    Trajectory t;
    t.final_loss = result.loss;
    t.learned = result.learned;
    if (!comm && world().rank() != 0) return t;  // rank 0 alone writes the run folder
    const std::string h5 = p.output.dir + "/solution.h5";
    t.losses = io::read_hdf5(h5, "history/loss").to_vector<double>();
    t.pde_weights = io::read_hdf5(h5, "history/weight_pde").to_vector<double>();
    return t;
  }

  // A single-process run of this rank's own.
  Trajectory serial_run(const std::string& name, const std::vector<std::string>& overrides = {},
                        const std::string& text = kHeat) {
    const auto single = dist::make_single_process_communicator();
    return run(problem(cat(name, "_rank", world().rank()), overrides, text), single.get());
  }

  static void expect_same(const Trajectory& parallel, const Trajectory& serial, double tolerance) {
    EXPECT_NEAR(parallel.final_loss, serial.final_loss, tolerance * std::abs(serial.final_loss));
    for (const auto& [name, value] : serial.learned) {
      EXPECT_NEAR(parallel.learned.at(name), value, tolerance * std::abs(value)) << name;
    }
    if (world().rank() != 0) return;
    ASSERT_EQ(parallel.losses.size(), serial.losses.size());
    for (size_t i = 0; i < serial.losses.size(); ++i) {
      EXPECT_NEAR(parallel.losses[i], serial.losses[i], tolerance * std::abs(serial.losses[i])) << "logged loss " << i;
      EXPECT_NEAR(parallel.pde_weights[i], serial.pde_weights[i], tolerance * std::abs(serial.pde_weights[i]))
          << "pde weight " << i;
    }
    // The losses moved, so agreeing ones are not two constant sequences.
    EXPECT_NE(serial.losses.front(), serial.losses.back());
  }

  // A dataset of a run's solution.h5.
  Tensor result(const std::string& run, const std::string& dataset) const {
    return io::read_hdf5((dir_ / run / "solution.h5").string(), dataset);
  }
  Tensor pde_points(const std::string& run) const { return result(run, "points/pde/coordinates"); }

  JobDirectory job_{"eddy_dp_solve_"};
  const fs::path& dir_ = job_.path();
  std::vector<std::unique_ptr<io::Config>> configs_;
};

TEST_F(DataParallelSolve, AdamAndLbfgsMatchOneProcessWithALearnableParameter) {
  SCOPED_TRACE(cat("rank ", world().rank(), " of ", world().size()));
  const Trajectory serial = serial_run("serial");
  const Trajectory parallel = run(problem("parallel"), nullptr);
  expect_same(parallel, serial, 1e-9);
  EXPECT_NE(parallel.learned.at("kappa"), 0.3);  // learned, not left at its initial value
  // ZeRO stage 1: each rank keeps Adam's moments for its share of the weights and kappa.
  expect_same(run(problem("zero1", {"training.zero_stage=1"}), nullptr), serial, 1e-9);
  if (world().rank() == 0) {  // the ranks' blocks of the output grid make up the whole field
    const Tensor serial_u = result("serial_rank0", "fields/u");
    EXPECT_EQ(result("parallel", "fields/u").shape(), (Shape{9, 5}));
    EXPECT_LT(max(abs(result("parallel", "fields/u") - serial_u)).item<double>(), 1e-9);
  }
}

// A parallel section states the split a job without one makes (the points over every rank); one
// process runs the same file as it is, and a mesh of another size than the job is refused.
TEST_F(DataParallelSolve, AParallelSectionSplitsThePointsAsAJobWithoutOne) {
  SCOPED_TRACE(cat("rank ", world().rank(), " of ", world().size()));
  const Trajectory serial = serial_run("serial");
  const std::string ranks = std::to_string(std::max(world().size(), 2));
  expect_same(run(problem("mesh", {"parallel.mesh=[" + ranks + "]", "parallel.names=[dp]"}), nullptr), serial, 1e-9);
  if (world().size() == 1) return;
  const std::string more = std::to_string(world().size() + 1);
  try {
    run(problem("wrong_mesh", {"parallel.mesh=[" + more + "]", "parallel.names=[dp]"}), nullptr);
    FAIL() << "a mesh of " << more << " ranks ran on " << world().size();
  } catch (const Error& e) {
    // The section is the overrides' alone, so they are named instead of the file.
    EXPECT_NE(std::string(e.what()).find(cat("command-line overrides 'parallel.mesh=[", more,
                                             "]', 'parallel.names=[dp]': parallel: mesh [", more, "] has ", more,
                                             " ranks, but this job has ", world().size(), "; start it with mpirun -np ",
                                             more)),
              std::string::npos)
        << e.what();
  }
}

TEST_F(DataParallelSolve, ValidationAndTheImageSeriesMatchOneProcess) {
  SCOPED_TRACE(cat("rank ", world().rank(), " of ", world().size()));
  const Trajectory serial = serial_run("serial", {}, kHeat2d);
  const Trajectory parallel = run(problem("parallel", {}, kHeat2d), nullptr);
  expect_same(parallel, serial, 1e-9);
  if (world().rank() != 0) return;
  EXPECT_LT(max(abs(result("parallel", "metrics/u_relative_l2") - result("serial_rank0", "metrics/u_relative_l2")))
                .item<double>(),
            1e-9);
  EXPECT_LT(max(abs(result("parallel", "fields/u") - result("serial_rank0", "fields/u"))).item<double>(), 1e-9);
  // One image per time, whole on one process and in pieces on several.
  const std::string image = world().size() > 1 ? ".pvti" : ".vti";
  for (int k = 0; k < 3; ++k) {
    vtkNew<vtkXMLImageDataReader> whole;
    whole->SetFileName((dir_ / "serial_rank0" / cat("solution_", k, ".vti")).c_str());
    whole->Update();
    const std::vector<double> expected = image_values(whole->GetOutput(), "u");
    ASSERT_EQ(expected.size(), 7u * 5u);
    vtkNew<vtkXMLPImageDataReader> pieces;
    vtkNew<vtkXMLImageDataReader> one;
    vtkImageData* read = nullptr;
    const std::string file = (dir_ / "parallel" / cat("solution_", k, image)).string();
    if (world().size() > 1) {
      pieces->SetFileName(file.c_str());
      pieces->Update();
      read = pieces->GetOutput();
    } else {
      one->SetFileName(file.c_str());
      one->Update();
      read = one->GetOutput();
    }
    const std::vector<double> values = image_values(read, "u");
    ASSERT_EQ(values.size(), expected.size()) << file;
    for (size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(values[i], expected[i], 1e-9) << file << " point " << i;
  }
  std::ostringstream series;
  series << io::read_file((dir_ / "parallel" / "solution.pvd").string());
  EXPECT_NE(series.str().find(cat("solution_2", image)), std::string::npos) << series.str();
}

TEST_F(DataParallelSolve, EagerStepsMatchOneProcess) {
  SCOPED_TRACE(cat("rank ", world().rank(), " of ", world().size()));
  const std::vector<std::string> short_run{"training.adam.steps=6", "training.lbfgs.iterations=3"};
  const Trajectory serial = serial_run("serial", short_run);
  SolveOptions options;
  options.eager = true;
  const SolveResult parallel = solve(problem("parallel", short_run), options);
  ASSERT_TRUE(parallel.finished) << parallel.message;
  EXPECT_NEAR(parallel.loss, serial.final_loss, 1e-9 * serial.final_loss);
}

// Taylor mode takes the second derivatives of activations built of primitives without a
// second-order rule (softplus: log, abs, maximum; gelu; silu) from nested forward levels, whose
// tangents on the distributed points must reach every rank's rows.
TEST_F(DataParallelSolve, TaylorModeThroughEachActivationMatchesOneProcess) {
  for (const std::string activation : {"softplus", "gelu", "silu"}) {
    SCOPED_TRACE(cat(activation, ", rank ", world().rank(), " of ", world().size()));
    const std::vector<std::string> short_run{"training.adam.steps=6", "training.lbfgs.iterations=0",
                                             "training.derivatives=taylor", "model.activation=" + activation};
    const Trajectory serial = serial_run("serial_" + activation, short_run);
    expect_same(run(problem("parallel_" + activation, short_run), nullptr), serial, 1e-9);
  }
}

TEST_F(DataParallelSolve, GradNormCausalWeightsAndRefinementMatchOneProcess) {
  SCOPED_TRACE(cat("rank ", world().rank(), " of ", world().size()));
  // Weights change at 3, 6, 9, ...; points are added at 4, 8, 12 (3 each: fewer than a share per
  // rank on some counts); causal chunks straddle the ranks' shares of the time-sorted points.
  const std::vector<std::string> aids{"training.loss_weighting={scheme: grad_norm, every: 3, alpha: 0.5}",
                                      "training.causal={chunks: 5, epsilon: 1}",
                                      "sampling.rar={every: 4, candidates: 40, add: 3}", "training.lbfgs.iterations=0"};
  const Trajectory serial = serial_run("serial", aids);
  const Trajectory parallel = run(problem("parallel", aids), nullptr);
  expect_same(parallel, serial, 1e-9);
  if (world().rank() == 0) {
    EXPECT_NE(serial.pde_weights.front(), serial.pde_weights.back());  // grad_norm moved the weights
    const Tensor serial_points = pde_points(cat("serial_rank0"));
    EXPECT_EQ(serial_points.shape(), (Shape{63 + 4 * 3, 2}));
    EXPECT_EQ(pde_points("parallel").to_vector<double>(), serial_points.to_vector<double>());
  }
}

TEST_F(DataParallelSolve, NtkWeightsAndRadMatchOneProcess) {
  SCOPED_TRACE(cat("rank ", world().rank(), " of ", world().size()));
  // Weights change at 3, 6, 9, ..., each from the kernels at 11 points per condition, which the
  // ranks share unevenly; the pde points are redrawn at 4, 8, 12 and 16.
  const std::vector<std::string> aids{"training.loss_weighting={scheme: ntk, every: 3, alpha: 0.5, ntk_points: 11}",
                                      "sampling.rad={every: 4, candidates: 150, k: 2, c: 0.5}",
                                      "training.lbfgs.iterations=0"};
  const Trajectory serial = serial_run("serial", aids);
  const Trajectory parallel = run(problem("parallel", aids), nullptr);
  expect_same(parallel, serial, 1e-9);
  if (world().rank() == 0) {
    EXPECT_NE(serial.pde_weights.front(), serial.pde_weights.back());  // the NTK moved the weights
    const Tensor serial_points = pde_points(cat("serial_rank0"));
    EXPECT_EQ(serial_points.shape(), (Shape{63, 2}));
    EXPECT_EQ(pde_points("parallel").to_vector<double>(), serial_points.to_vector<double>());
  }
}

TEST_F(DataParallelSolve, TimeMarchingMatchesOneProcessWindowByWindow) {
  SCOPED_TRACE(cat("rank ", world().rank(), " of ", world().size()));
  // Three windows, each 16 Adam steps and 8 L-BFGS iterations from the weights of the one before,
  // whose prediction at the window's start is its initial condition.
  const std::vector<std::string> windows{"training.time_marching={windows: 3}"};
  const Trajectory serial = serial_run("serial", windows);
  const Trajectory parallel = run(problem("parallel", windows), nullptr);
  expect_same(parallel, serial, 1e-9);
  if (world().rank() == 0) {
    // The output grid, which each window's network fills for its own times.
    const std::vector<double> serial_u = result("serial_rank0", "fields/u").to_vector<double>();
    const std::vector<double> parallel_u = result("parallel", "fields/u").to_vector<double>();
    ASSERT_EQ(parallel_u.size(), serial_u.size());
    for (size_t i = 0; i < serial_u.size(); ++i) EXPECT_NEAR(parallel_u[i], serial_u[i], 1e-9) << "grid point " << i;
    const std::vector<double> stages = result("serial_rank0", "history/stage").to_vector<double>();
    EXPECT_EQ(stages.front(), 0);
    EXPECT_EQ(stages.back(), 2);
  }
}

// A checkpoint holds nothing of the ranks that wrote it: the points are redrawn from the seed and
// the step, so a run stopped on N ranks goes on on M and ends where an uninterrupted run ends.
TEST_F(DataParallelSolve, ACheckpointFromNRanksResumesOnM) {
  SCOPED_TRACE(cat("rank ", world().rank(), " of ", world().size()));
  const std::vector<std::string> adam_only{"training.lbfgs.iterations=0"};
  const Trajectory whole = serial_run("whole", adam_only);

  // The first half on all ranks, the second on one process (each rank resumes a copy).
  std::vector<std::string> first_half = adam_only;
  first_half.push_back("training.adam.steps=8");
  run(problem("split", first_half), nullptr);
  world().barrier();  // rank 0 has written the checkpoint
  const std::string copy = cat("split_rank", world().rank());
  fs::copy(dir_ / "split", dir_ / copy, fs::copy_options::recursive);
  const Problem rest = problem(copy, adam_only);
  const auto single = dist::make_single_process_communicator();
  const Trajectory resumed = run(rest, single.get(), true);
  EXPECT_NEAR(resumed.final_loss, whole.final_loss, 1e-9 * whole.final_loss);
  EXPECT_NEAR(resumed.learned.at("kappa"), whole.learned.at("kappa"), 1e-9);

  // And back: the first half on one process, the second on all ranks.
  const Problem widened_rest = problem("one_then_all", adam_only);
  if (world().rank() == 0) {
    const auto rank0_alone = dist::make_single_process_communicator();
    run(problem("one_then_all", first_half), rank0_alone.get());
  }
  world().barrier();
  const Trajectory widened = run(widened_rest, nullptr, true);
  EXPECT_NEAR(widened.final_loss, whole.final_loss, 1e-9 * whole.final_loss);
}

// A ZeRO-1 checkpoint holds the whole of Adam's state: the second half goes on on one process.
TEST_F(DataParallelSolve, AZeroStage1CheckpointResumesOnOneProcess) {
  SCOPED_TRACE(cat("rank ", world().rank(), " of ", world().size()));
  const std::vector<std::string> adam_only{"training.lbfgs.iterations=0"};
  const Trajectory whole = serial_run("whole", adam_only);
  run(problem("zero1_split", {"training.lbfgs.iterations=0", "training.adam.steps=8", "training.zero_stage=1"}),
      nullptr);
  world().barrier();  // rank 0 has written the checkpoint
  const std::string copy = cat("zero1_split_rank", world().rank());
  fs::copy(dir_ / "zero1_split", dir_ / copy, fs::copy_options::recursive);
  const auto single = dist::make_single_process_communicator();
  const Trajectory resumed = run(problem(copy, adam_only), single.get(), true);
  EXPECT_NEAR(resumed.final_loss, whole.final_loss, 1e-9 * whole.final_loss);
  EXPECT_NEAR(resumed.learned.at("kappa"), whole.learned.at("kappa"), 1e-9);
}

}  // namespace
}  // namespace eddy::pinn
