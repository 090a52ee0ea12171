// Inference export: a graph written to graph.json + weights.safetensors and read back runs to the
// same values; the predictor batches any number of rows; broken or mismatched files are refused
// with messages that name the file and the key.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "eddy/compiler/predictor.h"
#include "eddy/compiler/serialize.h"
#include "eddy/compiler/trace.h"
#include "eddy/eddy.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/safetensors.h"
#include "eddy/nn/layers.h"
#include "support/expect_error.h"

namespace eddy::compiler {
namespace {

namespace fs = std::filesystem;
using TensorList = std::vector<Tensor>;

constexpr int64_t kBatch = 8;

// A tanh MLP [N, 2] -> [N, 3] with a scaled output, and its columns' sum as a second output:
// parameters, a constant, matmuls, elementwise ops and a reduction with attributes.
struct Mlp {
  Generator generator{5};
  nn::Sequential layers;

  Mlp() {
    layers.push_back(std::make_shared<nn::Linear>(2, 16, generator, DType::f64));
    layers.push_back(std::make_shared<nn::Activation>(nn::ActivationKind::tanh));
    layers.push_back(std::make_shared<nn::Linear>(16, 3, generator, DType::f64));
  }
  TensorList operator()(const TensorList& in) {
    const Tensor y = layers.forward(in[0]) * 0.5;
    return {y, sum(y, {1}, false)};
  }
};

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("eddy_export_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir() const { return dir_.string(); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  Graph mlp_graph() {
    return trace([this](const TensorList& in) { return mlp_(in); }, {randn({kBatch, 2}, DType::f64)}).graph;
  }
  void replace_in(const std::string& name, const std::string& from, const std::string& to) {
    std::string text = io::read_file(file(name));
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from << " not in " << name;
    io::write_file_atomically(file(name), text.replace(at, from.size(), to));
  }

  Mlp mlp_;
  fs::path dir_;
};

double max_difference(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item<double>(); }

TEST_F(ExportTest, RoundTripRunsToIdenticalOutputs) {
  Graph graph = mlp_graph();
  save_graph(graph, dir());
  Graph loaded = load_graph(dir());
  EXPECT_EQ(loaded.to_string(), graph.to_string());
  ASSERT_EQ(loaded.captured.size(), graph.captured.size());
  for (size_t i = 0; i < graph.captured.size(); ++i) {
    EXPECT_EQ(loaded.captured[i].constant, graph.captured[i].constant);
    EXPECT_EQ(max_difference(loaded.captured[i].tensor, graph.captured[i].tensor), 0.0);
  }
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    EXPECT_TRUE(loaded.nodes[n].attrs == graph.nodes[n].attrs) << "attrs of node " << n;
  }

  const Tensor x = randn({kBatch, 2}, DType::f64);
  const TensorList expected = Program(std::move(graph)).run({x});
  const TensorList got = Program(std::move(loaded)).run({x});
  ASSERT_EQ(got.size(), 2u);
  for (size_t o = 0; o < got.size(); ++o) EXPECT_EQ(max_difference(got[o], expected[o]), 0.0) << "output " << o;
}

// Every Attrs field away from its default survives the file (the node need not make sense beyond
// its shape: loading infers shapes but evaluates nothing).
TEST_F(ExportTest, EveryAttrsFieldRoundTrips) {
  Graph graph;
  const ValueId x = graph.add_value({2, 3}, DType::f32, ValueSource::input);
  graph.inputs.push_back(x);
  Attrs attrs;
  attrs.shape = {3, 2};
  attrs.axes = {1, 0};
  attrs.lo = {0, 1};
  attrs.hi = {2, 3};
  attrs.step = {1, 2};
  attrs.axis = -1;
  attrs.keepdims = true;
  attrs.inverse = true;
  attrs.scale = 1.0 / 3.0;
  attrs.dtype = DType::c128;
  const ValueId y = graph.add_value({2, 3}, DType::f32, ValueSource::node);
  const Primitive& neg = *std::find_if(all_primitives().begin(), all_primitives().end(),
                                       [](const Primitive& p) { return p.name == "neg"; });
  graph.nodes.push_back(GraphNode{&neg, attrs, {x}, y});
  graph.outputs.push_back(y);
  save_graph(graph, dir());
  EXPECT_TRUE(load_graph(dir()).nodes.at(0).attrs == attrs);

  // Values JSON has no number for: a full of -inf (an attention mask past the folding limit)
  // was written as null and refused when loaded.
  attrs.value = std::complex<double>(-HUGE_VAL, HUGE_VAL);
  attrs.scale = std::nan("");
  graph.nodes.at(0).attrs = attrs;
  save_graph(graph, dir());
  const Attrs loaded = load_graph(dir()).nodes.at(0).attrs;
  EXPECT_EQ(loaded.value.number, attrs.value.number);
  EXPECT_TRUE(std::isnan(loaded.scale));
}

