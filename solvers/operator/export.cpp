#include "solvers/operator/export.h"

#include "eddy/autodiff/tape.h"
#include "eddy/compiler/trace.h"
#include "eddy/io/checkpoint.h"
#include "eddy/io/hdf5.h"
#include "eddy/ops/ops.h"
#include "solvers/operator/trainer.h"

namespace eddy::operator_learning {

ExportSummary export_run(const std::string& run_dir, const std::string& output_dir, int64_t batch_size) {
  EDDY_CHECK(batch_size >= 1, "export: the batch size must be at least 1, got ", batch_size);
  auto config = io::Config::load(run_dir + "/config.yaml");
  OperatorProblem problem = read_operator_problem(*config);
  const Split layout = training_layout(problem);
  // The checkpoint holds the normalisers' statistics; the identity stands in until it is loaded.
  problem.data.normalize = false;
  const auto this_process = dist::make_single_process_communicator();
  OperatorModel model(problem, layout, *this_process);
  io::load_checkpoint(run_dir + "/checkpoint.safetensors", model);

  // The values traced on do not matter: the graph cannot depend on them.
  const SplitSpec& train = problem.data.train;
  Shape file_rows = io::hdf5_shape(train.file, train.input);
  file_rows[0] = batch_size;
  const Tensor example = zeros(file_rows, problem.training.dtype);
  const bool grid = problem.model.type == ModelType::fno;
  NoGradGuard no_grad;
  const compiler::Trace traced = compiler::trace(
      [&](const std::vector<Tensor>& in) {
        if (!grid) return std::vector<Tensor>{model.predict(in[0], layout.points)};
        const Tensor output = model.predict(to_grid_layout(in[0], problem.data.input_channels, train.stride));
        return std::vector<Tensor>{problem.data.output_channels ? output : squeeze(output, 1)};
      },
      {example});

  ExportSummary summary;
  summary.dir = output_dir.empty() ? run_dir + "/export" : output_dir;
  summary.batch_size = batch_size;
  summary.input_shape = example.shape();
  summary.signature = PredictorSignature{{{train.input, {}}}, {train.output}, run_dir};
  summary.graph_nodes = traced.graph.nodes.size();
  summary.tensors = traced.graph.captured.size();
  save_predictor(summary.dir, traced.graph, summary.signature);
  return summary;
}

}  // namespace eddy::operator_learning
