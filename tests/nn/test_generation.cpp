// Generation: the KV cache's incremental logits against the full forward, the sampler against
// probabilities worked out here, generate() against greedy decoding by full forwards, seeding,
// stopping, and the errors of bad prompts, options and cache use.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "eddy/eddy.h"
#include "eddy/nn/generation.h"
#include "support/expect_error.h"

namespace eddy::nn {
namespace {

Gpt2Options small_gpt2(DType dtype = DType::f64) {
  Gpt2Options options;
  options.vocab_size = 13;
  options.context_length = 12;
  options.hidden_size = 8;
  options.layers = 2;
  options.heads = 2;
  options.embedding_dropout = options.attention_dropout = options.residual_dropout = 0;
  options.init_std = 0.5;  // logits far enough apart that greedy and sampling differ
  options.dtype = dtype;
  options.seed = 3;
  return options;
}

LlamaOptions small_llama(DType dtype = DType::f64) {
  LlamaOptions options;
  options.vocab_size = 13;
  options.context_length = 12;
  options.hidden_size = 16;
  options.intermediate_size = 24;
  options.layers = 2;
  options.heads = 4;
  options.kv_heads = 2;  // grouped-query: two query heads per key/value head
  options.init_std = 0.5;
  options.dtype = dtype;
  options.seed = 5;
  return options;
}

std::vector<int32_t> random_tokens(int64_t count, int64_t vocab_size, uint64_t seed) {
  Generator generator(seed);
  const std::vector<double> draws = rand({count}, DType::f64, &generator).to_vector<double>();
  std::vector<int32_t> tokens;
  for (double u : draws) tokens.push_back(static_cast<int32_t>(u * double(vocab_size)));
  return tokens;
}

// Runs `tokens` [batch, T] through the cache in chunks of the given sizes, and returns the
// largest difference from the full forward's logits at the same positions.
double largest_cached_difference(CausalLanguageModel& model, const Tensor& tokens,
                                 const std::vector<int64_t>& chunks) {
  const Tensor full = model(tokens);
  KvCache cache = model.make_kv_cache(tokens.shape()[0]);
  double largest = 0;
  for (int64_t chunk : chunks) {
    const int64_t first = cache.length();
    const Tensor cached = model.forward(slice(tokens, 1, first, first + chunk), cache);
    EXPECT_EQ(cache.length(), first + chunk);
    const std::vector<double> expected = slice(full, 1, first, first + chunk).to_vector<double>();
    const std::vector<double> got = cached.to_vector<double>();
    EXPECT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) largest = std::max(largest, std::abs(got[i] - expected[i]));
  }
  return largest;
}

Tensor batch_of_sequences(int64_t batch, int64_t time, int64_t vocab_size) {
  std::vector<int32_t> tokens;
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<int32_t> sequence = random_tokens(time, vocab_size, 100 + b);
    tokens.insert(tokens.end(), sequence.begin(), sequence.end());
  }
  return tensor(tokens, {batch, time});
}

TEST(GenerationKvCache, Gpt2IncrementalLogitsEqualTheFullForward) {
  Gpt2Model model(small_gpt2());
  model.eval();
  const Tensor tokens = batch_of_sequences(2, 12, 13);
  // A prefill, single tokens, a chunk of three, and single tokens up to the full context.
  EXPECT_LT(largest_cached_difference(model, tokens, {4, 1, 1, 3, 1, 1, 1}), 1e-12);
}

TEST(GenerationKvCache, LlamaGroupedQueryIncrementalLogitsEqualTheFullForward) {
  LlamaModel model(small_llama());
  model.eval();
  const Tensor tokens = batch_of_sequences(2, 12, 13);
  EXPECT_LT(largest_cached_difference(model, tokens, {5, 1, 1, 2, 1, 1, 1}), 1e-12);
}

TEST(GenerationKvCache, UntiedHeadsAndOneTokenPrefillsMatchToo) {
  Gpt2Options gpt2_options = small_gpt2();
  gpt2_options.tie_embeddings = false;
  Gpt2Model gpt2(gpt2_options);
  gpt2.eval();
  LlamaOptions llama_options = small_llama();
  llama_options.kv_heads = 1;  // multi-query
  llama_options.tie_embeddings = true;
  LlamaModel llama(llama_options);
  llama.eval();
  const Tensor tokens = batch_of_sequences(1, 6, 13);
  const std::vector<int64_t> one_at_a_time(6, 1);
  EXPECT_LT(largest_cached_difference(gpt2, tokens, one_at_a_time), 1e-12);
  EXPECT_LT(largest_cached_difference(llama, tokens, one_at_a_time), 1e-12);
}

