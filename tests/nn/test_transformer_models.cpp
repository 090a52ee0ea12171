// GPT-2 and Llama: parameter names and shapes as Hugging Face's, initialisation, blocks and whole
// models against references written as loops over plain matrices here, causality, derivatives,
// compiled training steps (dropout included) against eager ones, and the errors of bad inputs.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <map>
#include <optional>

#include "eddy/compiler/compile.h"
#include "eddy/eddy.h"
#include "eddy/nn/transformer.h"
#include "support/derivative_check.h"
#include "support/expect_error.h"
#include "support/gradient_check.h"

namespace eddy::nn {
namespace {

using Values = std::vector<double>;

// A row-major matrix of plain doubles: the references below use no eddy op.
struct Matrix {
  int64_t rows = 0, cols = 0;
  Values v;
  double& at(int64_t r, int64_t c) { return v[r * cols + c]; }
  double at(int64_t r, int64_t c) const { return v[r * cols + c]; }
};

Matrix zero_matrix(int64_t rows, int64_t cols) { return {rows, cols, Values(rows * cols, 0.0)}; }

// Leading axes become rows.
Matrix matrix_of(const Tensor& t) {
  const int64_t cols = t.dim() == 1 ? t.numel() : t.shape().back();
  return {t.numel() / cols, cols, t.to_vector<double>()};
}

Matrix product(const Matrix& a, const Matrix& b) {
  Matrix out = zero_matrix(a.rows, b.cols);
  for (int64_t r = 0; r < a.rows; ++r) {
    for (int64_t k = 0; k < a.cols; ++k) {
      for (int64_t c = 0; c < b.cols; ++c) out.at(r, c) += a.at(r, k) * b.at(k, c);
    }
  }
  return out;
}

Matrix transposed(const Matrix& m) {
  Matrix out = zero_matrix(m.cols, m.rows);
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) out.at(c, r) = m.at(r, c);
  }
  return out;
}

template <typename F>
Matrix combine(const Matrix& a, const Matrix& b, F f) {
  Matrix out = a;
  for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = f(a.v[i], b.v[i]);
  return out;
}
Matrix plus(const Matrix& a, const Matrix& b) { return combine(a, b, [](double x, double y) { return x + y; }); }

Matrix plus_row(Matrix m, const Matrix& row) {
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) m.at(r, c) += row.v[c];
  }
  return m;
}

Matrix columns(const Matrix& m, int64_t first, int64_t count) {
  Matrix out = zero_matrix(m.rows, count);
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < count; ++c) out.at(r, c) = m.at(r, first + c);
  }
  return out;
}

Matrix rows_of(const Matrix& m, int64_t first, int64_t count) {
  return {count, m.cols, Values(m.v.begin() + first * m.cols, m.v.begin() + (first + count) * m.cols)};
}

Matrix layer_norm(Matrix m, const Matrix& weight, const Matrix& bias, double eps) {
  for (int64_t r = 0; r < m.rows; ++r) {
    double mean = 0, variance = 0;
    for (int64_t c = 0; c < m.cols; ++c) mean += m.at(r, c) / double(m.cols);
    for (int64_t c = 0; c < m.cols; ++c) variance += (m.at(r, c) - mean) * (m.at(r, c) - mean) / double(m.cols);
    for (int64_t c = 0; c < m.cols; ++c) {
      m.at(r, c) = (m.at(r, c) - mean) / std::sqrt(variance + eps) * weight.v[c] + bias.v[c];
    }
  }
  return m;
}

Matrix rms_norm(Matrix m, const Matrix& weight, double eps) {
  for (int64_t r = 0; r < m.rows; ++r) {
    double mean_square = 0;
    for (int64_t c = 0; c < m.cols; ++c) mean_square += m.at(r, c) * m.at(r, c) / double(m.cols);
    for (int64_t c = 0; c < m.cols; ++c) m.at(r, c) *= weight.v[c] / std::sqrt(mean_square + eps);
  }
  return m;
}

