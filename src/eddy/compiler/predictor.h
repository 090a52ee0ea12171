#pragma once
// Inference from an exported graph, without the code that traced it (docs/compiler.md,
// "Inference export"). An artifact is a folder with the graph (compiler/serialize.h) and
// meta.json, which names the inputs and outputs and gives the batch size B the graph was traced
// at. Every input and output has B as its leading extent; predict() takes any number of rows N,
// runs them B at a time as a compiler::Program (no tracing, no autodiff) and returns N rows.

#include <memory>
#include <string>
#include <vector>

#include "eddy/compiler/program.h"

namespace eddy {

struct PredictorInput {
  std::string name;                  // e.g. "points"
  std::vector<std::string> columns;  // what the last axis holds (e.g. the coordinates); may be empty
};

// meta.json's names, one per graph input and output, in graph order.
struct PredictorSignature {
  std::vector<PredictorInput> inputs;
  std::vector<std::string> outputs;  // e.g. the fields
  std::string source;                // what was exported (a run folder), for readers of meta.json
};

inline constexpr int kPredictorFormatVersion = 1;

// What `eddy export` wrote.
struct ExportSummary {
  std::string dir;
  int64_t batch_size = 0;
  PredictorSignature signature;
  Shape input_shape;  // of the traced input, [batch_size, ...]
  size_t graph_nodes = 0;
  size_t tensors = 0;  // in weights.safetensors
};

// "[N, 2]": a shape with its leading (batch) axis open, as messages write an input or output.
std::string rows_shape(const Shape& shape);

// Writes graph.json, weights.safetensors and meta.json into `dir` (created when needed). Throws
// eddy::Error unless the signature names every input and output and they all share input 0's
// leading extent.
void save_predictor(const std::string& dir, const compiler::Graph& graph, const PredictorSignature& signature);

class Predictor {
 public:
  // Reads an artifact folder and lowers its graph (fused kernels come from the kernel cache, or
  // are compiled once).
  static Predictor load(const std::string& dir);

  // One tensor per input, each [N, ...] with the graph's trailing shape and dtype, all with the
  // same N >= 0. Returns one tensor per output, [N, ...]. A last batch of fewer than B rows is
  // padded to B and its outputs trimmed.
  std::vector<Tensor> predict(const std::vector<Tensor>& inputs) const;

  const PredictorSignature& signature() const { return signature_; }
  int64_t batch_size() const { return batch_size_; }
  const compiler::Program& program() const { return *program_; }

 private:
  Predictor(PredictorSignature signature, int64_t batch_size, std::shared_ptr<const compiler::Program> program);

  PredictorSignature signature_;
  int64_t batch_size_;
  // Shared: a Program points into its own graph, so it is never copied.
  std::shared_ptr<const compiler::Program> program_;
};

}  // namespace eddy
