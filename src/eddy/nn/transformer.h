#pragma once
// Decoder-only transformers: the attention, normalisation, position and feed-forward pieces, and
// two language models built from them, GPT-2 (Radford et al. 2019) and Llama (Touvron et al.
// 2023). Everything is composed of eddy ops, so it differentiates to any order and compiles.
//
// Activations are [batch, time, hidden]; attention heads are [batch, heads, time, head_dim].
// Parameters carry Hugging Face's names and layouts (GPT2LMHeadModel, LlamaForCausalLM), so a
// state dict and a transformers checkpoint exchange tensors one for one.
//
// Dropout: every forward taking `Tensor* dropout_key` draws its masks from that key (random_key)
// when it is given, advancing it past each draw, so one key input gives a compiled training step
// fresh masks on every call. A null key makes each Dropout draw from its own generator, which
// eager code can do and a capture refuses. In eval mode, or with zero rates, nothing is drawn.
//
// Incremental runs: every forward taking a `KvCache&` sees only the new positions, after those
// the cache holds; each attention layer appends its new keys and values to the cache and attends
// over all of them. That path is for inference (generation.h): it records no graph, since the
// cache is overwritten in place, and it refuses a model in training mode (call eval()).

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "eddy/nn/attention.h"
#include "eddy/nn/layers.h"

namespace eddy::nn {

// x / sqrt(mean(x^2) + eps) * weight over the last axis (Zhang & Sennrich 2019).
class RmsNorm : public Module {
 public:
  explicit RmsNorm(int64_t dim, double eps = 1e-6, DType dtype = DType::f32);
  Tensor forward(const Tensor& x) override;

  Tensor weight;  // [dim], ones

 private:
  double eps_;
};

// Rotary position embedding (Su et al. 2021, RoFormer) in the "rotate half" layout of Hugging
// Face's Llama: in x [..., time, head_dim], element i < head_dim / 2 pairs with i + head_dim / 2,
// and the pair at position p = first_position + t turns by p * theta^(-2i / head_dim). The
// angles are computed in x's dtype, as transformers computes them in float32.
Tensor rotary_embedding(const Tensor& x, double theta, int64_t first_position = 0);

// The keys and values of the positions a model has seen, for each of its attention layers, so
// that the next tokens need only their own projections. Each layer's buffers are preallocated to
// `capacity` positions and written in place, which decodes faster than growing them by concat
// (docs/lm.md).
class KvCache {
 public:
  // Per layer, keys and values [batch, kv_heads, capacity, head_dim], none of them cached yet.
  KvCache(int64_t layers, int64_t batch, int64_t kv_heads, int64_t capacity, int64_t head_dim, DType dtype);
  // Move-only: a copy would share the buffers (tensors are handles) yet count its positions apart.
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;

  int64_t layers() const { return static_cast<int64_t>(keys_.size()); }
  int64_t batch() const { return keys_.front().shape()[0]; }
  int64_t capacity() const { return keys_.front().shape()[2]; }
  // The positions cached, which is also the position of the next token.
  int64_t length() const { return length_; }

  // Writes the keys and values [batch, kv_heads, T, head_dim] of `layer` at positions length()
  // to length() + T, and returns that layer's keys and values of all positions up to there:
  // [batch, kv_heads, length() + T, head_dim], views of the cache.
  std::pair<Tensor, Tensor> append(int64_t layer, const Tensor& keys, const Tensor& values);
  // Counts T more positions as cached, once every layer has appended them.
  void advance(int64_t positions);
  // Forgets every position, keeping the memory, to start another sequence.
  void clear() { length_ = 0; }

 private:
  std::vector<Tensor> keys_, values_;
  int64_t length_ = 0;
};

struct AttentionOptions {
  int64_t hidden_size = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;               // 0: as many as heads
  bool bias = false;                  // on the q, k, v and o projections
  std::optional<double> rope_theta;   // rotary embedding base; none: no rotation
  double dropout = 0;                 // on the attention weights
  DType dtype = DType::f32;
};

// Self-attention in Llama's layout: q_proj, k_proj, v_proj, o_proj, stored [out, in] as
// torch.nn.Linear; with grouped-query heads and rotary positions when the options ask.
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(const AttentionOptions& options, Generator& generator);
  Tensor forward(const Tensor& x) override { return forward(x, nullptr); }
  Tensor forward(const Tensor& x, Tensor* dropout_key);
  // x holds the positions after those `cache` holds; appends their keys and values as `layer`.
  Tensor forward(const Tensor& x, KvCache& cache, int64_t layer);

  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;

 private:
  struct Heads {
    Tensor queries, keys, values;
  };
  // The projections of x split into heads, rotated as positions first_position onwards.
  Heads project(const Tensor& x, int64_t first_position);

  AttentionOptions options_;
  std::shared_ptr<Dropout> weights_dropout_;
};