// Rotates each head's pairs (i, i + D/2) of row t by t theta^(-2i/D): Llama's layout.
Matrix rotate(Matrix m, int64_t head_dim, double theta) {
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < m.rows; ++t) {
    for (int64_t head = 0; head < m.cols / head_dim; ++head) {
      double* x = &m.v[t * m.cols + head * head_dim];
      for (int64_t i = 0; i < half; ++i) {
        const double angle = double(t) * std::pow(theta, -2.0 * double(i) / double(head_dim));
        const double a = x[i], b = x[i + half];
        x[i] = a * std::cos(angle) - b * std::sin(angle);
        x[i + half] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
  return m;
}

// One sequence's causal attention, rows = positions, heads side by side in the columns.
Matrix attention(const Matrix& q, const Matrix& k, const Matrix& v, int64_t heads, int64_t kv_heads) {
  const int64_t dim = q.cols / heads;
  Matrix out = zero_matrix(q.rows, q.cols);
  for (int64_t head = 0; head < heads; ++head) {
    const int64_t kv = head / (heads / kv_heads);
    for (int64_t t = 0; t < q.rows; ++t) {
      Values weights;
      double largest = -1e300, total = 0;
      for (int64_t s = 0; s <= t; ++s) {
        double dot = 0;
        for (int64_t d = 0; d < dim; ++d) dot += q.at(t, head * dim + d) * k.at(s, kv * dim + d);
        weights.push_back(dot / std::sqrt(double(dim)));
        largest = std::max(largest, weights.back());
      }
      for (double& w : weights) total += (w = std::exp(w - largest));
      for (int64_t s = 0; s <= t; ++s) {
        for (int64_t d = 0; d < dim; ++d) out.at(t, head * dim + d) += weights[s] / total * v.at(s, kv * dim + d);
      }
    }
  }
  return out;
}

template <typename F>
Matrix map(Matrix m, F f) {
  for (double& x : m.v) x = f(x);
  return m;
}
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}
double silu(double x) { return x / (1 + std::exp(-x)); }

// A model's parameters as matrices by name.
std::map<std::string, Matrix> weights_of(const Module& model) {
  std::map<std::string, Matrix> out;
  for (auto& [name, parameter] : model.named_parameters()) out[name] = matrix_of(parameter);
  return out;
}

// Replaces the small initial weights by larger random ones (norm weights around 1), so that no
// term of a block is negligible next to the others.
void scramble(Module& model, uint64_t seed) {
  Generator generator(seed);
  NoGradGuard no_grad;
  for (auto& [name, parameter] : model.named_parameters()) {
    Tensor noise = randn(parameter.shape(), parameter.dtype(), &generator) * 0.4;
    const bool norm_weight = parameter.dim() == 1 && name.ends_with("weight");
    parameter.copy_(norm_weight ? noise + 1.0 : noise);
  }
}

// GPT-2's block on one sequence x [T, C]; weights are [in, out] (Conv1D).
Matrix gpt2_block_reference(const Matrix& x, std::map<std::string, Matrix>& w, const std::string& p, int64_t heads,
                            double eps) {
  const int64_t hidden = x.cols;
  Matrix a = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps);
  Matrix qkv = plus_row(product(a, w[p + "attn.c_attn.weight"]), w[p + "attn.c_attn.bias"]);
  Matrix mixed = attention(columns(qkv, 0, hidden), columns(qkv, hidden, hidden), columns(qkv, 2 * hidden, hidden),
                           heads, heads);
  Matrix h = plus(x, plus_row(product(mixed, w[p + "attn.c_proj.weight"]), w[p + "attn.c_proj.bias"]));
  Matrix m = layer_norm(h, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps);
  m = map(plus_row(product(m, w[p + "mlp.c_fc.weight"]), w[p + "mlp.c_fc.bias"]), gelu_tanh);
  return plus(h, plus_row(product(m, w[p + "mlp.c_proj.weight"]), w[p + "mlp.c_proj.bias"]));
}

// Llama's block on one sequence; weights are [out, in] (torch.nn.Linear), no biases.
Matrix llama_block_reference(const Matrix& x, std::map<std::string, Matrix>& w, const std::string& p, int64_t heads,
                             int64_t kv_heads, double theta, double eps) {
  const int64_t head_dim = x.cols / heads;
  auto project = [&](const Matrix& in, const std::string& name) { return product(in, transposed(w[p + name])); };
  Matrix a = rms_norm(x, w[p + "input_layernorm.weight"], eps);
  Matrix q = rotate(project(a, "self_attn.q_proj.weight"), head_dim, theta);
  Matrix k = rotate(project(a, "self_attn.k_proj.weight"), head_dim, theta);
  Matrix mixed = attention(q, k, project(a, "self_attn.v_proj.weight"), heads, kv_heads);
  Matrix h = plus(x, project(mixed, "self_attn.o_proj.weight"));
  Matrix m = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps);
  Matrix gated = combine(map(project(m, "mlp.gate_proj.weight"), silu), project(m, "mlp.up_proj.weight"),
                         [](double g, double u) { return g * u; });
  return plus(h, project(gated, "mlp.down_proj.weight"));
}

