// The `eddy` command.
//
//   eddy solve FILE [key=value ...] [--resume] [--eager] [--quiet] [--device D]   train a PINN problem from its YAML
//   eddy check FILE [key=value ...]                                   validate any of these files, print it resolved
//   eddy eval RUN_DIR                                                 re-evaluate a finished run
//   eddy train FILE [key=value ...] [--resume] [--eager] [--quiet] [--device D]   train a neural operator from its YAML
//   eddy generate FILE [key=value ...] [--quiet] [--overwrite]        write a dataset from a classical solver
//   eddy export RUN_DIR [--output DIR] [--batch B] [--grid N[,M]]     a trained model as an inference artifact
//   eddy predict ARTIFACT INPUTS.h5 [--output OUT.h5] [--overwrite] [--input NAME=DATASET ...]   evaluate an exported model
//   eddy lm ...                                                       language models (lm_commands.h)
//
// `solve` and `train` run their training steps compiled (eddy::compile); --eager runs them as
// written.
//
// Exit status: 0 done; 1 an error; 2 a command line that does not parse (an unknown command or
// option, a missing or invalid argument); 3 training stopped on a non-finite loss; 130 (SIGINT, Ctrl-C)
// or 143 (SIGTERM) training stopped early by that signal, after writing the checkpoint and the
// results of the steps done (`--resume` goes on). The training commands install the handlers
// (solvers/common/interrupt.h) for this; a second signal ends the process at once.
//
// OpenMP threads spin briefly, then sleep, while they wait (GOMP_SPINCOUNT=1000, thread_waits.h)
// unless the user sets OMP_WAIT_POLICY or GOMP_SPINCOUNT.
//
// Under mpirun, `eddy solve` and `eddy train` are data parallel and `eddy generate` splits the
// samples over the ranks (docs/distributed.md); the other commands refuse to run on several
// ranks. An error on any rank ends the whole job with that rank's message.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "eddy/compiler/predictor.h"
#include "eddy/core/error.h"
#include "eddy/core/memory.h"
#include "eddy/core/suggest.h"
#include "eddy/dist/communicator.h"
#include "eddy/io/config.h"
#include "eddy/io/hdf5.h"
#include "device_option.h"
#include "override_option.h"
#include "lm_commands.h"
#include "eddy/ops/ops.h"
#include "interrupted.h"
#include "thread_waits.h"
#include "solvers/classical/dataset.h"
#include "solvers/common/file_kind.h"
#include "solvers/common/interrupt.h"
#include "solvers/common/training_loop.h"
#include "solvers/operator/dataset.h"
#include "solvers/operator/trainer.h"
#include "solvers/operator/export.h"
#include "solvers/pinn/export.h"
#include "solvers/pinn/output.h"
#include "solvers/pinn/problem.h"
#include "solvers/pinn/solver.h"

