// An inference export as `eddy predict` loads it (compiler/predictor.h): meta.json, graph.json and
// weights.safetensors read and checked against each other, the graph lowered, and then run on
// zeros of its input shapes, for fewer rows than its batch and for more.
//
// The input holds the three files one after the other, each but the last followed by kSeparator.
// Fusion is off, so that no kernel goes to the system compiler: the loader and the primitives'
// own checks are what is fuzzed. A graph is run only when its values are small (kMaxBytes in
// all): a valid graph may broadcast a few weights to any size.
#include <cstdlib>

#include "eddy/compiler/predictor.h"
#include "eddy/core/checked_size.h"
#include "eddy/ops/ops.h"
#include "fuzz_support.h"

namespace {

using namespace eddy;

constexpr std::string_view kSeparator = "\n--eddy-fuzz-file--\n";
constexpr int64_t kMaxBytes = int64_t{16} << 20;

bool small_enough(const compiler::Graph& graph) {
  int64_t total = 0;
  for (const compiler::ValueInfo& value : graph.values) {
    const std::optional<int64_t> bytes = checked_byte_size(value.shape, value.dtype);
    if (!bytes || __builtin_add_overflow(total, *bytes, &total) || total > kMaxBytes) return false;
  }
  return true;
}

void predict_on_zeros(const Predictor& predictor, int64_t rows) {
  const compiler::Graph& graph = predictor.program().graph();
  std::vector<Tensor> inputs;
  for (const compiler::ValueId id : graph.inputs) {
    Shape shape = graph.value(id).shape;
    if (shape.empty()) return;
    shape[0] = rows;
    inputs.push_back(zeros(shape, graph.value(id).dtype));
  }
  for (const Tensor& output : predictor.predict(inputs)) fuzz::read_every_byte(output);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("EDDY_COMPILER_DISABLE", "fusion", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest = fuzz::as_text(data, size);
  const std::filesystem::path dir = fuzz::scratch_dir() / "export";
  std::filesystem::create_directories(dir);
  for (const char* name : {"meta.json", "graph.json", "weights.safetensors"}) {
    const size_t end = rest.find(kSeparator);
    fuzz::write_bytes(dir / name, rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + kSeparator.size());
  }
  fuzz::expecting_errors([&] {
    const Predictor predictor = Predictor::load(dir.string());
    if (!small_enough(predictor.program().graph())) return;
    predict_on_zeros(predictor, 1);
    predict_on_zeros(predictor, predictor.batch_size() + 1);
  });
  std::filesystem::remove_all(dir);
  return 0;
}
