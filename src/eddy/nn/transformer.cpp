#include "eddy/nn/transformer.h"

#include <cmath>
#include <limits>
#include <string>

#include "eddy/core/autograd.h"
#include "eddy/nn/attention.h"
#include "eddy/nn/init.h"
#include "eddy/nn/normalize.h"
#include "eddy/nn/quantized.h"
#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"

namespace eddy::nn {
namespace {

void check_floating(std::string_view where, DType dtype) {
  EDDY_CHECK(dtype == DType::f32 || dtype == DType::f64, where, ": dtype must be float32 or float64, got ", dtype);
}

// Each Dropout gets its own stream: a seed drawn from the model's initialisation generator.
std::shared_ptr<Dropout> make_dropout(double p, Generator& generator) {
  const auto words = philox4x32(generator.advance(1), generator.seed());
  return std::make_shared<Dropout>(p, uint64_t{words[0]} | uint64_t{words[1]} << 32);
}

// [batch, T, heads * head_dim] -> [batch, heads, T, head_dim]
Tensor split_heads(const Tensor& x, int64_t heads) {
  const Shape& s = x.shape();
  return permute(reshape(x, {s[0], s[1], heads, s[2] / heads}), {0, 2, 1, 3});
}

// [batch, heads, T, head_dim] -> [batch, T, heads * head_dim]
Tensor merge_heads(const Tensor& x) {
  const Shape& s = x.shape();
  return reshape(permute(x, {0, 2, 1, 3}), {s[0], s[2], s[1] * s[3]});
}

void check_heads(std::string_view where, int64_t hidden_size, int64_t heads, int64_t kv_heads) {
  EDDY_CHECK(hidden_size > 0 && heads > 0, where, ": hidden_size and heads must be positive, got ", hidden_size,
             " and ", heads);
  EDDY_CHECK(hidden_size % heads == 0, where, ": hidden_size ", hidden_size, " is not divisible by heads ", heads);
  EDDY_CHECK(kv_heads > 0 && heads % kv_heads == 0, where, ": kv_heads ", kv_heads, " does not divide heads ",
             heads);
}

void check_rate(std::string_view where, std::string_view name, double rate) {
  EDDY_CHECK(rate >= 0 && rate < 1, where, ": ", name, " must be in [0, 1), got ", rate);
}

void check_tokens(std::string_view where, const Tensor& tokens, int64_t context_length) {
  EDDY_CHECK(tokens.dtype() == DType::i32 || tokens.dtype() == DType::i64, where,
             ": tokens must be int32 or int64, got ", tokens.dtype());
  EDDY_CHECK(tokens.dim() == 2 && tokens.shape()[1] > 0, where, ": tokens must be [batch, time], got shape ",
             tokens.shape());
  EDDY_CHECK(tokens.shape()[1] <= context_length, where, ": ", tokens.shape()[1],
             " tokens exceed the context length ", context_length);
}

// What every model's cached forward checks before it writes into the cache.
void check_cached_call(std::string_view where, const Module& model, const Tensor& tokens, const KvCache& cache,
                       int64_t layers, int64_t context_length) {
  EDDY_CHECK(!model.is_training(), where, ": the cached forward is for inference and applies no dropout; call ",
             "eval() first");
  check_tokens(where, tokens, context_length);
  EDDY_CHECK(cache.layers() == layers && cache.batch() == tokens.shape()[0], where, ": the cache holds ",
             cache.layers(), " layers of batch ", cache.batch(), " but the model has ", layers,
             " layers and the tokens a batch of ", tokens.shape()[0]);
  EDDY_CHECK(cache.length() + tokens.shape()[1] <= context_length, where, ": ", tokens.shape()[1],
             " tokens after the ", cache.length(), " cached exceed the context length ", context_length);
}

// Attention with `dropout` on its weights: the fused form where nothing is dropped (eval mode,
// rate 0), since only the composed one has the weights to drop from.
Tensor attention_with_dropout(const Tensor& queries, const Tensor& keys, const Tensor& values, Dropout& dropout,
                              Tensor* dropout_key) {
  if (!dropout.is_training() || dropout.p() == 0) return causal_attention(queries, keys, values);
  return attend(dropout.forward(causal_attention_weights(queries, keys), dropout_key), values);
}

}  // namespace

void CausalLanguageModel::use_quantized_head(std::shared_ptr<const QuantizedMatrix> packed) {
  EDDY_CHECK(packed != nullptr, "use_quantized_head: null matrix");
  EDDY_CHECK(packed->rows == vocab_size(), "use_quantized_head: a matrix of ", packed->rows,
             " rows cannot be the head of a vocabulary of ", vocab_size());
  quantized_head_ = std::move(packed);
}

// The head is stored [vocab, hidden], like the token embedding it may be.
Tensor CausalLanguageModel::project_to_vocabulary(const Tensor& hidden, const Tensor& head) const {
  const Shape& s = hidden.shape();
  const Tensor rows = reshape(hidden, {-1, s[2]});
  const Tensor logits = quantized_head_ ? quantized_matmul(rows, *quantized_head_) : matmul(rows, transpose(head));
  return reshape(logits, {s[0], s[1], logits.shape()[1]});
}

RmsNorm::RmsNorm(int64_t dim, double eps, DType dtype) : eps_(eps) {
  EDDY_CHECK(dim > 0, "RmsNorm: dim must be positive, got ", dim);
  EDDY_CHECK(eps >= 0, "RmsNorm: eps must be non-negative, got ", eps);
  weight = ones({dim}, dtype);
  register_parameter("weight", weight);
}

Tensor RmsNorm::forward(const Tensor& x) {
  EDDY_CHECK(x.dim() >= 1 && x.shape().back() == weight.shape()[0], "RmsNorm: input has shape ", x.shape(),
             " but the layer normalises ", weight.shape()[0], " features");
  return rms_normalize(x, eps_) * weight;
}

Tensor rotary_embedding(const Tensor& x, double theta, int64_t first_position) {
  EDDY_CHECK(x.dim() >= 2 && x.shape().back() % 2 == 0, "rotary_embedding: x must be [..., time, head_dim] ",
             "with an even head_dim, got shape ", x.shape());
  // 16-bit x (a product under autocast): the rotation in float32, rounded once, as kernels do.
  if (is_half(x.dtype())) {
    return detail::in_float32(x, [&](const Tensor& wide) { return rotary_embedding(wide, theta, first_position); });
  }
  check_floating("rotary_embedding", x.dtype());
  EDDY_CHECK(theta > 0, "rotary_embedding: theta must be positive, got ", theta);
  EDDY_CHECK(first_position >= 0, "rotary_embedding: first_position must be non-negative, got ", first_position);
  const int64_t time = x.shape()[x.dim() - 2], dim = x.shape().back(), half = dim / 2;
  const DType dtype = x.dtype();
  const Device device = x.device();
  Tensor inverse_frequencies =
      1.0 / pow(full({half}, theta, dtype, device), arange(0, dim, 2, dtype, device) / double(dim));
  Tensor positions = arange(double(first_position), double(first_position + time), 1, dtype, device);
  // An outer product by broadcasting, not matmul: under eddy.autocast a matmul rounds to 16 bits,
  // and angles at position 1000 were then 4 radians apart.
  Tensor angles = reshape(positions, {time, 1}) * reshape(inverse_frequencies, {1, half});
  angles = concat({angles, angles}, 1);  // [time, dim]: both halves of a pair turn alike
  Tensor rotated_half = concat({-slice(x, -1, half, dim), slice(x, -1, 0, half)}, -1);
  return x * cos(angles) + rotated_half * sin(angles);
}

KvCache::KvCache(int64_t layers, int64_t batch, int64_t kv_heads, int64_t capacity, int64_t head_dim,
                 DType dtype) {
  EDDY_CHECK(layers > 0 && batch > 0 && kv_heads > 0 && capacity > 0 && head_dim > 0, "KvCache: layers, batch, ",
             "kv_heads, capacity and head_dim must be positive, got ", layers, ", ", batch, ", ", kv_heads, ", ",
             capacity, " and ", head_dim);
  check_floating("KvCache", dtype);
  for (int64_t i = 0; i < layers; ++i) {
    keys_.push_back(zeros({batch, kv_heads, capacity, head_dim}, dtype));
    values_.push_back(zeros({batch, kv_heads, capacity, head_dim}, dtype));
  }
}

std::pair<Tensor, Tensor> KvCache::append(int64_t layer, const Tensor& keys, const Tensor& values) {
  EDDY_CHECK(layer >= 0 && layer < layers(), "KvCache: layer ", layer, " is not one of the ", layers(),
             " cached");
  const Shape& cached = keys_[layer].shape();
  const int64_t time = keys.dim() == 4 ? keys.shape()[2] : 0;
  const Shape expected{cached[0], cached[1], time, cached[3]};
  EDDY_CHECK(keys.shape() == expected && values.shape() == expected && keys.dtype() == keys_[layer].dtype() &&
                 values.dtype() == keys_[layer].dtype(),
             "KvCache: layer ", layer, " holds ", keys_[layer].dtype(), " [batch, kv_heads, time, head_dim] = [",
             cached[0], ", ", cached[1], ", time, ", cached[3], "], got keys ", keys.dtype(), " ", keys.shape(),
             " and values ", values.dtype(), " ", values.shape());
  EDDY_CHECK(length_ + time <= capacity(), "KvCache: ", time, " positions after the ", length_,
             " cached exceed its capacity ", capacity());
  const int64_t end = length_ + time;
  slice(keys_[layer], 2, length_, end).copy_(keys);
  slice(values_[layer], 2, length_, end).copy_(values);
  return {slice(keys_[layer], 2, 0, end), slice(values_[layer], 2, 0, end)};
}

void KvCache::advance(int64_t positions) {
  EDDY_CHECK(positions >= 0 && length_ + positions <= capacity(), "KvCache: cannot advance ", positions,
             " positions from ", length_, " within the capacity ", capacity());
  length_ += positions;
}

CausalSelfAttention::CausalSelfAttention(const AttentionOptions& options, Generator& generator)
    : options_(options) {
  if (options_.kv_heads == 0) options_.kv_heads = options_.heads;
  check_heads("CausalSelfAttention", options_.hidden_size, options_.heads, options_.kv_heads);
  const int64_t hidden = options_.hidden_size, head_dim = hidden / options_.heads;
  EDDY_CHECK(!options_.rope_theta || head_dim % 2 == 0, "CausalSelfAttention: rotary positions need an even ",
             "head_dim, got ", head_dim, " (hidden_size ", hidden, " / heads ", options_.heads, ")");
  auto projection = [&](int64_t in, int64_t out) {
    return std::make_shared<Linear>(in, out, generator, options_.dtype, options_.bias, WeightLayout::out_in);
  };
  q_proj = register_module("q_proj", projection(hidden, hidden));
  k_proj = register_module("k_proj", projection(hidden, options_.kv_heads * head_dim));
  v_proj = register_module("v_proj", projection(hidden, options_.kv_heads * head_dim));
  o_proj = register_module("o_proj", projection(hidden, hidden));
  weights_dropout_ = register_module("attention_dropout", make_dropout(options_.dropout, generator));
}

CausalSelfAttention::Heads CausalSelfAttention::project(const Tensor& x, int64_t first_position) {
  EDDY_CHECK(x.dim() == 3 && x.shape()[2] == options_.hidden_size, "CausalSelfAttention: input must be [batch, ",
             "time, ", options_.hidden_size, "], got shape ", x.shape());
  Heads heads{split_heads((*q_proj)(x), options_.heads), split_heads((*k_proj)(x), options_.kv_heads),
              split_heads((*v_proj)(x), options_.kv_heads)};
  if (options_.rope_theta) {
    heads.queries = rotary_embedding(heads.queries, *options_.rope_theta, first_position);
    heads.keys = rotary_embedding(heads.keys, *options_.rope_theta, first_position);
  }
  return heads;
}

Tensor CausalSelfAttention::forward(const Tensor& x, Tensor* dropout_key) {
  const Heads heads = project(x, 0);
  return (*o_proj)(
      merge_heads(attention_with_dropout(heads.queries, heads.keys, heads.values, *weights_dropout_, dropout_key)));
}

Tensor CausalSelfAttention::forward(const Tensor& x, KvCache& cache, int64_t layer) {
  const Heads heads = project(x, cache.length());
  const auto [keys, values] = cache.append(layer, heads.keys, heads.values);
  return (*o_proj)(merge_heads(causal_attention(heads.queries, keys, values)));
}

Gpt2Attention::Gpt2Attention(int64_t hidden_size, int64_t heads, double attention_dropout,
                             double residual_dropout, Generator& generator, DType dtype)
    : heads_(heads) {
  check_heads("Gpt2Attention", hidden_size, heads, heads);
  c_attn = register_module("c_attn", std::make_shared<Linear>(hidden_size, 3 * hidden_size, generator, dtype));
  c_proj = register_module("c_proj", std::make_shared<Linear>(hidden_size, hidden_size, generator, dtype));
  weights_dropout_ = register_module("attn_dropout", make_dropout(attention_dropout, generator));
  output_dropout_ = register_module("resid_dropout", make_dropout(residual_dropout, generator));
}

Gpt2Attention::Heads Gpt2Attention::project(const Tensor& x) {
  const int64_t hidden = c_proj->in_features();
  EDDY_CHECK(x.dim() == 3 && x.shape()[2] == hidden, "Gpt2Attention: input must be [batch, time, ", hidden,
             "], got shape ", x.shape());
  // The three projections' heads side by side, [batch, 3 * heads, T, head_dim], then sliced: views
  // of the dense product that the attention kernels read in place. Slicing q, k and v first made
  // each a strided [batch, T, hidden] whose reshape into heads copied it.
  const Tensor all_heads = split_heads((*c_attn)(x), 3 * heads_);
  return {slice(all_heads, 1, 0, heads_), slice(all_heads, 1, heads_, 2 * heads_),
          slice(all_heads, 1, 2 * heads_, 3 * heads_)};
}

Tensor Gpt2Attention::forward(const Tensor& x, Tensor* dropout_key) {
  const Heads heads = project(x);
  const Tensor mixed =
      attention_with_dropout(heads.queries, heads.keys, heads.values, *weights_dropout_, dropout_key);
  return output_dropout_->forward((*c_proj)(merge_heads(mixed)), dropout_key);
}

Tensor Gpt2Attention::forward(const Tensor& x, KvCache& cache, int64_t layer) {
  const Heads heads = project(x);
  const auto [keys, values] = cache.append(layer, heads.keys, heads.values);
  return (*c_proj)(merge_heads(causal_attention(heads.queries, keys, values)));
}

GeluMlp::GeluMlp(int64_t hidden_size, int64_t intermediate_size, GeluForm form, double dropout,
                 Generator& generator, DType dtype)
    : form_(form) {
  c_fc = register_module("c_fc", std::make_shared<Linear>(hidden_size, intermediate_size, generator, dtype));
  c_proj = register_module("c_proj", std::make_shared<Linear>(intermediate_size, hidden_size, generator, dtype));
  dropout_ = register_module("dropout", make_dropout(dropout, generator));
}

Tensor GeluMlp::forward(const Tensor& x, Tensor* dropout_key) {
  Tensor inner = (*c_fc)(x);
  inner = form_ == GeluForm::exact ? gelu_exact(inner) : gelu(inner);
  return dropout_->forward((*c_proj)(inner), dropout_key);
}

SwiGluMlp::SwiGluMlp(int64_t hidden_size, int64_t intermediate_size, bool bias, Generator& generator,
                     DType dtype) {
  auto projection = [&](int64_t in, int64_t out) {
    return std::make_shared<Linear>(in, out, generator, dtype, bias, WeightLayout::out_in);
  };
  gate_proj = register_module("gate_proj", projection(hidden_size, intermediate_size));
  up_proj = register_module("up_proj", projection(hidden_size, intermediate_size));
  down_proj = register_module("down_proj", projection(intermediate_size, hidden_size));
}

Tensor SwiGluMlp::forward(const Tensor& x) { return (*down_proj)(silu((*gate_proj)(x)) * (*up_proj)(x)); }

Gpt2Block::Gpt2Block(const Gpt2Options& options, Generator& generator) {
  const int64_t hidden = options.hidden_size;
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(hidden, options.norm_eps, options.dtype));
  attn = register_module("attn", std::make_shared<Gpt2Attention>(hidden, options.heads, options.attention_dropout,
                                                                 options.residual_dropout, generator, options.dtype));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(hidden, options.norm_eps, options.dtype));
  const int64_t inner = options.intermediate_size > 0 ? options.intermediate_size : 4 * hidden;
  mlp = register_module("mlp", std::make_shared<GeluMlp>(hidden, inner, options.gelu, options.residual_dropout,
                                                         generator, options.dtype));
}

