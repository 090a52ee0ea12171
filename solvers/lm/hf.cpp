#include "solvers/lm/hf.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "eddy/core/error.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/safetensors.h"
#include "eddy/nn/init.h"
#include "eddy/ops/ops.h"
#include "solvers/common/training_loop.h"
#include "solvers/lm/corpus.h"

namespace eddy::lm {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kGpt2Architecture = "GPT2LMHeadModel";
constexpr const char* kLlamaArchitecture = "LlamaForCausalLM";

// transformers 5 names the dtype "dtype", earlier versions "torch_dtype"; both are written.
std::string torch_dtype_name(DType dtype) { return dtype == DType::f64 ? "float64" : "float32"; }

json gpt2_config(const nn::Gpt2Options& o) {
  return {{"architectures", json::array({kGpt2Architecture})},
          {"model_type", "gpt2"},
          {"vocab_size", o.vocab_size},
          {"n_positions", o.context_length},
          {"n_embd", o.hidden_size},
          {"n_layer", o.layers},
          {"n_head", o.heads},
          {"n_inner", o.intermediate_size > 0 ? json(o.intermediate_size) : json(nullptr)},
          {"activation_function", o.gelu == nn::GeluForm::exact ? "gelu" : "gelu_new"},
          {"layer_norm_epsilon", o.norm_eps},
          {"embd_pdrop", o.embedding_dropout},
          {"attn_pdrop", o.attention_dropout},
          {"resid_pdrop", o.residual_dropout},
          {"initializer_range", o.init_std},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"reorder_and_upcast_attn", false},
          {"tie_word_embeddings", o.tie_embeddings},
          {"use_cache", true},
          {"torch_dtype", torch_dtype_name(o.dtype)},
          {"dtype", torch_dtype_name(o.dtype)}};
}

json llama_config(const nn::LlamaOptions& o) {
  return {{"architectures", json::array({kLlamaArchitecture})},
          {"model_type", "llama"},
          {"vocab_size", o.vocab_size},
          {"max_position_embeddings", o.context_length},
          {"hidden_size", o.hidden_size},
          {"intermediate_size", o.intermediate_size},
          {"num_hidden_layers", o.layers},
          {"num_attention_heads", o.heads},
          {"num_key_value_heads", o.kv_heads > 0 ? o.kv_heads : o.heads},
          {"head_dim", o.hidden_size / o.heads},
          {"hidden_act", "silu"},
          {"rms_norm_eps", o.norm_eps},
          {"rope_theta", o.rope_theta},
          {"rope_scaling", nullptr},
          {"attention_bias", o.attention_bias},
          {"mlp_bias", o.mlp_bias},
          {"attention_dropout", o.attention_dropout},
          {"initializer_range", o.init_std},
          {"pretraining_tp", 1},
          {"tie_word_embeddings", o.tie_embeddings},
          {"use_cache", true},
          {"torch_dtype", torch_dtype_name(o.dtype)},
          {"dtype", torch_dtype_name(o.dtype)}};
}

void write_json(const fs::path& path, const json& value) { io::write_file_atomically(path, value.dump(2) + "\n"); }

// config.json's values with transformers' defaults for absent keys (the eddy options' defaults
// are those), and errors naming the file and the key.
class ConfigFile {
 public:
  explicit ConfigFile(const fs::path& path) : path_(path.string()) {
    EDDY_CHECK(fs::exists(path), path_, " does not exist; a Hugging Face model folder has a config.json (and "
               "model.safetensors) as save_pretrained writes them");
    try {
      values_ = json::parse(io::read_file(path_));
    } catch (const json::parse_error& e) {
      throw Error(cat(path_, ": invalid JSON at byte ", e.byte, ": ", e.what()));
    } catch (const json::exception& e) {  // a number beyond double's range (1e400) is out_of_range
      throw Error(cat(path_, ": invalid JSON: ", e.what()));
    }
    EDDY_CHECK(values_.is_object(), path_, ": expected a JSON object, got ", values_.type_name());
  }

