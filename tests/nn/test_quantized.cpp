// Quantisation: packing against the rounding worked out here, the kernels against a float
// product of the dequantised weights and the rounded activations, odd sizes, quantised models
// against float ones, the state dict round trip and the errors.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "eddy/eddy.h"
#include "eddy/nn/generation.h"
#include "eddy/nn/quantized.h"
#include "support/expect_error.h"

namespace eddy::nn {
namespace {

Tensor random_matrix(int64_t rows, int64_t columns, uint64_t seed) {
  Generator generator(seed);
  return randn({rows, columns}, DType::f32, &generator);
}

// x W^T in double from the dequantised weights: what the kernels must give to float rounding.
std::vector<double> reference_product(const Tensor& x, const Tensor& weights) {
  const std::vector<float> a = x.to_vector<float>(), w = weights.to_vector<float>();
  const int64_t columns = weights.shape()[1], rows = weights.shape()[0], n = x.numel() / columns;
  std::vector<double> out(static_cast<size_t>(n * rows), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < columns; ++c) out[i * rows + r] += double(a[i * columns + c]) * w[r * columns + c];
    }
  }
  return out;
}

// What quantised products multiply: each run of 32 columns of each row of x rounded to a multiple of
// its largest magnitude / 127 (quantized.h).
Tensor rounded_activations(const Tensor& x) {
  std::vector<float> values = x.to_vector<float>();
  const int64_t columns = x.shape().back();
  for (int64_t start = 0; start < int64_t(values.size()); start += columns) {
    for (int64_t run = start; run < start + columns; run += 32) {
      const int64_t end = std::min(run + 32, start + columns);
      float extent = 0;
      for (int64_t i = run; i < end; ++i) extent = std::max(extent, std::abs(values[i]));
      const float scale = extent / 127.0f;
      for (int64_t i = run; i < end; ++i) values[i] = scale > 0 ? std::nearbyint(values[i] / scale) * scale : 0.0f;
    }
  }
  return tensor<float>(values, x.shape());
}

void expect_product_matches(int bits, int64_t rows, int64_t columns, int64_t group, int64_t n) {
  SCOPED_TRACE(testing::Message() << "int" << bits << " " << rows << "x" << columns << " group " << group
                                  << " rows of x " << n);
  const QuantizedMatrix m = quantize_matrix(random_matrix(rows, columns, 1), bits, group);
  const Tensor x = random_matrix(n, columns, 2);
  const std::vector<double> expected = reference_product(rounded_activations(x), dequantize(m));
  NoGradGuard no_grad;
  const std::vector<float> got = quantized_matmul(x, m).to_vector<float>();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5 * std::sqrt(double(columns)) * 4);
  // With a bias, each output row gains it exactly (it is added to the finished product).
  const Tensor bias = reshape(random_matrix(1, rows, 3), {rows});
  const std::vector<float> b = bias.to_vector<float>(), biased = quantized_matmul(x, m, bias).to_vector<float>();
  ASSERT_EQ(biased.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(biased[i], got[i] + b[i % size_t(rows)]) << i;
}

TEST(Quantized, Int8RowsRoundToTheNearestStepOfTheirScale) {
  const Tensor w = tensor<float>({1.0f, -0.5f, 0.25f, 0.0f, 0.3f, 2.54f, -2.54f, 1.0f}, {2, 4});
  const QuantizedMatrix m = quantize_matrix(w, 8);
  const std::vector<float> scales = m.scales.to_vector<float>();
  EXPECT_FLOAT_EQ(scales[0], 1.0f / 127);
  EXPECT_FLOAT_EQ(scales[1], 2.54f / 127);
  const std::vector<float> back = dequantize(m).to_vector<float>();
  const std::vector<int> steps{127, -64, 32, 0, 15, 127, -127, 50};  // round(w / scale), halves away from 0
  for (size_t i = 0; i < back.size(); ++i) EXPECT_FLOAT_EQ(back[i], steps[i] * scales[i / 4]) << i;
}