// GPT-2's self-attention: one c_attn projection to [q | k | v], heads of equal count, c_proj
// back, all stored [in, out] as GPT-2's Conv1D; dropout on the weights and on the output.
class Gpt2Attention : public Module {
 public:
  Gpt2Attention(int64_t hidden_size, int64_t heads, double attention_dropout, double residual_dropout,
                Generator& generator, DType dtype);
  Tensor forward(const Tensor& x) override { return forward(x, nullptr); }
  Tensor forward(const Tensor& x, Tensor* dropout_key);
  Tensor forward(const Tensor& x, KvCache& cache, int64_t layer);

  std::shared_ptr<Linear> c_attn, c_proj;

 private:
  struct Heads {
    Tensor queries, keys, values;
  };
  Heads project(const Tensor& x);

  int64_t heads_;
  std::shared_ptr<Dropout> weights_dropout_, output_dropout_;
};

enum class GeluForm { tanh_approximation, exact };

// c_proj(gelu(c_fc(x))), then dropout: GPT-2's MLP, [in, out] weights with biases.
class GeluMlp : public Module {
 public:
  GeluMlp(int64_t hidden_size, int64_t intermediate_size, GeluForm form, double dropout, Generator& generator,
          DType dtype);
  Tensor forward(const Tensor& x) override { return forward(x, nullptr); }
  Tensor forward(const Tensor& x, Tensor* dropout_key);

  std::shared_ptr<Linear> c_fc, c_proj;

 private:
  GeluForm form_;
  std::shared_ptr<Dropout> dropout_;
};

// down_proj(silu(gate_proj(x)) * up_proj(x)): the SwiGLU feed-forward (Shazeer 2020) of Llama,
// [out, in] weights as torch.nn.Linear.
class SwiGluMlp : public Module {
 public:
  SwiGluMlp(int64_t hidden_size, int64_t intermediate_size, bool bias, Generator& generator, DType dtype);
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;
};

// A decoder-only language model that runs incrementally: what generation (generation.h) needs.
class CausalLanguageModel : public Module {
 public:
  using Module::forward;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t context_length() const = 0;
  // An empty cache for `batch` sequences, with room for context_length() positions.
  virtual KvCache make_kv_cache(int64_t batch = 1) const = 0;
  // tokens [batch, T] -> logits [batch, T, vocab_size], dropout masks drawn from `dropout_key`
  // when given (see the top of this file).
  virtual Tensor forward(const Tensor& tokens, Tensor* dropout_key) = 0;
  // tokens [batch, T] at the positions after those `cache` holds -> their logits [batch, T,
  // vocab_size]; the cache then holds T more positions. Positions beyond context_length() are
  // refused. Equal to the last T positions of the full forward over all the tokens.
  virtual Tensor forward(const Tensor& tokens, KvCache& cache) = 0;

  // The state-dict name of the [vocab, hidden] matrix the logits multiply: the token embedding's
  // where the two are tied.
  virtual std::string output_head_name() const = 0;
  // From now on the logits multiply `packed` (int8 or int4, quantized.h) instead of the float
  // head: for inference only, as Linear::use_quantized_weight.
  void use_quantized_head(std::shared_ptr<const QuantizedMatrix> packed);
  const QuantizedMatrix* quantized_head() const { return quantized_head_.get(); }

 protected:
  // hidden [batch, T, hidden] -> logits [batch, T, vocab] = hidden head^T, through the packed
  // head once there is one.
  Tensor project_to_vocabulary(const Tensor& hidden, const Tensor& head) const;

 private:
  std::shared_ptr<const QuantizedMatrix> quantized_head_;
};

// Defaults are those of transformers' GPT2Config (GPT-2 small); the Hugging Face key follows.
struct Gpt2Options {
  int64_t vocab_size = 50257;
  int64_t context_length = 1024;      // n_positions
  int64_t hidden_size = 768;          // n_embd
  int64_t layers = 12;                // n_layer
  int64_t heads = 12;                 // n_head
  int64_t intermediate_size = 0;      // n_inner; 0: 4 * hidden_size
  GeluForm gelu = GeluForm::tanh_approximation;  // activation_function "gelu_new"
  double norm_eps = 1e-5;             // layer_norm_epsilon
  double embedding_dropout = 0.1;     // embd_pdrop
  double attention_dropout = 0.1;     // attn_pdrop
  double residual_dropout = 0.1;      // resid_pdrop
  double init_std = 0.02;             // initializer_range
  bool tie_embeddings = true;         // tie_word_embeddings
  DType dtype = DType::f32;
  uint64_t seed = 0;
};

// Pre-LN: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class Gpt2Block : public Module {
 public:
  Gpt2Block(const Gpt2Options& options, Generator& generator);
  Tensor forward(const Tensor& x) override { return forward(x, nullptr); }
  Tensor forward(const Tensor& x, Tensor* dropout_key);
  Tensor forward(const Tensor& x, KvCache& cache, int64_t layer);

  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<Gpt2Attention> attn;
  std::shared_ptr<GeluMlp> mlp;
};

