// `device:` in a problem file, on a machine without a GPU: the solve runs on a stand-in GPU
// (support/host_memory_device.h) that keeps cuda tensors in host memory. A tensor the solver left
// on the CPU would meet a cuda one in some op and be refused, naming both devices; with none left
// behind, the run equals the CPU run bit for bit, since the same kernels ran. Also run under
// `mpirun -np 2` (stand_in_device_tests_np2): each rank then takes its own stand-in GPU, and the
// gradients cross the ranks through MPI from device memory, staged through the host. On a real
// GPU, scripts/gpu-check.sh runs `eddy solve` with `device: cuda` (docs/gpu.md).

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "eddy/eddy.h"
#include "eddy/io/hdf5.h"
#include "solvers/pinn/problem.h"
#include "solvers/pinn/solver.h"
#include "support/equal_checkpoints.h"
#include "support/expect_error.h"
#include "support/host_memory_device.h"
#include "support/job_directory.h"

namespace eddy::pinn {
namespace {

namespace fs = std::filesystem;

// Heat with a learned diffusivity, in time, over the paths a solve takes between steps: resampling,
// NTK loss weights, causal weights, RAD, validation against an expression, L-BFGS, the VTK and
// HDF5 results and the checkpoint.
const std::string kHeat = R"(dtype: float64
geometry:
  space: {type: interval, min: 0, max: 1}
  time: {min: 0, max: 0.5}
fields: [u]
parameters: {kappa: {learnable: true, initial: 0.2}}
conditions:
  pde: {type: interior, equation: u_t - kappa*u_xx, points: 64}
  start: {type: initial, field: u, value: sin(pi*x), points: 16}
  ends: {type: dirichlet, faces: [left, right], field: u, points: 16}
sampling: {method: uniform, resample_every: 7, rad: {every: 5, candidates: 256}}
model: {width: 8, depth: 2}
training:
  adam: {steps: 12, learning_rate: 0.01}
  lbfgs: {iterations: 4}
  loss_weighting: {scheme: ntk, every: 4, ntk_points: 8}
  causal: {chunks: 4}
  log_every: 1
validation:
  every: 6
  reference: {expressions: {u: exp(-0.1*pi^2*t)*sin(pi*x)}}
output: {grid: [9, 3], checkpoint_every: 5}
)";

class SolveOnDevice : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::install_host_memory_device(); }
  JobDirectory job{"eddy_solve_on_device_"};
  const fs::path& dir = job.path();

  SolveResult solve_in(const std::string& run, const std::vector<std::string>& overrides) {
    std::vector<std::string> all = overrides;
    all.push_back("output.dir=" + (dir / run).string());
    auto config = io::Config::parse(kHeat, "heat.yaml", all);
    SolveOptions options;
    options.eager = true;  // a compiled program for a cuda device runs CUDA kernels: a real GPU's
    SolveResult result = solve(read_problem(*config), options);
    EXPECT_TRUE(result.finished) << result.message;
    return result;
  }
  std::string results(const std::string& run, const std::string& dataset) {
    return element_bytes(io::read_hdf5((dir / run / "solution.h5").string(), dataset));
  }

  // One run on each device with `override`, in the folders `name`/cpu and `name`/cuda; the
  // device's must have run there and equal the CPU's in every result.
  void expect_equal_runs(const std::string& name, const std::string& override) {
    const auto [on_cpu, on_device] = testing::on_cpu_and_stand_in(
        [&](const std::string& device) { return solve_in(name + "/" + device, {override, "device=" + device}); },
        10000);
    EXPECT_EQ(on_device.loss, on_cpu.loss);
    EXPECT_EQ(on_device.steps, on_cpu.steps);
    EXPECT_EQ(on_device.learned.at("kappa"), on_cpu.learned.at("kappa"));
    ASSERT_TRUE(on_device.metrics && on_cpu.metrics);
    EXPECT_EQ(on_device.metrics->relative_l2.at("u"), on_cpu.metrics->relative_l2.at("u"));
    // Rank 0 writes the results; the others wait for them before anyone moves on.
    world().barrier();
    if (world().rank() != 0) return;
    for (const char* dataset : {"history/loss", "history/weight_pde", "history/min_causal_weight", "history/kappa",
                                "metrics/u_relative_l2", "fields/u", "points/pde/coordinates"}) {
      EXPECT_EQ(results(name + "/cuda", dataset), results(name + "/cpu", dataset)) << dataset;
    }
    expect_equal_checkpoints((dir / name / "cuda/checkpoint.safetensors").string(),
                             (dir / name / "cpu/checkpoint.safetensors").string());
    // The same files, the VTK output among them (one image, or a piece per rank under mpirun).
    EXPECT_EQ(files_in(dir / name / "cuda"), files_in(dir / name / "cpu"));
    EXPECT_TRUE(files_in(dir / name / "cuda").count("solution.vti") || files_in(dir / name / "cuda").count("solution.pvti"));
  }

  static std::set<std::string> files_in(const fs::path& folder) {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder)) names.insert(entry.path().filename().string());
    return names;
  }
};

TEST_F(SolveOnDevice, EqualsTheCpuRunBitForBit) {
  expect_equal_runs("taylor", "training.derivatives=taylor");
  expect_equal_runs("reverse", "training.derivatives=reverse");
  expect_equal_runs("fit", "model.fit_initial_condition=true");
}

TEST_F(SolveOnDevice, ResumesOnAnotherDevice) {
  // A checkpoint holds host bytes, so a run stopped on one device resumes on another.
  const SolveResult uninterrupted = solve_in("whole", {});
  solve_in("parts", {"device=cuda", "training.adam.steps=5", "training.lbfgs.iterations=0"});
  std::vector<std::string> rest = {"output.dir=" + (dir / "parts").string()};
  auto config = io::Config::parse(kHeat, "heat.yaml", rest);
  SolveOptions options;
  options.eager = true;
  options.resume = true;
  const SolveResult resumed = solve(read_problem(*config), options);
  EXPECT_EQ(resumed.loss, uninterrupted.loss);
}

TEST_F(SolveOnDevice, RefusesADeviceItCannotUseNamingTheKey) {
  auto config = io::Config::parse(kHeat, "heat.yaml", {"device=cuda:3", "output.dir=" + (dir / "x").string()});
  const Problem problem = read_problem(*config);
  expect_error([&] { solve(problem, {}); },
               {"command-line override 'device=cuda:3': device: cuda:3 cannot be used: the tests' stand-in GPUs"});
  auto misspelt = io::Config::parse("device: gpu\n" + kHeat, "heat.yaml", {});
  expect_error([&] { read_problem(*misspelt); },
               {"heat.yaml:1:9: device: unknown device 'gpu': expected cpu, cuda or cuda:N"});
}

}  // namespace
}  // namespace eddy::pinn
