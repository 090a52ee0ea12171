// Hugging Face folders both ways: eddy's GPT-2 and Llama exported (save_hf_folder) and loaded
// back (load_hf_model) give the same logits, with the config keys transformers reads; folders
// that transformers' save_pretrained wrote (tests/data/hf, recorded by
// tests/lm/record_hf_fixtures.py under .venv-bench) give the logits transformers computed; and
// folders eddy cannot run are refused naming the file and the key.
// tests/python/test_hf_interop.py loads eddy's folders in transformers itself.

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "eddy/eddy.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/safetensors.h"
#include "eddy/nn/init.h"
#include "solvers/lm/corpus.h"
#include "solvers/lm/hf.h"
#include "solvers/lm/run.h"
#include "support/expect_error.h"

namespace eddy::lm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFixtures = EDDY_HF_FIXTURES;

class HfInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("eddy_hf_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static io::BpeTokenizer tokenizer() {
    io::BpeTrainingOptions options;
    options.vocab_size = 300;
    options.special_tokens = {kEndOfText};
    return io::BpeTokenizer::train({"The cat sees the ball. Then the dog sleeps.", "The fox likes some water."},
                                   options);
  }

  // Every parameter drawn from N(0, 0.2^2), so no bias or norm keeps a default that would hide
  // a misplaced tensor.
  static std::shared_ptr<nn::CausalLanguageModel> randomised(std::shared_ptr<nn::CausalLanguageModel> model) {
    Generator generator(11);
    for (auto& [name, parameter] : model->named_parameters()) nn::init::normal(parameter, generator, 0.2);
    model->eval();
    return model;
  }

  static std::shared_ptr<nn::CausalLanguageModel> gpt2(bool tied, DType dtype = DType::f32) {
    nn::Gpt2Options o;
    o.dtype = dtype;
    o.vocab_size = 300;
    o.context_length = 16;
    o.hidden_size = 16;
    o.layers = 2;
    o.heads = 4;
    o.tie_embeddings = tied;
    return randomised(std::make_shared<nn::Gpt2Model>(o));
  }

  static std::shared_ptr<nn::CausalLanguageModel> llama(bool tied, DType dtype = DType::f32) {
    nn::LlamaOptions o;
    o.dtype = dtype;
    o.vocab_size = 300;
    o.context_length = 16;
    o.hidden_size = 16;
    o.intermediate_size = 32;
    o.layers = 2;
    o.heads = 4;
    o.kv_heads = 2;
    o.rope_theta = 5000;
    o.tie_embeddings = tied;
    return randomised(std::make_shared<nn::LlamaModel>(o));
  }

  static Tensor tokens() { return tensor<int64_t>({5, 17, 260, 3, 0, 299, 42, 8, 1, 77, 150, 6}, {2, 6}); }

  static json read_json(const fs::path& path) { return json::parse(io::read_file(path.string())); }
  static void write_json(const fs::path& path, const json& value) {
    io::write_file_atomically(path.string(), value.dump(2));
  }

  // A copy of the fixture `name` to edit.
  fs::path copy_of(const std::string& name) const {
    const fs::path copy = dir_ / name;
    fs::copy(kFixtures / name, copy, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    return copy;
  }
  void edit_config(const fs::path& folder, const std::function<void(json&)>& edit) const {
    json config = read_json(folder / "config.json");
    edit(config);
    write_json(folder / "config.json", config);
  }
  void edit_weights(const fs::path& folder, const std::function<void(nn::StateDict&)>& edit) const {
    const std::string path = (folder / "model.safetensors").string();
    io::SafetensorsContents contents = io::load_safetensors(path);
    edit(contents.tensors);
    io::save_safetensors(path, contents.tensors, contents.metadata);
  }

  fs::path dir_;
};

double largest_difference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double largest = 0;
  for (size_t i = 0; i < x.size(); ++i) largest = std::max(largest, std::abs(double(x[i]) - double(y[i])));
  return largest;
}