TEST_F(ExportTest, PredictorBatchesAnyNumberOfRows) {
  save_predictor(dir(), mlp_graph(), {{{"points", {"x", "y"}}}, {"u", "total"}, "test"});
  const Predictor predictor = Predictor::load(dir());
  EXPECT_EQ(predictor.batch_size(), kBatch);
  EXPECT_EQ(predictor.signature().outputs, (std::vector<std::string>{"u", "total"}));
  for (int64_t rows : {0, 1, 5, 8, 8 * 3, 8 * 3 + 5}) {
    const Tensor points = randn({rows, 2}, DType::f64);
    const TensorList got = predictor.predict({points});
    NoGradGuard no_grad;
    const TensorList expected = mlp_({points});
    ASSERT_EQ(got.size(), 2u);
    for (size_t o = 0; o < got.size(); ++o) {
      ASSERT_EQ(got[o].shape(), expected[o].shape()) << rows << " rows, output " << o;
      if (rows > 0) {
        EXPECT_LE(max_difference(got[o], expected[o]), 1e-12) << rows << " rows, output " << o;
      }
    }
  }
}

TEST_F(ExportTest, PredictorChecksItsInputs) {
  save_predictor(dir(), mlp_graph(), {{{"points", {"x", "y"}}}, {"u", "total"}, "test"});
  const Predictor predictor = Predictor::load(dir());
  expect_error([&] { predictor.predict({randn({4, 3}, DType::f64)}); },
               {"input 'points' must be [N, 2] float64 (columns x, y) for any N, got [4, 3] float64"});
  expect_error([&] { predictor.predict({randn({4, 2}, DType::f32)}); },
               {"must be [N, 2] float64", "got [4, 2] float32"});
  expect_error([&] { predictor.predict({}); }, {"expected 1 inputs, got 0"});
  expect_error([&] { save_predictor(dir(), mlp_graph(), {{{"points", {"x"}}}, {"u", "total"}, ""}); },
               {"input 'points' names 1 columns (x) but has shape [8, 2]"});
  // A run folder given in place of its export says to export it (it said only that meta.json could
  // not be opened).
  const std::filesystem::path run = std::filesystem::path(dir()) / "run";
  std::filesystem::create_directories(run);
  std::ofstream(run / "config.yaml") << "fields: [u]\n";
  expect_error([&] { Predictor::load(run.string()); },
               {"has no meta.json", "is a run folder, so `eddy export " + run.string() + "` first"});
}

TEST_F(ExportTest, UnknownPrimitiveNamesTheFileAndNode) {
  save_graph(mlp_graph(), dir());
  replace_in("graph.json", "\"primitive\": \"tanh\"", "\"primitive\": \"tahn\"");
  expect_error([&] { load_graph(dir()); },
               {file("graph.json"), ".primitive: unknown primitive 'tahn' (did you mean 'tanh'?)"});
}

TEST_F(ExportTest, OtherFormatVersionIsRefused) {
  save_graph(mlp_graph(), dir());
  replace_in("graph.json", "\"version\": 1", "\"version\": 2");
  expect_error([&] { load_graph(dir()); }, {file("graph.json"), "version: format version 2", "reads version 1"});
}

// nlohmann's parser throws out_of_range, not parse_error, for a number beyond double's range.
TEST_F(ExportTest, NumberBeyondDoubleRangeIsAnError) {
  save_graph(mlp_graph(), dir());
  replace_in("graph.json", "\"version\": 1", "\"version\": 1e400");
  expect_error([&] { load_graph(dir()); }, {file("graph.json"), "not valid JSON", "number overflow"});
}

TEST_F(ExportTest, MissingOrMisshapenTensorsAreRefused) {
  save_graph(mlp_graph(), dir());
  io::SafetensorsContents weights = io::load_safetensors(file("weights.safetensors"));
  const std::string first = weights.tensors.begin()->first;
  const Tensor kept = weights.tensors.begin()->second;

  weights.tensors.erase(first);
  io::save_safetensors(file("weights.safetensors"), weights.tensors, weights.metadata);
  expect_error([&] { load_graph(dir()); },
               {file("weights.safetensors"), "no tensor '" + first + "'", "graph.json values["});

  weights.tensors[first] = zeros({7}, kept.dtype());
  io::save_safetensors(file("weights.safetensors"), weights.tensors, weights.metadata);
  expect_error([&] { load_graph(dir()); }, {file("weights.safetensors"), "tensor '" + first + "' is float64[7]"});
}