namespace {

using namespace eddy;

void print_metrics(const pinn::Metrics& metrics) {
  for (const auto& [field, l2] : metrics.relative_l2) {
    std::printf("%s: relative L2 error %.3e, max error %.3e\n", field.c_str(), l2, metrics.max_error.at(field));
  }
}

int run_solve(const std::string& file, const std::vector<std::string>& overrides, bool resume, bool eager,
              bool quiet, const std::string& resume_command) {
  solvers::install_interrupt_handlers();
  auto config = io::Config::load(file, overrides);
  solvers::require_kind(*config, solvers::FileKind::pinn, "solve");
  pinn::Problem problem = pinn::read_problem(*config);
  pinn::SolveOptions options;
  options.resume = resume;
  options.eager = eager;
  options.log = quiet ? nullptr : &std::cerr;
  options.terminal = !quiet && ::isatty(STDERR_FILENO);
  pinn::SolveResult result = pinn::solve(problem, options);
  if (dist::default_communicator().rank() != 0) {  // rank 0 reports
    return result.interrupted ? 128 + result.interrupted : result.finished ? 0 : 3;
  }
  if (!result.finished && !result.interrupted) {
    std::fprintf(stderr, "eddy: %s\n", result.message.c_str());
    return 3;
  }
  std::printf("%s\n", result.message.c_str());
  if (result.metrics) print_metrics(*result.metrics);
  for (const auto& [name, value] : result.learned) std::printf("%s = %.6g\n", name.c_str(), value);
  const std::string no_vtk = problem.output.vtk ? cat(" (no ParaView files for ", problem.spatial_dim(),
                                                       " spatial dimensions)")
                                                 : "";
  std::printf("results: %s/solution.h5 (HDF5)%s, checkpoint %s/checkpoint.safetensors\n", problem.output.dir.c_str(),
              pinn::writes_vtk(problem) ? cat(", ", problem.output.dir, problem.time && problem.spatial_dim() > 1
                                                                   ? "/solution.pvd"
                                                                   : dist::default_communicator().size() > 1
                                                                         ? "/solution.pvti"
                                                                         : "/solution.vti",
                                                               " and points.vtp (ParaView)").c_str()
                                        : no_vtk.c_str(),
              problem.output.dir.c_str());
  return result.interrupted ? cli::report_interrupted(result.interrupted, problem.output.dir, resume_command) : 0;
}

int run_train(const std::string& file, const std::vector<std::string>& overrides, bool resume, bool eager,
              bool quiet, const std::string& resume_command) {
  solvers::install_interrupt_handlers();
  auto config = io::Config::load(file, overrides);
  solvers::require_kind(*config, solvers::FileKind::operator_training, "train");
  const operator_learning::OperatorProblem problem = operator_learning::read_operator_problem(*config);
  operator_learning::TrainOptions options;
  options.resume = resume;
  options.eager = eager;
  options.log = quiet ? nullptr : &std::cerr;
  options.terminal = !quiet && ::isatty(STDERR_FILENO);
  const operator_learning::TrainResult result = operator_learning::train(problem, options);
  if (dist::default_communicator().rank() != 0) {  // rank 0 reports
    return result.interrupted ? 128 + result.interrupted : result.finished ? 0 : 3;
  }
  if (!result.finished && !result.interrupted) {
    std::fprintf(stderr, "eddy: %s\n", result.message.c_str());
    return 3;
  }
  std::printf("%s\n", result.message.c_str());
  for (const auto& [name, error] : result.test_relative_l2) {
    std::printf("test set %s: relative L2 error %.4e\n", name.c_str(), error);
  }
  // An FNO's test sets are grids, each with its first sample's image.
  std::string images;
  if (problem.output.vtk && problem.model.type == operator_learning::ModelType::fno) {
    for (const auto& [name, error] : result.test_relative_l2) {
      images += cat(images.empty() ? ", " : " and ", problem.output.dir, "/sample0_", name, ".vti");
    }
    if (!images.empty()) images += " (ParaView)";
  }
  std::printf("results: %s/predictions.h5 (HDF5)%s, checkpoint %s/checkpoint.safetensors\n", problem.output.dir.c_str(),
              images.c_str(), problem.output.dir.c_str());
  return result.interrupted ? cli::report_interrupted(result.interrupted, problem.output.dir, resume_command) : 0;
}

int check_pinn(io::Config& config) {
  pinn::Problem problem = pinn::read_problem(config);
  pinn::refuse_untrainable(problem);
  pinn::PinnState state(problem);
  state.check_derivative_memory();
  state.check_boundary_selections();
  std::printf("%s: valid. %zu coordinates (", config.source().c_str(), problem.coordinates.size());
  for (size_t i = 0; i < problem.coordinates.size(); ++i) std::printf("%s%s", i ? ", " : "", problem.coordinates[i].c_str());
  std::printf("), %zu fields, %zu conditions, %lld model parameters\n\n", problem.fields.size(),
              problem.conditions.size(), static_cast<long long>(state.model().parameter_count()));
  std::printf("%s\n", problem.resolved_config.c_str());
  return 0;
}

// Reads every split's shapes (not its samples) and builds the model, as `eddy train` would before
// its first epoch.
int check_operator(io::Config& config) {
  operator_learning::OperatorProblem problem = operator_learning::read_operator_problem(config);
  const operator_learning::Split layout = operator_learning::data_layout(problem).train;
  problem.data.normalize = false;  // the statistics need the samples, which a check does not load
  const auto this_process = dist::make_single_process_communicator();
  const operator_learning::OperatorModel model(problem, layout, *this_process);
  const operator_learning::SplitSpec& train = problem.data.train;
  std::printf("%s: valid. %s from %s: %s -> %s, %lld training samples (model input %s, output %s), %zu test "
              "set%s, %lld model parameters\n\n",
              config.source().c_str(), problem.model.type == operator_learning::ModelType::fno ? "FNO" : "DeepONet",
              train.file.c_str(), train.input.c_str(), train.output.c_str(), static_cast<long long>(layout.size),
              rows_shape(layout.input.shape()).c_str(), rows_shape(layout.output.shape()).c_str(),
              problem.data.tests.size(), problem.data.tests.size() == 1 ? "" : "s",
              static_cast<long long>(model.parameter_count()));
  std::printf("%s\n", problem.resolved_config.c_str());
  return 0;
}

int check_dataset(io::Config& config) {
  const classical::DatasetSpec spec = classical::read_dataset_spec(config);
  const std::string times = spec.solver == classical::DatasetSolver::darcy
                                ? std::string()
                                : cat(", ", spec.records, " record times up to t = ", spec.final_time);
  std::printf("%s: valid. %lld %s samples at resolution %lld%s, to be written to %s\n\n", config.source().c_str(),
              static_cast<long long>(spec.samples), classical::solver_name(spec.solver),
              static_cast<long long>(spec.resolution), times.c_str(), spec.output_path.c_str());
  std::printf("%s\n", spec.resolved_config.c_str());
  return 0;
}

int run_check(const std::string& file, const std::vector<std::string>& overrides) {
  auto config = io::Config::load(file, overrides);
  switch (solvers::file_kind(*config)) {
    case solvers::FileKind::pinn:
    case solvers::FileKind::unrecognised: return check_pinn(*config);
    case solvers::FileKind::operator_training: return check_operator(*config);
    case solvers::FileKind::dataset: return check_dataset(*config);
    case solvers::FileKind::language_model: return cli::check_lm_config(*config);
  }
  return 1;  // not reached: every kind is handled above
}

int run_generate(const std::string& file, const std::vector<std::string>& overrides, bool quiet, bool overwrite) {
  auto config = io::Config::load(file, overrides);
  solvers::require_kind(*config, solvers::FileKind::dataset, "generate");
  classical::DatasetSpec spec = classical::read_dataset_spec(*config);
  spec.overwrite = overwrite;
  // Rank 0 reports; on several ranks it also writes the file (generate_dataset).
  const bool root = dist::default_communicator().rank() == 0;
  classical::generate_dataset(spec, quiet || !root ? nullptr : &std::cerr);
  if (!root) return 0;
  const std::string times = spec.solver == classical::DatasetSolver::darcy ? std::string("")
                                                   : cat(", ", spec.records, " record times up to t = ",
                                                                    spec.final_time);
  const std::string image = spec.vtk ? cat(", and its first sample as ", classical::sample_image_path(spec.output_path))
                                     : std::string();
  std::printf("wrote %s: %lld %s samples at resolution %lld%s%s\n", spec.output_path.c_str(),
              static_cast<long long>(spec.samples), classical::solver_name(spec.solver),
              static_cast<long long>(spec.resolution), times.c_str(), image.c_str());
  return 0;
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// A run folder of `eddy train` or else of `eddy solve`; one of `eddy lm train` has its own export.
bool is_operator_run(const std::string& run_dir) {
  const std::string config_file = run_dir + "/config.yaml";
  EDDY_CHECK(std::filesystem::is_regular_file(config_file), "export: ", run_dir,
             " has no config.yaml; give a run folder written by `eddy solve` or `eddy train` (its output.dir)");
  const solvers::FileKind kind = solvers::file_kind(*io::Config::load(config_file));
  EDDY_CHECK(kind != solvers::FileKind::language_model, "export: ", run_dir,
             " is a language-model run (`eddy lm train`); export it with `eddy lm export ", run_dir, " --format hf`");
  return kind == solvers::FileKind::operator_training;
}

int run_export(const std::string& run_dir, const std::string& output, int64_t batch,
               const std::vector<int64_t>& grid) {
  // Named here: writing into it failed with the file system's words alone.
  EDDY_CHECK(output.empty() || !std::filesystem::exists(output) || std::filesystem::is_directory(output),
             "export: --output ", output, " is a file, not a folder; give a folder for the artifact");
  // An artifact in the run folder outlived the run: a later run there removes its export/ folder,
  // nothing else of it, and the stale artifact predicted with the old weights.
  std::error_code ignored;
  const auto canonical = [&](const std::string& path) {
    const std::filesystem::path resolved =
        std::filesystem::weakly_canonical(std::filesystem::absolute(path, ignored), ignored);
    return resolved.has_filename() ? resolved : resolved.parent_path();  // "run/new/.." is "run/"
  };
  const std::filesystem::path target = canonical(output), run = canonical(run_dir);
  const std::filesystem::path within = target.lexically_relative(run);
  // Anything under RUN_DIR/export goes with it.
  const std::filesystem::path within_export = target.lexically_relative(canonical(solvers::default_export_dir(run_dir)));
  EDDY_CHECK(output.empty() || (!within_export.empty() && *within_export.begin() != "..") || within.empty() ||
                 *within.begin() == "..",
             "export: --output ", output, " is ", target == run ? "the run folder itself" : "inside the run folder",
             ", where a later run in that folder would leave it with the old weights; give the artifact a folder "
             "outside it, or leave --output out (RUN_DIR/export, which a later run removes)");
  const bool operator_run = is_operator_run(run_dir);
  EDDY_CHECK(operator_run || grid.empty(), "export: --grid applies to FNO runs of `eddy train`; ", run_dir,
             " is a PINN run of `eddy solve`, whose artifact takes points anywhere");
  const ExportSummary summary = operator_run ? operator_learning::export_run(run_dir, output, batch, grid)
                                             : pinn::export_run(run_dir, output, batch);
  const PredictorInput& input = summary.signature.inputs.at(0);
  std::printf("wrote %s: %s %s%s -> %s; traced at %lld rows per batch, %zu graph nodes, %zu tensors\n",
              summary.dir.c_str(), input.name.c_str(), rows_shape(summary.input_shape).c_str(),
              input.columns.empty() ? "" : cat(" (", joined(input.columns), ")").c_str(),
              joined(summary.signature.outputs).c_str(), static_cast<long long>(summary.batch_size),
              summary.graph_nodes, summary.tensors);
  return 0;
}

// `--input NAME=DATASET` options as a map from an artifact's input (or one of its columns) to the
// dataset that holds it in the inputs file. A NAME the artifact does not take is an error listing
// those it does, so a typo is not silently ignored.
std::map<std::string, std::string> input_datasets(const std::vector<std::string>& mappings,
                                                  const PredictorSignature& signature) {
  std::vector<std::string> names;
  for (const PredictorInput& input : signature.inputs) {
    names.push_back(input.name);
    names.insert(names.end(), input.columns.begin(), input.columns.end());
  }
  std::map<std::string, std::string> datasets;
  for (const std::string& mapping : mappings) {
    const size_t equals = mapping.find('=');  // present: the option's check requires it
    const std::string name = mapping.substr(0, equals), dataset = mapping.substr(equals + 1);
    EDDY_CHECK(std::find(names.begin(), names.end(), name) != names.end(), "predict: --input ", mapping, ": '", name,
               "' is not an input of the artifact", did_you_mean(name, names), "; it takes: ", joined(names));
    EDDY_CHECK(datasets.emplace(name, dataset).second, "predict: --input ", mapping, ": '", name,
               "' is mapped twice; give each input once");
  }
  return datasets;
}

// An input's rows from the inputs file: the dataset named after it ("points", [N, d]), or else
// one 1-D dataset per column ("x", "t"); `--input` renames either. Real data (floating-point,
// integer or 8-bit, such as a permeability map of 0s and 1s) is converted to the model's dtype,
// as training converts it. `expected` is the graph's input shape, whose leading (batch) extent
// any number of rows may take.
Tensor read_input(const std::string& file, const std::vector<std::string>& datasets, const PredictorInput& input,
                  const compiler::ValueInfo& expected, const std::map<std::string, std::string>& renamed) {
  auto has = [&](const std::string& name) {
    return std::find(datasets.begin(), datasets.end(), name) != datasets.end();
  };
  auto dataset_for = [&](const std::string& name) {
    const auto mapped = renamed.find(name);
    return mapped == renamed.end() ? name : mapped->second;
  };
  // A dataset named by --input must be there: falling back to the columns would hide the typo.
  auto require_renamed = [&](const std::string& name) {
    const auto mapped = renamed.find(name);
    if (mapped == renamed.end()) return;
    EDDY_CHECK(has(mapped->second), "predict: --input ", name, "=", mapped->second, ": ",
               file, " has no dataset '", mapped->second, "'; it holds: ",
               datasets.empty() ? std::string("nothing") : joined(datasets));
  };
  require_renamed(input.name);
  for (const std::string& column : input.columns) require_renamed(column);
  // A column named by --input is read as a column, even where the file also holds the whole
  // input (it was dropped silently, predicting at the file's `points`).
  const bool column_renamed = std::any_of(input.columns.begin(), input.columns.end(),
                                          [&](const std::string& column) { return renamed.count(column) > 0; });
  EDDY_CHECK(!column_renamed || !renamed.count(input.name), "predict: --input names both the input '", input.name,
             "' and some of its columns (", joined(input.columns), "); give one or the other");
  Tensor values;
  if (!column_renamed && has(dataset_for(input.name))) {
    const std::string dataset = dataset_for(input.name);
    values = io::read_hdf5(file, dataset);
    // Points on a line are stored as a 1-D array (a run's own coordinates/x): rows of one column.
    if (values.dim() == 1 && expected.shape.size() == 2 && expected.shape[1] == 1) {
      values = reshape(values, {values.shape()[0], 1});
    }
    const Shape& shape = values.shape();
    const bool fits = shape.size() == expected.shape.size() &&
                      std::equal(shape.begin() + 1, shape.end(), expected.shape.begin() + 1);
    EDDY_CHECK(fits, "predict: ", file, ": dataset '", dataset, "' has shape ", shape, ", but the artifact's input '",
               input.name, "' takes ", rows_shape(expected.shape),
               input.columns.empty() ? std::string() : cat(" (columns ", joined(input.columns), ")"));
  } else {
    std::vector<std::string> missing;
    for (const std::string& column : input.columns) {
      if (!has(dataset_for(column))) missing.push_back(dataset_for(column));
    }
    EDDY_CHECK(!input.columns.empty() && missing.empty(), "predict: ", file, " has no dataset '",
               dataset_for(input.name), "'",
               input.columns.empty() ? std::string()
                                     : cat(" [N, ", input.columns.size(), "] and no 1-D dataset ", joined(missing),
                                           " (the model's inputs are ", joined(input.columns), ")"),
               "; it holds: ", datasets.empty() ? std::string("nothing") : joined(datasets),
               " (--input NAME=DATASET reads an input from a dataset of another name)");
    std::vector<Tensor> columns;
    for (const std::string& column : input.columns) {
      const std::string dataset = dataset_for(column);
      const Tensor read = io::read_hdf5(file, dataset);
      const int64_t rows = columns.empty() ? read.numel() : columns[0].shape()[0];
      EDDY_CHECK(read.dim() == 1 && read.shape()[0] == rows, "predict: ", file, ": dataset '", dataset,
                 "' has shape ", read.shape(), "; ", joined(input.columns), " must be 1-D datasets of one length");
      // Each in the model's dtype first: columns of two dtypes (float64 x, float32 t) failed in concat.
      columns.push_back(reshape(is_complex(read.dtype()) ? read : cast(read, expected.dtype), {-1, 1}));
    }
    values = concat(columns, 1);
  }
  return is_complex(values.dtype()) ? values : cast(values, expected.dtype);
}

int run_predict(const std::string& artifact, const std::string& inputs_file, std::string output,
                const std::vector<std::string>& input_mappings, bool overwrite) {
  namespace fs = std::filesystem;
  if (output.empty()) {
    output = (fs::path(inputs_file).parent_path() / fs::path(inputs_file).stem()).string() + ".predictions.h5";
  }
  EDDY_CHECK(!fs::exists(output) || !fs::equivalent(output, inputs_file), "predict: --output ", output,
             " is the inputs file itself; write the predictions to another file");
  // Nor over the artifact it reads, nor over a file of another kind (a run's checkpoint): both were
  // replaced without a word.
  std::error_code ignored;
  const fs::path target = fs::weakly_canonical(output, ignored);
  const fs::path within = target.lexically_relative(fs::weakly_canonical(artifact, ignored));
  EDDY_CHECK(within.empty() || *within.begin() == "..", "predict: --output ", output, " is inside the artifact ",
             artifact, "; write the predictions elsewhere");
  if (fs::is_regular_file(output, ignored)) {
    EDDY_CHECK(io::is_hdf5_file(output), "predict: --output ", output, " exists and is not an HDF5 file; give a new "
               "file (predictions are written as HDF5)");
  }
  const Predictor predictor = Predictor::load(artifact);
  // An existing HDF5 file is replaced when it holds these predictions (an earlier run of this
  // command, which marks it with the artifact); another one (a run's solution.h5, a dataset, a
  // user's file whose datasets are named as the outputs) only with --overwrite: it was lost
  // without a word.
  if (fs::is_regular_file(output, ignored) && !overwrite) {
    std::vector<std::string> held = io::list_hdf5_datasets(output), predicted = predictor.signature().outputs;
    std::sort(held.begin(), held.end());
    std::sort(predicted.begin(), predicted.end());
    EDDY_CHECK(held == predicted && io::hdf5_has_attribute(output, "/", "artifact"), "predict: --output ", output,
               " exists and is not an earlier prediction of this artifact (it holds ", joined(held),
               "); give a new file, or --overwrite to replace it");
  }
  const compiler::Graph& graph = predictor.program().graph();
  const std::map<std::string, std::string> renamed = input_datasets(input_mappings, predictor.signature());
  const std::vector<std::string> datasets = io::list_hdf5_datasets(inputs_file);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    inputs.push_back(
        read_input(inputs_file, datasets, predictor.signature().inputs[i], graph.value(graph.inputs[i]), renamed));
  }
  const std::vector<Tensor> outputs = predictor.predict(inputs);
  io::Hdf5Writer out(output);
  for (size_t o = 0; o < outputs.size(); ++o) out.write(predictor.signature().outputs[o], outputs[o]);
  out.set_attribute("/", "artifact", artifact);
  out.commit();
  std::printf("wrote %s: %s for %lld rows\n", output.c_str(), joined(predictor.signature().outputs).c_str(),
              static_cast<long long>(inputs.at(0).shape()[0]));
  return 0;
}

// The first word of the command line that names no command where one is expected, as CLI11
// would report it only as "A subcommand is required": "unknown command 'slove' (did you mean
// 'solve'?); commands are solve, check, ...". Empty when every command word is known.
std::string unknown_command(CLI::App& app, int argc, char** argv) {
  CLI::App* current = &app;
  std::string command = "eddy";
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') continue;  // --help: the only options before a command
    std::vector<std::string> names;
    CLI::App* next = nullptr;
    for (CLI::App* sub : current->get_subcommands(std::function<bool(CLI::App*)>())) {
      names.push_back(sub->get_name());
      if (sub->get_name() == word) next = sub;
    }
    if (names.empty()) return "";  // a command's own arguments follow
    if (!next) {
      return cat(command, ": unknown command '", word, "'", did_you_mean(word, names), "; commands are ",
                 joined(names));
    }
    current = next;
    command += " " + word;
  }
  return "";
}