void expect_matrix(const Tensor& got, const Matrix& expected, double tolerance = 1e-12) {
  const Values values = got.to_vector<double>();
  ASSERT_EQ(values.size(), expected.v.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_NEAR(values[i], expected.v[i], tolerance * (1 + std::abs(expected.v[i]))) << "element " << i;
  }
}

Gpt2Options tiny_gpt2() {
  Gpt2Options o;
  o.vocab_size = 11;
  o.context_length = 6;
  o.hidden_size = 8;
  o.layers = 2;
  o.heads = 2;
  o.embedding_dropout = o.attention_dropout = o.residual_dropout = 0;
  o.dtype = DType::f64;
  o.seed = 3;
  return o;
}

LlamaOptions tiny_llama(int64_t kv_heads) {
  LlamaOptions o;
  o.vocab_size = 13;
  o.hidden_size = 8;
  o.intermediate_size = 12;
  o.layers = 2;
  o.heads = 4;
  o.kv_heads = kv_heads;
  o.context_length = 16;
  o.rope_theta = 50;
  o.dtype = DType::f64;
  o.seed = 4;
  return o;
}

Tensor tokens_of(const std::vector<int64_t>& ids, int64_t batch) {
  return tensor(ids, {batch, int64_t(ids.size()) / batch});
}

std::map<std::string, Shape> shapes_of(const Module& model) {
  std::map<std::string, Shape> out;
  for (auto& [name, parameter] : model.named_parameters()) out[name] = parameter.shape();
  return out;
}

TEST(Gpt2Model, ParametersHaveTransformersNamesAndLayouts) {
  Gpt2Options o = tiny_gpt2();
  o.layers = 1;
  const std::map<std::string, Shape> tied{
      {"transformer.wte.weight", {11, 8}},           {"transformer.wpe.weight", {6, 8}},
      {"transformer.h.0.ln_1.weight", {8}},          {"transformer.h.0.ln_1.bias", {8}},
      {"transformer.h.0.attn.c_attn.weight", {8, 24}}, {"transformer.h.0.attn.c_attn.bias", {24}},
      {"transformer.h.0.attn.c_proj.weight", {8, 8}}, {"transformer.h.0.attn.c_proj.bias", {8}},
      {"transformer.h.0.ln_2.weight", {8}},          {"transformer.h.0.ln_2.bias", {8}},
      {"transformer.h.0.mlp.c_fc.weight", {8, 32}},  {"transformer.h.0.mlp.c_fc.bias", {32}},
      {"transformer.h.0.mlp.c_proj.weight", {32, 8}}, {"transformer.h.0.mlp.c_proj.bias", {8}},
      {"transformer.ln_f.weight", {8}},              {"transformer.ln_f.bias", {8}}};
  EXPECT_EQ(shapes_of(Gpt2Model(o)), tied);
  o.tie_embeddings = false;
  std::map<std::string, Shape> untied = tied;
  untied["lm_head.weight"] = {11, 8};
  EXPECT_EQ(shapes_of(Gpt2Model(o)), untied);
}

TEST(LlamaModel, ParametersHaveTransformersNamesAndLayouts) {
  LlamaOptions o = tiny_llama(2);
  o.layers = 1;
  const std::map<std::string, Shape> expected{
      {"model.embed_tokens.weight", {13, 8}},
      {"model.layers.0.self_attn.q_proj.weight", {8, 8}},
      {"model.layers.0.self_attn.k_proj.weight", {4, 8}},
      {"model.layers.0.self_attn.v_proj.weight", {4, 8}},
      {"model.layers.0.self_attn.o_proj.weight", {8, 8}},
      {"model.layers.0.mlp.gate_proj.weight", {12, 8}},
      {"model.layers.0.mlp.up_proj.weight", {12, 8}},
      {"model.layers.0.mlp.down_proj.weight", {8, 12}},
      {"model.layers.0.input_layernorm.weight", {8}},
      {"model.layers.0.post_attention_layernorm.weight", {8}},
      {"model.norm.weight", {8}},
      {"lm_head.weight", {13, 8}}};
  EXPECT_EQ(shapes_of(LlamaModel(o)), expected);
  o.tie_embeddings = true;
  EXPECT_EQ(LlamaModel(o).state_dict().count("lm_head.weight"), 0u);
}