Tensor Gpt2Block::forward(const Tensor& x, Tensor* dropout_key) {
  Tensor h = x + attn->forward((*ln_1)(x), dropout_key);
  return h + mlp->forward((*ln_2)(h), dropout_key);
}

Tensor Gpt2Block::forward(const Tensor& x, KvCache& cache, int64_t layer) {
  Tensor h = x + attn->forward((*ln_1)(x), cache, layer);
  return h + (*mlp)((*ln_2)(h));
}

Gpt2Model::Gpt2Model(const Gpt2Options& options) : options_(options) {
  const Gpt2Options& o = options_;
  check_floating("Gpt2Model", o.dtype);
  check_heads("Gpt2Model", o.hidden_size, o.heads, o.heads);
  EDDY_CHECK(o.vocab_size > 0 && o.context_length > 0 && o.layers > 0, "Gpt2Model: vocab_size, context_length ",
             "and layers must be positive, got ", o.vocab_size, ", ", o.context_length, " and ", o.layers);
  check_rate("Gpt2Model", "embedding_dropout", o.embedding_dropout);
  check_rate("Gpt2Model", "attention_dropout", o.attention_dropout);
  check_rate("Gpt2Model", "residual_dropout", o.residual_dropout);
  EDDY_CHECK(o.init_std >= 0, "Gpt2Model: init_std must be non-negative, got ", o.init_std);
  Generator generator(o.seed);
  wte = register_module("transformer.wte",
                        std::make_shared<Embedding>(o.vocab_size, o.hidden_size, generator, o.dtype));
  wpe = register_module("transformer.wpe",
                        std::make_shared<Embedding>(o.context_length, o.hidden_size, generator, o.dtype));
  embedding_dropout_ = register_module("transformer.drop", make_dropout(o.embedding_dropout, generator));
  for (int64_t i = 0; i < o.layers; ++i) {
    h.push_back(register_module("transformer.h." + std::to_string(i), std::make_shared<Gpt2Block>(o, generator)));
  }
  ln_f = register_module("transformer.ln_f", std::make_shared<LayerNorm>(o.hidden_size, o.norm_eps, o.dtype));
  if (o.tie_embeddings) {
    register_tied_name("lm_head.weight", output_head_name());
  } else {
    lm_head_weight = Tensor::empty({o.vocab_size, o.hidden_size}, o.dtype, default_device());
    register_parameter("lm_head.weight", lm_head_weight);
  }
  // As GPT-2: every residual branch ends in a c_proj, and scaling those by 1 / sqrt(2 * layers)
  // keeps the residual stream's variance from growing with depth.
  const double residual_std = o.init_std / std::sqrt(2.0 * double(o.layers));
  for (auto& [name, parameter] : named_parameters()) {
    if (parameter.dim() != 2) continue;  // biases stay zero, norms one
    const bool residual_projection = name.ends_with("c_proj.weight");
    init::normal(parameter, generator, residual_projection ? residual_std : o.init_std);
  }
}

