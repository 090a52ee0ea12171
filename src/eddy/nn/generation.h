#pragma once
// Text generation with the decoder-only language models of transformer.h: the prompt runs once
// through the model, filling a KvCache, then each new token runs alone against that cache, and
// the next token is chosen from its logits: greedily, or sampled with temperature, top-k and
// top-p (nucleus, Holtzman et al. 2020). Sampling is seeded and reproducible: the draw for the
// i-th new token is uniform(random_key(seed, i)), the same on every run, thread count and device.

#include <cstdint>
#include <functional>
#include <vector>

#include "eddy/nn/transformer.h"

namespace eddy::nn {

struct GenerationOptions {
  // At most this many new tokens; fewer when a stop token comes first or the context fills.
  int64_t max_new_tokens = 64;
  // Logits are divided by it before sampling: below 1 sharpens, above 1 flattens. 0 is greedy
  // (the most likely token, the lowest id among equals); as it tends to 0, sampling tends to
  // greedy.
  double temperature = 1;
  // Sample among the k most likely tokens only; 0 keeps all, 1 is greedy.
  int64_t top_k = 0;
  // Sample among the fewest most likely tokens whose probability (after temperature and top-k)
  // reaches top_p; in (0, 1], 1 keeps all, a tiny value is greedy.
  double top_p = 1;
  uint64_t seed = 0;
  // Only ids below this are chosen (0: every id): for a model whose embedding is padded past its
  // tokenizer's tokens (50304 rows for GPT-2's 50257), whose extra ids no tokenizer can decode.
  int64_t vocabulary = 0;
  // Generation ends after any of these is produced (it is returned and passed on like the rest).
  std::vector<int32_t> stop_tokens;
};

// The next token after `logits` [vocab] (float32 or float64), chosen as `options` ask (its
// temperature, top_k and top_p); `uniform` in [0, 1) is the random draw that picks the sample.
int32_t sample_token(const Tensor& logits, const GenerationOptions& options, double uniform);

// Continues `prompt` (token ids, 1 to context_length of them) and returns the new tokens,
// calling on_token(id) as each is chosen, so a caller can stream them. The sequence never grows
// past the model's context: generation stops when prompt and new tokens fill it. Runs without
// recording a graph and with the model in eval mode (its mode is restored after).
std::vector<int32_t> generate(CausalLanguageModel& model, const std::vector<int32_t>& prompt,
                              const GenerationOptions& options,
                              const std::function<void(int32_t)>& on_token = {});

}  // namespace eddy::nn