TEST(GenerationKvCache, ClearStartsAnotherSequence) {
  LlamaModel model(small_llama());
  model.eval();
  KvCache cache = model.make_kv_cache();
  model.forward(batch_of_sequences(1, 7, 13), cache);
  cache.clear();
  EXPECT_EQ(cache.length(), 0);
  const Tensor tokens = batch_of_sequences(1, 5, 13);
  const std::vector<double> cached = model.forward(tokens, cache).to_vector<double>();
  const std::vector<double> full = model(tokens).to_vector<double>();
  ASSERT_EQ(cached.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) EXPECT_NEAR(cached[i], full[i], 1e-12) << i;
}

TEST(GenerationKvCache, CachedForwardRecordsNoGraph) {
  Gpt2Model model(small_gpt2());
  model.eval();
  KvCache cache = model.make_kv_cache();
  const Tensor logits = model.forward(batch_of_sequences(1, 3, 13), cache);
  EXPECT_FALSE(logits.requires_grad());
  EXPECT_EQ(logits.shape(), (Shape{1, 3, 13}));
}

// The most likely token of each position, the lowest id among equals.
int32_t argmax(const std::vector<double>& values) {
  return static_cast<int32_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

std::vector<double> last_logits_of_full_forward(CausalLanguageModel& model, const std::vector<int32_t>& sequence) {
  const std::vector<double> logits = model(tensor(sequence, {1, int64_t(sequence.size())})).to_vector<double>();
  return std::vector<double>(logits.end() - model.vocab_size(), logits.end());
}

void expect_greedy_equals_argmax_of_full_forwards(CausalLanguageModel& model) {
  model.eval();
  const std::vector<int32_t> prompt = random_tokens(3, model.vocab_size(), 7);
  GenerationOptions options;
  options.temperature = 0;
  options.max_new_tokens = 8;
  std::vector<int32_t> streamed;
  const std::vector<int32_t> generated = generate(model, prompt, options, [&](int32_t id) { streamed.push_back(id); });
  ASSERT_EQ(generated.size(), 8u);
  EXPECT_EQ(streamed, generated);
  std::vector<int32_t> sequence = prompt;
  for (int32_t token : generated) {
    EXPECT_EQ(token, argmax(last_logits_of_full_forward(model, sequence))) << "after " << sequence.size();
    sequence.push_back(token);
  }
}

TEST(Generation, GreedyEqualsArgmaxOfTheFullForwardAtEveryStep) {
  Gpt2Model gpt2(small_gpt2());
  expect_greedy_equals_argmax_of_full_forwards(gpt2);
  LlamaModel llama(small_llama());
  expect_greedy_equals_argmax_of_full_forwards(llama);
}

TEST(Generation, Float32ModelsGenerateToo) {
  LlamaModel model(small_llama(DType::f32));
  expect_greedy_equals_argmax_of_full_forwards(model);
}

std::vector<int32_t> sample(CausalLanguageModel& model, GenerationOptions options, uint64_t seed) {
  options.seed = seed;
  options.max_new_tokens = 9;
  return generate(model, {1, 2}, options);
}

TEST(Generation, TheSameSeedGivesTheSameSampleAndOthersDiffer) {
  LlamaModel model(small_llama());
  const GenerationOptions options;  // temperature 1, no truncation
  const std::vector<int32_t> first = sample(model, options, 42);
  EXPECT_EQ(sample(model, options, 42), first);
  int differing = 0;
  for (uint64_t seed = 43; seed < 48; ++seed) differing += sample(model, options, seed) != first;
  EXPECT_GE(differing, 4);
}

TEST(Generation, SamplingIsNotGreedy) {
  Gpt2Model model(small_gpt2());
  GenerationOptions greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> greedy_tokens = sample(model, greedy, 0);
  int differing = 0;
  for (uint64_t seed = 0; seed < 5; ++seed) differing += sample(model, GenerationOptions{}, seed) != greedy_tokens;
  EXPECT_GE(differing, 4);
}

TEST(Generation, TopKOneTinyTopPAndTinyTemperatureAreGreedy) {
  for (bool llama : {false, true}) {
    std::unique_ptr<CausalLanguageModel> model;
    if (llama) {
      model = std::make_unique<LlamaModel>(small_llama());
    } else {
      model = std::make_unique<Gpt2Model>(small_gpt2());
    }
    GenerationOptions greedy;
    greedy.temperature = 0;
    const std::vector<int32_t> expected = sample(*model, greedy, 0);
    GenerationOptions top_k_one;
    top_k_one.top_k = 1;
    GenerationOptions tiny_top_p;
    tiny_top_p.top_p = 1e-9;
    GenerationOptions tiny_temperature;
    tiny_temperature.temperature = 1e-9;
    for (uint64_t seed = 0; seed < 3; ++seed) {
      EXPECT_EQ(sample(*model, top_k_one, seed), expected) << llama;
      EXPECT_EQ(sample(*model, tiny_top_p, seed), expected) << llama;
      EXPECT_EQ(sample(*model, tiny_temperature, seed), expected) << llama;
    }
  }
}

TEST(Generation, StopsAfterAStopToken) {
  Gpt2Model model(small_gpt2());
  const std::vector<int32_t> free_run = sample(model, GenerationOptions{}, 9);
  GenerationOptions options;
  options.stop_tokens = {free_run[3], 12};
  const std::vector<int32_t> stopped = sample(model, options, 9);
  const auto first_stop = std::find(free_run.begin(), free_run.end(), free_run[3]);
  EXPECT_EQ(stopped, std::vector<int32_t>(free_run.begin(), first_stop + 1));
}

TEST(Generation, StopsWhenTheContextIsFull) {
  LlamaModel model(small_llama());
  GenerationOptions options;
  options.max_new_tokens = 100;
  int streamed = 0;
  const auto count = [&](int32_t) { ++streamed; };
  EXPECT_EQ(generate(model, random_tokens(9, 13, 1), options, count).size(), 3u);  // context 12
  EXPECT_EQ(streamed, 3);
  EXPECT_TRUE(generate(model, random_tokens(12, 13, 1), options, count).empty());
  options.max_new_tokens = 0;
  EXPECT_TRUE(generate(model, {4}, options, count).empty());
  EXPECT_EQ(streamed, 3);
}

TEST(Generation, RunsInEvalModeAndRestoresTheModelsMode) {
  Gpt2Options with_dropout = small_gpt2();
  with_dropout.embedding_dropout = with_dropout.attention_dropout = with_dropout.residual_dropout = 0.5;
  Gpt2Model model(with_dropout);
  GenerationOptions greedy;
  greedy.temperature = 0;
  ASSERT_TRUE(model.is_training());
  const std::vector<int32_t> from_training_mode = sample(model, greedy, 0);
  EXPECT_TRUE(model.is_training());
  model.eval();
  EXPECT_EQ(sample(model, greedy, 0), from_training_mode);
  EXPECT_FALSE(model.is_training());
}

// ---- the sampler on logits whose probabilities are known ----

Tensor logits_of(const std::vector<double>& probabilities) {
  std::vector<double> logits;
  for (double p : probabilities) logits.push_back(std::log(p) + 3);  // a shift changes nothing
  return tensor(logits);
}

GenerationOptions sampling(double temperature, int64_t top_k = 0, double top_p = 1) {
  GenerationOptions options;
  options.temperature = temperature;
  options.top_k = top_k;
  options.top_p = top_p;
  return options;
}

// How often each token is chosen when the draw sweeps [0, 1) evenly.
std::vector<double> frequencies(const Tensor& logits, const GenerationOptions& options, int draws = 10000) {
  std::vector<double> counts(logits.numel(), 0);
  for (int i = 0; i < draws; ++i) counts[sample_token(logits, options, (i + 0.5) / draws)] += 1.0 / draws;
  return counts;
}

void expect_frequencies(const std::vector<double>& got, const std::vector<double>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 2e-4) << "token " << i;
}

