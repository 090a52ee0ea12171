#pragma once
// The safetensors format (Hugging Face): an 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the raw little-endian data. Files
// written here load with the Python `safetensors` package and vice versa.
//
// safetensors has no complex dtype, so a complex tensor is stored as a real one with a trailing
// axis of 2 (real, imaginary), and its name is listed in the metadata key "eddy.complex".

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "eddy/nn/state_dict.h"

namespace eddy::io {

struct SafetensorsContents {
  nn::StateDict tensors;
  std::map<std::string, std::string> metadata;  // the "__metadata__" strings
};

// Serialises tensors (any layout; written dense) and metadata into the file's bytes.
std::string encode_safetensors(const nn::StateDict& tensors, const std::map<std::string, std::string>& metadata);
// Which tensors of a file to read: all of them when empty.
using TensorFilter = std::function<bool(const std::string& name)>;

// Parses and validates a file's bytes: header length and JSON, known dtypes, shapes matching the
// byte ranges, ranges in bounds and covering the data without overlap. `source` names the file
// in errors. Every entry is validated; only the tensors `wanted` accepts are copied out.
SafetensorsContents decode_safetensors(std::string_view bytes, const std::string& source,
                                       const TensorFilter& wanted = {});

// Atomic write (temporary file, then rename).
void save_safetensors(const std::string& path, const nn::StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// Maps the file rather than reading it, so tensors `wanted` leaves out are never read from disk.
SafetensorsContents load_safetensors(const std::string& path, const TensorFilter& wanted = {});

}  // namespace eddy::io
