#include "solvers/lm/quantize.h"

#include <cmath>
#include <filesystem>

#include "eddy/core/autograd.h"
#include "eddy/core/error.h"
#include "eddy/io/safetensors.h"
#include "eddy/ops/ops.h"
#include "solvers/lm/corpus.h"

namespace eddy::lm {
namespace {

constexpr const char* kBitsKey = "eddy.quantization.bits";
constexpr const char* kGroupKey = "eddy.quantization.group";
constexpr const char* kStepKey = "eddy.step";

int64_t metadata_integer(const io::SafetensorsContents& contents, const std::string& key, const std::string& path) {
  const auto found = contents.metadata.find(key);
  EDDY_CHECK(found != contents.metadata.end(), path, " has no metadata \"", key,
             "\"; it is not a quantised model written by `eddy lm quantize`");
  try {
    return std::stoll(found->second);
  } catch (const std::exception&) {
    throw Error(cat(path, ": metadata \"", key, "\" is \"", found->second, "\", not an integer"));
  }
}

}  // namespace

std::string quantized_model_path(const std::string& run_dir, int bits) {
  return run_dir + "/quantized-int" + std::to_string(bits) + ".safetensors";
}

void save_quantized_model(TrainedModel& trained, const nn::QuantizationOptions& options, const std::string& path) {
  nn::quantize_model(*trained.model, options);
  io::save_safetensors(path, nn::quantized_state_dict(*trained.model),
                       {{kBitsKey, std::to_string(options.bits)},
                        {kGroupKey, std::to_string(options.bits == 8 ? 0 : options.group)},
                        {kStepKey, std::to_string(trained.step)}});
}

void load_quantized_model(TrainedModel& trained, const std::string& path) {
  EDDY_CHECK(std::filesystem::exists(path), path, " does not exist; write it with `eddy lm quantize`");
  const io::SafetensorsContents contents = io::load_safetensors(path);
  nn::QuantizationOptions options;
  options.bits = static_cast<int>(metadata_integer(contents, kBitsKey, path));
  options.group = metadata_integer(contents, kGroupKey, path);
  try {
    nn::load_quantized_state_dict(*trained.model, contents.tensors, options);
  } catch (const Error& e) {
    throw Error(cat(path, ": ", e.what()));
  }
  trained.step = metadata_integer(contents, kStepKey, path);
}

double validation_perplexity(TrainedModel& trained, const std::string& run_dir) {
  const std::string tokens = run_dir + "/data/validation.tokens";
  EDDY_CHECK(std::filesystem::exists(tokens), run_dir, " has no data/validation.tokens to measure perplexity on");
  const TokenFile file(tokens);
  NoGradGuard no_grad;
  const bool training = trained.model->is_training();
  trained.model->eval();
  double sum = 0;
  const std::vector<Batch> batches = validation_batches(file, trained.problem);
  for (const Batch& b : batches) {
    sum += cross_entropy(trained.model->forward(b.tokens, nullptr), b.targets).item<double>();
  }
  trained.model->train(training);
  return std::exp(sum / static_cast<double>(batches.size()));
}

}  // namespace eddy::lm
