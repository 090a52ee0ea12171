#pragma once
// The model a language-model run trains: GPT-2 or Llama (src/eddy/nn/transformer.h) shaped by
// the config's model section and the tokenizer's vocabulary, with Hugging Face's parameter names.

#include <memory>

#include "eddy/nn/transformer.h"
#include "solvers/lm/problem.h"

namespace eddy::lm {

std::shared_ptr<nn::CausalLanguageModel> make_model(const ModelSpec& spec, int64_t vocab_size, DType dtype,
                                                    uint64_t seed);

}  // namespace eddy::lm