  const std::string& path() const { return path_; }
  // The value of `key`, or nothing when it is absent or null (transformers' default then).
  const json* find(const std::string& key) const {
    auto it = values_.find(key);
    return it == values_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(const std::string& key, int64_t fallback) const {
    const json* value = find(key);
    if (!value) return fallback;
    EDDY_CHECK(value->is_number_integer(), path_, ": ", key, " must be an integer, got ", value->dump());
    return value->get<int64_t>();
  }
  double number(const std::string& key, double fallback) const {
    const json* value = find(key);
    if (!value) return fallback;
    EDDY_CHECK(value->is_number(), path_, ": ", key, " must be a number, got ", value->dump());
    return value->get<double>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    const json* value = find(key);
    if (!value) return fallback;
    EDDY_CHECK(value->is_boolean(), path_, ": ", key, " must be true or false, got ", value->dump());
    return value->get<bool>();
  }
  std::string text(const std::string& key, const std::string& fallback) const {
    const json* value = find(key);
    if (!value) return fallback;
    EDDY_CHECK(value->is_string(), path_, ": ", key, " must be a string, got ", value->dump());
    return value->get<std::string>();
  }
  // Refuses an option that would make transformers compute something eddy does not.
  void require(const std::string& key, const json& supported, const std::string& why) const {
    const json* value = find(key);
    EDDY_CHECK(!value || *value == supported, path_, ": ", key, " is ", value ? value->dump() : "", "; eddy ",
               "supports only ", supported.dump(), " (", why, ")");
  }

 private:
  std::string path_;
  json values_;
};

// "architectures" names the class save_pretrained saved; older files may give only model_type.
std::string architecture_of(const ConfigFile& config) {
  if (const json* architectures = config.find("architectures")) {
    EDDY_CHECK(architectures->is_array() && architectures->size() == 1 && (*architectures)[0].is_string(),
               config.path(), ": architectures must list one class name, got ", architectures->dump());
    const std::string name = (*architectures)[0].get<std::string>();
    EDDY_CHECK(name == kGpt2Architecture || name == kLlamaArchitecture, config.path(), ": architectures is [\"",
               name, "\"]; eddy loads ", kGpt2Architecture, " and ", kLlamaArchitecture);
    return name;
  }
  const std::string model_type = config.text("model_type", "");
  EDDY_CHECK(model_type == "gpt2" || model_type == "llama", config.path(), ": model_type is \"", model_type,
             "\" and no architectures are given; eddy loads model_type \"gpt2\" and \"llama\"");
  return model_type == "gpt2" ? kGpt2Architecture : kLlamaArchitecture;
}

// float64 where config.json says so (as eddy's export of a float64 run writes it), else float32:
// half-precision weights compute in float32. A float64 folder loaded as float32 was not the model
// exported.
DType read_dtype(const ConfigFile& config) {
  const std::string name = config.text("dtype", config.text("torch_dtype", "float32"));
  return name == "float64" ? DType::f64 : DType::f32;
}

nn::Gpt2Options read_gpt2_options(const ConfigFile& config) {
  nn::Gpt2Options o;
  o.dtype = read_dtype(config);
  o.vocab_size = config.integer("vocab_size", o.vocab_size);
  o.context_length = config.integer("n_positions", o.context_length);
  o.hidden_size = config.integer("n_embd", o.hidden_size);
  o.layers = config.integer("n_layer", o.layers);
  o.heads = config.integer("n_head", o.heads);
  o.intermediate_size = config.integer("n_inner", 0);
  // transformers' "gelu_pytorch_tanh" is the same tanh approximation as "gelu_new".
  const std::string activation = config.text("activation_function", "gelu_new");
  EDDY_CHECK(activation == "gelu_new" || activation == "gelu_pytorch_tanh" || activation == "gelu", config.path(),
             ": activation_function is \"", activation, "\"; eddy supports \"gelu_new\", \"gelu_pytorch_tanh\" ",
             "(GELU's tanh approximation) and \"gelu\" (exact)");
  o.gelu = activation == "gelu" ? nn::GeluForm::exact : nn::GeluForm::tanh_approximation;
  o.norm_eps = config.number("layer_norm_epsilon", o.norm_eps);
  o.embedding_dropout = config.number("embd_pdrop", o.embedding_dropout);
  o.attention_dropout = config.number("attn_pdrop", o.attention_dropout);
  o.residual_dropout = config.number("resid_pdrop", o.residual_dropout);
  o.init_std = config.number("initializer_range", o.init_std);
  o.tie_embeddings = config.boolean("tie_word_embeddings", true);
  config.require("scale_attn_weights", true, "scores are divided by sqrt(head_dim)");
  config.require("scale_attn_by_inverse_layer_idx", false, "no per-layer scaling of the scores");
  config.require("add_cross_attention", false, "decoder-only");
  return o;
}

// transformers 5 writes rope_parameters {rope_type, rope_theta}; earlier versions rope_theta and
// rope_scaling. Only the plain rotation (rope_type "default") is computed by eddy.
double read_rope_theta(const ConfigFile& config, double fallback) {
  double theta = config.number("rope_theta", fallback);
  std::string theta_key = "rope_theta";
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const json* rope = config.find(key);
    if (!rope) continue;
    EDDY_CHECK(rope->is_object(), config.path(), ": ", key, " must be an object, got ", rope->dump());
    std::string type = "default";
    for (const char* name : {"type", "rope_type"}) {  // transformers' older name, then its current one
      const auto found = rope->find(name);
      if (found == rope->end()) continue;
      EDDY_CHECK(found->is_string(), config.path(), ": ", key, ".", name, " must be a string, got ", found->dump());
      type = found->get<std::string>();
    }
    EDDY_CHECK(type == "default", config.path(), ": ", key, ".rope_type is \"", type, "\"; eddy supports only ",
               "\"default\" (RoPE without scaling)");
    if (auto found = rope->find("rope_theta"); found != rope->end() && theta_key == "rope_theta") {
      EDDY_CHECK(found->is_number(), config.path(), ": ", key, ".rope_theta must be a number, got ", found->dump());
      theta = found->get<double>();
      theta_key = cat(key, ".rope_theta");
    }
  }
  // Refused here, naming the file: the rotary embedding refused it only at the first forward.
  EDDY_CHECK(std::isfinite(theta) && theta > 0, config.path(), ": ", theta_key, " must be positive, got ", theta);
  return theta;
}