// GPT-2 with its language-model head: tokens [batch, T] (int32/int64, T <= context_length) ->
// logits [batch, T, vocab_size]. Parameters are named as in GPT2LMHeadModel
// (transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ...); the head reuses wte unless
// untied, when it is lm_head.weight [vocab, hidden]. Initialised as GPT-2: N(0, init_std^2)
// weights and embeddings, zero biases, unit norms, and the residual projections (c_proj) scaled
// by 1 / sqrt(2 * layers).
class Gpt2Model : public CausalLanguageModel {
 public:
  explicit Gpt2Model(const Gpt2Options& options);
  Tensor forward(const Tensor& tokens) override { return forward(tokens, nullptr); }
  Tensor forward(const Tensor& tokens, Tensor* dropout_key) override;
  Tensor forward(const Tensor& tokens, KvCache& cache) override;
  KvCache make_kv_cache(int64_t batch = 1) const override;
  int64_t vocab_size() const override { return options_.vocab_size; }
  int64_t context_length() const override { return options_.context_length; }
  // The final hidden states, after ln_f: [batch, T, hidden_size].
  Tensor hidden_states(const Tensor& tokens, Tensor* dropout_key = nullptr);
  const Gpt2Options& options() const { return options_; }
  std::string output_head_name() const override {
    return options_.tie_embeddings ? "transformer.wte.weight" : "lm_head.weight";
  }

  std::shared_ptr<Embedding> wte, wpe;
  std::vector<std::shared_ptr<Gpt2Block>> h;
  std::shared_ptr<LayerNorm> ln_f;
  Tensor lm_head_weight;  // untied only

 private:
  Gpt2Options options_;
  std::shared_ptr<Dropout> embedding_dropout_;
};

// Defaults are those of transformers' LlamaConfig (the 7B shape: set the sizes before building
// one); the Hugging Face key follows.
struct LlamaOptions {
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t layers = 32;                // num_hidden_layers
  int64_t heads = 32;                 // num_attention_heads
  int64_t kv_heads = 0;               // num_key_value_heads; 0: as many as heads
  int64_t context_length = 2048;      // max_position_embeddings
  double norm_eps = 1e-6;             // rms_norm_eps
  double rope_theta = 10000;
  bool attention_bias = false;
  bool mlp_bias = false;
  double attention_dropout = 0;
  double init_std = 0.02;             // initializer_range
  bool tie_embeddings = false;        // tie_word_embeddings
  DType dtype = DType::f32;
  uint64_t seed = 0;
};

// x + self_attn(input_layernorm(x)), then x + mlp(post_attention_layernorm(x)).
class LlamaBlock : public Module {
 public:
  LlamaBlock(const LlamaOptions& options, Generator& generator);
  Tensor forward(const Tensor& x) override { return forward(x, nullptr); }
  Tensor forward(const Tensor& x, Tensor* dropout_key);
  Tensor forward(const Tensor& x, KvCache& cache, int64_t layer);

  std::shared_ptr<CausalSelfAttention> self_attn;
  std::shared_ptr<SwiGluMlp> mlp;
  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm;
};

// Llama with its language-model head: tokens [batch, T] -> logits [batch, T, vocab_size], with
// rotary positions, so T is not bounded by the parameters (context_length is what the model
// was meant for, and what a T beyond it is refused against). Parameters are named as in
// LlamaForCausalLM (model.embed_tokens.weight, model.layers.0.self_attn.q_proj.weight, ...,
// lm_head.weight), initialised N(0, init_std^2) with unit norms.
class LlamaModel : public CausalLanguageModel {
 public:
  explicit LlamaModel(const LlamaOptions& options);
  Tensor forward(const Tensor& tokens) override { return forward(tokens, nullptr); }
  Tensor forward(const Tensor& tokens, Tensor* dropout_key) override;
  Tensor forward(const Tensor& tokens, KvCache& cache) override;
  KvCache make_kv_cache(int64_t batch = 1) const override;
  int64_t vocab_size() const override { return options_.vocab_size; }
  int64_t context_length() const override { return options_.context_length; }
  // The final hidden states, after the last norm: [batch, T, hidden_size].
  Tensor hidden_states(const Tensor& tokens, Tensor* dropout_key = nullptr);
  const LlamaOptions& options() const { return options_; }
  std::string output_head_name() const override {
    return options_.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  }

  std::shared_ptr<Embedding> embed_tokens;
  std::vector<std::shared_ptr<LlamaBlock>> layers;
  std::shared_ptr<RmsNorm> norm;
  Tensor lm_head_weight;  // untied only

 private:
  LlamaOptions options_;
};

}  // namespace eddy::nn