// A program sizes and indexes its buffers by the shapes graph.json declares, so a shape edited by
// hand must be refused at load, not read past the buffers when the graph runs.
TEST_F(ExportTest, DeclaredShapesAreCheckedAgainstTheWeights) {
  const Graph graph = mlp_graph();
  for (const GraphNode& node : graph.nodes) {
    Graph edited = graph;
    ValueInfo& value = edited.values[static_cast<size_t>(node.output)];
    const Shape computed = value.shape;
    value.shape.push_back(3);
    save_predictor(dir(), edited, {{{"points", {"x", "y"}}}, {"u", "total"}, "test"});
    const std::string_view dtype = dtype_name(value.dtype);
    expect_error([&] { Predictor::load(dir()); },
                 {file("graph.json"), cat(": values[", node.output, "] is declared ", dtype, value.shape),
                  cat(node.primitive->name, ") computes it as ", dtype, computed)});
  }

  Graph wider_input = graph;
  wider_input.values[static_cast<size_t>(graph.inputs[0])].shape = {kBatch, 3};
  save_graph(wider_input, dir());
  expect_error([&] { load_graph(dir()); }, {file("graph.json"), ": nodes[", "[8, 3]"});

  Graph huge_input = graph;
  huge_input.values[static_cast<size_t>(graph.inputs[0])].shape = {int64_t{1} << 62, 2};
  save_graph(huge_input, dir());
  expect_error([&] { load_graph(dir()); },
               {file("graph.json"), cat(": values[", graph.inputs[0], "].shape: [4611686018427387904, 2]"),
                "too large to address"});
}

TEST_F(ExportTest, WeightsOfAnotherExportAreRefused) {
  save_graph(mlp_graph(), dir() + "/a");
  save_graph(mlp_graph(), dir() + "/b");
  fs::copy_file(dir() + "/b/weights.safetensors", dir() + "/a/weights.safetensors",
                fs::copy_options::overwrite_existing);
  expect_error([&] { load_graph(dir() + "/a"); }, {"not the weights of", "export again"});
}

// Killed after graph.json and the weights, before meta.json, an export left another model's
// columns and names beside them, and predictions were labelled as that model's.
TEST_F(ExportTest, MetaOfAnotherExportIsRefused) {
  const PredictorSignature signature{{{"points", {"x", "y"}}}, {"u", "total"}, "test"};
  save_predictor(dir() + "/a", mlp_graph(), signature);
  save_predictor(dir() + "/b", mlp_graph(), signature);
  fs::copy_file(dir() + "/b/meta.json", dir() + "/a/meta.json", fs::copy_options::overwrite_existing);
  expect_error([&] { Predictor::load(dir() + "/a"); },
               {"a/meta.json: export_id: ", "an export interrupted between its files", "export again"});
  // An artifact of an eddy before export_id loads as it did.
  replace_in("a/meta.json", "\"export_id\"", "\"exported_by\"");
  EXPECT_NO_THROW(Predictor::load(dir() + "/a"));
  // A killed writer's temporary is swept at the next export.
  const std::string leftover = dir() + "/b/meta.json.tmp-999999999";
  std::ofstream(leftover) << "{";
  save_predictor(dir() + "/b", mlp_graph(), signature);
  EXPECT_FALSE(fs::exists(leftover));
  EXPECT_NO_THROW(Predictor::load(dir() + "/b"));
}

TEST_F(ExportTest, NodeWithAPayloadCannotBeExported) {
  Graph graph = trace(
      [](const TensorList& in) {
        return checkpoint([](const TensorList& xs) { return TensorList{sin(xs[0]) * 2.0}; }, in);
      },
      {randn({kBatch, 2}, DType::f64).requires_grad_()}).graph;  // recorded: only reverse mode needs the node
  expect_error([&] { save_graph(graph, dir()); }, {"checkpoint(...) carries live state", "cannot be written"});
  EXPECT_FALSE(fs::exists(file("graph.json")));
}

// Graphs refer to primitives by name, so no two may share one.
TEST(ExportNames, PrimitiveNamesAreUnique) {
  std::set<std::string_view> seen;
  for (const Primitive& primitive : all_primitives()) EXPECT_TRUE(seen.insert(primitive.name).second) << primitive.name;
}

}  // namespace
}  // namespace eddy::compiler