TEST(Quantized, Int4GroupsHaveTheirOwnScaleAndClampToSeven) {
  std::vector<float> values(64, 0.0f);
  for (int c = 0; c < 32; ++c) values[c] = 0.7f * float(c % 11 - 5) / 5;  // group 0: extent 0.7
  for (int c = 32; c < 64; ++c) values[c] = float(c - 48);                 // group 1: extent 16
  const QuantizedMatrix m = quantize_matrix(tensor<float>(values, {1, 64}), 4, 32);
  const std::vector<float> scales = m.scales.to_vector<float>(), back = dequantize(m).to_vector<float>();
  ASSERT_EQ(scales.size(), 2u);
  EXPECT_FLOAT_EQ(scales[0], 0.7f / 7);
  EXPECT_FLOAT_EQ(scales[1], 16.0f / 7);
  for (int c = 0; c < 64; ++c) {
    const float scale = scales[c / 32];
    const long step = std::lround(values[c] / scale);
    EXPECT_GE(step, -7);
    EXPECT_LE(step, 7);
    EXPECT_FLOAT_EQ(back[c], float(step) * scale) << c;
  }
}

TEST(Quantized, ErrorIsWithinHalfAStepOfEachScale) {
  const Tensor w = random_matrix(40, 200, 5);
  for (const auto& [bits, group] : {std::pair{8, 0}, std::pair{4, 32}, std::pair{4, 64}, std::pair{4, 128}}) {
    const QuantizedMatrix m = quantize_matrix(w, bits, group);
    const std::vector<float> original = w.to_vector<float>(), back = dequantize(m).to_vector<float>();
    const std::vector<float> scales = m.scales.to_vector<float>();
    const int64_t groups = m.scales.shape()[1];
    for (int64_t r = 0; r < 40; ++r) {
      for (int64_t c = 0; c < 200; ++c) {
        const float scale = scales[r * groups + c / m.group];
        ASSERT_LE(std::abs(back[r * 200 + c] - original[r * 200 + c]), 0.5f * scale * 1.0001f)
            << "int" << bits << " group " << group << " at " << r << ", " << c;
      }
    }
  }
}

TEST(Quantized, PackedSizes) {
  const QuantizedMatrix int8 = quantize_matrix(random_matrix(3, 10, 1), 8);
  EXPECT_EQ(int8.packed.shape(), (Shape{3, 3}));  // 10 bytes padded to 3 words
  EXPECT_EQ(int8.scales.shape(), (Shape{3, 1}));
  const QuantizedMatrix int4 = quantize_matrix(random_matrix(3, 100, 1), 4, 64);
  EXPECT_EQ(int4.packed.shape(), (Shape{3, 16}));  // 2 groups of 64 nibbles: 64 bytes
  EXPECT_EQ(int4.scales.shape(), (Shape{3, 2}));
}

TEST(Quantized, MatrixVectorAndMatrixProductsMatchTheDequantisedWeights) {
  for (int64_t n : {1, 3, 70}) {
    expect_product_matches(8, 130, 96, 0, n);
    expect_product_matches(8, 17, 37, 0, n);  // columns neither a multiple of 16 nor of 4
    expect_product_matches(8, 5, 100, 0, n);  // a row of one and a half 64-byte chunks
    expect_product_matches(4, 130, 128, 32, n);
    expect_product_matches(4, 65, 320, 64, n);
    expect_product_matches(4, 9, 300, 128, n);  // a short last group
    expect_product_matches(4, 5, 45, 32, n);    // a last group shorter than a run of 32
    expect_product_matches(4, 3, 16, 32, n);    // fewer columns than one run
    expect_product_matches(4, 11, 200, 96, n);  // groups that straddle 128-column chunks, a short last one
    expect_product_matches(4, 6, 384, 96, n);
  }
}

TEST(Quantized, LeadingAxesAreKept) {
  const QuantizedMatrix m = quantize_matrix(random_matrix(6, 64, 1), 4, 32);
  NoGradGuard no_grad;
  EXPECT_EQ(quantized_matmul(reshape(random_matrix(2 * 3, 64, 2), {2, 3, 64}), m).shape(), (Shape{2, 3, 6}));
  EXPECT_EQ(quantized_matmul(zeros({64}, DType::f32), m).shape(), (Shape{6}));
}

