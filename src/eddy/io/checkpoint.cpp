#include "eddy/io/checkpoint.h"

#include <filesystem>
#include <optional>

#include "eddy/core/fingerprint.h"
#include "eddy/io/safetensors.h"
#include "eddy/io/tensor_fingerprint.h"
#include "eddy/ops/ops.h"

namespace eddy::io {
namespace {
constexpr std::string_view kModelPrefix = "model.";
constexpr std::string_view kOptimizerPrefix = "optimizer.";

bool take_prefix(const std::string& name, std::string_view prefix, std::string& rest) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  rest = name.substr(prefix.size());
  return true;
}

// FNV-1a over the tensors' names, dtypes, shapes and bytes, in name order: what a checkpoint
// records of its model and of its optimiser state (eddy.model_hash, eddy.optimizer_hash), so that
// bytes changed on disk are refused when loaded. Flipped bytes had loaded: a PINN trained on to a
// loss of 3.5e6, and LM and operator runs stopped on NaN blaming the learning rate.
std::string content_hash(const nn::StateDict& tensors) {
  uint64_t hash = kFnvOffsetBasis;
  for (const auto& [name, tensor] : tensors) {
    hash = fnv1a(cat(name, ' ', dtype_name(tensor.dtype()), ' ', tensor.shape()), hash);
    hash = fnv1a_tensor_bytes(tensor, hash);
  }
  return hex_digits(hash);
}

constexpr const char* kModelHash = "eddy.model_hash";
constexpr const char* kOptimizerHash = "eddy.optimizer_hash";

// Refuses `tensors` when `contents` records another hash of them under `key`; a checkpoint of an
// eddy that recorded none is taken as it is.
void check_content(const std::string& path, const SafetensorsContents& contents, const char* key,
                   const nn::StateDict& tensors, const char* what) {
  const auto recorded = contents.metadata.find(key);
  if (recorded == contents.metadata.end()) return;
  EDDY_CHECK(recorded->second == content_hash(tensors), path, ": the hash of the ", what, " (", key,
             ") is not the one written with them: the file was changed or damaged after it was written, and cannot "
             "be used");
}

// The name of a tensor that holds NaN or inf, if any. The optimiser's own records (an L-BFGS best
// loss not yet seen) may be infinite.
std::optional<std::string> first_non_finite(const nn::StateDict& tensors) {
  for (const auto& [name, tensor] : tensors) {
    if (name.starts_with(std::string(kOptimizerPrefix) + std::string(kRecordPrefix))) continue;
    if (eddy::first_non_finite(tensor)) return name;
  }
  return std::nullopt;
}

// The two states under the names a checkpoint stores them by.
nn::StateDict checkpoint_tensors(const nn::StateDict& model_state, const nn::StateDict& optimizer_state) {
  nn::StateDict tensors;
  for (const auto& [name, tensor] : model_state) tensors.emplace(std::string(kModelPrefix) + name, tensor);
  for (const auto& [name, tensor] : optimizer_state) tensors.emplace(std::string(kOptimizerPrefix) + name, tensor);
  return tensors;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const nn::StateDict& optimizer_state,
                     const CheckpointInfo& info) {
  save_checkpoint(path, model.state_dict(), optimizer_state, info);
}

std::optional<std::string> non_finite_checkpoint_tensor(const nn::StateDict& model_state,
                                                        const nn::StateDict& optimizer_state) {
  return first_non_finite(checkpoint_tensors(model_state, optimizer_state));
}

void save_checkpoint(const std::string& path, const nn::StateDict& model_state, const nn::StateDict& optimizer_state,
                     const CheckpointInfo& info) {
  const nn::StateDict tensors = checkpoint_tensors(model_state, optimizer_state);
  // Refused here rather than at the load, which cannot use it: a NaN state replaced the last good
  // checkpoint with a file no run could resume from.
  if (const std::optional<std::string> name = first_non_finite(tensors)) {
    throw Error(cat("save_checkpoint: ", path, ": tensor \"", *name, "\" holds NaN or infinite values; nothing was "
                    "written (a checkpoint of it could not be resumed from)"));
  }
  save_safetensors(path, tensors,
                   {{"eddy.step", std::to_string(info.step)},
                    {"eddy.config_hash", info.config_hash},
                    {"eddy.settings", info.settings},
                    {"eddy.version", EDDY_VERSION},
                    {kModelHash, content_hash(model_state)},
                    {kOptimizerHash, content_hash(optimizer_state)}});
}

namespace {

CheckpointInfo info_of(const std::string& path, const SafetensorsContents& contents) {
  CheckpointInfo info;
  auto field = [&](const char* key) {
    auto found = contents.metadata.find(key);
    return found == contents.metadata.end() ? std::string() : found->second;
  };
  const std::string step = field("eddy.step");
  try {
    info.step = step.empty() ? 0 : std::stoll(step);
  } catch (const std::exception&) {
    throw Error(cat(path, ": metadata eddy.step is not an integer: \"", step, "\""));
  }
  info.config_hash = field("eddy.config_hash");
  info.eddy_version = field("eddy.version");
  info.settings = field("eddy.settings");
  return info;
}

void load_tensors(const std::string& path, const SafetensorsContents& contents, nn::Module& model,
                  nn::StateDict* optimizer_state) {
  nn::StateDict model_state, optimizer;
  for (const auto& [name, tensor] : contents.tensors) {
    std::string rest;
    if (take_prefix(name, kModelPrefix, rest)) {
      model_state.emplace(rest, tensor);
    } else if (take_prefix(name, kOptimizerPrefix, rest)) {
      optimizer.emplace(rest, tensor);
    } else {
      throw Error(cat(path, ": tensor \"", name, "\" is neither model.* nor optimizer.*; not an eddy checkpoint"));
    }
  }
  check_content(path, contents, kModelHash, model_state, "model's tensors");
  if (optimizer_state) check_content(path, contents, kOptimizerHash, optimizer, "optimizer's state");
  // Written so (save_checkpoint refuses it), or damaged with its hash: training from it would stop
  // at a NaN loss steps later, blamed on the run instead of the file.
  if (const std::optional<std::string> name = first_non_finite(contents.tensors)) {
    throw Error(cat(path, ": tensor \"", *name, "\" holds NaN or infinite values; the checkpoint cannot be used"));
  }
  try {
    model.load_state_dict(model_state);
  } catch (const Error& e) {
    throw Error(cat(path, ": ", e.what()));
  }
  if (optimizer_state) *optimizer_state = std::move(optimizer);
}

}  // namespace

CheckpointInfo load_checkpoint(const std::string& path, nn::Module& model, nn::StateDict* optimizer_state,
                               const std::function<void(const CheckpointInfo&)>& check) {
  // Without a place for the optimizer's state (inference), its tensors, twice the model's size
  // for AdamW, are validated in the header but not read.
  TensorFilter wanted;
  if (!optimizer_state) wanted = [](const std::string& name) { return !name.starts_with(kOptimizerPrefix); };
  const SafetensorsContents contents = load_safetensors(path, wanted);
  const CheckpointInfo info = info_of(path, contents);
  if (check) check(info);
  load_tensors(path, contents, model, optimizer_state);
  return info;
}

void require_checkpoint(const std::string& path) {
  EDDY_CHECK(std::filesystem::exists(path), "--resume: no checkpoint at ", path);
}

CheckpointInfo checkpoint_info(const std::string& path) {
  require_checkpoint(path);
  return info_of(path, load_safetensors(path, [](const std::string&) { return false; }));
}

CheckpointInfo resume_from_checkpoint(const std::string& path, const std::function<void(const CheckpointInfo&)>& check,
                                      nn::Module& model, nn::StateDict& training_state) {
  require_checkpoint(path);
  const SafetensorsContents contents = load_safetensors(path);
  const CheckpointInfo info = info_of(path, contents);
  check(info);
  load_tensors(path, contents, model, &training_state);
  return info;
}

}  // namespace eddy::io