nn::LlamaOptions read_llama_options(const ConfigFile& config) {
  nn::LlamaOptions o;
  o.dtype = read_dtype(config);
  o.vocab_size = config.integer("vocab_size", o.vocab_size);
  o.hidden_size = config.integer("hidden_size", o.hidden_size);
  o.intermediate_size = config.integer("intermediate_size", o.intermediate_size);
  o.layers = config.integer("num_hidden_layers", o.layers);
  o.heads = config.integer("num_attention_heads", o.heads);
  o.kv_heads = config.integer("num_key_value_heads", o.heads);
  o.context_length = config.integer("max_position_embeddings", o.context_length);
  o.norm_eps = config.number("rms_norm_eps", o.norm_eps);
  o.rope_theta = read_rope_theta(config, o.rope_theta);
  o.attention_bias = config.boolean("attention_bias", o.attention_bias);
  o.mlp_bias = config.boolean("mlp_bias", o.mlp_bias);
  o.attention_dropout = config.number("attention_dropout", o.attention_dropout);
  o.init_std = config.number("initializer_range", o.init_std);
  o.tie_embeddings = config.boolean("tie_word_embeddings", o.tie_embeddings);
  config.require("hidden_act", "silu", "SwiGLU's gate is SiLU");
  EDDY_CHECK(o.heads > 0 && o.hidden_size % o.heads == 0, config.path(), ": hidden_size ", o.hidden_size,
             " is not a multiple of num_attention_heads ", o.heads);
  config.require("head_dim", o.hidden_size / o.heads, "heads split hidden_size evenly");
  return o;
}

// Buffers that older transformers saved and eddy computes instead: GPT-2's causal mask and its
// fill value, and Llama's rotary frequencies.
bool is_recomputed_buffer(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") ||
         name.ends_with(".rotary_emb.inv_freq");
}