// PyTorch's state dict of a tied model (Hugging Face's GPT-2 and Llama with tied embeddings) lists
// lm_head.weight beside the embedding it shares; loading one was refused as an unexpected key.
TEST(TransformerModels, LoadTheTiedHeadOfAPyTorchStateDictWhenItEqualsTheEmbedding) {
  Gpt2Model source(tiny_gpt2()), target([] {
    Gpt2Options o = tiny_gpt2();
    o.seed = 5;
    return o;
  }());
  StateDict state = source.state_dict();
  state["lm_head.weight"] = state.at("transformer.wte.weight");
  target.load_state_dict(state);
  EXPECT_EQ(target.wte->weight.to_vector<double>(), source.wte->weight.to_vector<double>());
  state["lm_head.weight"] = state.at("transformer.wte.weight") * 2.0;
  expect_error([&] { target.load_state_dict(state); },
               {"\"lm_head.weight\" differs from \"transformer.wte.weight\", which this model uses in its place"});

  // Inside another model, under its prefix (a backbone with a head of its own).
  struct Wrapper : Module {
    std::shared_ptr<Gpt2Model> gpt;
    explicit Wrapper(const Gpt2Options& o) : gpt(register_module("gpt", std::make_shared<Gpt2Model>(o))) {}
    Tensor forward(const Tensor& tokens) override { return (*gpt)(tokens); }
  } wrapper([] {
    Gpt2Options o = tiny_gpt2();
    o.seed = 9;
    return o;
  }());
  EXPECT_NE(wrapper.gpt->wte->weight.to_vector<double>(), source.wte->weight.to_vector<double>());
  StateDict wrapped;
  for (const auto& [name, tensor] : source.state_dict()) wrapped["gpt." + name] = tensor;
  wrapped["gpt.lm_head.weight"] = wrapped.at("gpt.transformer.wte.weight");
  wrapper.load_state_dict(wrapped);
  EXPECT_EQ(wrapper.gpt->wte->weight.to_vector<double>(), source.wte->weight.to_vector<double>());
  // A child reached by two names is listed under the first: its tied name under the second is
  // not one of this model's keys (it raised std::map::at's out_of_range).
  struct Twice : Module {
    std::shared_ptr<Gpt2Model> a, b;
    Twice() : a(register_module("a", std::make_shared<Gpt2Model>(tiny_gpt2()))), b(register_module("b", a)) {}
    Tensor forward(const Tensor& tokens) override { return (*a)(tokens); }
  } twice;
  StateDict doubled = twice.state_dict();
  doubled["b.lm_head.weight"] = doubled.at("a.transformer.wte.weight");
  expect_error([&] { twice.load_state_dict(doubled); }, {"unexpected key \"b.lm_head.weight\""});

  LlamaOptions llama = tiny_llama(2);
  llama.tie_embeddings = true;
  LlamaModel tied(llama);
  StateDict llama_state = tied.state_dict();
  llama_state["lm_head.weight"] = llama_state.at("model.embed_tokens.weight");
  tied.load_state_dict(llama_state);
  llama.tie_embeddings = false;
  LlamaModel untied(llama);
  StateDict extra = untied.state_dict();
  extra["lm_head.bias"] = zeros({13}, DType::f64);
  expect_error([&] { untied.load_state_dict(extra); }, {"unexpected key \"lm_head.bias\""});
}

double standard_deviation(const Tensor& t) {
  const Values v = t.to_vector<double>();
  double mean = 0, square = 0;
  for (double x : v) mean += x / double(v.size());
  for (double x : v) square += (x - mean) * (x - mean) / double(v.size());
  return std::sqrt(square);
}

