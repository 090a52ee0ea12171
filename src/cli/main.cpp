// The `eddy` command.
//
//   eddy solve FILE [key=value ...] [--resume] [--quiet]   train a PINN problem from its YAML
//   eddy check FILE [key=value ...]                         validate and print the resolved problem
//   eddy eval RUN_DIR                                       re-evaluate a finished run
//   eddy train FILE [key=value ...] [--resume] [--quiet]   train a neural operator from its YAML
//   eddy generate FILE [key=value ...] [--quiet]            write a dataset from a classical solver
//
// Under mpirun, `eddy train` is data parallel (docs/distributed.md); the other commands refuse
// to run on several ranks. An error on any rank ends the whole job with that rank's message.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "eddy/core/error.h"
#include "eddy/dist/communicator.h"
#include "eddy/io/config.h"
#include "solvers/classical/dataset.h"
#include "solvers/operator/trainer.h"
#include "solvers/pinn/problem.h"
#include "solvers/pinn/solver.h"

namespace {

using namespace eddy;

void print_metrics(const pinn::Metrics& metrics) {
  for (const auto& [field, l2] : metrics.relative_l2) {
    std::printf("%s: relative L2 error %.3e, max error %.3e\n", field.c_str(), l2, metrics.max_error.at(field));
  }
}

int run_solve(const std::string& file, const std::vector<std::string>& overrides, bool resume, bool quiet) {
  auto config = io::Config::load(file, overrides);
  pinn::Problem problem = pinn::read_problem(*config);
  pinn::SolveOptions options;
  options.resume = resume;
  options.log = quiet ? nullptr : &std::cerr;
  options.terminal = !quiet && ::isatty(STDERR_FILENO);
  pinn::SolveResult result = pinn::solve(problem, options);
  if (!result.finished) {
    std::fprintf(stderr, "eddy: %s\n", result.message.c_str());
    return 3;
  }
  std::printf("%s\n", result.message.c_str());
  if (result.metrics) print_metrics(*result.metrics);
  for (const auto& [name, value] : result.learned) std::printf("%s = %.6g\n", name.c_str(), value);
  std::printf("results: %s/solution.h5 (HDF5)%s, checkpoint %s/checkpoint.safetensors\n", problem.output.dir.c_str(),
              problem.output.vtk ? cat(", ", problem.output.dir, problem.time && problem.spatial_dim() > 1
                                                                   ? "/solution.pvd"
                                                                   : "/solution.vti", " and points.vtp (ParaView)").c_str()
                                 : "",
              problem.output.dir.c_str());
  return 0;
}

int run_train(const std::string& file, const std::vector<std::string>& overrides, bool resume, bool quiet) {
  auto config = io::Config::load(file, overrides);
  const operator_learning::OperatorProblem problem = operator_learning::read_operator_problem(*config);
  operator_learning::TrainOptions options;
  options.resume = resume;
  options.log = quiet ? nullptr : &std::cerr;
  options.terminal = !quiet && ::isatty(STDERR_FILENO);
  const operator_learning::TrainResult result = operator_learning::train(problem, options);
  if (dist::default_communicator().rank() != 0) return result.finished ? 0 : 3;  // rank 0 reports
  if (!result.finished) {
    std::fprintf(stderr, "eddy: %s\n", result.message.c_str());
    return 3;
  }
  std::printf("%s\n", result.message.c_str());
  for (const auto& [name, error] : result.test_relative_l2) {
    std::printf("test set %s: relative L2 error %.4e\n", name.c_str(), error);
  }
  std::printf("results: %s/predictions.h5 (HDF5)%s, checkpoint %s/checkpoint.safetensors\n", problem.output.dir.c_str(),
              problem.output.vtk && problem.model.type == operator_learning::ModelType::fno
                  ? cat(", ", problem.output.dir, "/sample0_<test set>.vti (ParaView)").c_str()
                  : "",
              problem.output.dir.c_str());
  return 0;
}

int run_check(const std::string& file, const std::vector<std::string>& overrides) {
  auto config = io::Config::load(file, overrides);
  pinn::Problem problem = pinn::read_problem(*config);
  std::printf("%s: valid. %zu coordinates (", file.c_str(), problem.coordinates.size());
  for (size_t i = 0; i < problem.coordinates.size(); ++i) std::printf("%s%s", i ? ", " : "", problem.coordinates[i].c_str());
  std::printf("), %zu fields, %zu conditions, %lld model parameters\n\n", problem.fields.size(),
              problem.conditions.size(), static_cast<long long>(pinn::PinnState(problem).model().parameter_count()));
  std::printf("%s\n", problem.resolved_config.c_str());
  return 0;
}

int run_generate(const std::string& file, const std::vector<std::string>& overrides, bool quiet) {
  auto config = io::Config::load(file, overrides);
  classical::DatasetSpec spec = classical::read_dataset_spec(*config);
  classical::generate_dataset(spec, quiet ? nullptr : &std::cerr);
  const std::string times = spec.solver == "darcy" ? std::string("")
                                                   : cat(", ", spec.records, " record times up to t = ",
                                                                    spec.final_time);
  std::printf("wrote %s: %lld %s samples at resolution %lld%s%s\n", spec.output_path.c_str(),
              static_cast<long long>(spec.samples), spec.solver.c_str(), static_cast<long long>(spec.resolution),
              times.c_str(), spec.vtk ? " (and the first sample as .vti)" : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"eddy: differentiable physics and scientific machine learning"};
  app.require_subcommand(1);
  std::string file, run_dir;
  std::vector<std::string> overrides;
  bool resume = false, quiet = false;

  CLI::App* solve = app.add_subcommand("solve", "Train a PINN problem defined in a YAML file");
  solve->add_option("file", file, "problem YAML")->required()->check(CLI::ExistingFile);
  solve->add_option("overrides", overrides, "key.path=value overrides, e.g. training.adam.steps=20000");
  solve->add_flag("--resume", resume, "continue from the run folder's last checkpoint");
  solve->add_flag("--quiet", quiet, "no progress output");

  CLI::App* check = app.add_subcommand("check", "Validate a problem and print it resolved, without training");
  check->add_option("file", file, "problem YAML")->required()->check(CLI::ExistingFile);
  check->add_option("overrides", overrides, "key.path=value overrides");

  CLI::App* eval = app.add_subcommand("eval", "Re-evaluate a finished run against its reference");
  eval->add_option("run_dir", run_dir, "run folder (output.dir)")->required()->check(CLI::ExistingDirectory);

  CLI::App* train = app.add_subcommand("train", "Train a neural operator (FNO, DeepONet) defined in a YAML file");
  train->add_option("file", file, "training YAML")->required()->check(CLI::ExistingFile);
  train->add_option("overrides", overrides, "key.path=value overrides, e.g. training.epochs=50");
  train->add_flag("--resume", resume, "continue from the run folder's last checkpoint");
  train->add_flag("--quiet", quiet, "no progress output");
  CLI::App* generate = app.add_subcommand("generate", "Write an operator-learning dataset with a classical solver");
  generate->add_option("file", file, "dataset YAML")->required()->check(CLI::ExistingFile);
  generate->add_option("overrides", overrides, "key.path=value overrides, e.g. samples=1000");
  generate->add_flag("--quiet", quiet, "no progress output");

  CLI11_PARSE(app, argc, argv);
  try {
    // Starts MPI on every rank of an mpirun job, before anything can fail on one rank only.
    const dist::Communicator& world = dist::default_communicator();
    const bool launched_as_ranks = world.size() > 1;
    EDDY_CHECK(!launched_as_ranks || *train, "eddy ", app.get_subcommands().front()->get_name(), " runs on one ",
               "process; of the commands, only `eddy train` is distributed so far (docs/distributed.md). Run it ",
               "without mpirun");
    if (*solve) return run_solve(file, overrides, resume, quiet);
    if (*check) return run_check(file, overrides);
    if (*train) return run_train(file, overrides, resume, quiet);
    if (*generate) return run_generate(file, overrides, quiet);
    print_metrics(pinn::evaluate_run(run_dir));
    return 0;
  } catch (const std::exception& e) {
    // With several ranks the others may be waiting in a collective for this one: end them all.
    dist::abort_job(e.what(), 1);
  }
}
