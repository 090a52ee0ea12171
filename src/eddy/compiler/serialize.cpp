#include "eddy/compiler/serialize.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "eddy/core/checked_size.h"
#include "eddy/core/json_integers.h"
#include "eddy/core/suggest.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/safetensors.h"

namespace eddy::compiler {
namespace {

using json = nlohmann::ordered_json;  // keeps keys in the order written, for people reading the files

constexpr const char* kFormat = "eddy.graph";
constexpr const char* kExportIdKey = "eddy.export_id";

std::string graph_path(const std::string& dir) { return (std::filesystem::path(dir) / "graph.json").string(); }
std::string weights_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "weights.safetensors").string();
}

std::string source_name(const Graph& graph, ValueId id) {
  switch (graph.value(id).source) {
    case ValueSource::input: return "input";
    case ValueSource::node: return "node";
    case ValueSource::captured: return graph.find_captured(id)->constant ? "constant" : "parameter";
  }
  return "";
}

ValueSource source_kind(const std::string& name, const std::string& where) {
  if (name == "input") return ValueSource::input;
  if (name == "node") return ValueSource::node;
  EDDY_CHECK(name == "parameter" || name == "constant", where, ": '", name,
             "' is none of input, parameter, constant, node");
  return ValueSource::captured;
}

std::string tensor_key(const CapturedTensor& entry) {
  return cat(entry.constant ? "constant." : "parameter.", entry.id);
}

// A double as JSON: a number, or "inf", "-inf" or "nan", which JSON has no number for (a full of
// -inf, an attention mask, was written as null and refused when loaded).
json number_json(double value) {
  if (std::isfinite(value)) return value;
  return std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
}

double number_from(const json& node, const std::string& where) {
  if (node.is_number()) return node.get<double>();
  const std::string text = node.is_string() ? node.get<std::string>() : "";
  if (text == "inf") return std::numeric_limits<double>::infinity();
  if (text == "-inf") return -std::numeric_limits<double>::infinity();
  if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
  throw Error(cat(where, ": expected a number, \"inf\", \"-inf\" or \"nan\", got ", node.dump()));
}

// Every field but the payload (which save_graph refuses): a field added to Attrs must be added
// here and in attrs_from, or the primitives that read it would load with its default.
json attrs_json(const Attrs& attrs) {
  return {{"shape", attrs.shape}, {"axes", attrs.axes},         {"lo", attrs.lo},
          {"hi", attrs.hi},       {"step", attrs.step},         {"axis", attrs.axis},
          {"keepdims", attrs.keepdims}, {"inverse", attrs.inverse}, {"scale", number_json(attrs.scale)},
          {"dtype", std::string(dtype_name(attrs.dtype))},
          {"device", {static_cast<int>(attrs.device.type), attrs.device.index}},
          {"value", {number_json(attrs.value.number.real()), number_json(attrs.value.number.imag())}}};
}

DType dtype_named(const std::string& name, const std::string& where) {
  for (DType dtype : {DType::f32, DType::f64, DType::c64, DType::c128, DType::i32, DType::i64, DType::b8}) {
    if (dtype_name(dtype) == name) return dtype;
  }
  throw Error(cat(where, ": unknown dtype '", name, "'"));
}

Attrs attrs_from(const json& node, const std::string& where) {
  Attrs attrs;
  attrs.shape = json_integers(node.at("shape"), where + ".shape");
  attrs.axes = json_integers(node.at("axes"), where + ".axes");
  attrs.lo = json_integers(node.at("lo"), where + ".lo");
  attrs.hi = json_integers(node.at("hi"), where + ".hi");
  attrs.step = json_integers(node.at("step"), where + ".step");
  attrs.axis = json_integer(node.at("axis"), where + ".axis");
  attrs.keepdims = node.at("keepdims").get<bool>();
  attrs.inverse = node.at("inverse").get<bool>();
  attrs.scale = number_from(node.at("scale"), where + ".scale");
  attrs.dtype = dtype_named(node.at("dtype").get<std::string>(), where + ".dtype");
  // Absent from files written before creation ops were graph nodes, which need neither.
  if (node.contains("device")) {
    const auto device = json_integers<int>(node.at("device"), where + ".device");
    EDDY_CHECK(device.size() == 2 && device[0] >= 0 && device[0] < kNumDeviceTypes, where,
               ".device: expected [type, index] with type below ", kNumDeviceTypes);
    attrs.device = Device{static_cast<DeviceType>(device[0]), device[1]};
  }
  if (node.contains("value")) {
    const json& value = node.at("value");
    EDDY_CHECK(value.is_array() && value.size() == 2, where, ".value: expected [real, imaginary], got ", value.dump());
    attrs.value = std::complex<double>(number_from(value[0], where + ".value"), number_from(value[1], where + ".value"));
  }
  return attrs;
}

