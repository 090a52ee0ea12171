#pragma once
// The model a language-model run trains: GPT-2 or Llama (src/eddy/nn/transformer.h) shaped by
// the config's model section and the tokenizer's vocabulary, with Hugging Face's parameter names.

#include <functional>
#include <memory>

#include "eddy/nn/transformer.h"
#include "solvers/lm/problem.h"

namespace eddy::lm {

struct LanguageModel {
  std::shared_ptr<nn::Gpt2Model> gpt2;    // one of the two is set
  std::shared_ptr<nn::LlamaModel> llama;

  nn::Module& module() const;
  // tokens [batch, T] -> logits [batch, T, vocab]; dropout masks from `dropout_key` (see
  // transformer.h), none in eval mode.
  Tensor logits(const Tensor& tokens, Tensor* dropout_key = nullptr) const;
  int64_t context() const;
  int64_t vocab_size() const;
};

LanguageModel make_model(const ModelSpec& spec, int64_t vocab_size, DType dtype, uint64_t seed);

}  // namespace eddy::lm
