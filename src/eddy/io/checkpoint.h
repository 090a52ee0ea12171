#pragma once
// Training checkpoints: a model's parameters and buffers, the optimiser's state and run metadata
// in one safetensors file (keys "model.<name>" and "optimizer.<name>"), written atomically.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "eddy/nn/module.h"

namespace eddy::io {

/// Optimiser-state entries under this prefix are records of the run (losses, errors per step),
/// which may be NaN or infinite (a relative error against a zero reference); every other inexact
/// tensor of a checkpoint must be finite to load.
inline constexpr std::string_view kRecordPrefix = "history.";

struct CheckpointInfo {
  int64_t step = 0;
  std::string config_hash;  // of the resolved config that produced the run
  std::string eddy_version;  // filled in on save
  // The config values a --resume must keep, as the solvers record them (empty: not recorded).
  std::string settings{};
};

// Both refuse a state holding NaN or an infinity (see non_finite_checkpoint_tensor), writing nothing.
void save_checkpoint(const std::string& path, const nn::Module& model, const nn::StateDict& optimizer_state,
                     const CheckpointInfo& info);
// The same from the model's state dict (gathered whole from distributed parameters, say).
void save_checkpoint(const std::string& path, const nn::StateDict& model_state, const nn::StateDict& optimizer_state,
                     const CheckpointInfo& info);

// The name a checkpoint would store it by ("model.<name>", "optimizer.<name>") of a floating-point
// tensor of these states that holds NaN or an infinity, if any: such a state cannot be resumed
// from, so save_checkpoint refuses it.
std::optional<std::string> non_finite_checkpoint_tensor(const nn::StateDict& model_state,
                                                        const nn::StateDict& optimizer_state);

// Loads into `model`, checking every tensor's name, shape and dtype against it (see
// Module::load_state_dict); the optimiser state goes to `optimizer_state` when given, and is not
// read from the file when not. `check`, when given, sees the metadata first and refuses a
// checkpoint of another run by throwing before any tensor is compared.
CheckpointInfo load_checkpoint(const std::string& path, nn::Module& model, nn::StateDict* optimizer_state = nullptr,
                               const std::function<void(const CheckpointInfo&)>& check = {});

// --resume: refuses, naming `path`, when there is no checkpoint there.
void require_checkpoint(const std::string& path);

// The metadata of the checkpoint at `path` (refused as require_checkpoint does when there is none),
// read without its tensors.
CheckpointInfo checkpoint_info(const std::string& path);

// --resume: checks that `path` exists and hands its metadata to `check`, which refuses a
// checkpoint of another run by throwing before anything is loaded; then loads it into `model` (the
// rest into `training_state`) and returns its metadata.
CheckpointInfo resume_from_checkpoint(const std::string& path, const std::function<void(const CheckpointInfo&)>& check,
                                      nn::Module& model, nn::StateDict& training_state);

}  // namespace eddy::io