const Primitive& primitive_named(const std::string& name, const std::string& where) {
  if (const Primitive* primitive = find_primitive(name)) return *primitive;
  std::vector<std::string> known;
  for (const Primitive& primitive : all_primitives()) known.emplace_back(primitive.name);
  throw Error(cat(where, ": unknown primitive '", name, "'", did_you_mean(name, known),
                  "; the graph was exported by an eddy with primitives this one lacks"));
}

// Unique per export, so the two files of one export can be told from a mix of two.
std::string new_export_id() {
  return cat(std::chrono::system_clock::now().time_since_epoch().count(), "-", ::getpid());
}

// The captured tensors of `file`'s values, checked against the weights file: every tensor there,
// no more, each with its value's shape and dtype.
std::vector<CapturedTensor> captured_tensors(const json& values, const Graph& graph, nn::StateDict tensors,
                                             const std::string& file, const std::string& weights_file) {
  std::vector<CapturedTensor> captured;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string source = values[i].at("source").get<std::string>();
    if (source != "parameter" && source != "constant") continue;
    const std::string key = values[i].at("tensor").get<std::string>();
    auto found = tensors.find(key);
    EDDY_CHECK(found != tensors.end(), weights_file, ": no tensor '", key, "', which ", file, " values[", i,
               "] names");
    const ValueInfo& info = graph.values[i];
    const Tensor& tensor = found->second;
    EDDY_CHECK(tensor.shape() == info.shape && tensor.dtype() == info.dtype, weights_file, ": tensor '", key,
               "' is ", dtype_name(tensor.dtype()), tensor.shape(), " but ", file, " values[", i, "] says ",
               dtype_name(info.dtype), info.shape);
    captured.push_back(CapturedTensor{static_cast<ValueId>(i), tensor, source == "constant"});
    tensors.erase(found);
  }
  EDDY_CHECK(tensors.empty(), weights_file, ": tensor '", tensors.begin()->first, "' is not a value of ", file);
  return captured;
}

// Each node's declared output against what its primitive infers from its inputs, starting from the
// graph's inputs and the captured tensors (checked against the weights file already). A program
// sizes and indexes its buffers by the declared shapes, so one edited by hand would have it read
// past them.
void check_node_shapes(const Graph& graph, const std::string& file) {
  InterpreterScope abstract(abstract_evaluator());
  std::vector<Tensor> values(graph.values.size());
  for (ValueId id : graph.inputs) {
    values[static_cast<size_t>(id)] = Tensor::abstract(graph.value(id).shape, graph.value(id).dtype);
  }
  for (const CapturedTensor& entry : graph.captured) {
    const Tensor& tensor = entry.tensor;
    values[static_cast<size_t>(entry.id)] = Tensor::abstract(tensor.shape(), tensor.dtype(), tensor.device());
  }
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const GraphNode& node = graph.nodes[n];
    std::vector<Tensor> inputs;
    for (ValueId input : node.inputs) inputs.push_back(values[static_cast<size_t>(input)]);
    Tensor output;
    try {
      output = dispatch(*node.primitive, inputs, node.attrs);
    } catch (const Error& e) {
      throw Error(cat(file, ": nodes[", n, "]: ", e.what()));
    }
    const ValueInfo& declared = graph.value(node.output);
    EDDY_CHECK(output.shape() == declared.shape && output.dtype() == declared.dtype, file, ": values[", node.output,
               "] is declared ", dtype_name(declared.dtype), declared.shape, ", but nodes[", n, "] (",
               node.primitive->name, ") computes it as ", dtype_name(output.dtype()), output.shape(),
               " from its inputs");
    values[static_cast<size_t>(node.output)] = output;
  }
}

