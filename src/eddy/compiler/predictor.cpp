#include "eddy/compiler/predictor.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "eddy/autodiff/tape.h"
#include "eddy/compiler/serialize.h"
#include "eddy/core/json_integers.h"
#include "eddy/io/atomic_file.h"
#include "eddy/ops/ops.h"

namespace eddy {
namespace {

using json = nlohmann::ordered_json;  // keeps keys in the order written, for people reading the files
using compiler::Graph;

constexpr const char* kFormat = "eddy.predictor";

std::string meta_path(const std::string& dir) { return (std::filesystem::path(dir) / "meta.json").string(); }

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// The batch size B, after checking that `signature` fits `graph`; `where` starts each message.
int64_t check_layout(const Graph& graph, const PredictorSignature& signature, const std::string& where) {
  EDDY_CHECK(signature.inputs.size() == graph.inputs.size() && signature.outputs.size() == graph.outputs.size(),
             where, "names ", signature.inputs.size(), " inputs and ", signature.outputs.size(),
             " outputs, but the graph has ", graph.inputs.size(), " and ", graph.outputs.size());
  EDDY_CHECK(!graph.inputs.empty(), where, "the graph has no inputs, so it has no batch axis to predict along");
  const int64_t batch = graph.value(graph.inputs[0]).shape.empty() ? 0 : graph.value(graph.inputs[0]).shape[0];
  EDDY_CHECK(batch > 0, where, "input '", signature.inputs[0].name, "' has shape ",
             graph.value(graph.inputs[0]).shape, "; inference needs a leading batch axis of at least one row");
  auto check_rows = [&](compiler::ValueId id, const std::string& kind, const std::string& name) {
    const Shape& shape = graph.value(id).shape;
    EDDY_CHECK(!shape.empty() && shape[0] == batch, where, kind, " '", name, "' has shape ", shape,
               ", but every input and output must have the batch size ", batch, " as its leading extent");
  };
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const PredictorInput& input = signature.inputs[i];
    check_rows(graph.inputs[i], "input", input.name);
    const Shape& shape = graph.value(graph.inputs[i]).shape;
    EDDY_CHECK(input.columns.empty() || (shape.size() == 2 && shape[1] == static_cast<int64_t>(input.columns.size())),
               where, "input '", input.name, "' names ", input.columns.size(), " columns (", joined(input.columns),
               ") but has shape ", shape);
  }
  for (size_t o = 0; o < graph.outputs.size(); ++o) check_rows(graph.outputs[o], "output", signature.outputs[o]);
  return batch;
}

json meta_json(const Graph& graph, const PredictorSignature& signature, int64_t batch, const std::string& export_id) {
  json inputs = json::array();
  for (const PredictorInput& input : signature.inputs) {
    json entry{{"name", input.name}};
    if (!input.columns.empty()) entry["columns"] = input.columns;
    inputs.push_back(std::move(entry));
  }
  json outputs = json::array();
  for (const std::string& name : signature.outputs) outputs.push_back({{"name", name}});
  return {{"format", kFormat},
          {"version", kPredictorFormatVersion},
          {"batch_size", batch},
          {"dtype", std::string(dtype_name(graph.value(graph.inputs[0]).dtype))},
          {"inputs", inputs},
          {"outputs", outputs},
          {"source", signature.source},
          {"export_id", export_id}};
}

PredictorSignature signature_from(const json& meta, const std::string& file) {
  std::string key = "format";
  try {
    EDDY_CHECK(meta.is_object() && meta.contains("format") && meta["format"] == kFormat, file,
               ": not an eddy predictor's meta.json (its \"format\" is not \"", kFormat, "\")");
    key = "version";
    const int version = json_integer<int>(meta.at("version"), cat(file, ": version"));
    EDDY_CHECK(version == kPredictorFormatVersion, file, ": version: format version ", version,
               ", but this eddy reads version ", kPredictorFormatVersion, "; export again with this eddy");
    PredictorSignature signature;
    key = "inputs";
    for (const json& input : meta.at("inputs")) {
      signature.inputs.push_back(PredictorInput{input.at("name").get<std::string>(),
                                                input.value("columns", std::vector<std::string>{})});
    }
    key = "outputs";
    for (const json& output : meta.at("outputs")) signature.outputs.push_back(output.at("name").get<std::string>());
    key = "source";
    signature.source = meta.value("source", "");
    return signature;
  } catch (const json::exception& e) {
    throw Error(cat(file, ": ", key, ": ", e.what()));
  }
}

// Rows [0, n) of `rows` followed by copies of its last row up to `batch` rows: a valid point
// (inside the domain), so the padding computes nothing a model could choke on.
Tensor padded(const Tensor& rows, int64_t batch) {
  const int64_t n = rows.shape()[0];
  Shape fill_shape = rows.shape();
  fill_shape[0] = batch - n;
  return concat({rows, expand(slice(rows, 0, n - 1, n), fill_shape)}, 0);
}

}  // namespace

std::string rows_shape(const Shape& shape) {
  std::string text = "[N";
  for (size_t axis = 1; axis < shape.size(); ++axis) text += cat(", ", shape[axis]);
  return text + "]";
}

void save_predictor(const std::string& dir, const Graph& graph, const PredictorSignature& signature) {
  const int64_t batch = check_layout(graph, signature, "export: ");
  const std::string export_id = compiler::save_graph(graph, dir);
  // A killed export's temporaries (NAME.tmp-PID) stayed beside the files through later exports.
  io::remove_abandoned_temporaries_in(dir);
  io::write_file_atomically(meta_path(dir), meta_json(graph, signature, batch, export_id).dump(2) + "\n");
}

