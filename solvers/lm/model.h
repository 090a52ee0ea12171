#pragma once
// The model a language-model run trains: GPT-2 or Llama (src/eddy/nn/transformer.h) shaped by
// the config's model section and the tokenizer's vocabulary, with Hugging Face's parameter names.

#include <memory>
#include <optional>
#include <string>

#include "eddy/core/distribution.h"
#include "eddy/nn/transformer.h"
#include "solvers/lm/problem.h"

namespace eddy::lm {

std::shared_ptr<nn::CausalLanguageModel> make_model(const ModelSpec& spec, int64_t vocab_size, DType dtype,
                                                    uint64_t seed);

// The hidden units of each layer's MLP (the spec's, or the architecture's default for 0).
int64_t mlp_units(const ModelSpec& spec);

// Where tensor parallelism (Megatron's layout) puts the parameter called `name` on the mesh axis
// that splits heads, units and the vocabulary; nullopt: whole on every rank of it.
std::optional<Placement> tensor_parallel_placement(Architecture architecture, const std::string& name);

}  // namespace eddy::lm
