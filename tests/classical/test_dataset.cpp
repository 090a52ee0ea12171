// Dataset generation from YAML: the file read back holds what the solvers give, independent of
// the batching, Darcy files included, and config mistakes are errors that point at the key.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "eddy/eddy.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/hdf5.h"
#include "solvers/classical/burgers.h"
#include "solvers/classical/dataset.h"
#include "solvers/classical/output_dtype.h"
#include "solvers/classical/phase_field.h"
#include "support/expect_error.h"

namespace eddy::classical {
namespace {

namespace fs = std::filesystem;

class DatasetTest : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("eddy_classical_dataset_" + std::to_string(::getpid()));
  void TearDown() override { fs::remove_all(dir); }

  DatasetSpec spec(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
    auto config = io::Config::parse(yaml, "data.yaml", overrides);
    return read_dataset_spec(*config);
  }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

const char* kBurgers = R"(solver: burgers
resolution: 32
samples: 3
batch: 2
seed: 4
nu: 0.05
time:
  dt: 0.01
  final: 0.2
  records: 4
output:
  path: PATH
  dtype: float64
  vtk: true
)";

std::string with_path(std::string yaml, const std::string& path) { return yaml.replace(yaml.find("PATH"), 4, path); }

// An unstable time step made finite garbage (max |u| 219 from 1.8) or infinities in float32,
// written without a word; both are refused, naming the sample and time.dt.
// Stable but under-resolved: at nu = 1e-4 on 128 points the data were 18% to 100% from a
// converged solution, within the maximum principle's slack, and were written.
TEST_F(DatasetTest, BurgersFrontsTheGridDoesNotResolveAreRefused) {
  const std::string path = file("unresolved.h5");
  expect_error([&] {
    generate_dataset(spec(with_path(kBurgers, path), {"nu=1e-3", "time.dt=1e-3", "time.final=0.4"}));
  }, {"burgers solution holds", "top third of the wavenumbers the grid keeps", "resolution = 32 does not resolve",
      "give a larger resolution or nu"});
  EXPECT_FALSE(fs::exists(path));
  generate_dataset(spec(with_path(kBurgers, path), {"nu=1e-2", "time.dt=1e-3", "time.final=0.4", "resolution=128"}));
  EXPECT_TRUE(fs::exists(path));
  fs::remove(path);
  // Little energy near the cut-off, yet 2.6% from a converged solution: the same initial
  // conditions on twice the points tell, whatever the batch (a batch of 1 checked one sample).
  expect_error([&] {
    generate_dataset(spec(with_path(kBurgers, path), {"nu=0", "resolution=64", "time.dt=1e-4", "time.final=0.03",
                                                      "time.records=1", "seed=6", "samples=4", "batch=1"}));
  }, {"burgers solution at t = 0.03 is", "from the same initial condition solved on twice the points",
      "resolution = 64 or time.dt = 0.0001 is too coarse for it at nu = 0"});
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(DatasetTest, UnstableSolutionsAreRefused) {
  const std::string path = file("unstable.h5");
  const std::vector<std::string> unstable{"nu=0.001", "time.dt=0.1", "time.final=0.4"};
  expect_error([&] { generate_dataset(spec(with_path(kBurgers, path), unstable)); },
               {"sample 0's burgers solution reached max |u|", "maximum principle", "time.dt = 0.1"});
  std::vector<std::string> in_float32 = unstable;
  in_float32.push_back("output.dtype=float32");
  // Diagnosed on the float64 solution, whatever the file's dtype (a float32 cast made it inf first).
  expect_error([&] { generate_dataset(spec(with_path(kBurgers, path), in_float32)); },
               {"sample 0's burgers solution reached max |u|", "time.dt = 0.1"});
  EXPECT_FALSE(fs::exists(path));
  // Without viscosity the cause is the shock, at any time step: refused before solving where the
  // initial condition breaks before time.final (at dt = 0.01 the data were written, 0.9 apart
  // from dt = 0.005's), and accepted where it does not.
  for (const char* dt : {"time.dt=0.001", "time.dt=0.01"}) {
    expect_error([&] { generate_dataset(spec(with_path(kBurgers, path), {"nu=0", "resolution=256", dt})); },
                 {"generate: with nu = 0, sample ", " steepens into a shock at t = ",
                  "(1 / max(-u0'); the earliest of the samples), before time.final = 0.2", "give nu > 0 or a time.final below"});
  }
  EXPECT_FALSE(fs::exists(path));
  generate_dataset(spec(with_path(kBurgers, path), {"nu=0", "time.dt=1e-4", "time.final=1e-3", "time.records=1"}));
  EXPECT_TRUE(fs::exists(path));
  fs::remove(path);
  // Phase-field steps past their stability limit stayed finite (and Allen-Cahn's within its
  // maximum principle's slack) and were written; their Ginzburg-Landau energy rises.
  const std::string phase_field = "resolution: 32\nsamples: 1\nseed: 3\noutput: {path: PATH, vtk: false}\n";
  const std::vector<std::pair<std::string, std::string>> unstable_phase_fields{
      {"solver: allen_cahn\ntime: {dt: 1.2, final: 24, records: 20}\n", "allen_cahn"},
      {"solver: cahn_hilliard\ntime: {dt: 4.0e-3, final: 1, records: 10}\n", "cahn_hilliard"}};
  for (const auto& [yaml, solver] : unstable_phase_fields) {
    expect_error([&] { generate_dataset(spec(with_path(yaml + phase_field, path))); },
                 {"sample 0's " + solver + " solution's Ginzburg-Landau energy rose", "went unstable"});
  }
  EXPECT_FALSE(fs::exists(path));
}

// Checked with half the time step alone, phase-field data on too coarse a grid were written while
// 7% to 34% (Allen-Cahn) and 6.5% to 10% (Cahn-Hilliard) from the same on finer grids.
TEST_F(DatasetTest, PhaseFieldsTheGridDoesNotResolveAreRefused) {
  const std::string path = file("coarse.h5");
  const std::vector<std::pair<std::string, std::string>> coarse{
      {"allen_cahn", "epsilon: 0.02\ntime: {dt: 0.01, final: 20, records: 4}\n"},
      {"cahn_hilliard", "gamma: 1.0e-3\ntime: {dt: 2.0e-5, final: 0.1, records: 4}\n"}};
  for (const auto& [solver, keys] : coarse) {
    const std::string yaml = "solver: " + solver + "\nresolution: 16\nsamples: 2\nseed: 2\nlength: 1\n" + keys +
                             "output: {path: PATH, vtk: false}\n";
    expect_error([&] { generate_dataset(spec(with_path(yaml, path))); },
                 {solver + " solution at t = ", "from the same initial condition solved on twice the points",
                  "is too large or resolution = 16 too coarse for it; give a smaller time.dt or a larger resolution"});
  }
  EXPECT_FALSE(fs::exists(path));
}

// A folder that cannot be made was found after every sample had been solved.
TEST_F(DatasetTest, AnOutputPathThatCannotBeWrittenFailsBeforeSolving) {
  fs::create_directories(dir);
  std::ofstream(dir / "blocker") << "a file where a folder would go";
  const std::string path = file("blocker/sub/data.h5");
  const std::string darcy = "solver: darcy\nresolution: 16\nsamples: 100000\noutput: {path: PATH}\n";
  for (const std::string& yaml : {with_path(kBurgers, path), with_path(darcy, path)}) {
    expect_error([&] { generate_dataset(spec(yaml, {"samples=100000"})); },
                 {"generate: output.path " + path + ": cannot make its folder"});
  }
}

// What cannot fit in memory is refused before any work: a resolution of 10^12 ended in a bare
// std::bad_alloc, 2^63 - 1 samples in an overflowed row count at the write.
TEST_F(DatasetTest, ADatasetLargerThanMemoryIsRefusedBeforeSolving) {
  const std::string path = file("huge.h5");
  expect_error([&] { spec(with_path(kBurgers, path), {"resolution=1000000000000"}); },
               {"3 samples of 5 fields at resolution 1000000000000", "need at least", "this "});
  expect_error([&] { spec(with_path(kBurgers, path), {"samples=9223372036854775807", "batch=9223372036854775807"}); },
               {"9223372036854775807 samples of 5 fields at resolution 32", "need at least"});
  // Only min(batch, samples) samples are solved at once: one sample with a batch of 10^11 was
  // refused as needing terabytes, and the error named samples.
  EXPECT_NO_THROW(spec(with_path(kBurgers, path), {"samples=1", "batch=100000000000"}));
  // The records per sample are blamed where they make the size.
  expect_error([&] { spec(with_path(kBurgers, path), {"time.records=100000000000", "time.dt=1e-12"}); },
               {"override 'time.records=100000000000'", "need at least"});
}

// `batch` is no Darcy key: it was accepted, and listed among the valid keys, because the memory
// check asked whether it was set.
TEST_F(DatasetTest, DarcyRefusesBatch) {
  const std::string yaml = "solver: darcy\nresolution: 16\nsamples: 2\nbatch: 7\noutput: {path: PATH}\n";
  expect_error([&] { spec(with_path(yaml, file("darcy.h5"))); }, {"unknown key 'batch'"});
}

// A Navier-Stokes time step 25 times too large grew the RMS vorticity from 7 to about 6e5 over
// one time unit and stayed finite: written as a valid dataset.
TEST_F(DatasetTest, NavierStokesSolutionsPastTheEnergyBoundAreRefused) {
  const std::string path = file("ns.h5");
  const std::string yaml = with_path(R"(solver: navier_stokes
resolution: 32
samples: 2
seed: 0
nu: 1.0e-3
initial_condition: {sigma: 200}
time: {dt: 0.01, final: 1, records: 2}
output: {path: PATH}
)", path);
  expect_error([&] { generate_dataset(spec(yaml, {"time.dt=0.25"})); },
               {"sample 0's navier_stokes solution reached an RMS vorticity of", "time.dt = 0.25"});
  EXPECT_FALSE(fs::exists(path));
  generate_dataset(spec(yaml, {"time.dt=0.001"}));
  EXPECT_TRUE(fs::exists(path));
}

// Past the CFL limit but within the bound above: data 4% to 47% off were written.
TEST_F(DatasetTest, NavierStokesDataFarFromHalfTheTimeStepAreRefused) {
  const std::string path = file("ns_cfl.h5");
  const std::string yaml = with_path(R"(solver: navier_stokes
resolution: 64
samples: 2
seed: 0
nu: 1.0e-3
time: {dt: 1, final: 10, records: 10}
output: {path: PATH}
)", path);
  expect_error([&] { generate_dataset(spec(yaml)); },
               {"navier_stokes solution at t = ", "from the same initial condition solved on twice the points",
                "time.dt = 1 is too large at nu = 0.001 on 64 points", "give a smaller time.dt"});
  EXPECT_FALSE(fs::exists(path));
  // Stiff in the viscous term: Crank-Nicolson's finest modes flip sign every step, and the advice
  // was a larger resolution or nu, which make it worse.
  expect_error([&] { generate_dataset(spec(yaml, {"nu=10", "time.dt=0.01", "time.final=0.1", "time.records=1"})); },
               {"navier_stokes solution at t = ", "time.dt = 0.01 is too large at nu = 10",
                "flipping sign every step", "at most 2.47"});
  // Too coarse in space at a stable step: 2.2% to 3.6% from converged, checked with half the step
  // alone and written.
  expect_error([&] { generate_dataset(spec(yaml, {"resolution=32", "nu=1e-5", "time.dt=0.01", "time.final=5"})); },
               {"navier_stokes solution at t = ", "resolution = 32 or time.dt = 0.01 is too coarse for it"});
}

// Phase-field files: each record is the stepper's answer for the stored initial condition,
// Cahn-Hilliard keeps every sample's mass, and Allen-Cahn separates into phases near +-1.
TEST_F(DatasetTest, PhaseFieldFilesHoldTheSteppersTrajectories) {
  const char* yaml = R"(solver: SOLVER
resolution: 16
samples: 2
seed: 1
time: {dt: DT, final: FINAL, records: 2}
output: {path: PATH, dtype: float64, vtk: true}
)";
  for (const std::string solver : {"allen_cahn", "cahn_hilliard"}) {
    SCOPED_TRACE(solver);
    std::string text = with_path(yaml, file(solver + ".h5"));
    text.replace(text.find("SOLVER"), 6, solver);
    // Cahn-Hilliard's explicit term, Laplacian(c^3 - c), limits dt to about 1 / (3 c^2 max|k|^2);
    // at 1e-4 the data were 1.1% from converged, and refused.
    const double dt = solver == "allen_cahn" ? 0.01 : 2e-5;
    text.replace(text.find("DT"), 2, cat(dt));
    text.replace(text.find("FINAL"), 5, cat(40 * dt));
    generate_dataset(spec(text));
    const Tensor a = io::read_hdf5(file(solver + ".h5"), "a"), u = io::read_hdf5(file(solver + ".h5"), "u");
    ASSERT_EQ(u.shape(), (Shape{2, 2, 16, 16}));
    const Tensor last = squeeze(slice(u, 1, 1, 2), 1);
    Tensor expected;
    if (solver == "allen_cahn") {
      AllenCahnOptions options;
      options.dt = dt;
      options.steps = 40;
      expected = allen_cahn(a, options);
    } else {
      CahnHilliardOptions options;
      options.dt = dt;
      options.steps = 40;
      expected = cahn_hilliard(a, options);
      EXPECT_LT(max(abs(mean(last, {1, 2}) - mean(a, {1, 2}))).item<double>(), 1e-12);
    }
    EXPECT_LT(max(abs(last - expected)).item<double>(), 1e-12);
    EXPECT_TRUE(fs::exists(file(solver + "_sample0.vti")));
  }
  expect_error([&] { spec(with_path("solver: allen_cahn\nnu: 0.1\ntime: {dt: 0.1, final: 1}\noutput: {path: PATH}\n",
                                    file("x.h5"))); },
               {"data.yaml", "unknown key 'nu'"});
}

TEST_F(DatasetTest, BurgersFileHoldsTheSolverTrajectoriesWhateverTheBatching) {
  const std::string path = file("burgers.h5");
  generate_dataset(spec(with_path(kBurgers, path)));
  const Tensor a = io::read_hdf5(path, "a"), u = io::read_hdf5(path, "u"), t = io::read_hdf5(path, "t");
  EXPECT_EQ(a.shape(), (Shape{3, 32}));
  EXPECT_EQ(u.shape(), (Shape{3, 4, 32}));
  EXPECT_LT(max(abs(t - tensor<double>({0.05, 0.1, 0.15, 0.2}))).item<double>(), 1e-15);
  EXPECT_TRUE(fs::exists(file("burgers_sample0.vti")));

  // The last record of sample 2 is the solver's answer for that initial condition.
  Burgers solver(32, 1.0, 0.01, scalar(0.05, DType::f64));
  const Tensor expected = solver.solve(slice(a, 0, 2, 3), {20})[0];
  EXPECT_LT(max(abs(reshape(slice(slice(u, 0, 2, 3), 1, 3, 4), {1, 32}) - expected)).item<double>(), 1e-12);

  // Batches of one give the same samples (to rounding: FFTW plans differ with the batch size).
  const std::string single = file("single.h5");
  generate_dataset(spec(with_path(kBurgers, single), {"batch=1"}));
  EXPECT_LT(max(abs(io::read_hdf5(single, "u") - u)).item<double>(), 1e-13);
}

// Two datasets whose names differ after a dot have an image each (only .h5 is taken off), a run
// that is refused leaves the earlier dataset and its image as they were, and a killed run's
// temporary image is cleaned up by the next run.
TEST_F(DatasetTest, EachDatasetHasAnImageOfItsOwn) {
  generate_dataset(spec(with_path(kBurgers, file("nu1.0e-2"))));
  generate_dataset(spec(with_path(kBurgers, file("nu1.5e-2")), {"nu=0.06"}));
  EXPECT_TRUE(fs::exists(file("nu1.0e-2_sample0.vti")));
  EXPECT_TRUE(fs::exists(file("nu1.5e-2_sample0.vti")));
  EXPECT_FALSE(fs::exists(file("nu1_sample0.vti")));

  const std::string path = file("burgers.h5"), image = file("burgers_sample0.vti");
  generate_dataset(spec(with_path(kBurgers, path)));
  const std::string image_before = io::read_file(image);
  EXPECT_THROW(generate_dataset(spec(with_path(kBurgers, path), {"nu=1e-3", "time.dt=1e-3", "time.final=0.4"})),
               Error);
  EXPECT_EQ(io::read_file(image), image_before);

  // A running process's temporary of the path: another generate writing it now.
  const std::string running = path + ".tmp-" + std::to_string(::getppid());
  io::write_file_atomically(running, "being written");
  expect_error([&] { generate_dataset(spec(with_path(kBurgers, path))); },
               {"output.path", "is being written by another process (pid " + std::to_string(::getppid())});
  fs::remove(running);
  const std::string killed = image + ".tmp-999999999";
  io::write_file_atomically(killed, "part of an image");
  generate_dataset(spec(with_path(kBurgers, path), {"output.vtk=false"}));
  EXPECT_FALSE(fs::exists(killed));
  EXPECT_FALSE(fs::exists(image));
}

TEST_F(DatasetTest, NavierStokesFileHasTheFnoLayoutAndAttributes) {
  const std::string path = file("ns/ns.h5");
  generate_dataset(spec(with_path(R"(solver: navier_stokes
resolution: 16
samples: 2
nu: 1.0e-3
time: {dt: 0.01, final: 0.1, records: 2}
output: {path: PATH}
)", path)));
  const Tensor u = io::read_hdf5(path, "u");
  EXPECT_EQ(u.shape(), (Shape{2, 2, 16, 16}));
  EXPECT_EQ(u.dtype(), DType::f32);
  EXPECT_EQ(io::read_hdf5(path, "a").shape(), (Shape{2, 16, 16}));
  // The vorticity moved, and stayed of the order of the initial field.
  const Tensor a = cast(io::read_hdf5(path, "a"), DType::f64), last = cast(slice(u, 1, 1, 2), DType::f64);
  EXPECT_GT(max(abs(squeeze(last, 1) - a)).item<double>(), 1e-3);
  EXPECT_LT(max(abs(last)).item<double>(), 2 * max(abs(a)).item<double>());
}

// float32 files held inf, or zeros, where the float64 solves gave values beyond float32's range or
// below its normal numbers; each is refused, naming the array and the row.
TEST_F(DatasetTest, ValuesTheOutputDtypeCannotHoldAreRefused) {
  const Tensor rows = reshape(tensor(std::vector<double>{1, -2, 0, 1e-45, 0, -3e-46, 0, 0, 0}), {3, 3});
  expect_error([&] { in_output_dtype(rows, DType::f32, "the solution u", "scale it", 6); },
               {"the solution u of sample 7 is at most 1e-45 in magnitude", "subnormal",
                "write output.dtype: float64, or scale it"});
  expect_error([&] { in_output_dtype(tensor(std::vector<double>{0.5, 1e46}), DType::f32, "t", "scale time.final"); },
               {"t[1] reaches |value| = 1e+46, beyond float32's largest", "scale time.final"});
  // Not finite: in float64 too, and no dtype is the remedy.
  for (DType dtype : {DType::f32, DType::f64}) {
    expect_error([&] { in_output_dtype(tensor(std::vector<double>{0.5, INFINITY}), dtype, "u", "scale the forcing"); },
                 {"u[1] is not finite (inf) in float64 already: scale the forcing into its range"});
  }
  EXPECT_EQ(in_output_dtype(slice(rows, 0, 0, 1), DType::f32, "u", "").dtype(), DType::f32);
  EXPECT_EQ(in_output_dtype(rows, DType::f64, "u", "").dtype(), DType::f64);
  const std::string path = file("tiny.h5");
  expect_error([&] { generate_dataset(spec(with_path(kBurgers, path), {"initial_condition.sigma=2.5e-45",
                                                                       "output.dtype=float32"})); },
               {"the initial field a of sample 0 is at most", "scale initial_condition.sigma"});
  EXPECT_FALSE(fs::exists(path));
  // A prior float64 cannot hold drew all-zero (or NaN) fields, in float64 too: refused at its key.
  for (const char* prior : {"initial_condition.sigma=1e-300", "initial_condition.alpha=300"}) {
    expect_error([&] { spec(with_path(kBurgers, path), {prior}); },
                 {"initial_condition: sigma ", "which float64 cannot hold: the fields would be zero or not finite"});
  }
  EXPECT_NO_THROW(spec(with_path(kBurgers, path), {"initial_condition.sigma=1e-100"}));
}

// sigma follows tau and alpha when a dataset's stored config is read again with them changed (the
// stored config held the first value, so the new prior had the old amplitude).
TEST_F(DatasetTest, TheInitialFieldsSigmaFollowsItsKeysWhenAStoredConfigIsReadAgain) {
  const std::string yaml = with_path(R"(solver: navier_stokes
resolution: 16
samples: 2
nu: 1.0e-3
time: {dt: 0.01, final: 0.1, records: 2}
output: {path: PATH}
)", file("ns.h5"));
  const DatasetSpec first = spec(yaml);
  EXPECT_DOUBLE_EQ(first.initial_condition.sigma, std::pow(7.0, 1.5));
  EXPECT_EQ(first.resolved_config.find("sigma"), std::string::npos) << first.resolved_config;
  EXPECT_DOUBLE_EQ(spec(first.resolved_config, {"initial_condition.tau=4"}).initial_condition.sigma, 8.0);
  EXPECT_DOUBLE_EQ(spec(yaml, {"initial_condition.sigma=3"}).initial_condition.sigma, 3.0);
}

const char* kDarcy = R"(solver: darcy
resolution: 10
samples: 3
seed: 2
forcing: 1
coefficient: {high: 12, low: 3, alpha: 2, tau: 3}
output: {path: PATH, vtk: true}
)";

TEST_F(DatasetTest, DarcyFileHoldsCoefficientsAndSolutionsOnTheUnitSquare) {
  const std::string path = file("darcy/darcy.h5");
  generate_dataset(spec(with_path(kDarcy, path)));
  EXPECT_EQ(io::list_hdf5_datasets(path), (std::vector<std::string>{"a", "config", "u", "x"}));
  const Tensor a = cast(io::read_hdf5(path, "a"), DType::f64), u = cast(io::read_hdf5(path, "u"), DType::f64);
  EXPECT_EQ(io::read_hdf5(path, "a").dtype(), DType::f32);
  EXPECT_EQ(a.shape(), (Shape{3, 10, 10}));
  EXPECT_EQ(u.shape(), (Shape{3, 10, 10}));
  EXPECT_LT(max(abs(cast(io::read_hdf5(path, "x"), DType::f64) - arange(0, 10, 1, DType::f64) / 9.0)).item<double>(),
            1e-7);
  EXPECT_TRUE(fs::exists(file("darcy/darcy_sample0.vti")));

  // Two phases, a in {3, 12}; u > 0 inside (f = 1, maximum principle) and u = 0 on the boundary.
  const double lows = sum(cast(eq(a, full_like(a, 3.0)), DType::f64)).item<double>();
  const double highs = sum(cast(eq(a, full_like(a, 12.0)), DType::f64)).item<double>();
  EXPECT_EQ(lows + highs, 300.0);
  EXPECT_GT(max(a).item<double>(), min(a).item<double>());
  EXPECT_GT(min(slice(slice(u, 1, 1, 9), 2, 1, 9)).item<double>(), 0.0);
  for (int64_t edge : {0, 9}) {
    EXPECT_EQ(max(abs(slice(u, 1, edge, edge + 1))).item<double>(), 0.0);
    EXPECT_EQ(max(abs(slice(u, 2, edge, edge + 1))).item<double>(), 0.0);
  }

  // The same file as the C++ writer's, up to float32 rounding.
  const std::string reference = file("reference.h5");
  write_darcy_dataset({.resolution = 10, .samples = 3, .seed = 2}, reference);
  EXPECT_EQ(a.to_vector<double>(), io::read_hdf5(reference, "a").to_vector<double>());
  EXPECT_LT(max(abs(u - io::read_hdf5(reference, "u"))).item<double>(), 1e-7);
}

TEST_F(DatasetTest, DarcyConfigMistakesNameTheKey) {
  const std::string yaml = with_path(kDarcy, file("x.h5"));
  expect_error([&] { spec(yaml, {"coefficient.alpha=1"}); }, {"coefficient.alpha", "greater than 1"});
  expect_error([&] { spec(yaml, {"coefficient.low=0"}); }, {"coefficient.low", "positive"});
  expect_error([&] { spec(yaml, {"coefficient.hihg=2"}); }, {"unknown key 'hihg'", "did you mean 'high'"});
  expect_error([&] { spec(yaml, {"nu=0.1"}); }, {"unknown key 'nu'"});  // Burgers and Navier-Stokes only
  expect_error([&] { spec(yaml, {"resolution=2"}); }, {"resolution", "at least 3"});
}

TEST_F(DatasetTest, ConfigMistakesNameTheKey) {
  const std::string yaml = with_path(kBurgers, file("x.h5"));
  expect_error([&] { spec(yaml, {"samplse=3"}); }, {"unknown key 'samplse'", "did you mean 'samples'"});
  expect_error([&] { spec(yaml, {"output.path=''"}); }, {"output.path: is empty"});
  expect_error([&] { spec(yaml, {"solver=heat"}); }, {"solver", "burgers", "navier_stokes", "darcy"});
  expect_error([&] { spec(yaml, {"time.dt=0.03"}); }, {"time.dt", "whole number of steps"});
  // A step count past what a double counts exactly overflowed into step -2^63.
  expect_error([&] { spec(yaml, {"time.final=1e20", "time.dt=1", "time.records=1"}); },
               {"time.final", "1e+20 steps is more than eddy counts"});
  expect_error([&] { spec(yaml, {"time.dt=1e-300"}); }, {"override 'time.dt=1e-300'", "steps is more than eddy counts"});
  expect_error([&] { spec(yaml, {"forcing=fno"}); }, {"unknown key 'forcing'"});  // Navier-Stokes only
  expect_error([&] { spec(yaml, {"resolution=2"}); }, {"resolution", "at least 4"});
  auto config = io::Config::parse("solver: burgers\nnu: 0.1\n", "data.yaml");
  expect_error([&] { read_dataset_spec(*config); }, {"data.yaml", "missing required key 'time'"});
}

}  // namespace
}  // namespace eddy::classical
