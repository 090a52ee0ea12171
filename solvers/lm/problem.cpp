#include "solvers/lm/problem.h"

#include <filesystem>

#include "eddy/core/error.h"
#include "eddy/io/tokenizer.h"
#include "solvers/common/training_config.h"
#include "solvers/lm/model.h"

namespace eddy::lm {
namespace {

using io::ConfigNode;

// A string or a list of strings, each read by `read`: plain, or as an input path (for a pattern,
// its folder part is resolved, which glob then expands).
std::vector<std::string> strings(const ConfigNode& node,
                                 std::string (ConfigNode::*read)() const = &ConfigNode::as_string) {
  if (node.is_scalar()) return {(node.*read)()};
  std::vector<std::string> all;
  for (const ConfigNode& element : node.elements()) all.push_back((element.*read)());
  return all;
}

void require_positive(const ConfigNode& section, const char* key) {
  if (section.integer(key) < 1) section.at(key).fail("must be at least 1");
}

CorpusSpec read_corpus(const ConfigNode& data) {
  CorpusSpec corpus;
  corpus.where = data.where();
  const ConfigNode files = data.at("files");
  corpus.files = strings(files, &ConfigNode::as_input_pattern);
  if (corpus.files.empty()) files.fail("needs at least one file or pattern");
  if (data.has("exclude")) corpus.exclude = strings(data.at("exclude"));
  corpus.separator = data.string("separator", "");
  corpus.validation_fraction = data.number("validation_fraction", 0.05);
  if (!(corpus.validation_fraction > 0 && corpus.validation_fraction < 1)) {
    data.at("validation_fraction").fail("must be in (0, 1)");
  }
  return corpus;
}

TokenizerSpec read_tokenizer(const ConfigNode& section) {
  TokenizerSpec tokenizer;
  tokenizer.file = section.input_path("file", "");
  if (!tokenizer.file.empty() && !std::filesystem::is_regular_file(tokenizer.file)) {
    section.at("file").fail(cat(std::filesystem::is_directory(tokenizer.file) ? "is a folder, not a file: "
                                                                               : "no such file: ",
                                tokenizer.file));
  }
  // Read here, so that `eddy check` refuses a file that training would (a corrupt tokenizer.json),
  // naming the key.
  if (!tokenizer.file.empty()) {
    try {
      io::BpeTokenizer::load(tokenizer.file);
    } catch (const Error& e) {
      section.at("file").fail(e.what());
    }
  }
  tokenizer.vocab_size = static_cast<int32_t>(section.integer("vocab_size", 4096));
  tokenizer.min_frequency = section.integer("min_frequency", 2);
  // 256 byte tokens and the end-of-text token come first.
  if (tokenizer.vocab_size < 257 || tokenizer.vocab_size > (1 << 24)) {
    section.at("vocab_size").fail("must be between 257 (the byte tokens and <|endoftext|>) and 16777216");
  }
  if (tokenizer.min_frequency < 1) section.at("min_frequency").fail("must be at least 1");
  return tokenizer;
}

ModelSpec read_model(const ConfigNode& model) {
  ModelSpec m;
  m.architecture = model.choice("type", {{"gpt2", Architecture::gpt2}, {"llama", Architecture::llama}},
                                Architecture::gpt2);
  m.context = model.integer("context", 256);
  m.hidden_size = model.integer("hidden_size", 256);
  m.layers = model.integer("layers", 4);
  m.heads = model.integer("heads", 4);
  for (const char* key : {"context", "hidden_size", "layers", "heads"}) require_positive(model, key);
  if (m.hidden_size % m.heads != 0) {
    model.at("heads").fail(cat(m.heads, " heads do not divide hidden_size ", m.hidden_size));
  }
  m.intermediate_size = model.integer("intermediate_size", 0);
  if (m.intermediate_size < 0) model.at("intermediate_size").fail("must be non-negative (0: the layout's default)");
  m.dropout = model.number("dropout", 0.0);
  if (!(m.dropout >= 0 && m.dropout < 1)) model.at("dropout").fail("must be in [0, 1)");
  m.tie_embeddings = model.boolean("tie_embeddings", true);
  if (m.architecture == Architecture::llama) {
    m.kv_heads = model.derived_integer("kv_heads", m.heads);
    if (m.kv_heads < 1 || m.heads % m.kv_heads != 0) {
      model.at("kv_heads").fail(cat("must divide heads (", m.heads, "); got ", m.kv_heads));
    }
    if ((m.hidden_size / m.heads) % 2 != 0) {
      model.at("heads").fail(cat("rotary positions need an even head size; hidden_size / heads = ",
                                 m.hidden_size / m.heads));
    }
    m.rope_theta = model.number("rope_theta", 10000.0);
    if (!(m.rope_theta > 0)) model.at("rope_theta").fail("must be positive");
  } else {
    // Read only to say so: as an unknown key it would be offered `heads` as the nearest one.
    for (const char* llama_only : {"kv_heads", "rope_theta"}) {
      if (model.has(llama_only)) model.at(llama_only).fail("is a key of type: llama models (this one is gpt2)");
    }
  }
  return m;
}

TrainingSpec read_training(const ConfigNode& training) {
  TrainingSpec t;
  t.steps = training.integer("steps", 1000);
  if (t.steps < 0) training.at("steps").fail("must be non-negative");
  t.batch_size = training.integer("batch_size", 16);
  t.accumulation = training.integer("accumulation", 1);
  t.evaluate_every = training.integer("evaluate_every", 100);
  t.evaluation_batches = training.integer("evaluation_batches", 8);
  for (const char* key : {"batch_size", "accumulation", "evaluate_every", "evaluation_batches"}) {
    require_positive(training, key);
  }
  t.learning_rate = training.number("learning_rate", 1e-3);
  if (!(t.learning_rate > 0)) training.at("learning_rate").fail("must be positive");
  t.weight_decay = training.number("weight_decay", 0.1);
  if (!(t.weight_decay >= 0)) training.at("weight_decay").fail("must be non-negative");
  t.beta1 = training.number("beta1", 0.9);
  t.beta2 = training.number("beta2", 0.95);
  for (const char* key : {"beta1", "beta2"}) {
    const double beta = training.number(key);
    if (!(beta >= 0 && beta < 1)) training.at(key).fail("must be in [0, 1)");
  }
  t.clip = training.number("clip", 1.0);
  if (!(t.clip >= 0)) training.at("clip").fail("must be non-negative (0: no clipping)");
  t.schedule = solvers::read_schedule(training.section("schedule"), 100, t.learning_rate,
                                      solvers::RunLength{t.steps, "training.steps"});
  t.dtype = training.choice("dtype", {{"float32", DType::f32}, {"float64", DType::f64}}, DType::f32);
  // float16 is left out: its gradients need loss scaling, which this trainer does not do.
  if (training.choice("autocast", {"none", "bfloat16"}, "none") == "bfloat16") {
    if (t.dtype != DType::f32) {
      training.at("autocast").fail(cat("bfloat16 rounds float32 products; training.dtype is ", t.dtype,
                                       " (set it to float32, or autocast to none)"));
    }
    t.autocast = DType::bf16;
  }
  const int64_t seed = training.integer("seed", 0);
  if (seed < 0) training.at("seed").fail("must be non-negative");
  t.seed = static_cast<uint64_t>(seed);
  t.zero_stage = solvers::read_zero_stage(training);
  return t;
}

// Lower bounds of what training holds, refused here with the key to change rather than as a bare
// std::bad_alloc in the first step. Weights: each layer's four attention projections and the token
// embedding, kept with their gradient and AdamW's two moments. Activations the backward pass
// keeps per token: each layer's queries, keys, values and attention output, its attention weights
// over the context, and the logits with their softmax.
void require_training_memory(const ConfigNode& root, const TokenizerSpec& tokenizer, const ModelSpec& m,
                             const TrainingSpec& t) {
  const auto bytes = static_cast<double>(dtype_size(t.dtype));
  const auto hidden = static_cast<double>(m.hidden_size), layers = static_cast<double>(m.layers);
  const auto vocabulary = static_cast<double>(tokenizer.vocab_size);
  // The MLP's width too (intermediate_size 1e12 passed here and failed in training, naming no key);
  // its default is at most 4 hidden_size, and the Llama layout's three matrices are counted as two.
  const double mlp = m.intermediate_size > 0 ? static_cast<double>(m.intermediate_size) : 4 * hidden;
  const double weights = layers * (4 * hidden * hidden + 2 * hidden * mlp) + vocabulary * hidden;
  const std::string mlp_given = m.intermediate_size > 0 ? cat("intermediate_size ", m.intermediate_size, ", ") : "";
  root.at("model").require_memory(cat("a model of hidden_size ", m.hidden_size, ", ", m.layers, " layers, ", mlp_given,
                                      "and a vocabulary of ", tokenizer.vocab_size, " has at least ", weights,
                                      " weights, which with their gradient and AdamW's two moments"),
                                  4 * weights * bytes);
  const double tokens = static_cast<double>(t.batch_size) * static_cast<double>(m.context);
  const double per_token =
      layers * (4 * hidden + static_cast<double>(m.heads) * static_cast<double>(m.context)) + 2 * vocabulary;
  // The key that a command-line override set, if one of the two was (an override of the context
  // was reported at the batch size's line in the file), else the context, whose square the
  // activations grow with (the attention weights).
  // (Chosen by key, not by moving ConfigNodes about: assigning one writes into the YAML tree.)
  const ConfigNode model = root.at("model"), training = root.section("training");
  const bool context_given = model.has("context"), batch_given = training.has("batch_size");
  const bool batch_overridden = batch_given && training.at("batch_size").override_text();
  const bool context_overridden = context_given && model.at("context").override_text();
  const ConfigNode blamed = batch_overridden && !context_overridden ? training.at("batch_size")
                            : context_given                        ? model.at("context")
                            : batch_given                          ? training.at("batch_size")
                                                                   : model;
  blamed.require_memory(cat("a batch of ", t.batch_size, " windows of ", m.context,
                            " tokens, whose activations a training step keeps for the backward pass,"),
                        tokens * per_token * bytes);
  // The validation windows are drawn once, before the first step (corpus.cpp, validation_batches),
  // as int64 tokens and targets.
  const bool evaluation_given = training.has("evaluation_batches");
  (evaluation_given ? training.at("evaluation_batches") : training)
      .require_memory(cat(t.evaluation_batches, " validation batches of ", t.batch_size, " windows of ", m.context,
                          " tokens"),
                      static_cast<double>(t.evaluation_batches) * tokens * 2 * sizeof(int64_t));
}

solvers::ParallelSpec read_parallel(const ConfigNode& node, const ModelSpec& model) {
  const solvers::ParallelSpec parallel = solvers::read_parallel(node, {"dp", "mp"});
  const ConfigNode mesh = node.at("mesh");
  for (size_t axis = 0; axis < parallel.mesh.size(); ++axis) {
    const int64_t ranks = parallel.mesh[axis];
    if (parallel.names[axis] == "mp") {
      // GPT-2's heads stay whole (model.cpp, tensor_parallel_placement): only its MLP is split.
      const int64_t units = mlp_units(model), kv_heads = model.kv_heads > 0 ? model.kv_heads : model.heads;
      const bool heads_split = model.architecture == Architecture::llama;
      if (units % ranks != 0 || (heads_split && (model.heads % ranks != 0 || kv_heads % ranks != 0))) {
        mesh.fail(cat("mp = ", ranks, " must divide the MLP's hidden units (", units, ")",
                      heads_split ? cat(" and the attention heads (", model.heads, ", ", kv_heads,
                                        " for keys and values)") : std::string()));
      }
    }
  }
  return parallel;
}

// Where training.autocast cannot run yet, refused at the key rather than in the first step with a
// message about a tensor the user never sees: MPI carries no 16-bit floats, and tensor-parallel
// products send their partial sums (bfloat16 under autocast) to be added; the GPU backend has no
// 16-bit kernels.
void require_bfloat16_support(const ConfigNode& root, const LmProblem& p) {
  const ConfigNode autocast = root.at("training").at("autocast");
  for (size_t axis = 0; axis < p.parallel.mesh.size(); ++axis) {
    if (p.parallel.names[axis] == "mp" && p.parallel.mesh[axis] > 1) {
      autocast.fail("bfloat16 does not run with an mp axis yet (the split products' partial sums would be sent "
                    "to be added in bfloat16, which MPI does not carry); use data parallel ranks, or none");
    }
  }
  if (p.device.device.type == DeviceType::cuda) {
    autocast.fail("bfloat16 does not run on a GPU yet (its kernels have no 16-bit forms); use none there");
  }
}

}  // namespace

LmProblem read_lm_problem(io::Config& config, bool for_training) {
  LmProblem p;
  p.source = config.source();
  const ConfigNode root = config.root();
  p.description = root.string("description", "");
  p.device = solvers::read_device(root);
  p.corpus = read_corpus(root.at("data"));
  p.tokenizer = read_tokenizer(root.section("tokenizer"));
  p.model = read_model(root.section("model"));
  p.training = read_training(root.section("training"));
  if (for_training) require_training_memory(root, p.tokenizer, p.model, p.training);

  if (root.has("parallel")) p.parallel = read_parallel(root.at("parallel"), p.model);
  if (p.training.autocast) require_bfloat16_support(root, p);

  const ConfigNode output = root.section("output");
  p.output.dir = solvers::read_output_dir(output, "runs/" + std::filesystem::path(p.source).stem().string());
  p.output.checkpoint_every = output.integer("checkpoint_every", 100);
  if (p.output.checkpoint_every < 0) output.at("checkpoint_every").fail("must be non-negative (0: only at the end)");

  config.check_no_unknown_keys();
  p.resolved_config = config.resolved();
  p.derived_settings = solvers::derived_settings(config);
  p.config_hash = config.hash();
  return p;
}

}  // namespace eddy::lm