Tensor Gpt2Model::hidden_states(const Tensor& tokens, Tensor* dropout_key) {
  check_tokens("Gpt2Model", tokens, options_.context_length);
  const int64_t time = tokens.shape()[1];
  Tensor x = (*wte)(tokens) + slice(wpe->weight, 0, 0, time);
  x = embedding_dropout_->forward(x, dropout_key);
  for (auto& block : h) x = block->forward(x, dropout_key);
  return (*ln_f)(x);
}

Tensor Gpt2Model::forward(const Tensor& tokens, Tensor* dropout_key) {
  return project_to_vocabulary(hidden_states(tokens, dropout_key),
                               options_.tie_embeddings ? wte->weight : lm_head_weight);
}

Tensor Gpt2Model::forward(const Tensor& tokens, KvCache& cache) {
  check_cached_call("Gpt2Model", *this, tokens, cache, options_.layers, options_.context_length);
  NoGradGuard no_graph;
  const int64_t first_position = cache.length(), time = tokens.shape()[1];
  Tensor x = (*wte)(tokens) + slice(wpe->weight, 0, first_position, first_position + time);
  for (size_t i = 0; i < h.size(); ++i) x = h[i]->forward(x, cache, static_cast<int64_t>(i));
  cache.advance(time);
  return project_to_vocabulary((*ln_f)(x), options_.tie_embeddings ? wte->weight : lm_head_weight);
}