Predictor::Predictor(PredictorSignature signature, int64_t batch_size, std::shared_ptr<const compiler::Program> program)
    : signature_(std::move(signature)), batch_size_(batch_size), program_(std::move(program)) {}

Predictor Predictor::load(const std::string& dir) {
  EDDY_CHECK(std::filesystem::is_directory(dir), "predictor: ", dir,
             " is not a folder; give the folder `eddy export` wrote (RUN_DIR/export by default)");
  const std::string file = meta_path(dir);
  EDDY_CHECK(std::filesystem::exists(file), "predictor: ", dir, " has no meta.json; give the folder `eddy export` ",
             "wrote (RUN_DIR/export by default)",
             std::filesystem::exists(std::filesystem::path(dir) / "config.yaml")
                 ? cat(": ", dir, " is a run folder, so `eddy export ", dir, "` first")
                 : std::string());
  json meta;
  // json::exception, not only parse_error: a number beyond double's range (1e400) is out_of_range.
  try {
    meta = json::parse(io::read_file(file));
  } catch (const json::exception& e) {
    throw Error(cat(file, ": not valid JSON: ", e.what()));
  }
  PredictorSignature signature = signature_from(meta, file);
  std::string export_id;
  Graph graph = compiler::load_graph(dir, &export_id);
  // An export interrupted after graph.json and the weights, before meta.json, left another
  // model's columns and names beside them: its predictions were labelled as that model's. A
  // meta.json written before it recorded the id (2026-12-06) loads as it did.
  EDDY_CHECK(!meta.contains("export_id") || meta["export_id"] == export_id, file, ": export_id: ",
             meta.value("export_id", json()).dump(), ", but graph.json and weights.safetensors are of export \"",
             export_id, "\" (an export interrupted between its files); export again");
  const int64_t batch = check_layout(graph, signature, file + ": ");
  EDDY_CHECK(meta.value("batch_size", json()) == batch, file, ": batch_size: ", meta.value("batch_size", json()).dump(),
             ", but the graph's inputs have ", batch, " rows");
  return Predictor(std::move(signature), batch, std::make_shared<const compiler::Program>(std::move(graph)));
}

std::vector<Tensor> Predictor::predict(const std::vector<Tensor>& inputs) const {
  const Graph& graph = program_->graph();
  EDDY_CHECK(inputs.size() == graph.inputs.size(), "predict: expected ", graph.inputs.size(), " inputs, got ",
             inputs.size());
  int64_t rows = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const PredictorInput& spec = signature_.inputs[i];
    const compiler::ValueInfo& info = graph.value(graph.inputs[i]);
    const std::string columns = spec.columns.empty() ? "" : " (columns " + joined(spec.columns) + ")";
    EDDY_CHECK(inputs[i].defined(), "predict: input '", spec.name, "' is an undefined tensor");
    const Shape& shape = inputs[i].shape();
    const bool fits =
        shape.size() == info.shape.size() && std::equal(shape.begin() + 1, shape.end(), info.shape.begin() + 1);
    EDDY_CHECK(fits && inputs[i].dtype() == info.dtype, "predict: input '", spec.name, "' must be ",
               rows_shape(info.shape), " ", dtype_name(info.dtype), columns, " for any N, got ", shape, " ",
               dtype_name(inputs[i].dtype()));
    EDDY_CHECK(rows < 0 || shape[0] == rows, "predict: input '", spec.name, "' has ", shape[0],
               " rows but input '", signature_.inputs[0].name, "' has ", rows);
    // Its outputs would be NaN with nothing said, where training refuses such data.
    if (const auto index = first_non_finite(inputs[i])) {
      const bool column_known = index->size() == 2 && (*index)[1] < static_cast<int64_t>(spec.columns.size());
      throw Error(cat("predict: input '", spec.name, "' holds a non-finite value (NaN or infinity",
                      inputs[i].dtype() == DType::f32 ? ", or a value past float32's range cast to it" : "", ") at ",
                      to_string(*index), column_known ? cat(" (column ", spec.columns[(*index)[1]], ")") : "",
                      "; the inputs must be finite"));
    }
    rows = shape[0];
  }

  NoGradGuard no_grad;
  std::vector<std::vector<Tensor>> pieces(graph.outputs.size());
  for (int64_t start = 0; start < rows; start += batch_size_) {
    const int64_t count = std::min(batch_size_, rows - start);
    std::vector<Tensor> batch;
    for (const Tensor& input : inputs) {
      const Tensor part = slice(input, 0, start, start + count);
      batch.push_back(count < batch_size_ ? padded(part, batch_size_) : part);
    }
    std::vector<Tensor> outputs = program_->run(batch);
    for (size_t o = 0; o < outputs.size(); ++o) {
      pieces[o].push_back(count < batch_size_ ? slice(outputs[o], 0, 0, count) : outputs[o]);
    }
  }
  std::vector<Tensor> results;
  for (size_t o = 0; o < graph.outputs.size(); ++o) {
    const compiler::ValueInfo& info = graph.value(graph.outputs[o]);
    Shape empty_shape = info.shape;
    empty_shape[0] = 0;
    results.push_back(pieces[o].empty() ? zeros(empty_shape, info.dtype) : concat(pieces[o], 0));
  }
  return results;
}

}  // namespace eddy
