#pragma once
// Hugging Face folders: what transformers' save_pretrained writes and from_pretrained reads, for
// GPT2LMHeadModel and LlamaForCausalLM, without any network. eddy's parameter names and layouts
// already are transformers' (transformer.h), so the tensors go across one for one; what this adds
// is config.json, the tokenizer's side files, and the checks that a folder is one eddy can run.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eddy/io/tokenizer.h"
#include "eddy/nn/transformer.h"

namespace eddy::lm {

// Writes into `dir` (created if missing), each file atomically:
//   config.json             GPT2Config or LlamaConfig of the model, float32, <|endoftext|> as
//                           bos and eos when the tokenizer has it;
//   model.safetensors       the state dict (a tied head is not written, as save_pretrained does);
//   tokenizer.json          the tokenizer as it is;
//   tokenizer_config.json   PreTrainedTokenizerFast with <|endoftext|> as bos/eos/unk and nothing
//                           added around the text, so AutoTokenizer gives eddy's ids;
//   generation_config.json  the bos and eos ids.
// Only Gpt2Model and LlamaModel are exported; another model is an error.
void save_hf_folder(const nn::CausalLanguageModel& model, const io::BpeTokenizer& tokenizer, const std::string& dir);

// The model in `dir`'s config.json and model.safetensors, as save_pretrained writes them for
// GPT2LMHeadModel and LlamaForCausalLM; weights of another float dtype are cast to float32. What
// eddy does not compute the same way (another architecture, rope_scaling, an activation other
// than GELU's, ...) is refused with an error naming the file and the key.
std::shared_ptr<nn::CausalLanguageModel> load_hf_model(const std::string& dir);

// Where a Hugging Face folder's generation stops (eos_token_id: an id or a list of ids) and what
// an empty prompt starts from (bos_token_id), as transformers' generate reads them: from
// generation_config.json, else config.json. Empty where neither names them.
struct SpecialTokenIds {
  std::vector<int32_t> end;
  std::optional<int32_t> start;
};
SpecialTokenIds hf_special_token_ids(const std::string& dir);

}  // namespace eddy::lm