KvCache Gpt2Model::make_kv_cache(int64_t batch) const {
  return KvCache(options_.layers, batch, options_.heads, options_.context_length,
                 options_.hidden_size / options_.heads, options_.dtype);
}

LlamaBlock::LlamaBlock(const LlamaOptions& options, Generator& generator) {
  AttentionOptions attention;
  attention.hidden_size = options.hidden_size;
  attention.heads = options.heads;
  attention.kv_heads = options.kv_heads;
  attention.bias = options.attention_bias;
  attention.rope_theta = options.rope_theta;
  attention.dropout = options.attention_dropout;
  attention.dtype = options.dtype;
  self_attn = register_module("self_attn", std::make_shared<CausalSelfAttention>(attention, generator));
  mlp = register_module("mlp", std::make_shared<SwiGluMlp>(options.hidden_size, options.intermediate_size,
                                                           options.mlp_bias, generator, options.dtype));
  input_layernorm = register_module("input_layernorm",
                                    std::make_shared<RmsNorm>(options.hidden_size, options.norm_eps, options.dtype));
  post_attention_layernorm = register_module(
      "post_attention_layernorm", std::make_shared<RmsNorm>(options.hidden_size, options.norm_eps, options.dtype));
}

Tensor LlamaBlock::forward(const Tensor& x, Tensor* dropout_key) {
  Tensor h = x + self_attn->forward((*input_layernorm)(x), dropout_key);
  return h + (*mlp)((*post_attention_layernorm)(h));
}

