#include "eddy/nn/generation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string_view>

#include "eddy/core/autograd.h"
#include "eddy/ops/ops.h"

namespace eddy::nn {
namespace {

void check_sampling(std::string_view where, const GenerationOptions& options) {
  EDDY_CHECK(std::isfinite(options.temperature) && options.temperature >= 0, where,
             ": temperature must be finite and non-negative (0 is greedy), got ", options.temperature);
  EDDY_CHECK(options.top_k >= 0, where, ": top_k must be non-negative (0 keeps every token), got ", options.top_k);
  EDDY_CHECK(options.top_p > 0 && options.top_p <= 1, where, ": top_p must be in (0, 1], got ", options.top_p);
  EDDY_CHECK(options.vocabulary >= 0, where, ": vocabulary must be non-negative (0 keeps every id), got ",
             options.vocabulary);
}

void check_token(std::string_view what, int64_t index, int32_t token, int64_t vocab_size) {
  EDDY_CHECK(token >= 0 && token < vocab_size, "generate: ", what, " ", index, " is token ", token,
             ", outside the vocabulary [0, ", vocab_size, ")");
}

// Puts a model in eval mode for a scope, so no dropout touches the logits, and restores its mode.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Module& model) : model_(model), was_training_(model.is_training()) { model_.eval(); }
  ~EvalModeGuard() { model_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Module& model_;
  bool was_training_;
};

bool is_greedy(const GenerationOptions& options) { return options.temperature == 0 || options.top_k == 1; }

// The logits of the last position of a batch of one: [1, T, vocab] -> [vocab].
Tensor last_position(const Tensor& logits) {
  const int64_t time = logits.shape()[1];
  return reshape(slice(logits, 1, time - 1, time), {logits.shape()[2]});
}

}  // namespace

int32_t sample_token(const Tensor& logits, const GenerationOptions& options, double uniform) {
  check_sampling("sample_token", options);
  EDDY_CHECK(logits.dim() == 1 && logits.numel() > 0 && is_floating(logits.dtype()), "sample_token: logits ",
             "must be a non-empty float32 or float64 [vocab], got ", logits.dtype(), " of shape ", logits.shape());
  EDDY_CHECK(uniform >= 0 && uniform < 1, "sample_token: uniform must be in [0, 1), got ", uniform);
  std::vector<double> values = logits.to_vector<double>();
  if (options.vocabulary > 0 && static_cast<size_t>(options.vocabulary) < values.size()) {
    values.resize(static_cast<size_t>(options.vocabulary));
  }
  constexpr double infinity = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < values.size(); ++i) {
    EDDY_CHECK(!std::isnan(values[i]) && values[i] != infinity, "sample_token: logit ", i, " is ", values[i]);
  }
  // The greedy pick is the first of the largest logits, so the lower id wins among equals.
  const auto largest = std::max_element(values.begin(), values.end());
  EDDY_CHECK(*largest > -infinity, "sample_token: every logit is -inf");
  if (is_greedy(options)) return static_cast<int32_t>(largest - values.begin());

  // Most likely first, and the lower id first among equals, as for the greedy pick.
  const auto more_likely = [&](int32_t a, int32_t b) {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  };
  std::vector<int32_t> candidates(values.size());
  std::iota(candidates.begin(), candidates.end(), 0);
  // A top_k that keeps every token leaves the order, and so a seeded draw, as top_k = 0 does.
  const size_t kept = options.top_k > 0 ? std::min(values.size(), size_t(options.top_k)) : values.size();
  if (kept < values.size() || options.top_p < 1) {
    std::partial_sort(candidates.begin(), candidates.begin() + kept, candidates.end(), more_likely);
    candidates.resize(kept);
  }
  const double most_likely = *largest;

  // Weights relative to the most likely token, exp((logit - max) / temperature) <= 1: none
  // overflows however small the temperature, and the most likely always weighs 1.
  std::vector<double> cumulative(candidates.size());
  double total = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    total += std::exp((values[candidates[i]] - most_likely) / options.temperature);
    cumulative[i] = total;
  }
  // The nucleus: the shortest run of the most likely tokens whose share of the weight reaches
  // top_p. With top_p < 1 the bound top_p * total lies below the last cumulative weight, total.
  auto nucleus_end = cumulative.end();
  if (options.top_p < 1) {
    nucleus_end = std::lower_bound(cumulative.begin(), cumulative.end(), options.top_p * total) + 1;
  }
  // Inverse transform sampling: the first token whose cumulative weight exceeds the draw; tokens
  // of zero weight never do.
  const double target = uniform * *(nucleus_end - 1);
  const auto chosen = std::upper_bound(cumulative.begin(), nucleus_end, target);
  return candidates[std::min(chosen, nucleus_end - 1) - cumulative.begin()];
}

std::vector<int32_t> generate(CausalLanguageModel& model, const std::vector<int32_t>& prompt,
                              const GenerationOptions& options, const std::function<void(int32_t)>& on_token) {
  check_sampling("generate", options);
  EDDY_CHECK(options.max_new_tokens >= 0, "generate: max_new_tokens must be non-negative, got ",
             options.max_new_tokens);
  const int64_t prompt_length = static_cast<int64_t>(prompt.size()), context = model.context_length();
  EDDY_CHECK(prompt_length > 0, "generate: the prompt is empty; it needs at least one token");
  EDDY_CHECK(prompt_length <= context, "generate: the prompt's ", prompt_length,
             " tokens exceed the model's context length ", context);
  for (size_t i = 0; i < prompt.size(); ++i) check_token("prompt position", int64_t(i), prompt[i], model.vocab_size());
  for (size_t i = 0; i < options.stop_tokens.size(); ++i) {
    check_token("stop token", int64_t(i), options.stop_tokens[i], model.vocab_size());
  }

  NoGradGuard no_graph;
  EvalModeGuard eval_mode(model);
  // The cache, the tokens and the draws where the model's weights are.
  DefaultDeviceScope on_model_device(model.parameters().front().device());
  KvCache cache = model.make_kv_cache(1);
  Tensor logits = last_position(model.forward(tensor(prompt, {1, prompt_length}), cache));
  const int64_t new_tokens = std::min(options.max_new_tokens, context - prompt_length);
  std::vector<int32_t> generated;
  for (int64_t i = 0; i < new_tokens; ++i) {
    // Greedy picks ignore the draw, so none is made for them.
    const double draw =
        is_greedy(options) ? 0.0 : uniform(random_key(options.seed, uint64_t(i)), {1}, DType::f64).item<double>();
    const int32_t token = sample_token(logits, options, draw);
    generated.push_back(token);
    if (on_token) on_token(token);
    const bool stop = std::ranges::find(options.stop_tokens, token) != options.stop_tokens.end();
    if (stop || i + 1 == new_tokens) break;
    logits = last_position(model.forward(tensor(std::vector<int32_t>{token}, {1, 1}), cache));
  }
  return generated;
}

}  // namespace eddy::nn