Gpt2Options gpt2_options() {
  Gpt2Options options;
  options.vocab_size = 50;
  options.context_length = 16;
  options.hidden_size = 64;
  options.layers = 2;
  options.heads = 4;
  options.embedding_dropout = options.attention_dropout = options.residual_dropout = 0;
  options.seed = 4;
  return options;
}

LlamaOptions llama_options() {
  LlamaOptions options;
  options.vocab_size = 50;
  options.context_length = 16;
  options.hidden_size = 64;
  options.intermediate_size = 96;  // 96 columns in down_proj: one and a half groups of 64
  options.layers = 2;
  options.heads = 4;
  options.kv_heads = 2;
  options.seed = 4;
  return options;
}

Tensor some_tokens() { return tensor<int64_t>({1, 7, 3, 9, 22, 41, 5, 0, 13, 2}, {1, 10}); }

// The largest difference of two models' logits over some tokens, relative to the largest logit.
double relative_logit_difference(CausalLanguageModel& a, CausalLanguageModel& b) {
  NoGradGuard no_grad;
  const std::vector<float> x = a(some_tokens()).to_vector<float>(), y = b(some_tokens()).to_vector<float>();
  double largest = 0, difference = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    largest = std::max(largest, std::abs(double(x[i])));
    difference = std::max(difference, std::abs(double(x[i]) - y[i]));
  }
  return difference / largest;
}

template <typename Model, typename Options>
void expect_quantised_close(const Options& options) {
  for (const auto& [bits, tolerance] : {std::pair{8, 0.02}, std::pair{4, 0.25}}) {
    SCOPED_TRACE(testing::Message() << "int" << bits);
    Model reference(options), quantised(options);
    quantised.eval();
    reference.eval();
    quantize_model(quantised, {bits, 64});
    const double difference = relative_logit_difference(reference, quantised);
    EXPECT_LT(difference, tolerance);
    EXPECT_GT(difference, 0);  // the quantised layers are in use
  }
}

TEST(Quantized, ModelLogitsStayCloseToFloat) {
  expect_quantised_close<Gpt2Model>(gpt2_options());
  expect_quantised_close<LlamaModel>(llama_options());
}

TEST(Quantized, CachedDecodingEqualsTheFullForward) {
  LlamaModel model(llama_options());
  model.eval();
  quantize_model(model, {4, 32});
  NoGradGuard no_grad;
  const std::vector<float> full = model(some_tokens()).to_vector<float>();
  KvCache cache = model.make_kv_cache();
  std::vector<float> stepped;
  const std::vector<int64_t> ids = some_tokens().to_vector<int64_t>();
  for (int64_t id : ids) {
    const std::vector<float> logits = model.forward(tensor<int64_t>({id}, {1, 1}), cache).to_vector<float>();
    stepped.insert(stepped.end(), logits.begin(), logits.end());
  }
  ASSERT_EQ(full.size(), stepped.size());
  for (size_t i = 0; i < full.size(); ++i) EXPECT_NEAR(full[i], stepped[i], 1e-4) << i;
}

TEST(Quantized, StateDictRoundTripGivesTheSameLogits) {
  for (int bits : {8, 4}) {
    Gpt2Model model(gpt2_options());
    model.eval();
    quantize_model(model, {bits, 32});
    const StateDict state = quantized_state_dict(model);
    EXPECT_EQ(state.count("transformer.h.0.attn.c_attn.weight"), 0u);
    EXPECT_EQ(state.at("transformer.h.0.attn.c_attn.weight.packed").dtype(), DType::i32);
    Gpt2Options other_seed = gpt2_options();
    other_seed.seed = 9;
    Gpt2Model loaded(other_seed);
    loaded.eval();
    load_quantized_state_dict(loaded, state, {bits, 32});
    EXPECT_EQ(relative_logit_difference(model, loaded), 0) << "int" << bits;
    EXPECT_NE(loaded.h[1]->mlp->c_fc->quantized_weight(), nullptr);
    EXPECT_EQ(state.count("transformer.wte.weight"), 0u);  // the tied head, packed
    EXPECT_EQ(state.at("transformer.wte.weight.packed").dtype(), DType::i32);
    EXPECT_NE(loaded.quantized_head(), nullptr);
  }
}