Tensor LlamaBlock::forward(const Tensor& x, KvCache& cache, int64_t layer) {
  Tensor h = x + self_attn->forward((*input_layernorm)(x), cache, layer);
  return h + (*mlp)((*post_attention_layernorm)(h));
}

LlamaModel::LlamaModel(const LlamaOptions& options) : options_(options) {
  LlamaOptions& o = options_;
  if (o.kv_heads == 0) o.kv_heads = o.heads;
  check_floating("LlamaModel", o.dtype);
  check_heads("LlamaModel", o.hidden_size, o.heads, o.kv_heads);
  EDDY_CHECK(o.vocab_size > 0 && o.intermediate_size > 0 && o.context_length > 0 && o.layers > 0,
             "LlamaModel: vocab_size, intermediate_size, context_length and layers must be positive, got ",
             o.vocab_size, ", ", o.intermediate_size, ", ", o.context_length, " and ", o.layers);
  check_rate("LlamaModel", "attention_dropout", o.attention_dropout);
  EDDY_CHECK(o.init_std >= 0, "LlamaModel: init_std must be non-negative, got ", o.init_std);
  // Refused when built: the rotary embedding refused it only at the first forward.
  EDDY_CHECK(std::isfinite(o.rope_theta) && o.rope_theta > 0, "LlamaModel: rope_theta must be positive, got ",
             o.rope_theta);
  Generator generator(o.seed);
  embed_tokens = register_module("model.embed_tokens",
                                 std::make_shared<Embedding>(o.vocab_size, o.hidden_size, generator, o.dtype));
  for (int64_t i = 0; i < o.layers; ++i) {
    layers.push_back(register_module("model.layers." + std::to_string(i), std::make_shared<LlamaBlock>(o, generator)));
  }
  norm = register_module("model.norm", std::make_shared<RmsNorm>(o.hidden_size, o.norm_eps, o.dtype));
  if (o.tie_embeddings) {
    register_tied_name("lm_head.weight", output_head_name());
  } else {
    lm_head_weight = Tensor::empty({o.vocab_size, o.hidden_size}, o.dtype, default_device());
    register_parameter("lm_head.weight", lm_head_weight);
  }
  for (auto& [name, parameter] : named_parameters()) {
    if (parameter.dim() == 2) init::normal(parameter, generator, o.init_std);  // biases stay zero, norms one
  }
}

