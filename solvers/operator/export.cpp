#include "solvers/operator/export.h"

#include "eddy/autodiff/tape.h"
#include "eddy/compiler/trace.h"
#include "eddy/io/checkpoint.h"
#include "eddy/io/hdf5.h"
#include "eddy/ops/ops.h"
#include "solvers/common/training_loop.h"
#include "solvers/common/resume_settings.h"
#include "solvers/operator/trainer.h"

namespace eddy::operator_learning {

namespace {

// What the artifact takes: the training split's rows, subsampled as in training, or rows on
// `grid` taken whole.
struct TracedRows {
  Shape shape;  // [batch_size, ...]
  int64_t stride;
};

TracedRows traced_rows(const OperatorProblem& problem, const std::string& run_dir, Shape rows,
                       const std::vector<int64_t>& grid, int64_t batch_size) {
  const SplitSpec& train = problem.data.train;
  rows[0] = batch_size;
  if (grid.empty()) return {rows, train.stride};
  EDDY_CHECK(problem.model.type == ModelType::fno, "export: --grid applies to FNO runs; ", run_dir,
             " trained a DeepONet, whose query points are the training split's");
  const size_t axes = problem.model.fno.modes.size();
  EDDY_CHECK(grid.size() == 1 || grid.size() == axes, "export: --grid gives ", grid.size(), " sizes (",
             to_string(grid), ") but the model has ", axes, " spatial axes (model.modes ",
             to_string(problem.model.fno.modes), "); give one size per axis, or one for all");
  for (int64_t size : grid) {
    EDDY_CHECK(size >= 2, "export: --grid sizes must be at least 2 points, got ", to_string(grid));
  }
  Shape grid_rows{batch_size};
  if (problem.data.input_channels) grid_rows.push_back(rows[1]);
  for (size_t axis = 0; axis < axes; ++axis) grid_rows.push_back(grid.size() == 1 ? grid[0] : grid[axis]);
  return {grid_rows, 1};
}

}  // namespace

ExportSummary export_run(const std::string& run_dir, const std::string& output_dir, int64_t batch_size,
                         const std::vector<int64_t>& grid) {
  EDDY_CHECK(batch_size >= 1, "export: the batch size must be at least 1, got ", batch_size);
  solvers::refuse_export_while_a_run_holds(run_dir);
  auto config = io::Config::load(run_dir + "/config.yaml", {}, io::Config::RelativePaths::working_directory);
  OperatorProblem problem = read_operator_problem(*config, /*for_training=*/false);
  // The model's input shape (and a DeepONet's query points) come from the training data.
  const auto [file_rows, layout] = [&] {
    try {
      return std::pair{io::hdf5_shape(problem.data.train.file, problem.data.train.input), training_layout(problem)};
    } catch (const Error& e) {
      throw Error(cat("export: ", e.what(), " (export reads the shapes of ", run_dir, "/config.yaml's data.train "
                      "from ", problem.data.train.file, "; put the file back there)"));
    }
  }();
  const TracedRows rows = traced_rows(problem, run_dir, file_rows, grid, batch_size);
  // The checkpoint holds the normalisers' statistics; the identity stands in until it is loaded.
  problem.data.normalize = false;
  const auto this_process = dist::make_single_process_communicator();
  OperatorModel model(problem, layout, *this_process);
  const io::CheckpointInfo info = solvers::load_run_checkpoint(run_dir, problem.derived_settings, kResumable, model);
  if (!info.settings.empty()) {
    const solvers::Settings recorded = solvers::decode_settings(info.settings, run_dir + "/checkpoint.safetensors");
    const auto trained_on = recorded.find(kTrainingShapeKey);
    EDDY_CHECK(trained_on == recorded.end() || trained_on->second == to_string(file_rows), "export: ",
               problem.data.train.file, "'s ", problem.data.train.input, " is ", to_string(file_rows), " now; ",
               run_dir, " trained on ", trained_on->second, ", and the model follows its training grid (an FNO's "
               "padding, a DeepONet's query points). Put the training file back as it was");
  }

  // The values traced on do not matter: the graph cannot depend on them.
  const SplitSpec& train = problem.data.train;
  const Tensor example = zeros(rows.shape, problem.training.dtype);
  const bool fno = problem.model.type == ModelType::fno;
  NoGradGuard no_grad;
  const compiler::Trace traced = compiler::trace(
      [&](const std::vector<Tensor>& in) {
        if (!fno) return std::vector<Tensor>{model.predict(in[0], layout.points)};
        const Tensor output = model.predict(to_grid_layout(in[0], problem.data.input_channels, rows.stride));
        return std::vector<Tensor>{problem.data.output_channels ? output : squeeze(output, 1)};
      },
      {example});

  ExportSummary summary;
  summary.dir = output_dir.empty() ? solvers::default_export_dir(run_dir) : output_dir;
  summary.batch_size = batch_size;
  summary.input_shape = example.shape();
  summary.signature = PredictorSignature{{{train.input, {}}}, {train.output}, run_dir};
  summary.graph_nodes = traced.graph.nodes.size();
  summary.tensors = traced.graph.captured.size();
  save_predictor(summary.dir, traced.graph, summary.signature);
  return summary;
}

}  // namespace eddy::operator_learning
