#include "eddy/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "eddy/core/backend.h"
#include "eddy/core/checked_size.h"
#include "eddy/core/json_integers.h"
#include "eddy/io/atomic_file.h"
#include "eddy/ops/ops.h"

namespace eddy::io {
namespace {

using nlohmann::json;

constexpr const char* kComplexKey = "eddy.complex";
constexpr uint64_t kMaxHeaderBytes = 100 << 20;  // as the reference implementation

std::string_view format_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::b8: return "BOOL";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    default: return "";
  }
}

bool parse_format(const std::string& name, DType& dtype) {
  static const std::map<std::string, DType> formats{
      {"F32", DType::f32}, {"F64", DType::f64}, {"I32", DType::i32}, {"I64", DType::i64}, {"BOOL", DType::b8},
      {"BF16", DType::bf16}, {"F16", DType::f16}};
  auto found = formats.find(name);
  if (found == formats.end()) return false;
  dtype = found->second;
  return true;
}

// A complex tensor as its real view: [..., 2].
Tensor as_real_pairs(const Tensor& z) {
  Tensor dense = host_copy(z);
  Shape shape = dense.shape();
  shape.push_back(2);
  Shape strides = contiguous_strides(shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = dense.storage();
  impl->offset = dense.offset() * 2;
  impl->shape = shape;
  impl->strides = strides;
  impl->dtype = real_dtype(z.dtype());
  return Tensor(std::move(impl));
}

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> names;
  std::stringstream stream(list);
  std::string name;
  while (std::getline(stream, name, ',')) {
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

}  // namespace

std::string encode_safetensors(const nn::StateDict& tensors, const std::map<std::string, std::string>& metadata) {
  std::map<std::string, std::string> meta = metadata;
  std::string complex_names;
  std::vector<std::pair<std::string, Tensor>> entries;
  for (const auto& [name, tensor] : tensors) {
    EDDY_CHECK(!name.empty() && name != "__metadata__", "safetensors: invalid tensor name \"", name, "\"");
    EDDY_CHECK(tensor.defined(), "safetensors: the tensor \"", name, "\" is undefined (nothing to save)");
    EDDY_CHECK(name.find(',') == std::string::npos || !is_complex(tensor.dtype()),
               "safetensors: complex tensor name \"", name, "\" may not contain a comma");
    if (is_complex(tensor.dtype())) {
      complex_names += (complex_names.empty() ? "" : ",") + name;
      entries.emplace_back(name, as_real_pairs(tensor));
    } else {
      entries.emplace_back(name, host_copy(tensor));
    }
  }
  if (!complex_names.empty()) meta[kComplexKey] = complex_names;
  // Wider element types first, so every tensor's offset is aligned to its element size.
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return dtype_size(a.second.dtype()) > dtype_size(b.second.dtype());
  });
  json header = json::object();
  if (!meta.empty()) header["__metadata__"] = meta;
  uint64_t offset = 0;
  for (const auto& [name, t] : entries) {
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    header[name] = {{"dtype", format_name(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  std::string out(8, '\0');
  out.reserve(8 + text.size() + offset);  // checkpoints run to hundreds of MB: one allocation, no regrowth
  const uint64_t length = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  out += text;
  for (const auto& [name, t] : entries) {
    out.append(static_cast<const char*>(t.raw_data()), t.numel() * dtype_size(t.dtype()));
  }
  return out;
}

SafetensorsContents decode_safetensors(std::string_view bytes, const std::string& source,
                                       const TensorFilter& wanted) {
  EDDY_CHECK(bytes.size() >= 8, source, ": not a safetensors file (", bytes.size(), " bytes, shorter than the 8-byte header length)");
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EDDY_CHECK(length <= kMaxHeaderBytes && length <= bytes.size() - 8, source, ": header length ", length,
             " exceeds the file (", bytes.size(), " bytes); the file is truncated or not safetensors");
  json header;
  // json::exception, not only parse_error: a number beyond double's range (1e400) is out_of_range.
  try {
    header = json::parse(bytes.substr(8, length));
  } catch (const json::exception& e) {
    throw Error(cat(source, ": header is not valid JSON (", e.what(), ")"));
  }
  EDDY_CHECK(header.is_object(), source, ": header is not a JSON object");
  const uint64_t data_size = bytes.size() - 8 - length;
  const char* data = bytes.data() + 8 + length;

  SafetensorsContents contents;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      EDDY_CHECK(entry.is_object(), source, ": __metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        EDDY_CHECK(value.is_string(), source, ": metadata \"", key, "\" is not a string");
        contents.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    EDDY_CHECK(entry.is_object() && entry.contains("dtype") && entry.contains("shape") && entry.contains("data_offsets"),
               source, ": tensor \"", name, "\" lacks dtype, shape or data_offsets");
    DType dtype;
    const std::string format = entry["dtype"].is_string() ? entry["dtype"].get<std::string>() : "";
    EDDY_CHECK(parse_format(format, dtype), source, ": tensor \"", name, "\" has unsupported dtype \"", format,
               "\" (eddy reads F32, F64, BF16, F16, I32, I64, BOOL)");
    Shape shape;
    uint64_t begin = 0, end = 0;
    try {
      shape = json_integers(entry["shape"], cat(source, ": tensor \"", name, "\" shape"));
      auto offsets = json_integers<uint64_t>(entry["data_offsets"], cat(source, ": tensor \"", name, "\" data_offsets"));
      EDDY_CHECK(offsets.size() == 2, source, ": tensor \"", name, "\" data_offsets needs 2 entries");
      begin = offsets[0];
      end = offsets[1];
    } catch (const json::exception& e) {
      throw Error(cat(source, ": tensor \"", name, "\" has a malformed shape or data_offsets (", e.what(), ")"));
    }
    for (int64_t d : shape) EDDY_CHECK(d >= 0, source, ": tensor \"", name, "\" has a negative dimension");
    const std::optional<int64_t> needed = checked_byte_size(shape, dtype);
    EDDY_CHECK(needed, source, ": tensor \"", name, "\" has shape ", shape, " of ", format,
               ", too large to address (2^63 bytes or more); the file is corrupt");
    EDDY_CHECK(begin <= end && end <= data_size, source, ": tensor \"", name, "\" byte range [", begin, ", ", end,
               ") lies outside the ", data_size, " data bytes; the file is truncated or corrupt");
    EDDY_CHECK(end - begin == static_cast<uint64_t>(*needed), source, ": tensor \"", name, "\" has ", end - begin,
               " bytes but shape ", shape, " of ", format, " needs ", *needed);
    ranges.emplace_back(begin, end);
    if (!wanted || wanted(name)) contents.tensors.emplace(name, from_buffer(data + begin, shape, dtype));
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t covered = 0;
  for (const auto& [begin, end] : ranges) {
    EDDY_CHECK(begin == covered, source, ": tensor byte ranges overlap or leave a gap at byte ", covered);
    covered = end;
  }
  EDDY_CHECK(covered == data_size, source, ": ", data_size - covered, " trailing data bytes belong to no tensor");

  auto complex_list = contents.metadata.find(kComplexKey);
  if (complex_list != contents.metadata.end()) {
    for (const std::string& name : split_names(complex_list->second)) {
      if (wanted && !wanted(name)) continue;
      auto found = contents.tensors.find(name);
      EDDY_CHECK(found != contents.tensors.end() && found->second.dim() >= 1 && found->second.shape().back() == 2 &&
                     is_floating(found->second.dtype()),
                 source, ": \"", name, "\" is listed as complex but is not a real [..., 2] tensor");
      const Tensor& pairs = found->second;
      found->second = complex(squeeze(slice(pairs, -1, 0, 1), -1), squeeze(slice(pairs, -1, 1, 2), -1));
    }
    contents.metadata.erase(complex_list);
  }
  return contents;
}

void save_safetensors(const std::string& path, const nn::StateDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomically(path, encode_safetensors(tensors, metadata));
}

SafetensorsContents load_safetensors(const std::string& path, const TensorFilter& wanted) {
  const MappedFile file(path);
  return decode_safetensors(file.bytes(), path, wanted);
}

}  // namespace eddy::io