Graph graph_from(const json& root, const io::SafetensorsContents& weights, const std::string& file,
                 const std::string& weights_file) {
  Graph graph;
  std::string where = "values";
  try {
    const json& values = root.at("values");
    for (size_t i = 0; i < values.size(); ++i) {
      where = cat("values[", i, "]");
      // Nodes refer to values by id, so a value added or removed by hand would shift them all.
      EDDY_CHECK(json_integer<size_t>(values[i].at("id"), cat(file, ": ", where, ".id")) == i, file, ": ", where,
                 ".id: ", values[i].at("id").dump(),
                 ", but values must be listed in id order from 0");
      const Shape shape = json_integers(values[i].at("shape"), cat(file, ": ", where, ".shape"));
      const DType dtype = dtype_named(values[i].at("dtype").get<std::string>(), cat(file, ": ", where, ".dtype"));
      EDDY_CHECK(checked_byte_size(shape, dtype), file, ": ", where, ".shape: ", shape,
                 " has a negative extent or is too large to address (2^63 bytes or more)");
      graph.add_value(shape, dtype,
                      source_kind(values[i].at("source").get<std::string>(), cat(file, ": ", where, ".source")));
    }
    where = "values";
    graph.captured = captured_tensors(values, graph, weights.tensors, file, weights_file);
    where = "inputs";
    graph.inputs = json_integers<ValueId>(root.at("inputs"), cat(file, ": inputs"));
    where = "outputs";
    graph.outputs = json_integers<ValueId>(root.at("outputs"), cat(file, ": outputs"));
    const json& nodes = root.at("nodes");
    for (size_t n = 0; n < nodes.size(); ++n) {
      where = cat("nodes[", n, "]");
      const json& node = nodes[n];
      const Primitive& primitive = primitive_named(node.at("primitive").get<std::string>(),
                                                   cat(file, ": ", where, ".primitive"));
      GraphNode parsed{&primitive, attrs_from(node.at("attrs"), cat(file, ": ", where, ".attrs")),
                       json_integers<ValueId>(node.at("inputs"), cat(file, ": ", where, ".inputs")),
                       json_integer<ValueId>(node.at("output"), cat(file, ": ", where, ".output"))};
      EDDY_CHECK(primitive.arity < 0 || static_cast<int>(parsed.inputs.size()) == primitive.arity, file, ": ",
                 where, ".inputs: ", primitive.name, " takes ", primitive.arity, " inputs, not ",
                 parsed.inputs.size());
      graph.nodes.push_back(std::move(parsed));
    }
  } catch (const json::exception& e) {
    throw Error(cat(file, ": ", where, ": ", e.what()));
  }
  try {
    verify(graph);
  } catch (const Error& e) {
    throw Error(cat(file, ": ", e.what()));
  }
  check_node_shapes(graph, file);
  return graph;
}

}  // namespace

std::string attrs_text(const Attrs& attrs) { return attrs_json(attrs).dump(); }

std::string save_graph(const Graph& graph, const std::string& dir) {
  json values = json::array();
  for (size_t id = 0; id < graph.values.size(); ++id) {
    const ValueInfo& info = graph.values[id];
    json value{{"id", id}, {"shape", info.shape}, {"dtype", std::string(dtype_name(info.dtype))},
               {"source", source_name(graph, static_cast<ValueId>(id))}};
    const CapturedTensor* entry = graph.find_captured(static_cast<ValueId>(id));
    if (entry) value["tensor"] = tensor_key(*entry);
    values.push_back(std::move(value));
  }
  json nodes = json::array();
  for (const GraphNode& node : graph.nodes) {
    EDDY_CHECK(!node.attrs.payload, "export: %", node.output, " = ", node.primitive->name,
               "(...) carries live state (a checkpointed segment's code or a communicator) that cannot be "
               "written to a file; export a function without checkpoint() or collectives");
    nodes.push_back({{"primitive", std::string(node.primitive->name)}, {"attrs", attrs_json(node.attrs)},
                     {"inputs", node.inputs}, {"output", node.output}});
  }
  const std::string export_id = new_export_id();
  const json root{{"format", kFormat}, {"version", kGraphFormatVersion}, {"export_id", export_id},
                  {"values", values},  {"inputs", graph.inputs},         {"outputs", graph.outputs},
                  {"nodes", nodes}};
  nn::StateDict tensors;
  for (const CapturedTensor& entry : graph.captured) tensors[tensor_key(entry)] = entry.tensor.detach();

  io::create_folders(dir, "export");
  io::save_safetensors(weights_path(dir), tensors, {{kExportIdKey, export_id}});
  io::write_file_atomically(graph_path(dir), root.dump(1) + "\n");
  return export_id;
}

Graph load_graph(const std::string& dir, std::string* export_id) {
  const std::string file = graph_path(dir), weights_file = weights_path(dir);
  json root;
  // json::exception, not only parse_error: a number beyond double's range (1e400) is out_of_range.
  try {
    root = json::parse(io::read_file(file));
  } catch (const json::exception& e) {
    throw Error(cat(file, ": not valid JSON: ", e.what()));
  }
  EDDY_CHECK(root.is_object() && root.contains("format") && root["format"] == kFormat, file,
             ": not an eddy graph (its \"format\" is not \"", kFormat, "\")");
  const json version = root.contains("version") ? root["version"] : json();
  EDDY_CHECK(version == kGraphFormatVersion, file, ": version: format version ", version.dump(),
             ", but this eddy reads version ", kGraphFormatVersion, "; export the graph again with this eddy");
  const io::SafetensorsContents weights = io::load_safetensors(weights_file);
  const auto id = weights.metadata.find(kExportIdKey);
  EDDY_CHECK(id != weights.metadata.end() && root.contains("export_id") && root["export_id"] == id->second,
             weights_file, ": not the weights of ", file, " (__metadata__.", kExportIdKey,
             " differs from its export_id); export again");
  if (export_id) *export_id = id->second;
  return graph_from(root, weights, file, weights_file);
}

}  // namespace eddy::compiler
