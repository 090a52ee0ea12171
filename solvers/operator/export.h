#pragma once
// `eddy export` of a neural-operator run: the trained model, normalisers included, as an inference
// artifact (compiler/predictor.h) that runs without the trainer or the data. Its input and output
// are named after the training split's datasets and have their layout in the file, so
// `eddy predict ARTIFACT FILE` reads a dataset file directly: FNO maps rows [N, grid] (or
// [N, C_in, grid] with data.input_channels) on the training grid to [N, grid] (or [N, C_out,
// grid]), taking every data.train.stride-th grid point as training did; DeepONet maps [N, sensors]
// to [N, P] at the training split's query points, which the artifact holds. An FNO can be exported
// for another grid instead (its weights serve any resolution): rows on that grid, taken whole.

#include <cstdint>
#include <string>
#include <vector>

#include "eddy/compiler/predictor.h"

namespace eddy::operator_learning {

// Rebuilds the model from `run_dir`'s config.yaml (reading only the shapes of its training data,
// and DeepONet's points) and checkpoint, traces its prediction at `batch_size` samples and writes
// the artifact to `output_dir` (empty: run_dir/export). A non-empty `grid` (FNO only: one size per
// spatial axis, or one for all) makes the artifact take and give rows on that grid.
ExportSummary export_run(const std::string& run_dir, const std::string& output_dir, int64_t batch_size,
                         const std::vector<int64_t>& grid = {});

}  // namespace eddy::operator_learning
