#include "solvers/lm/quantize.h"

#include <cmath>
#include <filesystem>

#include "eddy/core/autograd.h"
#include "eddy/core/error.h"
#include "eddy/core/fingerprint.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/safetensors.h"
#include "eddy/io/tensor_fingerprint.h"
#include "eddy/ops/ops.h"
#include "solvers/lm/corpus.h"

namespace eddy::lm {
namespace {

constexpr const char* kBitsKey = "eddy.quantization.bits";
constexpr const char* kGroupKey = "eddy.quantization.group";
constexpr const char* kStepKey = "eddy.step";
// Which float weights a file was quantised from, so that a file left from an earlier training of
// the run folder is not taken for its present checkpoint.
constexpr const char* kSourceKey = "eddy.quantization.source";

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

// An FNV-1a fingerprint of trained.model's parameters, names and bytes in order, taken once while
// they are the float weights it was loaded with.
std::string float_weights_fingerprint(TrainedModel& trained) {
  if (trained.float_fingerprint.empty()) {
    uint64_t hash = kFnvOffsetBasis;
    for (const auto& [name, parameter] : trained.model->named_parameters()) {
      hash = io::fnv1a_tensor_bytes(parameter.detach(), fnv1a(name, hash));
    }
    trained.float_fingerprint = hex_digits(hash);
  }
  return trained.float_fingerprint;
}

// Whether `path` is a file save_quantized_model wrote, which a new quantisation may replace.
bool written_by_quantize(const std::string& path) {
  try {
    return io::load_safetensors(path, [](const std::string&) { return false; }).metadata.count(kBitsKey) > 0;
  } catch (const Error&) {
    return false;  // not safetensors: not ours
  }
}

}  // namespace

std::string quantized_model_path(const std::string& run_dir, int bits) {
  return run_dir + "/quantized-int" + std::to_string(bits) + ".safetensors";
}

void save_quantized_model(TrainedModel& trained, const nn::QuantizationOptions& options, const std::string& path) {
  // Before the model is quantised in place (it then had to be loaded again).
  EDDY_CHECK(!path.empty(), "quantize: the output path is empty; give the file to write");
  EDDY_CHECK(!std::filesystem::is_directory(path), "quantize: ", path, " is a folder; give the file to write");
  io::refuse_special_file(path, "quantize: the output");
  // Another run's predictions.h5 or a config was replaced by safetensors bytes without a word.
  EDDY_CHECK(!std::filesystem::exists(path) || written_by_quantize(path), "quantize: ", path,
             " exists and is not a quantised model that eddy lm quantize wrote; give a new file, or remove that one "
             "first");
  if (const auto folder = std::filesystem::path(path).parent_path(); !folder.empty()) {
    io::create_folders(folder.string(), "lm quantize");
  }
  const std::string source = float_weights_fingerprint(trained);
  nn::quantize_model(*trained.model, options);
  io::save_safetensors(path, nn::quantized_state_dict(*trained.model),
                       {{kBitsKey, std::to_string(options.bits)},
                        {kGroupKey, std::to_string(options.bits == 8 ? 0 : options.group)},
                        {kStepKey, std::to_string(trained.step)},
                        {kSourceKey, source}});
}

void load_quantized_model(TrainedModel& trained, const std::string& path, std::optional<int> bits) {
  EDDY_CHECK(std::filesystem::exists(path), path, " does not exist; write it with `eddy lm quantize`");
  const io::SafetensorsContents contents = io::load_safetensors(path);
  nn::QuantizationOptions options;
  options.bits = static_cast<int>(metadata_integer(contents, kBitsKey, path));
  // `--quantized int4` ran an int8 file written under int4's name as int8, saying nothing.
  EDDY_CHECK(!bits || *bits == options.bits, path, " holds int", options.bits, " weights, not int", *bits,
             "; write them with `eddy lm quantize --bits ", *bits, "`");
  options.group = metadata_integer(contents, kGroupKey, path);
  // Files written before the fingerprint was kept have none to check.
  if (const auto source = contents.metadata.find(kSourceKey);
      source != contents.metadata.end() && source->second != float_weights_fingerprint(trained)) {
    throw Error(cat(path, " was quantised from other weights than the model's (its checkpoint was at step ",
                    metadata_integer(contents, kStepKey, path), ", the model's is at step ", trained.step,
                    "): quantise it again with `eddy lm quantize`"));
  }
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
