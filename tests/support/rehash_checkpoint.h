#pragma once
// Resume tests stop a run early by running a shortened config, whose hash differs from the full
// one's, or copy a run folder to another output.dir: this gives the checkpoint the hash of the
// config it is resumed with, as a user resuming with the full file would get.

#include <string>

#include "eddy/io/safetensors.h"

namespace eddy {

inline void rehash_checkpoint(const std::string& checkpoint, const std::string& config_hash) {
  io::SafetensorsContents saved = io::load_safetensors(checkpoint);
  saved.metadata["eddy.config_hash"] = config_hash;
  io::save_safetensors(checkpoint, saved.tensors, saved.metadata);
}

}  // namespace eddy