TEST(Gpt2Model, InitialisesAsGpt2WithScaledResidualProjections) {
  Gpt2Options o;
  o.vocab_size = 300;
  o.context_length = 64;
  o.hidden_size = 64;
  o.layers = 2;
  o.heads = 4;
  Gpt2Model model(o);
  for (auto& [name, parameter] : model.named_parameters()) {
    const Values v = parameter.to_vector<double>();
    if (name.ends_with("bias")) {
      EXPECT_EQ(*std::max_element(v.begin(), v.end()), 0.0) << name;
      EXPECT_EQ(*std::min_element(v.begin(), v.end()), 0.0) << name;
    } else if (parameter.dim() == 1) {
      EXPECT_EQ(sum(parameter).item<double>(), 64.0) << name;
    } else {
      const double expected = name.ends_with("c_proj.weight") ? 0.02 / 2 : 0.02;  // 1 / sqrt(2 * 2 layers)
      EXPECT_NEAR(standard_deviation(parameter), expected, 0.06 * expected) << name;
    }
  }
  LlamaOptions l = tiny_llama(2);
  l.hidden_size = 64;
  l.intermediate_size = 128;
  l.vocab_size = 200;
  for (auto& [name, parameter] : LlamaModel(l).named_parameters()) {
    if (parameter.dim() == 2) {
      EXPECT_NEAR(standard_deviation(parameter), 0.02, 0.06 * 0.02) << name;
    }
  }
}

TEST(Gpt2Model, BlocksAndLogitsMatchLoops) {
  Gpt2Options o = tiny_gpt2();
  for (bool tied : {true, false}) {
    o.tie_embeddings = tied;
    Gpt2Model model(o);
    scramble(model, 5);
    std::map<std::string, Matrix> w = weights_of(model);
    const std::vector<int64_t> ids{3, 0, 10, 7, 7, 2, 9, 1, 4, 5};
    Tensor logits = model(tokens_of(ids, 2));
    ASSERT_EQ(logits.shape(), (Shape{2, 5, 11}));
    Matrix expected = zero_matrix(0, 11);
    for (int64_t b = 0; b < 2; ++b) {
      Matrix x = zero_matrix(5, 8);
      for (int64_t t = 0; t < 5; ++t) {
        for (int64_t c = 0; c < 8; ++c) {
          x.at(t, c) = w["transformer.wte.weight"].at(ids[b * 5 + t], c) + w["transformer.wpe.weight"].at(t, c);
        }
      }
      for (int64_t layer = 0; layer < 2; ++layer) {
        x = gpt2_block_reference(x, w, "transformer.h." + std::to_string(layer) + ".", 2, 1e-5);
      }
      x = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], 1e-5);
      Matrix head = tied ? w["transformer.wte.weight"] : w["lm_head.weight"];
      Matrix sequence_logits = product(x, transposed(head));
      expected.v.insert(expected.v.end(), sequence_logits.v.begin(), sequence_logits.v.end());
    }
    expect_matrix(logits, expected, 1e-11);
  }
}

Tensor random_f64(const Shape& shape, uint64_t seed) {
  Generator generator(seed);
  return randn(shape, DType::f64, &generator);
}

TEST(Gpt2Block, MatchesLoopsPerSequence) {
  Gpt2Options o = tiny_gpt2();
  Generator generator(6);
  Gpt2Block block(o, generator);
  scramble(block, 7);
  std::map<std::string, Matrix> w = weights_of(block);
  Tensor x = random_f64({2, 4, 8}, 8);
  Tensor y = block(x);
  for (int64_t b = 0; b < 2; ++b) {
    expect_matrix(slice(y, 0, b, b + 1), gpt2_block_reference(rows_of(matrix_of(x), 4 * b, 4), w, "", 2, 1e-5));
  }
}

TEST(LlamaBlock, MatchesLoopsForMultiHeadGroupedAndMultiQueryAttention) {
  for (int64_t kv_heads : {4, 2, 1}) {
    LlamaOptions o = tiny_llama(kv_heads);
    Generator generator(9);
    LlamaBlock block(o, generator);
    scramble(block, 10);
    std::map<std::string, Matrix> w = weights_of(block);
    Tensor x = random_f64({2, 5, 8}, 11);
    Tensor y = block(x);
    for (int64_t b = 0; b < 2; ++b) {
      expect_matrix(slice(y, 0, b, b + 1),
                    llama_block_reference(rows_of(matrix_of(x), 5 * b, 5), w, "", 4, kv_heads, 50, 1e-6));
    }
  }
}

TEST(LlamaModel, LogitsMatchLoops) {
  LlamaModel model(tiny_llama(2));
  scramble(model, 12);
  std::map<std::string, Matrix> w = weights_of(model);
  const std::vector<int64_t> ids{12, 0, 5, 5, 8, 1};
  Tensor logits = model(tokens_of(ids, 1));
  Matrix x = zero_matrix(6, 8);
  for (int64_t t = 0; t < 6; ++t) {
    for (int64_t c = 0; c < 8; ++c) x.at(t, c) = w["model.embed_tokens.weight"].at(ids[t], c);
  }
  for (int64_t layer = 0; layer < 2; ++layer) {
    x = llama_block_reference(x, w, "model.layers." + std::to_string(layer) + ".", 4, 2, 50, 1e-6);
  }
  x = rms_norm(x, w["model.norm.weight"], 1e-6);
  expect_matrix(logits, product(x, transposed(w["lm_head.weight"])), 1e-11);
}