TEST(Quantized, TheHeadIsQuantisedAndItsFloatWeightHoldsTheDequantisedValues) {
  Gpt2Model tied(gpt2_options());
  quantize_model(tied, {4, 32});
  ASSERT_NE(tied.quantized_head(), nullptr);
  EXPECT_EQ(tied.output_head_name(), "transformer.wte.weight");
  EXPECT_EQ(tied.wte->weight.to_vector<float>(), dequantize(*tied.quantized_head()).to_vector<float>());

  LlamaModel untied(llama_options());
  const std::vector<float> embedding = untied.embed_tokens->weight.to_vector<float>();
  quantize_model(untied, {8, 64});
  ASSERT_NE(untied.quantized_head(), nullptr);
  EXPECT_EQ(untied.output_head_name(), "lm_head.weight");
  EXPECT_EQ(untied.lm_head_weight.to_vector<float>(), dequantize(*untied.quantized_head()).to_vector<float>());
  EXPECT_EQ(untied.embed_tokens->weight.to_vector<float>(), embedding);  // not the head: left alone
}

TEST(Quantized, AFileWithAFloatHeadLoadsWithAFloatHead) {
  Gpt2Model model(gpt2_options());
  model.eval();
  quantize_model(model, {4, 64});
  StateDict state = quantized_state_dict(model);
  // As `eddy lm quantize` wrote files before heads were quantised.
  state.erase("transformer.wte.weight.packed");
  state.erase("transformer.wte.weight.scales");
  state.emplace("transformer.wte.weight", model.wte->weight);
  Gpt2Options other_seed = gpt2_options();
  other_seed.seed = 9;
  Gpt2Model loaded(other_seed);
  loaded.eval();
  load_quantized_state_dict(loaded, state, {4, 64});
  EXPECT_EQ(loaded.quantized_head(), nullptr);
  EXPECT_NE(loaded.h[0]->attn->c_attn->quantized_weight(), nullptr);
  // The same head values, multiplied by GEMM instead of the packed kernel, which multiplies x
  // rounded to int8 (quantized.h): a few parts in a thousand, where another head would differ by
  // about as much as the logits themselves.
  EXPECT_LT(relative_logit_difference(model, loaded), 1e-2);
}

TEST(Quantized, Errors) {
  const Tensor w = random_matrix(4, 64, 1);
  expect_error([&] { quantize_matrix(w, 3); }, {"bits must be 8 or 4", "3"});
  expect_error([&] { quantize_matrix(w, 4, 48); }, {"group", "48"});
  expect_error([&] { quantize_matrix(w, 4, 256); }, {"group", "256"});
  const QuantizedMatrix m = quantize_matrix(w, 8);
  expect_error([&] { quantized_matmul(zeros({2, 63}, DType::f32), m); }, {"quantized_matmul", "64"});
  expect_error([&] { quantized_matmul(zeros({2, 64}, DType::f64), m); }, {"float32"});
  expect_error([&] { quantized_matmul(zeros({2, 64}, DType::f32), m, zeros({5}, DType::f32)); },
               {"bias must be float32 [4]", "[5]"});
  Tensor trainable = zeros({1, 64}, DType::f32);
  trainable.requires_grad_();
  expect_error([&] { quantized_matmul(trainable, m); }, {"no derivative", "NoGradGuard"});

  Gpt2Model model(gpt2_options());
  expect_error([&] { quantized_state_dict(model); }, {"not quantised"});
  quantize_model(model, {8, 64});
  StateDict state = quantized_state_dict(model);
  Gpt2Model other(gpt2_options());
  expect_error([&] { load_quantized_state_dict(other, state, {4, 64}); },
               {"transformer.h.0.attn.c_attn.weight.packed", "int4"});
  state.erase("transformer.h.1.mlp.c_proj.weight.scales");
  expect_error([&] { load_quantized_state_dict(other, state, {8, 64}); },
               {"missing key", "transformer.h.1.mlp.c_proj.weight.scales"});
}

}  // namespace
}  // namespace eddy::nn