// The file's tensors under the model's names, checked against them and cast to its dtype.
nn::StateDict read_weights(const fs::path& path, const std::string& architecture, nn::CausalLanguageModel& model,
                           bool tied, const std::string& embedding_name) {
  const std::string file = path.string();
  EDDY_CHECK(fs::exists(path), file, " does not exist; eddy reads a model's weights from one model.safetensors "
             "(not sharded, not pytorch_model.bin), as save_pretrained writes it");
  const nn::StateDict expected = model.state_dict();
  io::SafetensorsContents contents = io::load_safetensors(file);
  nn::StateDict weights;
  std::optional<Tensor> tied_head;
  for (auto& [stored_name, tensor] : contents.tensors) {
    std::string name = stored_name;
    // A GPT2Model saved without its head (as the published GPT-2 checkpoints are) has no prefix.
    if (architecture == kGpt2Architecture && !name.starts_with("transformer.") && name != "lm_head.weight") {
      name = "transformer." + name;
    }
    if (is_recomputed_buffer(name)) continue;
    if (tied && name == "lm_head.weight") {
      tied_head = tensor;
      continue;
    }
    auto it = expected.find(name);
    EDDY_CHECK(it != expected.end(), file, ": tensor \"", stored_name, "\" is not a parameter of ", architecture,
               " as config.json shapes it", name == "lm_head.weight" ? "" : " (is it another architecture?)");
    EDDY_CHECK(tensor.shape() == it->second.shape(), file, ": tensor \"", stored_name, "\" has shape ",
               tensor.shape(), " but config.json makes it ", it->second.shape());
    EDDY_CHECK(is_floating(tensor.dtype()), file, ": tensor \"", stored_name, "\" has dtype ",
               dtype_name(tensor.dtype()), "; eddy reads floating-point weights");
    weights[name] = tensor.dtype() == it->second.dtype() ? tensor : cast(tensor, it->second.dtype());
  }
  for (const auto& [name, tensor] : expected) {
    EDDY_CHECK(weights.contains(name), file, ": no tensor \"", name, "\", which ", architecture, " has",
               name == "lm_head.weight" ? " when tie_word_embeddings is false" : "");
  }
  // transformers ties the head to the embedding whatever the file holds; a different stored head
  // would mean the file was not made with tied embeddings.
  if (tied_head) {
    const Tensor embedding = weights.at(embedding_name);
    EDDY_CHECK(tied_head->shape() == embedding.shape() &&
                   cast(*tied_head, DType::f64).to_vector<double>() == cast(embedding, DType::f64).to_vector<double>(),
               file, ": lm_head.weight differs from ", embedding_name, " while config.json's tie_word_embeddings is "
               "true");
  }
  return weights;
}

}  // namespace

