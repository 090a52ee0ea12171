#pragma once
// `eddy export`: a PINN run folder's trained model as an inference artifact (compiler/predictor.h)
// that runs without the solver. Its one input is "points" [N, coordinates] (columns named after
// the coordinates), and it has one output per field, [N], output transforms (hard constraints)
// included: what the solver's own predictions at those points are.

#include <cstdint>
#include <string>

#include "eddy/compiler/predictor.h"

namespace eddy::pinn {

// Rebuilds the model from `run_dir`'s config.yaml and checkpoint, traces its forward pass at
// `batch_size` rows and writes the artifact to `output_dir` (empty: run_dir/export). Throws
// eddy::Error for a folder that is no PINN run (operator runs export through
// operator_learning::export_run).
ExportSummary export_run(const std::string& run_dir, const std::string& output_dir, int64_t batch_size);

}  // namespace eddy::pinn
