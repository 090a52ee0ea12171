#include "solvers/lm/model.h"

namespace eddy::lm {

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
  // Llama's SwiGLU keeps the parameter count of a 4x MLP with 2/3 of the width (Shazeer 2020),
  // rounded up to a multiple of 32 for the GEMMs.
  o.intermediate_size =
      spec.intermediate_size > 0 ? spec.intermediate_size : (8 * spec.hidden_size / 3 + 31) / 32 * 32;
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