void save_hf_folder(const nn::CausalLanguageModel& model, const io::BpeTokenizer& tokenizer, const std::string& dir) {
  json config;
  if (const auto* gpt2 = dynamic_cast<const nn::Gpt2Model*>(&model)) {
    config = gpt2_config(gpt2->options());
  } else if (const auto* llama = dynamic_cast<const nn::LlamaModel*>(&model)) {
    config = llama_config(llama->options());
  }
  EDDY_CHECK(!config.is_null(), "save_hf_folder: only GPT-2 and Llama models (Gpt2Model, LlamaModel) have a ",
             "Hugging Face layout");
  EDDY_CHECK(tokenizer.vocab_size() <= model.vocab_size(), "save_hf_folder: the tokenizer has ",
             tokenizer.vocab_size(), " tokens, more than the model's vocabulary of ", model.vocab_size());
  const std::optional<int32_t> end_of_text = tokenizer.token_to_id(kEndOfText);
  const json end_of_text_id = end_of_text ? json(*end_of_text) : json(nullptr);
  config["bos_token_id"] = config["eos_token_id"] = end_of_text_id;

  // Without a template or post-processor in tokenizer.json, PreTrainedTokenizerFast adds nothing
  // to the text, so its ids are eddy's.
  json tokenizer_config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                           {"model_max_length", model.context_length()},
                           {"add_bos_token", false},
                           {"add_eos_token", false},
                           {"clean_up_tokenization_spaces", false}};
  if (end_of_text) {
    for (const char* role : {"bos_token", "eos_token", "unk_token"}) tokenizer_config[role] = kEndOfText;
  }

  const fs::path folder(dir);
  EDDY_CHECK(!fs::exists(folder) || fs::is_directory(folder), folder.string(),
             " is a file; a Hugging Face model is a folder");
  io::create_folders(folder.string(), "lm export");
  // Each file is written atomically, the set is not: an earlier export's files go first, and
  // config.json, by which transformers knows the folder, comes last. An export stopped midway
  // left this model's weights beside the earlier export's tokenizer, which transformers loaded
  // together; now it leaves an incomplete folder, which transformers refuses.
  // All checked before any is removed: a pipe at the last left the earlier export without the rest.
  for (const std::string& name : solvers::kHfExportFiles) io::refuse_special_file((folder / name).string(), "lm export");
  for (const std::string& name : solvers::kHfExportFiles) {
    io::remove_abandoned_temporaries_of((folder / name).string());
    io::remove_stale_file((folder / name).string(), "lm export");
  }
  // transformers refuses a safetensors file whose metadata does not name its format.
  io::save_safetensors((folder / "model.safetensors").string(), model.state_dict(), {{"format", "pt"}});
  tokenizer.save((folder / "tokenizer.json").string());
  write_json(folder / "tokenizer_config.json", tokenizer_config);
  write_json(folder / "generation_config.json", {{"bos_token_id", end_of_text_id}, {"eos_token_id", end_of_text_id}});
  write_json(folder / "config.json", config);
}

std::shared_ptr<nn::CausalLanguageModel> load_hf_model(const std::string& dir) {
  const fs::path folder(dir);
  const ConfigFile config(folder / "config.json");
  const std::string architecture = architecture_of(config);
  std::shared_ptr<nn::CausalLanguageModel> model;
  bool tied = false;
  std::string embedding_name;
  try {
    // read_weights below sets every parameter (it refuses a file that lacks one).
    nn::init::SkipRandomInitialisation loaded_next;
    if (architecture == kGpt2Architecture) {
      const nn::Gpt2Options options = read_gpt2_options(config);
      model = std::make_shared<nn::Gpt2Model>(options);
      tied = options.tie_embeddings;
      embedding_name = "transformer.wte.weight";
    } else {
      const nn::LlamaOptions options = read_llama_options(config);
      model = std::make_shared<nn::LlamaModel>(options);
      tied = options.tie_embeddings;
      embedding_name = "model.embed_tokens.weight";
    }
  } catch (const Error& e) {
    const std::string message = e.what();
    // The model's own checks (heads dividing the width, ...) do not know the file.
    if (message.starts_with(config.path())) throw;
    throw Error(cat(config.path(), ": ", message));
  }
  model->load_state_dict(read_weights(folder / "model.safetensors", architecture, *model, tied, embedding_name));
  model->eval();  // as from_pretrained returns it
  return model;
}

SpecialTokenIds hf_special_token_ids(const std::string& dir) {
  SpecialTokenIds ids;
  for (const char* file : {"generation_config.json", "config.json"}) {
    if (!fs::exists(fs::path(dir) / file)) continue;
    const ConfigFile config(fs::path(dir) / file);
    auto id_of = [&](const std::string& key, const json& value) {
      EDDY_CHECK(value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() <= INT32_MAX,
                 config.path(), ": ", key, " must be a token id (or a list of them), got ", value.dump());
      return value.get<int32_t>();
    };
    if (const json* end = config.find("eos_token_id"); end && ids.end.empty()) {
      if (end->is_array()) {
        for (const json& id : *end) ids.end.push_back(id_of("eos_token_id", id));
      } else {
        ids.end.push_back(id_of("eos_token_id", *end));
      }
    }
    if (const json* start = config.find("bos_token_id"); start && !ids.start) ids.start = id_of("bos_token_id", *start);
  }
  return ids;
}

}  // namespace eddy::lm