// Changing token `changed` leaves every earlier position's logits exactly as they were.
void expect_causal(Module& model, int64_t vocab) {
  const std::vector<int64_t> ids{1, 4, 2, 0, 3, 2};
  std::vector<int64_t> edited = ids;
  const int64_t changed = 3;
  edited[changed] = (ids[changed] + 1) % vocab;
  const Values before = model(tokens_of(ids, 1)).to_vector<double>();
  const Values after = model(tokens_of(edited, 1)).to_vector<double>();
  for (int64_t t = 0; t < 6; ++t) {
    double largest_change = 0;
    for (int64_t c = 0; c < vocab; ++c) {
      largest_change = std::max(largest_change, std::abs(before[t * vocab + c] - after[t * vocab + c]));
    }
    if (t < changed) {
      EXPECT_EQ(largest_change, 0.0) << "position " << t;
    } else {
      EXPECT_GT(largest_change, 1e-6) << "position " << t;
    }
  }
}

TEST(TransformerModels, AreCausal) {
  Gpt2Model gpt2(tiny_gpt2());
  scramble(gpt2, 13);
  expect_causal(gpt2, 11);
  LlamaModel llama(tiny_llama(1));
  scramble(llama, 14);
  expect_causal(llama, 13);
}

TEST(TransformerDerivatives, BlocksToOrderTwoInTheirInput) {
  Generator generator(15);
  Gpt2Block gpt2(tiny_gpt2(), generator);
  scramble(gpt2, 16);
  expect_derivatives_match_central_differences([&](const std::vector<Tensor>& x) { return gpt2(x[0]); },
                                               {random_f64({1, 3, 8}, 17)}, 2, "Gpt2Block");
  LlamaBlock llama(tiny_llama(2), generator);
  scramble(llama, 18);
  expect_derivatives_match_central_differences([&](const std::vector<Tensor>& x) { return llama(x[0]); },
                                               {random_f64({1, 3, 8}, 19)}, 2, "LlamaBlock");
}

TEST(TransformerDerivatives, WeightGradientsOfTheLanguageModelLoss) {
  Gpt2Options gpt2_options = tiny_gpt2();
  gpt2_options.tie_embeddings = false;
  Gpt2Model gpt2(gpt2_options);
  scramble(gpt2, 20);
  Tensor tokens = tokens_of({1, 4, 2, 0, 3, 10, 9, 8}, 2), targets = tokens_of({4, 2, 0, 3, -100, 9, 8, 7}, 2);
  expect_weight_gradient_matches_finite_difference(gpt2, [&] { return cross_entropy(gpt2(tokens), targets); });
  LlamaOptions llama_options = tiny_llama(2);
  llama_options.tie_embeddings = true;
  LlamaModel llama(llama_options);
  scramble(llama, 21);
  expect_weight_gradient_matches_finite_difference(llama, [&] { return cross_entropy(llama(tokens), targets); });
}

// Loss and every parameter's gradient: the tensors a training step needs.
std::vector<Tensor> loss_and_gradients(Gpt2Model& model, const Tensor& tokens, const Tensor& targets,
                                       Tensor* dropout_key) {
  Tensor loss = cross_entropy(model.forward(tokens, dropout_key), targets);
  std::vector<Tensor> out = grad({loss}, model.parameters());
  out.insert(out.begin(), loss);
  return out;
}

void expect_same_tensors(const std::vector<Tensor>& got, const std::vector<Tensor>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const Values a = got[i].to_vector<double>(), b = expected[i].to_vector<double>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(a[j], b[j], 1e-12 * (1 + std::abs(b[j]))) << i << ", " << j;
  }
}

