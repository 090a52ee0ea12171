#pragma once
// A trained run's model quantised for inference (int8 or int4 weights, nn/quantized.h): the
// file `eddy lm quantize` writes beside the checkpoint, loading it back, and the validation
// perplexity that shows what quantising cost.

#include <optional>
#include <string>

#include "eddy/nn/quantized.h"
#include "solvers/lm/run.h"

namespace eddy::lm {

// RUN_DIR/quantized-int8.safetensors or quantized-int4.safetensors.
std::string quantized_model_path(const std::string& run_dir, int bits);

// Quantises trained.model in place and writes its quantized_state_dict, with the bits, group and
// checkpoint step and a fingerprint of the float weights in the metadata, to `path` atomically
// (creating its folder).
void save_quantized_model(TrainedModel& trained, const nn::QuantizationOptions& options, const std::string& path);

// Replaces trained.model's weights by those of a file save_quantized_model wrote for a model of
// the same config, of `bits` where given; errors name the file and what does not match.
void load_quantized_model(TrainedModel& trained, const std::string& path, std::optional<int> bits = std::nullopt);

// exp of the mean cross-entropy over the run's fixed validation windows (validation_batches of
// RUN_DIR/data/validation.tokens), the perplexity `eddy lm train` reports, computed eagerly
// with whatever weights trained.model has now.
double validation_perplexity(TrainedModel& trained, const std::string& run_dir);

}  // namespace eddy::lm