TEST(SampleToken, DrawsEachTokenWithItsSoftmaxProbability) {
  const Tensor logits = logits_of({0.5, 0.3, 0.2});
  EXPECT_EQ(sample_token(logits, sampling(1), 0.1), 0);
  EXPECT_EQ(sample_token(logits, sampling(1), 0.55), 1);
  EXPECT_EQ(sample_token(logits, sampling(1), 0.85), 2);
  expect_frequencies(frequencies(logits, sampling(1)), {0.5, 0.3, 0.2});
  expect_frequencies(frequencies(cast(logits, DType::f32), sampling(1)), {0.5, 0.3, 0.2});
}

// An embedding padded past the tokenizer's tokens (50304 rows for GPT-2's 50257): a Hugging Face
// model of vocab_size 410 with a 400-token tokenizer sampled id 405 and failed to decode it.
TEST(SampleToken, AVocabularyLimitLeavesTheIdsPastItOut) {
  const Tensor logits = logits_of({0.1, 0.2, 0.3, 0.4});
  GenerationOptions limited = sampling(1);
  limited.vocabulary = 2;
  expect_frequencies(frequencies(logits, limited), {0.1 / 0.3, 0.2 / 0.3, 0, 0});
  limited.temperature = 0;
  EXPECT_EQ(sample_token(logits, limited, 0.5), 1);
}

