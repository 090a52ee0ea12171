#include "solvers/operator/problem.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "eddy/core/error.h"
#include "eddy/core/shape.h"
#include "solvers/common/training_config.h"

namespace eddy::operator_learning {
namespace {

using io::ConfigNode;

// The model's size defaults, which the memory check compares given sizes with too.
constexpr int64_t kFnoWidth = 32, kFnoLayers = 4, kFnoProjectionWidth = 128;
constexpr int64_t kDeepOnetLatent = 40, kDeepOnetWidth = 40, kDeepOnetDepth = 2;

// A file name holds 255 bytes; sample0_NAME.vti.tmp-PID, the image's temporary, adds 24 with a
// 7-digit pid.
constexpr size_t kLongestSplitName = 231;

SplitSpec read_split(const ConfigNode& node, const std::string& default_file, const std::string& default_name) {
  SplitSpec split;
  split.where = node.where();
  split.name = node.string("name", default_name);
  // The name becomes part of file names (sample0_NAME.vti) and of HDF5 group paths (test/NAME): a
  // control character (NUL) or a name too long for a file failed those writes after training.
  const bool control =
      std::ranges::any_of(split.name, [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  if (split.name.empty() || split.name == "." || split.name == ".." ||
      split.name.find_first_of("/\\") != std::string::npos || control || split.name.size() > kLongestSplitName) {
    (node.has("name") ? node.at("name") : node).fail(cat("a test set's name must be non-empty, not '.' or '..', and "
                                                         "without '/', '\\' or control characters, of at most ",
                                                         kLongestSplitName, " bytes (it names files and HDF5 groups); got '",
                                                         split.name, "'"));
  }
  split.file = node.derived_input_path("file", default_file);
  if (split.file.empty()) node.fail("needs a file (here or as data.file)");
  split.input = node.string("input");
  split.output = node.string("output");
  split.first = node.integer("first", 0);
  if (split.first < 0) node.at("first").fail("must be non-negative (a row of the file)");
  split.samples = node.integer("samples", -1);
  if (split.samples == 0 || split.samples < -1) node.at("samples").fail("must be positive (or -1 for all)");
  split.stride = node.integer("stride", 1);
  if (split.stride < 1) node.at("stride").fail("must be at least 1");
  return split;
}

void read_fno(const ConfigNode& model, nn::FnoOptions& fno) {
  const ConfigNode modes = model.at("modes");
  // As integers, so that 04 is refused as any integer key refuses it (it read as 4 here, as 8 elsewhere).
  for (const ConfigNode& count : modes.is_scalar() ? std::vector<ConfigNode>{modes} : modes.elements()) {
    const int64_t k = count.as_integer();
    if (k < 1) modes.fail("mode counts must be integers >= 1");
    fno.modes.push_back(k);
  }
  if (fno.modes.empty() || fno.modes.size() > 3) modes.fail("needs 1 to 3 entries, one per spatial axis");
  fno.width = model.integer("width", kFnoWidth);
  fno.layers = model.integer("layers", kFnoLayers);
  fno.projection_width = model.integer("projection_width", kFnoProjectionWidth);
  fno.grid_coordinates = model.boolean("grid_coordinates", true);
  fno.padding = model.integer("padding", 0);
  fno.factorization = nn::parse_factorization(model.choice("factorization", {"dense", "tucker"}, "dense"));
  // Read for dense weights too, so switching factorization by an override needs no other edit.
  fno.rank = model.number("rank", 0.5);
  if (!(fno.rank > 0 && fno.rank <= 1)) model.at("rank").fail("must be in (0, 1]");
  for (const char* key : {"width", "layers", "projection_width"}) {
    if (model.integer(key) < 1) model.at(key).fail("must be at least 1");
  }
  if (fno.padding < 0) model.at("padding").fail("must be non-negative");
}

void read_deeponet(const ConfigNode& model, nn::DeepOnetOptions& deeponet) {
  deeponet.latent = model.integer("latent", kDeepOnetLatent);
  deeponet.width = model.integer("width", kDeepOnetWidth);
  deeponet.depth = model.integer("depth", kDeepOnetDepth);
  for (const char* key : {"latent", "width", "depth"}) {
    if (model.integer(key) < 1) model.at(key).fail("must be at least 1");
  }
}

// The weights, kept with their gradient and AdamW's two moments, refused when they cannot fit,
// naming the sizes that make them, at the one given furthest above its default (the likely typo):
// a bare std::bad_alloc when building, or a message that blamed width for layers: 1e9 (or named no
// key, for projection_width or latent).
void refuse_model_beyond_memory(const ModelSpec& spec, const ConfigNode& model, DType dtype) {
  double weights = 0;
  std::string sizes;
  std::vector<std::pair<const char*, double>> given_over_default;
  if (spec.type == ModelType::fno) {
    const nn::FnoOptions& fno = spec.fno;
    // Each spectral layer holds width^2 complex weights per mode, in 2^(axes - 1) corners.
    double modes = std::pow(2.0, static_cast<double>(fno.modes.size()) - 1);
    for (const int64_t k : fno.modes) modes *= static_cast<double>(k);
    const double spectral = fno.factorization == nn::SpectralFactorization::tucker ? fno.rank : 1;
    const auto width = static_cast<double>(fno.width), layers = static_cast<double>(fno.layers);
    weights = layers * width * width * (2 * modes * spectral + 1) + width * static_cast<double>(fno.projection_width);
    sizes = cat("width ", fno.width, ", layers ", fno.layers, ", modes ", to_string(fno.modes),
                " and projection_width ", fno.projection_width);
    given_over_default = {{"width", width / kFnoWidth},
                          {"layers", layers / kFnoLayers},
                          {"projection_width", static_cast<double>(fno.projection_width) / kFnoProjectionWidth}};
  } else {
    const nn::DeepOnetOptions& deeponet = spec.deeponet;
    const auto width = static_cast<double>(deeponet.width);
    weights = 2 * (static_cast<double>(deeponet.depth) * width * width + width * static_cast<double>(deeponet.latent));
    sizes = cat("width ", deeponet.width, ", depth ", deeponet.depth, " and latent ", deeponet.latent);
    given_over_default = {{"width", width / kDeepOnetWidth},
                          {"depth", static_cast<double>(deeponet.depth) / kDeepOnetDepth},
                          {"latent", static_cast<double>(deeponet.latent) / kDeepOnetLatent}};
  }
  std::optional<ConfigNode> blamed;
  double furthest = 0;
  for (const auto& [key, ratio] : given_over_default) {
    if (model.has(key) && ratio > furthest) {
      blamed.emplace(model.at(key));
      furthest = ratio;
    }
  }
  (blamed ? *blamed : model)
      .require_memory(cat("a model of ", sizes, " has at least ", weights,
                          " weights, which with their gradient and AdamW's two moments"),
                      4 * weights * static_cast<double>(dtype_size(dtype)));
}

}  // namespace

OperatorProblem read_operator_problem(io::Config& config, bool for_training) {
  OperatorProblem p;
  p.source = config.source();
  ConfigNode root = config.root();
  p.description = root.string("description", "");
  p.device = solvers::read_device(root);

  ConfigNode data = root.at("data");
  const std::string file = data.input_path("file", "");
  p.data.input_channels = data.boolean("input_channels", false);
  p.data.output_channels = data.boolean("output_channels", false);
  p.data.normalize = data.boolean("normalize", true);
  p.data.points = data.string("points", "");
  p.data.train = read_split(data.at("train"), file, "train");
  const ConfigNode tests = data.at("test");
  if (tests.is_map()) {
    p.data.tests.push_back(read_split(tests, file, "test"));
  } else {
    const std::vector<ConfigNode> entries = tests.elements();
    if (entries.empty()) tests.fail("needs at least one test set");
    for (size_t i = 0; i < entries.size(); ++i) p.data.tests.push_back(read_split(entries[i], file, cat("test", i)));
  }
  for (size_t i = 0; i < p.data.tests.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (p.data.tests[i].name == p.data.tests[j].name) {
        tests.fail(cat("two test sets are named '", p.data.tests[i].name, "'; give each a distinct name"));
      }
    }
  }

  ConfigNode model = root.at("model");
  p.model.type = model.choice("type", {{"fno", ModelType::fno}, {"deeponet", ModelType::deeponet}}, ModelType::fno);
  const nn::ActivationKind default_activation =
      p.model.type == ModelType::fno ? nn::ActivationKind::gelu : nn::ActivationKind::relu;
  const std::string activation = model.string("activation", std::string(nn::activation_name(default_activation)));
  try {
    p.model.fno.activation = p.model.deeponet.activation = nn::parse_activation(activation);
  } catch (const Error& e) {
    model.at("activation").fail(e.what());
  }
  if (p.model.type == ModelType::fno && !p.data.points.empty()) {
    data.at("points").fail("is the trunk's query points of a DeepONet; an FNO evaluates on its data's grid");
  }
  // A DeepONet's arrays have no channel axis ([N, sensors] in, [N, P] out): the keys were ignored.
  for (const auto& [key, set] : {std::pair{"input_channels", p.data.input_channels},
                                  std::pair{"output_channels", p.data.output_channels}}) {
    if (p.model.type == ModelType::deeponet && set) {
      data.at(key).fail("is an FNO's channel axis; a DeepONet reads [N, sensors] and writes [N, P], without one");
    }
  }
  if (p.model.type == ModelType::fno) {
    read_fno(model, p.model.fno);
    p.model.modes_where = model.at("modes").where();
    if (model.has("padding")) p.model.padding_where = model.at("padding").where();
  } else {
    read_deeponet(model, p.model.deeponet);
  }

  ConfigNode training = root.section("training");
  TrainingSpec& t = p.training;
  t.epochs = training.integer("epochs", 100);
  t.batch_size = training.integer("batch_size", 20);
  t.learning_rate = training.number("learning_rate", 1e-3);
  t.weight_decay = training.number("weight_decay", 1e-4);
  t.evaluate_every = training.integer("evaluate_every", 1);
  if (t.epochs < 0) training.at("epochs").fail("must be non-negative");
  if (t.batch_size < 1) training.at("batch_size").fail("must be at least 1");
  if (!(t.learning_rate > 0)) training.at("learning_rate").fail("must be positive");
  if (t.weight_decay < 0) training.at("weight_decay").fail("must be non-negative");
  if (t.evaluate_every < 1) training.at("evaluate_every").fail("must be at least 1");
  t.schedule = solvers::read_schedule(training.section("schedule"), 100, t.learning_rate,
                                      solvers::RunLength{t.epochs, "training.epochs", "epoch"});
  t.loss = training.choice("loss", {{"relative_l2", LossType::relative_l2}, {"mse", LossType::mse}},
                           LossType::relative_l2);
  t.dtype = training.choice("dtype", {{"float32", DType::f32}, {"float64", DType::f64}}, DType::f32);
  const int64_t seed = training.integer("seed", 0);
  if (seed < 0) training.at("seed").fail(cat("must be non-negative, got ", seed));
  t.seed = static_cast<uint64_t>(seed);
  t.zero_stage = solvers::read_zero_stage(training);
  p.model.fno.dtype = p.model.deeponet.dtype = t.dtype;
  const bool fno = p.model.type == ModelType::fno;
  if (for_training) refuse_model_beyond_memory(p.model, model, t.dtype);
  p.model.fno.seed = p.model.deeponet.seed = t.seed;

  if (root.has("parallel")) {
    const ConfigNode parallel = root.at("parallel");
    p.parallel = solvers::read_parallel(parallel, {"dp", "grid"});
    const int64_t grid = p.parallel.ranks("grid");
    if (grid > 1 && !fno) {
      parallel.at("names").fail("grid splits the fields of an FNO over the ranks; a DeepONet has no grid (use dp)");
    }
    if (grid > 1 && p.model.fno.padding > 0) {
      model.at("padding").fail(cat("must be 0 when parallel.mesh splits the grid over ", grid,
                                   " ranks: the padded grid would have to be split again"));
    }
  }

  ConfigNode output = root.section("output");
  p.output.dir = solvers::read_output_dir(output, "runs/" + std::filesystem::path(p.source).stem().string());
  p.output.checkpoint_every = output.integer("checkpoint_every", 10);
  if (p.output.checkpoint_every < 0) output.at("checkpoint_every").fail("must be non-negative (0: only at the end)");
  p.output.vtk = output.boolean("vtk", true);

  config.check_no_unknown_keys();
  p.resolved_config = config.resolved();
  p.derived_settings = solvers::derived_settings(config);
  p.config_hash = config.hash();
  return p;
}

}  // namespace eddy::operator_learning
