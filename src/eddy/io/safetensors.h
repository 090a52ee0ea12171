#pragma once
// The safetensors format (Hugging Face): an 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the raw little-endian data. Files
// written here load with the Python `safetensors` package and vice versa.
//
// safetensors has no complex dtype, so a complex tensor is stored as a real one with a trailing
// axis of 2 (real, imaginary), and its name is listed in the metadata key "eddy.complex".

#include <map>
#include <string>

#include "eddy/nn/state_dict.h"

namespace eddy::io {

struct SafetensorsContents {
  nn::StateDict tensors;
  std::map<std::string, std::string> metadata;  // the "__metadata__" strings
};

// Serialises tensors (any layout; written dense) and metadata into the file's bytes.
std::string encode_safetensors(const nn::StateDict& tensors, const std::map<std::string, std::string>& metadata);
// Parses and validates a file's bytes: header length and JSON, known dtypes, shapes matching the
// byte ranges, ranges in bounds and covering the data without overlap. `source` names the file
// in errors.
SafetensorsContents decode_safetensors(const std::string& bytes, const std::string& source);

// Atomic write (temporary file, then rename).
void save_safetensors(const std::string& path, const nn::StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});
SafetensorsContents load_safetensors(const std::string& path);

}  // namespace eddy::io