TEST(SampleToken, TemperatureRaisesProbabilitiesToItsInversePower) {
  const Tensor logits = logits_of({0.5, 0.3, 0.2, 0.0001});
  for (double temperature : {0.5, 2.0}) {
    std::vector<double> expected;
    double total = 0;
    for (double p : {0.5, 0.3, 0.2, 0.0001}) total += std::pow(p, 1 / temperature);
    for (double p : {0.5, 0.3, 0.2, 0.0001}) expected.push_back(std::pow(p, 1 / temperature) / total);
    expect_frequencies(frequencies(logits, sampling(temperature)), expected);
  }
}

TEST(SampleToken, TopKRenormalisesOverTheKMostLikely) {
  const Tensor logits = logits_of({0.1, 0.4, 0.05, 0.25, 0.2});
  expect_frequencies(frequencies(logits, sampling(1, 2)), {0, 0.4 / 0.65, 0, 0.25 / 0.65, 0});
  expect_frequencies(frequencies(logits, sampling(1, 3)), {0, 0.4 / 0.85, 0, 0.25 / 0.85, 0.2 / 0.85});
  expect_frequencies(frequencies(logits, sampling(1, 50)), {0.1, 0.4, 0.05, 0.25, 0.2});
  // A top_k that keeps every token draws what top_k = 0 draws, draw for draw (it sorted the
  // candidates first, so a seed gave other text).
  for (int i = 0; i < 100; ++i) {
    const double draw = (i + 0.5) / 100;
    for (int64_t k : {5, 6, 50}) EXPECT_EQ(sample_token(logits, sampling(1, k), draw), sample_token(logits, sampling(1), draw));
  }
}

TEST(SampleToken, TopPKeepsTheFewestTokensThatReachIt) {
  const Tensor logits = logits_of({0.1, 0.4, 0.05, 0.25, 0.2});
  expect_frequencies(frequencies(logits, sampling(1, 0, 0.3)), {0, 1, 0, 0, 0});
  expect_frequencies(frequencies(logits, sampling(1, 0, 0.6)), {0, 0.4 / 0.65, 0, 0.25 / 0.65, 0});
  expect_frequencies(frequencies(logits, sampling(1, 0, 0.9)), {0.1 / 0.95, 0.4 / 0.95, 0, 0.25 / 0.95, 0.2 / 0.95});
  // After top-k, top-p takes its share of what top-k kept: 0.4 / 0.85 < 0.5 needs the second.
  expect_frequencies(frequencies(logits, sampling(1, 3, 0.5)), {0, 0.4 / 0.65, 0, 0.25 / 0.65, 0});
}

TEST(SampleToken, GreedyPicksTheLowestIdAmongEqualsAndSkipsMinusInfinity) {
  constexpr double minus_infinity = -std::numeric_limits<double>::infinity();
  const Tensor tied = tensor<double>({1, 3, 3, -2});
  for (double u : {0.0, 0.5, 0.999}) {
    EXPECT_EQ(sample_token(tied, sampling(0), u), 1);
    EXPECT_EQ(sample_token(tied, sampling(1, 1), u), 1);
  }
  const Tensor two_finite = tensor<double>({minus_infinity, 0, minus_infinity, 0});
  expect_frequencies(frequencies(two_finite, sampling(1)), {0, 0.5, 0, 0.5});
  expect_frequencies(frequencies(two_finite, sampling(1, 0, 0.2)), {0, 1, 0, 0});
}

TEST(SampleToken, TinyTemperatureSplitsOnlyBetweenExactTies) {
  expect_frequencies(frequencies(tensor<double>({1, 3, 2.999999, 3}), sampling(1e-300)), {0, 0.5, 0, 0.5});
  EXPECT_EQ(sample_token(tensor<double>({1, 3, 2.999999, 2}), sampling(1e-300), 0.999), 1);
}

// ---- errors ----

