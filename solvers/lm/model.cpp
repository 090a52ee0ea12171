#include "solvers/lm/model.h"

namespace eddy::lm {

int64_t mlp_units(const ModelSpec& spec) {
  if (spec.intermediate_size > 0) return spec.intermediate_size;
  // GPT-2's MLP is 4x wide; Llama's SwiGLU keeps the parameter count of a 4x MLP with 2/3 of the
  // width (Shazeer 2020), rounded up to a multiple of 32 for the GEMMs.
  return spec.architecture == Architecture::gpt2 ? 4 * spec.hidden_size : (8 * spec.hidden_size / 3 + 31) / 32 * 32;
}

std::optional<Placement> tensor_parallel_placement(Architecture architecture, const std::string& name) {
  auto ends_with = [&](std::string_view suffix) { return name.ends_with(suffix); };
  // The [vocabulary, hidden] tables split by vocabulary rows (Megatron's vocabulary-parallel
  // embedding and output layer): the lookup and the cross-entropy find each token on its rank.
  for (const char* table : {"wte.weight", "embed_tokens.weight", "lm_head.weight"}) {
    if (ends_with(table)) return Placement::shard(0);
  }
  if (architecture == Architecture::llama) {
    // Projections are [out, in]: the column-parallel ones split their rows, the row-parallel ones
    // (after the split heads and units) their columns.
    for (const char* column : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "gate_proj.weight", "up_proj.weight",
                               "q_proj.bias", "k_proj.bias", "v_proj.bias", "gate_proj.bias", "up_proj.bias"}) {
      if (ends_with(column)) return Placement::shard(0);
    }
    if (ends_with("o_proj.weight") || ends_with("down_proj.weight")) return Placement::shard(1);
    return std::nullopt;
  }
  // GPT-2's MLP only, its weights [in, out]: the fused attention projection (c_attn) interleaves
  // queries, keys and values, so splitting its columns would not split the heads.
  if (ends_with("mlp.c_fc.weight")) return Placement::shard(1);
  if (ends_with("mlp.c_fc.bias")) return Placement::shard(0);
  if (ends_with("mlp.c_proj.weight")) return Placement::shard(0);
  return std::nullopt;
}

std::shared_ptr<nn::CausalLanguageModel> make_model(const ModelSpec& spec, int64_t vocab_size, DType dtype,
                                                    uint64_t seed) {
  if (spec.architecture == Architecture::gpt2) {
    nn::Gpt2Options o;
    o.vocab_size = vocab_size;
    o.context_length = spec.context;
    o.hidden_size = spec.hidden_size;
    o.layers = spec.layers;
    o.heads = spec.heads;
    o.intermediate_size = spec.intermediate_size;
    o.embedding_dropout = o.attention_dropout = o.residual_dropout = spec.dropout;
    o.tie_embeddings = spec.tie_embeddings;
    o.dtype = dtype;
    o.seed = seed;
    return std::make_shared<nn::Gpt2Model>(o);
  }
  nn::LlamaOptions o;
  o.vocab_size = vocab_size;
  o.context_length = spec.context;
  o.hidden_size = spec.hidden_size;
  o.intermediate_size = mlp_units(spec);
  o.layers = spec.layers;
  o.heads = spec.heads;
  o.kv_heads = spec.kv_heads;
  o.rope_theta = spec.rope_theta;
  o.attention_dropout = spec.dropout;
  o.tie_embeddings = spec.tie_embeddings;
  o.dtype = dtype;
  o.seed = seed;
  return std::make_shared<nn::LlamaModel>(o);
}

}  // namespace eddy::lm
