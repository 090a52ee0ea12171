#include "solvers/pinn/export.h"

#include <filesystem>

#include "eddy/autodiff/tape.h"
#include "eddy/compiler/trace.h"
#include "eddy/ops/ops.h"
#include "solvers/common/training_loop.h"
#include "solvers/pinn/solver.h"

namespace eddy::pinn {

ExportSummary export_run(const std::string& run_dir, const std::string& output_dir, int64_t batch_size) {
  EDDY_CHECK(batch_size >= 1, "export: the batch size must be at least 1, got ", batch_size);
  solvers::refuse_export_while_a_run_holds(run_dir);
  const std::string config_file = run_dir + "/config.yaml";
  EDDY_CHECK(std::filesystem::is_regular_file(config_file), "export: ", run_dir,
             " has no config.yaml; give a run folder written by `eddy solve` (its output.dir)");
  auto config = io::Config::load(config_file, {}, io::Config::RelativePaths::working_directory);
  EDDY_CHECK(config->root().has("geometry") || !config->root().has("data"), "export: ", run_dir,
             " is a neural-operator run (`eddy train`), not a PINN run");
  const Problem problem = read_problem(*config, {}, UnknownEquationNames::supplied_when_trained);
  PinnState state(problem);
  load_trained(state, run_dir);

  // The values traced on do not matter (the graph cannot depend on them); the domain's centre
  // keeps every op on points the model was trained for.
  const BoundingBox box = problem.domain_box();
  const int64_t columns = static_cast<int64_t>(problem.coordinates.size());
  std::vector<double> centre;
  for (int64_t a = 0; a < columns; ++a) centre.push_back(0.5 * (box.lower[a] + box.upper[a]));
  const Tensor example = contiguous(expand(cast(tensor(centre, {1, columns}), problem.dtype), {batch_size, columns}));

  NoGradGuard no_grad;
  compiler::Trace traced = compiler::trace(
      [&](const std::vector<Tensor>& in) {
        const Tensor values = state.predict(in[0]);
        std::vector<Tensor> fields;
        for (int64_t f = 0; f < static_cast<int64_t>(problem.fields.size()); ++f) {
          fields.push_back(reshape(slice(values, 1, f, f + 1), {batch_size}));
        }
        return fields;
      },
      {example});

  ExportSummary summary;
  summary.dir = output_dir.empty() ? solvers::default_export_dir(run_dir) : output_dir;
  summary.batch_size = batch_size;
  summary.input_shape = example.shape();
  summary.signature = PredictorSignature{{{"points", problem.coordinates}}, problem.fields, run_dir};
  summary.graph_nodes = traced.graph.nodes.size();
  summary.tensors = traced.graph.captured.size();
  save_predictor(summary.dir, traced.graph, summary.signature);
  return summary;
}

}  // namespace eddy::pinn