TEST(Generation, BadPromptsAndOptionsNameTheirValues) {
  Gpt2Model model(small_gpt2());
  const auto run = [&](const std::vector<int32_t>& prompt, const GenerationOptions& options) {
    generate(model, prompt, options);
  };
  expect_error([&] { run({}, {}); }, {"generate", "prompt is empty"});
  expect_error([&] { run(std::vector<int32_t>(13, 1), {}); }, {"13 tokens", "context length 12"});
  expect_error([&] { run({1, 13}, {}); }, {"prompt position 1", "token 13", "[0, 13)"});
  expect_error([&] { run({-1}, {}); }, {"prompt position 0", "token -1"});
  GenerationOptions options;
  options.stop_tokens = {2, 20};
  expect_error([&] { run({1}, options); }, {"stop token 1", "token 20", "[0, 13)"});
  expect_error([&] { run({1}, sampling(-0.5)); }, {"temperature", "non-negative", "-0.5"});
  expect_error([&] { run({1}, sampling(std::nan(""))); }, {"temperature", "nan"});
  expect_error([&] { run({1}, sampling(1, -2)); }, {"top_k", "-2"});
  expect_error([&] { run({1}, sampling(1, 0, 0)); }, {"top_p", "(0, 1]", "got 0"});
  expect_error([&] { run({1}, sampling(1, 0, 1.5)); }, {"top_p", "(0, 1]", "1.5"});
  options = {};
  options.max_new_tokens = -1;
  expect_error([&] { run({1}, options); }, {"max_new_tokens", "-1"});
}

TEST(SampleToken, BadLogitsAndDrawsNameThem) {
  expect_error([&] { sample_token(zeros({2, 3}, DType::f64), {}, 0.5); }, {"sample_token", "[vocab]", "[2, 3]"});
  expect_error([&] { sample_token(zeros({3}, DType::i32), {}, 0.5); }, {"sample_token", "int32"});
  expect_error([&] { sample_token(tensor<double>({0, std::nan("")}), {}, 0.5); }, {"logit 1", "nan"});
  const double minus_infinity = -std::numeric_limits<double>::infinity();
  expect_error([&] { sample_token(tensor<double>({minus_infinity, minus_infinity}), {}, 0.5); },
               {"every logit", "-inf"});
  expect_error([&] { sample_token(tensor<double>({0, 1}), {}, 1.0); }, {"uniform", "[0, 1)", "got 1"});
}

TEST(GenerationKvCache, MisuseIsRefusedWithTheSizesInvolved) {
  Gpt2Model model(small_gpt2());
  KvCache cache = model.make_kv_cache();
  expect_error([&] { model.forward(batch_of_sequences(1, 2, 13), cache); }, {"Gpt2Model", "inference", "eval()"});
  model.eval();
  model.forward(batch_of_sequences(1, 10, 13), cache);
  expect_error([&] { model.forward(batch_of_sequences(1, 3, 13), cache); },
               {"Gpt2Model", "3 tokens after the 10 cached", "context length 12"});
  EXPECT_EQ(cache.length(), 10);  // a refused call leaves the cache as it was
  expect_error([&] { model.forward(batch_of_sequences(2, 1, 13), cache); }, {"batch of 2", "batch 1"});
  LlamaOptions multi_query = small_llama();
  multi_query.kv_heads = 1;
  LlamaModel llama(multi_query);
  llama.eval();
  cache.clear();
  expect_error([&] { llama.forward(batch_of_sequences(1, 1, 13), cache); },
               {"KvCache: layer 0", "[1, 2, time, 4]", "[1, 1, 1, 4]"});
  KvCache small(1, 1, 2, 3, 4, DType::f64);
  expect_error([&] { small.append(0, zeros({1, 2, 4, 4}, DType::f64), zeros({1, 2, 4, 4}, DType::f64)); },
               {"4 positions after the 0 cached", "capacity 3"});
  expect_error([&] { small.append(1, zeros({1, 2, 1, 4}, DType::f64), zeros({1, 2, 1, 4}, DType::f64)); },
               {"layer 1", "1 cached"});
  expect_error([&] { small.append(0, zeros({1, 2, 1, 4}, DType::f32), zeros({1, 2, 1, 4}, DType::f32)); },
               {"float64", "float32"});
  expect_error([&] { KvCache empty(0, 1, 2, 3, 4, DType::f64); }, {"KvCache", "positive", "got 0"});
}

}  // namespace
}  // namespace eddy::nn