// What a command line that CLI11 could not parse (or --help) exits with, after CLI11 prints its
// message: 0 for --help, else 2, as for shell builtins. CLI11's own codes (105, 109, ...) differ
// by the kind of mistake, which scripts have no use for.
int command_line_status(const CLI::App& app, const CLI::Error& error) { return app.exit(error) == 0 ? 0 : 2; }

}  // namespace

int main(int argc, char** argv) {
  eddy::cli::use_short_thread_waits(argv);
  eddy::keep_freed_heap_memory();
  CLI::App app{"eddy: differentiable physics and scientific machine learning"};
  app.set_version_flag("--version", "eddy " EDDY_VERSION);
  app.require_subcommand(1);
  std::string file, run_dir, artifact, inputs_file, output, device;
  std::vector<std::string> overrides, input_mappings;
  bool resume = false, eager = false, quiet = false, overwrite = false;
  int64_t batch = 1024;
  std::vector<int64_t> grid;

  CLI::App* solve = app.add_subcommand("solve", "Train a PINN problem defined in a YAML file");
  solve->add_option("file", file, "problem YAML")->required()->check(CLI::ExistingFile);
  eddy::cli::add_overrides_option(solve, overrides, "key.path=value overrides, e.g. training.adam.steps=20000");
  solve->add_flag("--resume", resume, "continue from the run folder's last checkpoint");
  solve->add_flag("--eager", eager, "run the training step as written instead of compiled");
  solve->add_option("--device", device, cli::kDeviceHelp);
  solve->add_flag("--quiet", quiet, "no progress output");

  CLI::App* check = app.add_subcommand("check", "Validate a PINN problem, operator training, dataset or "
                                       "language-model file and print it resolved, without running it");
  check->add_option("file", file, "YAML file of `eddy solve`, `eddy train`, `eddy generate` or `eddy lm train`")
      ->required()->check(CLI::ExistingFile);
  eddy::cli::add_overrides_option(check, overrides, "key.path=value overrides");

  CLI::App* eval = app.add_subcommand("eval", "Re-evaluate a finished run against its reference");
  eval->add_option("run_dir", run_dir, "run folder (output.dir)")->required()->check(CLI::ExistingDirectory);

  CLI::App* train = app.add_subcommand("train", "Train a neural operator (FNO, DeepONet) defined in a YAML file");
  train->add_option("file", file, "training YAML")->required()->check(CLI::ExistingFile);
  eddy::cli::add_overrides_option(train, overrides, "key.path=value overrides, e.g. training.epochs=50");
  train->add_flag("--resume", resume, "continue from the run folder's last checkpoint");
  train->add_flag("--eager", eager, "run the batch step and evaluation as written instead of compiled");
  train->add_option("--device", device, cli::kDeviceHelp);
  train->add_flag("--quiet", quiet, "no progress output");
  CLI::App* generate = app.add_subcommand("generate", "Write an operator-learning dataset with a classical solver");
  generate->add_option("file", file, "dataset YAML")->required()->check(CLI::ExistingFile);
  eddy::cli::add_overrides_option(generate, overrides, "key.path=value overrides, e.g. samples=1000");
  generate->add_flag("--quiet", quiet, "no progress output");
  generate->add_flag("--overwrite", overwrite, "replace an existing output.path file that eddy generate did not write "
                                               "(a reference dataset, a run's results)");

  CLI::App* export_command = app.add_subcommand("export", "Write a run's trained model as an inference artifact "
                                            "(graph.json, weights.safetensors, meta.json)");
  export_command->add_option("run_dir", run_dir, "run folder of `eddy solve` or `eddy train` (output.dir)")->required()
      ->check(CLI::ExistingDirectory);
  export_command->add_option("--output", output, "artifact folder (default RUN_DIR/export)");
  export_command->add_option("--batch", batch, "rows per batch the model is traced at (default 1024)");
  export_command->add_option("--grid", grid, "FNO: the grid the artifact takes and gives rows on, one size per "
                             "spatial axis or one for all, e.g. 256 or 128,128 (default: the training grid)")
      ->delimiter(',');
  CLI::App* predict = app.add_subcommand("predict", "Evaluate an exported model at the points of an HDF5 file");
  predict->add_option("artifact", artifact, "folder written by `eddy export`")->required()
      ->check(CLI::ExistingDirectory);
  predict->add_option("inputs", inputs_file, "HDF5 file with each input as a dataset of its name (a PINN's "
                      "`points` [N, coordinates], or one 1-D dataset per coordinate)")->required()
      ->check(CLI::ExistingFile);
  predict->add_option("--output", output, "HDF5 file for the outputs, one dataset each (default "
                      "INPUTS.predictions.h5 beside the inputs)");
  predict->add_option("--input", input_mappings, "NAME=DATASET: read the artifact's input (or input column) NAME "
                      "from DATASET, e.g. train/a=test/a; repeat for several")
      ->check(CLI::Validator(
          [](const std::string& mapping) {
            const size_t equals = mapping.find('=');
            return equals == std::string::npos || equals == 0 || equals + 1 == mapping.size()
                       ? std::string("expected NAME=DATASET, got '" + mapping + "'")
                       : std::string();
          },
          "NAME=DATASET"));
  predict->add_flag("--overwrite", overwrite, "replace an existing --output file that holds other datasets (a run's "
                    "results, a dataset)");

  const cli::LmCommands lm(app);

  if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    return command_line_status(app, CLI::Error("UnknownCommand", unknown, CLI::ExitCodes::ExtrasError));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return command_line_status(app, e);
  }
  try {
    // Starts MPI on every rank of an mpirun job, before anything can fail on one rank only.
    const dist::Communicator& world = dist::default_communicator();
    const bool launched_as_ranks = world.size() > 1;
    const CLI::App* command = app.get_subcommands().front();
    const std::string command_name = command->get_subcommands().empty()
                                         ? command->get_name()
                                         : cat(command->get_name(), " ", command->get_subcommands().front()->get_name());
    EDDY_CHECK(!launched_as_ranks || *train || *solve || *generate || lm.distributed(), "eddy ", command_name,
               " runs on one process; of the commands, `eddy solve`, ",
               "`eddy train`, `eddy generate` and `eddy lm train` are distributed ",
               "(docs/distributed.md). Run it without mpirun");
    const std::string resume_command = cli::resume_command(argc, argv);
    cli::add_device_override(device, overrides);
    if (*solve) return run_solve(file, overrides, resume, eager, quiet, resume_command);
    if (*check) return run_check(file, overrides);
    if (*train) return run_train(file, overrides, resume, eager, quiet, resume_command);
    if (*generate) return run_generate(file, overrides, quiet, overwrite);
    if (*export_command) return run_export(run_dir, output, batch, grid);
    if (*predict) return run_predict(artifact, inputs_file, output, input_mappings, overwrite);
    if (lm.chosen()) return lm.run(resume_command);
    print_metrics(pinn::evaluate_run(run_dir));
    return 0;
  } catch (const std::exception& e) {
    // With several ranks the others may be waiting in a collective for this one: end them all.
    dist::abort_job(e.what(), 1);
  }
}