Tensor LlamaModel::hidden_states(const Tensor& tokens, Tensor* dropout_key) {
  check_tokens("LlamaModel", tokens, options_.context_length);
  Tensor x = (*embed_tokens)(tokens);
  for (auto& block : layers) x = block->forward(x, dropout_key);
  return (*norm)(x);
}

Tensor LlamaModel::forward(const Tensor& tokens, Tensor* dropout_key) {
  return project_to_vocabulary(hidden_states(tokens, dropout_key),
                               options_.tie_embeddings ? embed_tokens->weight : lm_head_weight);
}

Tensor LlamaModel::forward(const Tensor& tokens, KvCache& cache) {
  check_cached_call("LlamaModel", *this, tokens, cache, options_.layers, options_.context_length);
  NoGradGuard no_graph;
  Tensor x = (*embed_tokens)(tokens);
  for (size_t i = 0; i < layers.size(); ++i) x = layers[i]->forward(x, cache, static_cast<int64_t>(i));
  cache.advance(tokens.shape()[1]);
  return project_to_vocabulary((*norm)(x), options_.tie_embeddings ? embed_tokens->weight : lm_head_weight);
}

KvCache LlamaModel::make_kv_cache(int64_t batch) const {
  return KvCache(options_.layers, batch, options_.kv_heads, options_.context_length,
                 options_.hidden_size / options_.heads, options_.dtype);
}

}  // namespace eddy::nn