TEST_F(HfInterop, ExportedModelsLoadBackWithTheSameLogits) {
  const io::BpeTokenizer words = tokenizer();
  for (bool tied : {true, false}) {
    for (auto model : {gpt2(tied), llama(tied)}) {
      const fs::path folder = dir_ / "hf";
      save_hf_folder(*model, words, folder.string());
      const auto loaded = load_hf_model(folder.string());
      EXPECT_EQ(dynamic_cast<nn::Gpt2Model*>(loaded.get()) != nullptr,
                dynamic_cast<nn::Gpt2Model*>(model.get()) != nullptr);
      EXPECT_FALSE(loaded->is_training());
      EXPECT_EQ(loaded->forward(tokens()).to_vector<float>(), model->forward(tokens()).to_vector<float>());
      // As save_pretrained: a tied head is the embedding, not a tensor of its own.
      const io::SafetensorsContents file = io::load_safetensors((folder / "model.safetensors").string());
      EXPECT_EQ(file.tensors.contains("lm_head.weight"), !tied);
      EXPECT_EQ(file.tensors.size(), model->state_dict().size());
      EXPECT_EQ(file.metadata.at("format"), "pt");
      fs::remove_all(folder);
    }
  }
}

TEST_F(HfInterop, AnExportOverAnEarlierOneReplacesItsFilesFirst) {
  // Each file was atomic, the set was not: a stop midway left the new weights beside the earlier
  // export's tokenizer, which transformers loaded together, and a killed writer's temporary stayed.
  const io::BpeTokenizer words = tokenizer();
  const fs::path folder = dir_ / "hf";
  save_hf_folder(*gpt2(true), words, folder.string());
  const std::string abandoned = (folder / "tokenizer.json").string() + ".tmp-999999999";
  io::write_file_atomically(abandoned, "a killed export's");
  const std::string user_file = (folder / "README.md").string();
  io::write_file_atomically(user_file, "the user's");
  save_hf_folder(*llama(false), words, folder.string());
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_EQ(io::read_file(user_file), "the user's");
  EXPECT_NE(dynamic_cast<nn::LlamaModel*>(load_hf_model(folder.string()).get()), nullptr);
  // config.json, by which transformers knows the folder, is written last.
  const auto written = [&](const char* name) { return fs::last_write_time(folder / name); };
  for (const char* name : {"model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    EXPECT_LE(written(name), written("config.json")) << name;
  }
}

TEST_F(HfInterop, AFloat64ExportLoadsBackInFloat64) {
  const io::BpeTokenizer words = tokenizer();
  for (auto model : {gpt2(true, DType::f64), llama(false, DType::f64)}) {
    const fs::path folder = dir_ / "hf";
    save_hf_folder(*model, words, folder.string());
    const Tensor logits = load_hf_model(folder.string())->forward(tokens());
    ASSERT_EQ(logits.dtype(), DType::f64);
    EXPECT_EQ(logits.to_vector<double>(), model->forward(tokens()).to_vector<double>());
    fs::remove_all(folder);
  }
}

TEST_F(HfInterop, ConfigFilesHoldTransformersKeys) {
  const io::BpeTokenizer words = tokenizer();
  const int32_t end_of_text = *words.token_to_id(kEndOfText);
  save_hf_folder(*gpt2(true), words, (dir_ / "gpt2").string());
  json gpt2_config = read_json(dir_ / "gpt2" / "config.json");
  EXPECT_EQ(gpt2_config["architectures"], json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(gpt2_config["model_type"], "gpt2");
  EXPECT_EQ(gpt2_config["vocab_size"], 300);
  EXPECT_EQ(gpt2_config["n_positions"], 16);
  EXPECT_EQ(gpt2_config["n_embd"], 16);
  EXPECT_EQ(gpt2_config["n_layer"], 2);
  EXPECT_EQ(gpt2_config["n_head"], 4);
  EXPECT_TRUE(gpt2_config["n_inner"].is_null());
  EXPECT_EQ(gpt2_config["activation_function"], "gelu_new");
  EXPECT_EQ(gpt2_config["layer_norm_epsilon"], 1e-5);
  EXPECT_EQ(gpt2_config["attn_pdrop"], 0.1);
  EXPECT_EQ(gpt2_config["tie_word_embeddings"], true);
  EXPECT_EQ(gpt2_config["torch_dtype"], "float32");
  EXPECT_EQ(gpt2_config["dtype"], "float32");
  EXPECT_EQ(gpt2_config["bos_token_id"], end_of_text);
  EXPECT_EQ(gpt2_config["eos_token_id"], end_of_text);

  save_hf_folder(*llama(false), words, (dir_ / "llama").string());
  json llama_config = read_json(dir_ / "llama" / "config.json");
  EXPECT_EQ(llama_config["architectures"], json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(llama_config["model_type"], "llama");
  EXPECT_EQ(llama_config["hidden_size"], 16);
  EXPECT_EQ(llama_config["intermediate_size"], 32);
  EXPECT_EQ(llama_config["num_hidden_layers"], 2);
  EXPECT_EQ(llama_config["num_attention_heads"], 4);
  EXPECT_EQ(llama_config["num_key_value_heads"], 2);
  EXPECT_EQ(llama_config["head_dim"], 4);
  EXPECT_EQ(llama_config["max_position_embeddings"], 16);
  EXPECT_EQ(llama_config["rms_norm_eps"], 1e-6);
  EXPECT_EQ(llama_config["rope_theta"], 5000.0);
  EXPECT_EQ(llama_config["hidden_act"], "silu");
  EXPECT_EQ(llama_config["attention_bias"], false);
  EXPECT_EQ(llama_config["tie_word_embeddings"], false);
  EXPECT_EQ(llama_config["bos_token_id"], end_of_text);

  json tokenizer_config = read_json(dir_ / "llama" / "tokenizer_config.json");
  EXPECT_EQ(tokenizer_config["tokenizer_class"], "PreTrainedTokenizerFast");
  for (const char* role : {"bos_token", "eos_token", "unk_token"}) EXPECT_EQ(tokenizer_config[role], kEndOfText);
  EXPECT_EQ(tokenizer_config["add_bos_token"], false);
  EXPECT_EQ(tokenizer_config["model_max_length"], 16);
  EXPECT_EQ(read_json(dir_ / "llama" / "generation_config.json"),
            (json{{"bos_token_id", end_of_text}, {"eos_token_id", end_of_text}}));
  const std::string text = "The cat likes the dog.";
  EXPECT_EQ(io::BpeTokenizer::load((dir_ / "llama" / "tokenizer.json").string()).encode(text), words.encode(text));
}

TEST_F(HfInterop, GenerateReadsAHuggingFaceFolder) {
  const io::BpeTokenizer words = tokenizer();
  const auto model = llama(false);
  save_hf_folder(*model, words, (dir_ / "hf").string());
  TrainedModel loaded = load_trained_model((dir_ / "hf").string());
  EXPECT_EQ(loaded.problem.model.architecture, Architecture::llama);
  EXPECT_EQ(loaded.problem.model.kv_heads, 2);
  EXPECT_EQ(loaded.problem.model.rope_theta, 5000);
  TrainedModel original{LmProblem{}, words, model, 0, {}, {}};
  nn::GenerationOptions greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = 8;
  const std::string text = generate_text(loaded, "The cat", greedy);
  EXPECT_EQ(text, generate_text(original, "The cat", greedy));
  ASSERT_FALSE(text.empty());

  // Generation stops where generation_config.json's eos_token_id says, as transformers' does: an
  // id list naming every token ends it at once (eddy stopped at <|endoftext|> only).
  std::string every_id;
  for (int32_t id = 0; id < words.vocab_size(); ++id) every_id += cat(id ? ", " : "", id);
  io::write_file_atomically((dir_ / "hf" / "generation_config.json").string(),
                            cat("{\"eos_token_id\": [", every_id, "], \"bos_token_id\": 1}"));
  EXPECT_EQ(generate_text(loaded, "The cat", greedy), "");
  // An eos outside the vocabulary (GPT2Config's default 50256 beside a small tokenizer) stops
  // nothing, as in transformers; it was refused as "stop token 0".
  io::write_file_atomically((dir_ / "hf" / "generation_config.json").string(),
                            "{\"eos_token_id\": 50256, \"bos_token_id\": 50256}");
  EXPECT_EQ(generate_text(loaded, "The cat", greedy), text);
  expect_error([&] { generate_text(loaded, "", greedy); }, {"token to start from, 50256", "outside the vocabulary"});

  fs::remove(dir_ / "hf" / "tokenizer.json");
  expect_error([&] { load_trained_model((dir_ / "hf").string()); }, {"hf has a config.json but no tokenizer.json"});
}

// The fixtures are transformers' own: save_pretrained's files, and the logits its float32 forward
// gave on the recorded tokens.
TEST_F(HfInterop, TransformersFoldersGiveTheRecordedLogits) {
  for (const char* name : {"gpt2", "gpt2_untied_gelu", "llama", "llama_tied_bias"}) {
    SCOPED_TRACE(name);
    const auto model = load_hf_model((kFixtures / name).string());
    const io::SafetensorsContents reference =
        io::load_safetensors((kFixtures / name / "reference.safetensors").string());
    const double difference = largest_difference(model->forward(reference.tensors.at("tokens")),
                                                 reference.tensors.at("logits"));
    EXPECT_LT(difference, 1e-5);
    std::cout << name << ": largest logit difference from transformers " << difference << "\n";
  }
}

// The published GPT-2 files hold GPT2Model's keys (no "transformer." prefix, no head) and the
// causal-mask buffers older transformers saved; eddy reads them as the same model.
TEST_F(HfInterop, Gpt2WithoutPrefixOrWithMaskBuffersLoadsTheSame) {
  const fs::path folder = copy_of("gpt2");
  edit_weights(folder, [](nn::StateDict& weights) {
    nn::StateDict renamed;
    for (auto& [name, tensor] : weights) renamed[name.substr(std::string("transformer.").size())] = tensor;
    for (const char* layer : {"0", "1"}) {
      renamed[cat("h.", layer, ".attn.bias")] = ones({1, 1, 16, 16});
      renamed[cat("h.", layer, ".attn.masked_bias")] = tensor<float>({-1e4f}, {});
    }
    weights = renamed;
  });
  const Tensor tokens =
      io::load_safetensors((kFixtures / "gpt2" / "reference.safetensors").string()).tensors.at("tokens");
  EXPECT_EQ(load_hf_model(folder.string())->forward(tokens).to_vector<float>(),
            load_hf_model((kFixtures / "gpt2").string())->forward(tokens).to_vector<float>());
}

TEST_F(HfInterop, FoldersEddyCannotRunAreRefusedNamingFileAndKey) {
  expect_error([&] { load_hf_model((dir_ / "nothing").string()); }, {"nothing/config.json does not exist"});

  const fs::path gpt2 = copy_of("gpt2"), llama = copy_of("llama");
  auto refused = [&](const fs::path& folder, const std::function<void(json&)>& edit,
                     const std::vector<std::string>& fragments) {
    const json original = read_json(folder / "config.json");
    edit_config(folder, edit);
    expect_error([&] { load_hf_model(folder.string()); }, fragments);
    write_json(folder / "config.json", original);
  };
  refused(gpt2, [](json& c) { c["architectures"] = json::array({"BertForMaskedLM"}); },
          {"gpt2/config.json: architectures is [\"BertForMaskedLM\"]", "GPT2LMHeadModel"});
  refused(gpt2, [](json& c) { c.erase("architectures"); c["model_type"] = "bert"; }, {"model_type is \"bert\""});
  refused(gpt2, [](json& c) { c["activation_function"] = "relu"; }, {"config.json: activation_function", "relu"});
  refused(gpt2, [](json& c) { c["scale_attn_by_inverse_layer_idx"] = true; },
          {"config.json: scale_attn_by_inverse_layer_idx is true"});
  refused(gpt2, [](json& c) { c["n_embd"] = "16"; }, {"config.json: n_embd must be an integer, got \"16\""});
  refused(gpt2, [](json& c) { c["n_head"] = 3; }, {"config.json: ", "heads"});
  refused(gpt2, [](json& c) { c["n_embd"] = 32; c["n_head"] = 4; },
          {"model.safetensors: tensor \"transformer.h.0.attn.c_attn.bias\" has shape [48] but config.json makes "
           "it [96]"});
  refused(llama, [](json& c) { c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}}; },
          {"llama/config.json: rope_scaling.rope_type is \"linear\""});
  refused(llama, [](json& c) { c["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e4}}; },
          {"config.json: rope_parameters.rope_type is \"yarn\""});
  // A rope type of another JSON type got the JSON library's "type must be string, but is null".
  refused(llama, [](json& c) { c["rope_parameters"] = {{"rope_type", nullptr}, {"rope_theta", 1e4}}; },
          {"config.json: rope_parameters.rope_type must be a string, got null"});
  refused(llama, [](json& c) { c["rope_scaling"] = {{"type", 2.0}, {"factor", 2.0}}; },
          {"config.json: rope_scaling.type must be a string, got 2.0"});
  // A base the rotary embedding cannot use was refused only at the first forward.
  refused(llama, [](json& c) { c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 0}}; },
          {"config.json: rope_parameters.rope_theta must be positive, got 0"});
  refused(llama, [](json& c) { c.erase("rope_parameters"); c["rope_theta"] = -5; },
          {"config.json: rope_theta must be positive, got -5"});
  refused(llama, [](json& c) { c["hidden_act"] = "gelu"; }, {"config.json: hidden_act is \"gelu\"", "silu"});
  refused(llama, [](json& c) { c["head_dim"] = 8; }, {"config.json: head_dim is 8"});
  refused(llama, [](json& c) { c["tie_word_embeddings"] = true; },
          {"model.safetensors: lm_head.weight differs from model.embed_tokens.weight", "tie_word_embeddings"});
  refused(llama, [](json& c) { c["num_key_value_heads"] = 4; },
          {"model.safetensors: tensor \"model.layers.0.self_attn.k_proj.weight\" has shape [8, 16]"});

  io::write_file_atomically((gpt2 / "config.json").string(), "{\"n_embd\": 16,");
  expect_error([&] { load_hf_model(gpt2.string()); }, {"gpt2/config.json: invalid JSON at byte"});

  edit_weights(llama, [](nn::StateDict& weights) { weights.erase("model.norm.weight"); });
  expect_error([&] { load_hf_model(llama.string()); }, {"llama/model.safetensors: no tensor \"model.norm.weight\""});
  edit_weights(llama, [](nn::StateDict& weights) {
    weights["model.norm.weight"] = ones({16});
    weights["model.layers.0.cross_attn.weight"] = ones({16});
  });
  expect_error([&] { load_hf_model(llama.string()); },
               {"model.safetensors: tensor \"model.layers.0.cross_attn.weight\" is not a parameter of "
                "LlamaForCausalLM"});
  fs::remove(llama / "model.safetensors");
  expect_error([&] { load_hf_model(llama.string()); }, {"llama/model.safetensors does not exist"});
}

}  // namespace
}  // namespace eddy::lm