TEST(Gpt2Model, CompiledTrainingStepEqualsEager) {
  Gpt2Model model(tiny_gpt2());
  scramble(model, 22);
  CompiledFunction step = compile([&](const std::vector<Tensor>& in) {
    return loss_and_gradients(model, in[0], in[1], nullptr);
  });
  Tensor tokens = tokens_of({1, 4, 2, 0, 3, 10, 9, 8}, 2), targets = tokens_of({4, 2, 0, 3, -100, 9, 8, 7}, 2);
  const std::vector<Tensor> eager = loss_and_gradients(model, tokens, targets, nullptr);
  step({tokens, targets});
  ASSERT_NE(step.program_for({tokens, targets}), nullptr);
  expect_same_tensors(step({tokens, targets}), eager);
  Tensor other_tokens = tokens_of({5, 5, 6, 1, 0, 2, 3, 4}, 2);
  expect_same_tensors(step({other_tokens, targets}), loss_and_gradients(model, other_tokens, targets, nullptr));
  EXPECT_EQ(step.stats().traces, 1);
}

TEST(Gpt2Model, CompiledDropoutDrawsFromTheKeyInput) {
  Gpt2Options o = tiny_gpt2();
  o.embedding_dropout = 0.1;
  o.attention_dropout = 0.2;
  o.residual_dropout = 0.3;
  Gpt2Model model(o);
  scramble(model, 23);
  Tensor tokens = tokens_of({1, 4, 2, 0, 3, 10, 9, 8}, 2), targets = tokens_of({4, 2, 0, 3, 6, 9, 8, 7}, 2);
  CompiledFunction step = compile([&](const std::vector<Tensor>& in) {
    Tensor key = in[2];
    return loss_and_gradients(model, in[0], in[1], &key);
  });
  std::vector<double> losses;
  for (uint64_t call = 0; call < 3; ++call) {
    Tensor key = random_key(77, call << 32);
    Tensor eager_key = key;
    const std::vector<Tensor> compiled = step({tokens, targets, key});
    expect_same_tensors(compiled, loss_and_gradients(model, tokens, targets, &eager_key));
    losses.push_back(compiled[0].item<double>());
  }
  EXPECT_NE(losses[0], losses[1]);
  EXPECT_NE(losses[1], losses[2]);
  model.eval();
  Tensor unused_key = random_key(1);
  EXPECT_EQ(model.forward(tokens, &unused_key).to_vector<double>(), model(tokens).to_vector<double>());
  model.train();
  CompiledFunction without_key =
      compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{model(in[0])}; });
  expect_error([&] { without_key({tokens}); }, {"random numbers from a generator", "random_key"});
}

TEST(TransformerModels, BadInputsNameThem) {
  Gpt2Model gpt2(tiny_gpt2());
  expect_error([&] { gpt2(zeros({1, 3}, DType::f32)); }, {"Gpt2Model", "int32 or int64", "float32"});
  expect_error([&] { gpt2(tensor<int64_t>({1, 2, 3})); }, {"[batch, time]", "[3]"});
  expect_error([&] { gpt2(zeros({1, 7}, DType::i64)); }, {"7 tokens", "context length 6"});
  expect_error([&] { gpt2(tokens_of({1, 11}, 1)); }, {"Embedding: ids must be in [0, 11), got 11 in ids of shape [1, 2]"});
  Gpt2Options bad = tiny_gpt2();
  bad.heads = 3;
  expect_error([&] { Gpt2Model model(bad); }, {"hidden_size 8", "heads 3"});
  bad = tiny_gpt2();
  bad.dtype = DType::i32;
  expect_error([&] { Gpt2Model model(bad); }, {"float32 or float64", "int32"});
  bad = tiny_gpt2();
  bad.residual_dropout = 1.0;
  expect_error([&] { Gpt2Model model(bad); }, {"residual_dropout", "[0, 1)", "got 1"});
  LlamaOptions llama = tiny_llama(3);
  expect_error([&] { LlamaModel model(llama); }, {"kv_heads 3", "heads 4"});
  llama = tiny_llama(2);
  llama.rope_theta = 0;
  expect_error([&] { LlamaModel model(llama); }, {"LlamaModel: rope_theta must be positive, got 0"});
  llama = tiny_llama(2);
  llama.context_length = 2;
  LlamaModel short_context(llama);
  expect_error([&] { short_context(zeros({2, 3}, DType::i32)); }, {"LlamaModel", "3 tokens", "context length 2"});
  Gpt2Model other(tiny_gpt2());
  StateDict state = LlamaModel(tiny_llama(2)).state_dict();
  expect_error([&] { other.load_state_dict(state); }, {"missing key \"transformer."});
}

}  // namespace
}  // namespace eddy::nn
