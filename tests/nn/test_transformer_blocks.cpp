// The transformer pieces against references written out as loops here: norms, GELU, rotary
// positions, causal grouped-query attention, cross_entropy and keyed dropout; their derivatives
// to order 2 against central differences in float64; and the errors bad inputs get.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <numbers>
#include <tuple>
#include <limits>

#include "eddy/eddy.h"
#include "eddy/nn/normalize.h"
#include "eddy/nn/transformer.h"
#include "support/derivative_check.h"
#include "support/expect_error.h"

namespace eddy::nn {
namespace {

using Values = std::vector<double>;

Tensor random_f64(const Shape& shape, uint64_t seed) {
  Generator generator(seed);
  return randn(shape, DType::f64, &generator);
}

void expect_close(const Tensor& got, const Values& expected, double tolerance = 1e-12) {
  const Values values = got.to_vector<double>();
  ASSERT_EQ(values.size(), expected.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_NEAR(values[i], expected[i], tolerance * (1 + std::abs(expected[i]))) << "element " << i;
  }
}

void assign(Tensor& target, const Tensor& source) {
  NoGradGuard no_grad;
  target.copy_(source);
}

TEST(TransformerNorms, LayerNormWithAndWithoutBiasMatchesLoops) {
  const int64_t rows = 3, dim = 5;
  Tensor x = random_f64({rows, dim}, 1) * 3.0 + 1.0;
  const Values weight = random_f64({dim}, 2).to_vector<double>(), bias = random_f64({dim}, 3).to_vector<double>();
  for (bool with_bias : {true, false}) {
    LayerNorm norm(dim, 1e-5, DType::f64, with_bias);
    assign(norm.weight, tensor(weight));
    if (with_bias) assign(norm.bias, tensor(bias));
    EXPECT_EQ(norm.named_parameters().size(), with_bias ? 2u : 1u);
    const Values in = x.to_vector<double>();
    Values expected;
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, variance = 0;
      for (int64_t c = 0; c < dim; ++c) mean += in[r * dim + c] / dim;
      for (int64_t c = 0; c < dim; ++c) variance += (in[r * dim + c] - mean) * (in[r * dim + c] - mean) / dim;
      for (int64_t c = 0; c < dim; ++c) {
        expected.push_back((in[r * dim + c] - mean) / std::sqrt(variance + 1e-5) * weight[c] +
                           (with_bias ? bias[c] : 0.0));
      }
    }
    expect_close(norm(x), expected);
  }
}

TEST(TransformerNorms, RmsNormMatchesLoops) {
  const int64_t rows = 4, dim = 6;
  RmsNorm norm(dim, 1e-6, DType::f64);
  const Values weight = random_f64({dim}, 4).to_vector<double>();
  assign(norm.weight, tensor(weight));
  Tensor x = random_f64({2, 2, dim}, 5);
  const Values in = x.to_vector<double>();
  Values expected;
  for (int64_t r = 0; r < rows; ++r) {
    double mean_square = 0;
    for (int64_t c = 0; c < dim; ++c) mean_square += in[r * dim + c] * in[r * dim + c] / dim;
    for (int64_t c = 0; c < dim; ++c) expected.push_back(in[r * dim + c] / std::sqrt(mean_square + 1e-6) * weight[c]);
  }
  expect_close(norm(x), expected);
}

// The primitives' kernel against the composed form it stands for: float32 and float64, a row, a
// transposed view, and enough rows to be split over threads.
// 16-bit rows were normalised in 16-bit steps: float16 rows past 256 came out all zeros (their
// squares inf), bfloat16 rows of mean 50 off by 0.1. In float32, rounded once.
TEST(TransformerNorms, SixteenBitRowsAreNormalisedInFloat32) {
  const Tensor rows = tensor<double>({300, -400, 500, 100, 50.25, 49.5, 51, 50}, {2, 4});
  for (DType half : {DType::f16, DType::bf16}) {
    const Tensor x = cast(rows, half), wide = cast(x, DType::f32);
    for (const auto& [name, got, want] :
         {std::tuple{"layer", layer_normalize(x, 1e-5), layer_normalize(wide, 1e-5)},
          std::tuple{"rms", rms_normalize(x, 1e-6), rms_normalize(wide, 1e-6)}}) {
      ASSERT_EQ(got.dtype(), half) << name;
      EXPECT_EQ(got.to_vector<double>(), cast(want, half).to_vector<double>()) << name << " " << half;
    }
  }
}

TEST(TransformerNorms, NormalizePrimitivesMatchTheComposedForm) {
  for (DType dtype : {DType::f32, DType::f64}) {
    for (const Tensor& x : {cast(random_f64({7}, 6), dtype), transpose(cast(random_f64({9, 4}, 7), dtype)),
                            cast(random_f64({2, 150, 320}, 8) * 2.0 + 0.5, dtype)}) {
      SCOPED_TRACE(testing::Message() << dtype << " " << to_string(x.shape()));
      const double tolerance = dtype == DType::f32 ? 2e-6 : 1e-13;
      for (double eps : {1e-5, 0.5}) {
        const std::vector<double> layer = layer_normalize(x, eps).to_vector<double>(),
                                  layer_composed = composed_layer_normalize(x, eps).to_vector<double>(),
                                  rms = rms_normalize(x, eps).to_vector<double>(),
                                  rms_composed = composed_rms_normalize(x, eps).to_vector<double>();
        ASSERT_EQ(layer.size(), layer_composed.size());
        for (size_t i = 0; i < layer.size(); ++i) {
          EXPECT_NEAR(layer[i], layer_composed[i], tolerance) << i;
          EXPECT_NEAR(rms[i], rms_composed[i], tolerance) << i;
        }
      }
    }
  }
}

TEST(TransformerActivations, BothGeluFormsMatchTheirFormulas) {
  const Values points{-4.0, -1.5, -0.3, 0.0, 0.2, 1.0, 3.5};
  Values exact, approximate;
  for (double x : points) {
    exact.push_back(0.5 * x * (1 + std::erf(x / std::sqrt(2.0))));
    approximate.push_back(0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x))));
  }
  expect_close(gelu_exact(tensor(points)), exact);
  expect_close(gelu(tensor(points)), approximate);
}

// Llama's "rotate half": element i < D/2 pairs with i + D/2 and turns by p theta^(-2i/D).
Values rotary_reference(const Values& x, int64_t rows, int64_t time, int64_t dim, double theta, int64_t first) {
  Values out(x.size());
  const int64_t half = dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < time; ++t) {
      const double* in = &x[(r * time + t) * dim];
      double* o = &out[(r * time + t) * dim];
      for (int64_t i = 0; i < half; ++i) {
        const double angle = double(first + t) * std::pow(theta, -2.0 * double(i) / double(dim));
        o[i] = in[i] * std::cos(angle) - in[i + half] * std::sin(angle);
        o[i + half] = in[i + half] * std::cos(angle) + in[i] * std::sin(angle);
      }
    }
  }
  return out;
}

TEST(RotaryEmbedding, MatchesTheRotateHalfLoopsAtAnOffset) {
  Tensor x = random_f64({2, 3, 5, 8}, 6);
  expect_close(rotary_embedding(x, 10000.0, 7), rotary_reference(x.to_vector<double>(), 6, 5, 8, 10000.0, 7));
  expect_close(rotary_embedding(x, 500.0), rotary_reference(x.to_vector<double>(), 6, 5, 8, 500.0, 0));
}

TEST(RotaryEmbedding, ScoresDependOnlyOnTheDistanceBetweenPositions) {
  // RoFormer's point: <R_m q, R_n k> depends on m - n alone.
  Tensor q = reshape(random_f64({8}, 7), {1, 8});
  Tensor k = reshape(random_f64({8}, 8), {1, 8});
  auto score = [&](int64_t m, int64_t n) {
    return sum(rotary_embedding(q, 100.0, m) * rotary_embedding(k, 100.0, n)).item<double>();
  };
  EXPECT_NEAR(score(5, 2), score(13, 10), 1e-12);
  EXPECT_NEAR(score(0, 4), score(20, 24), 1e-12);
  EXPECT_GT(std::abs(score(5, 2) - score(5, 3)), 1e-3);
}

// Causal attention by loops: query t of T is position S - T + t and sees keys 0..S-T+t; head h
// reads key/value head h / (H / KV).
Values attention_reference(const Tensor& queries, const Tensor& keys, const Tensor& values) {
  const Shape& qs = queries.shape();
  const int64_t batch = qs[0], heads = qs[1], time = qs[2], dim = qs[3];
  const int64_t kv_heads = keys.shape()[1], length = keys.shape()[2];
  const Values q = queries.to_vector<double>(), k = keys.to_vector<double>(), v = values.to_vector<double>();
  Values out;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kv = h / (heads / kv_heads);
      for (int64_t t = 0; t < time; ++t) {
        const int64_t last_visible = length - time + t;
        Values scores;
        double largest = -std::numeric_limits<double>::infinity();
        for (int64_t s = 0; s <= last_visible; ++s) {
          double dot = 0;
          for (int64_t d = 0; d < dim; ++d) {
            dot += q[((b * heads + h) * time + t) * dim + d] * k[((b * kv_heads + kv) * length + s) * dim + d];
          }
          scores.push_back(dot / std::sqrt(double(dim)));
          largest = std::max(largest, scores.back());
        }
        double total = 0;
        for (double& s : scores) total += (s = std::exp(s - largest));
        for (int64_t d = 0; d < dim; ++d) {
          double mixed = 0;
          for (int64_t s = 0; s <= last_visible; ++s) {
            mixed += scores[s] / total * v[((b * kv_heads + kv) * length + s) * dim + d];
          }
          out.push_back(mixed);
        }
      }
    }
  }
  return out;
}

TEST(CausalAttention, GroupedQueryHeadsMatchLoopsForEveryGrouping) {
  for (int64_t kv_heads : {1, 2, 4}) {
    Tensor q = random_f64({2, 4, 5, 3}, 10), k = random_f64({2, kv_heads, 5, 3}, 11);
    Tensor v = random_f64({2, kv_heads, 5, 3}, 12);
    expect_close(causal_attention(q, k, v), attention_reference(q, k, v));
  }
}

TEST(CausalAttention, QueriesAfterCachedKeysSeeThePast) {
  // Two new queries against five keys: positions 3 and 4.
  Tensor q = random_f64({1, 2, 2, 4}, 13), k = random_f64({1, 1, 5, 4}, 14), v = random_f64({1, 1, 5, 4}, 15);
  expect_close(causal_attention(q, k, v), attention_reference(q, k, v));
}

// In float32 and float64: the fused kernel's output and the gradients of sum(output * seed) with
// respect to random leaves of `leaf_shapes`, against the composed form's, where q, k and v are
// `arrange`d from the leaves.
void expect_fused_equals_composed(const std::vector<Shape>& leaf_shapes, const Shape& seed_shape, uint64_t random_seed,
                                  const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& arrange) {
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Generator generator(random_seed);
    std::vector<Tensor> leaves;
    for (const Shape& shape : leaf_shapes) leaves.push_back(randn(shape, dtype, &generator));
    const Tensor seed = randn(seed_shape, dtype, &generator);
    auto output_and_gradients = [&](auto attention) {
      std::vector<Tensor> x;
      for (const Tensor& leaf : leaves) x.push_back(leaf.detach().requires_grad_());
      const std::vector<Tensor> qkv = arrange(x);
      const Tensor out = attention(qkv[0], qkv[1], qkv[2]);
      std::vector<Tensor> results = grad({sum(out * seed)}, x);
      results.insert(results.begin(), out.detach());
      return results;
    };
    const std::vector<Tensor> fused = output_and_gradients(causal_attention);
    const std::vector<Tensor> composed = output_and_gradients(composed_causal_attention);
    const double tolerance = dtype == DType::f32 ? 2e-5 : 1e-12;
    for (size_t i = 0; i < fused.size(); ++i) {
      const double scale = max(abs(composed[i])).item<double>();
      EXPECT_LE(max(abs(fused[i] - composed[i])).item<double>(), tolerance * scale) << "result " << i;
    }
  }
}

// The fused kernel works in tiles of 64 queries and 64 keys: over several tiles, with a partial
// last one, grouped heads and queries after cached keys, its output and gradients are the
// composed form's.
TEST(CausalAttention, FusedEqualsComposedAcrossTiles) {
  expect_fused_equals_composed({{2, 4, 150, 16}, {2, 2, 200, 16}, {2, 2, 200, 16}}, {2, 4, 150, 16}, 40,
                               [](const std::vector<Tensor>& x) { return x; });
}

// The kernel's scratch tiles come from the heap; where the heap puts them must not change a bit of
// the result (Eigen's exp and sum over a row ran another order on a row that started off its
// vector alignment). Blocks kept alive between the calls move where the next tiles land.
TEST(CausalAttention, ResultsDoNotDependOnWhereTheHeapPutsTheScratch) {
  NoGradGuard no_grad;
  manual_seed(42);
  const Tensor q = randn({2, 4, 16, 8}), k = randn({2, 4, 16, 8}), v = randn({2, 4, 16, 8});
  const std::vector<float> first = nn::causal_attention(q, k, v).to_vector<float>();
  std::vector<std::unique_ptr<char[]>> shifts;
  for (int i = 0; i < 32; ++i) {
    shifts.push_back(std::make_unique<char[]>(static_cast<size_t>(16 * i + 16)));
    const std::vector<float> again = nn::causal_attention(q, k, v).to_vector<float>();
    ASSERT_EQ(again, first) << "after " << i + 1 << " heap blocks";
  }
}

// Heads split from [B, T, H, D] projections are permuted views, [B, H, T, D] with rows H * D
// apart: the CPU kernels read them in place (core/backend.h), with the same results.
TEST(CausalAttention, HeadsSplitFromAProjectionAreReadInPlace) {
  expect_fused_equals_composed({{2, 150, 4, 16}, {2, 200, 2, 16}, {2, 200, 2, 16}}, {2, 4, 150, 16}, 41,
                               [](const std::vector<Tensor>& x) {
                                 std::vector<Tensor> heads;
                                 for (const Tensor& projection : x) heads.push_back(permute(projection, {0, 2, 1, 3}));
                                 EXPECT_FALSE(heads[0].is_contiguous());
                                 return heads;
                               });
}

TEST(CausalAttention, WeightsAreRowsOfProbabilitiesWithExactZerosAboveTheDiagonal) {
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor q = cast(random_f64({1, 2, 4, 3}, 16) * 30.0, dtype), k = cast(random_f64({1, 2, 4, 3}, 17) * 30.0, dtype);
    const Values weights = causal_attention_weights(q, k).to_vector<double>();
    for (int64_t row = 0; row < 8; ++row) {
      const int64_t t = row % 4;
      double total = 0;
      for (int64_t s = 0; s < 4; ++s) {
        const double w = weights[row * 4 + s];
        if (s > t) {
          EXPECT_EQ(w, 0.0) << dtype << " row " << row;
        }
        total += w;
      }
      EXPECT_NEAR(total, 1.0, 1e-6) << dtype;
    }
  }
}

// bfloat16 operands (a Llama's bias-free projections under autocast) were refused; they are
// attended in float32 and rounded once. Past 256 positions bfloat16 cannot count (256, 256, 258),
// so the mask is built in float32: no query sees a later key.
TEST(CausalAttention, BFloat16OperandsAreAttendedInFloat32WithTheMaskIntact) {
  const int64_t time = 300;
  const auto bf16_random = [&](uint64_t seed) { return cast(random_f64({1, 2, time, 4}, seed), DType::bf16); };
  const Tensor q = bf16_random(21), k = bf16_random(22), v = bf16_random(23);
  const Tensor weights = causal_attention_weights(q, k);
  ASSERT_EQ(weights.dtype(), DType::bf16);
  const Values w = weights.to_vector<double>();
  for (int64_t head = 0; head < 2; ++head) {
    for (int64_t t = 250; t < time; ++t) {
      for (int64_t s = t + 1; s < time; ++s) ASSERT_EQ(w[(head * time + t) * time + s], 0.0) << t << " sees " << s;
    }
  }
  const auto wide = [](const Tensor& x) { return cast(x, DType::f32); };
  for (const Tensor& attended : {causal_attention(q, k, v), composed_causal_attention(q, k, v)}) {
    ASSERT_EQ(attended.dtype(), DType::bf16);
    const Values got = attended.to_vector<double>();
    const Values want = causal_attention(wide(q), wide(k), wide(v)).to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-2 * std::abs(want[i]) + 1e-3) << i;
  }
  EXPECT_EQ(rotary_embedding(q, 10000.0).to_vector<double>(),
            cast(rotary_embedding(wide(q), 10000.0), DType::bf16).to_vector<double>());
}

TEST(CausalAttention, BadShapesNameThem) {
  Tensor q = zeros({1, 4, 3, 2}, DType::f64), k = zeros({1, 3, 3, 2}, DType::f64);
  expect_error([&] { causal_attention(q, k, k); }, {"3 heads", "does not divide the 4 heads", "[1, 3, 3, 2]"});
  expect_error([&] { causal_attention(q, zeros({2, 2, 3, 2}, DType::f64), zeros({2, 2, 3, 2}, DType::f64)); },
               {"batch"});
  expect_error([&] { causal_attention(q, zeros({1, 2, 2, 2}, DType::f64), zeros({1, 2, 2, 2}, DType::f64)); },
               {"3 queries", "got 2"});
  expect_error([&] { causal_attention(q, zeros({1, 2, 3, 5}, DType::f64), zeros({1, 2, 3, 5}, DType::f64)); },
               {"head_dim"});
  expect_error([&] { causal_attention(q, zeros({1, 2, 3, 2}, DType::f32), zeros({1, 2, 3, 2}, DType::f32)); },
               {"float64", "float32"});
  expect_error([&] { causal_attention(zeros({4, 3, 2}, DType::f64), k, k); }, {"rank 4", "[4, 3, 2]"});
  expect_error([&] { rotary_embedding(zeros({2, 5}, DType::f64), 10000.0); }, {"even head_dim", "[2, 5]"});
  expect_error([&] { rotary_embedding(zeros({2, 4}, DType::i64), 10000.0); }, {"int64"});
  AttentionOptions options;
  options.hidden_size = 12;
  options.heads = 4;
  options.kv_heads = 3;
  Generator generator(0);
  expect_error([&] { CausalSelfAttention attention(options, generator); }, {"kv_heads 3", "heads 4"});
  options.heads = 5;
  expect_error([&] { CausalSelfAttention attention(options, generator); }, {"hidden_size 12", "heads 5"});
  options.heads = 4;
  options.kv_heads = 2;
  options.hidden_size = 4;
  options.rope_theta = 10000.0;
  expect_error([&] { CausalSelfAttention attention(options, generator); }, {"even head_dim", "got 1"});
  options.hidden_size = 8;
  CausalSelfAttention attention(options, generator);
  expect_error([&] { attention(zeros({1, 3, 6}, DType::f32)); }, {"[batch, time, 8]", "[1, 3, 6]"});
}

// -log softmax(row)[target] by loops in long double, skipping ignored targets.
std::pair<double, int64_t> cross_entropy_reference(const Values& logits, const std::vector<int64_t>& targets,
                                                   int64_t classes, int64_t ignore_index) {
  long double total = 0;
  int64_t counted = 0;
  for (size_t row = 0; row < targets.size(); ++row) {
    if (targets[row] == ignore_index) continue;
    long double largest = logits[row * classes];
    for (int64_t c = 0; c < classes; ++c) largest = std::max<long double>(largest, logits[row * classes + c]);
    long double sum_exp = 0;
    for (int64_t c = 0; c < classes; ++c) sum_exp += std::exp(logits[row * classes + c] - largest);
    total += std::log(sum_exp) + largest - logits[row * classes + targets[row]];
    ++counted;
  }
  return {double(total), counted};
}

TEST(CrossEntropy, MatchesLoopsOverBatchAndTimeWithIgnoredTargets) {
  const int64_t classes = 7;
  Tensor logits = random_f64({2, 3, classes}, 20) * 4.0;
  const std::vector<int64_t> targets{3, -100, 0, 6, 2, -100};
  const auto [total, counted] = cross_entropy_reference(logits.to_vector<double>(), targets, classes, -100);
  ASSERT_EQ(counted, 4);
  Tensor target_tensor = tensor(targets, {2, 3});
  EXPECT_NEAR(cross_entropy(logits, target_tensor).item<double>(), total / 4, 1e-13);
  EXPECT_NEAR(cross_entropy(logits, target_tensor, -100, Reduction::sum).item<double>(), total, 1e-13);
  // [N, V] with int32 targets and another ignore index.
  const std::vector<int32_t> narrow{3, 5, 0, 6, 2, 5};
  const auto [narrow_total, narrow_counted] =
      cross_entropy_reference(logits.to_vector<double>(), {3, 5, 0, 6, 2, 5}, classes, 5);
  EXPECT_NEAR(cross_entropy(reshape(logits, {6, classes}), tensor(narrow), 5).item<double>(),
              narrow_total / double(narrow_counted), 1e-13);
}

TEST(CrossEntropy, IsStableForHugeLogitsInFloat32) {
  // Logits near 1e4 in float32: exp overflows unshifted, and a logsumexp of 1e4 would keep
  // only about 1e-3 of absolute precision.
  Tensor logits = tensor<float>({10000.0f, 10001.5f, 9999.0f, -20000.0f, -20001.0f, -19990.0f}, {2, 3});
  Tensor targets = tensor<int64_t>({1, 0});
  const auto [total, counted] =
      cross_entropy_reference({10000.0, 10001.5, 9999.0, -20000.0, -20001.0, -19990.0}, {1, 0}, 3, -100);
  EXPECT_NEAR(cross_entropy(logits, targets).item<double>(), total / double(counted), 1e-6);
}

TEST(CrossEntropy, AllIgnoredIsNaNForTheMeanAndZeroForTheSum) {
  Tensor logits = random_f64({2, 3}, 21);
  Tensor targets = tensor<int64_t>({-100, -100});
  EXPECT_TRUE(std::isnan(cross_entropy(logits, targets).item<double>()));
  EXPECT_EQ(cross_entropy(logits, targets, -100, Reduction::sum).item<double>(), 0.0);
}

TEST(CrossEntropy, BadInputsNameThem) {
  Tensor logits = zeros({2, 3, 4}, DType::f32);
  expect_error([&] { cross_entropy(logits, zeros({2, 3}, DType::f32)); }, {"int32 or int64", "float32"});
  expect_error([&] { cross_entropy(logits, tensor<int64_t>({0, 1}, {2})); }, {"[2, 3, 4]", "[2, 3]", "[2]"});
  expect_error([&] { cross_entropy(cast(logits, DType::i64), tensor<int64_t>({0, 1, 2, 3, 0, 1}, {2, 3})); },
               {"float32 or float64", "int64"});
  expect_error([&] { cross_entropy(logits, tensor<int64_t>({0, 1, 2, 4, 0, 1}, {2, 3})); },
               {"target 4", "position 3", "[0, 4)"});
  expect_error([&] { cross_entropy(logits, tensor<int64_t>({0, 1, -1, 3, 0, 1}, {2, 3})); },
               {"target -1", "ignore_index -100"});
}

// Values printed by tests/nn/record_transformer_values.py (the command is in its docstring), on
// inputs that are formulas of the flat index.
Tensor pattern(const Shape& shape, double (*f)(double)) {
  Values values(numel(shape));
  for (size_t i = 0; i < values.size(); ++i) values[i] = f(double(i));
  return tensor(values, shape);
}

TEST(PyTorchRecorded, GroupedQueryAttentionMatchesScaledDotProductAttention) {
  Tensor q = pattern({1, 4, 3, 4}, [](double i) { return std::sin(0.37 * i + 0.1); });
  Tensor k = pattern({1, 2, 3, 4}, [](double i) { return std::cos(0.23 * i + 0.2); });
  Tensor v = pattern({1, 2, 3, 4}, [](double i) { return std::sin(0.011 * i * i + 0.3); });
  expect_close(causal_attention(q, k, v),
               {0.29552020666133955,  0.30601081732530144, 0.3372554328537061,  0.38849708675900285,
                0.33694367423873633,  0.366558152213211,   0.41462441285673657, 0.47899787692899315,
                0.6471845202216053,   0.7213200011675672,  0.7863211281454614,  0.8316157086307057,
                0.29552020666133955,  0.30601081732530144, 0.3372554328537061,  0.38849708675900285,
                0.35795063438309477,  0.39726334241634775, 0.45386031401099397, 0.524893273990617,
                0.3552846773291516,   0.38483553486722993, 0.43092484157265726, 0.49096345008393294,
                0.9513513762338285,   0.8319387441406216,  0.633131862608296,   0.3584365767005306,
                0.6871286870594225,   0.5000111094684933,  0.2637171824103551,  -0.00192236823595701,
                0.0028081412540484586, -0.1325624218529137, -0.2215042109252282, -0.2547684705380212,
                0.9513513762338285,   0.8319387441406216,  0.633131862608296,   0.3584365767005306,
                0.46734862832160656,  0.22391417293026972, -0.04356142551768618, -0.3016684283956929,
                0.5841699670449704,   0.41405799280732314, 0.20985793552185594, -0.012337758223711052});
}

TEST(PyTorchRecorded, CrossEntropyAndGelu) {
  Tensor logits = pattern({6, 5}, [](double i) { return 3 * std::sin(0.7 * i); });
  Tensor targets = tensor<int64_t>({2, -100, 0, 4, 1, 3});
  expect_close(cross_entropy(logits, targets), {1.018189245369825});
  expect_close(cross_entropy(logits, targets, -100, Reduction::sum), {5.090946226849124});
  Tensor x = pattern({7}, [](double i) { return i - 3.0; });
  expect_close(gelu_exact(x), {-0.00404969409489031, -0.04550026389635842, -0.15865525393145702, 0.0,
                               0.841344746068543, 1.9544997361036416, 2.99595030590511});
  expect_close(gelu(x), {-0.0036373920817729943, -0.04540230591222494, -0.15880800939172324, 0.0,
                         0.8411919906082768, 1.954597694087775, 2.996362607918227});
}

TEST(TransformerDerivatives, AttentionToOrderTwo) {
  auto attention = [](const std::vector<Tensor>& x) { return causal_attention(x[0], x[1], x[2]); };
  expect_derivatives_match_central_differences(
      attention, {random_f64({1, 4, 3, 2}, 30), random_f64({1, 2, 3, 2}, 31), random_f64({1, 2, 3, 2}, 32)}, 2,
      "grouped-query attention");
  AttentionOptions options;
  options.hidden_size = 8;
  options.heads = 4;
  options.kv_heads = 2;
  options.bias = true;
  options.rope_theta = 10000.0;
  options.dtype = DType::f64;
  Generator generator(33);
  CausalSelfAttention layer(options, generator);
  expect_derivatives_match_central_differences([&](const std::vector<Tensor>& x) { return layer(x[0]); },
                                               {random_f64({2, 3, 8}, 34)}, 2, "CausalSelfAttention with RoPE");
}

TEST(TransformerDerivatives, NormsToOrderTwoInInputAndWeights) {
  LayerNorm layer_norm(5, 1e-5, DType::f64);
  expect_derivatives_match_central_differences(
      [&](const std::vector<Tensor>& x) {
        layer_norm.weight = x[1];
        layer_norm.bias = x[2];
        return layer_norm(x[0]);
      },
      {random_f64({3, 5}, 40), random_f64({5}, 41), random_f64({5}, 42)}, 2, "LayerNorm");
  RmsNorm rms_norm(5, 1e-6, DType::f64);
  expect_derivatives_match_central_differences(
      [&](const std::vector<Tensor>& x) {
        rms_norm.weight = x[1];
        return rms_norm(x[0]);
      },
      {random_f64({3, 5}, 43), random_f64({5}, 44)}, 2, "RmsNorm");
}

TEST(TransformerDerivatives, CrossEntropyToOrderTwo) {
  Tensor targets = tensor<int64_t>({2, -100, 0, 4, 1, 3}, {2, 3});
  for (Reduction reduction : {Reduction::mean, Reduction::sum}) {
    expect_derivatives_match_central_differences(
        [&](const std::vector<Tensor>& x) { return cross_entropy(x[0], targets, -100, reduction); },
        {random_f64({2, 3, 5}, 50) * 2.0}, 2, "cross_entropy");
  }
  expect_derivatives_match_central_differences(
      [](const std::vector<Tensor>& x) { return gelu_exact(x[0]); }, {random_f64({6}, 51)}, 2, "gelu_exact");
}

TEST(Dropout, AKeyGivesTheGeneratorsMaskAndAdvancesPastIt) {
  Tensor x = ones({4, 250}, DType::f64);
  Dropout seeded(0.3, 9);
  Tensor key = random_key(9, 0);
  Dropout keyed(0.3, 123);
  expect_close(keyed.forward(x, &key), seeded(x).to_vector<double>(), 0);
  EXPECT_EQ(key.to_vector<int64_t>(), (std::vector<int64_t>{9, 1000}));
  expect_close(keyed.forward(x, &key), seeded(x).to_vector<double>(), 0);
  keyed.eval();
  EXPECT_TRUE(keyed.forward(x, &key).same(x));
  EXPECT_EQ(key.to_vector<int64_t>(), (std::vector<int64_t>{9, 2000}));
}

TEST(Linear, PyTorchLayoutAndLeadingAxesGiveTheSameMap) {
  Generator generator(60);
  Linear eddy_layout(3, 4, generator, DType::f64);
  Linear torch_layout(3, 4, generator, DType::f64, true, WeightLayout::out_in);
  EXPECT_EQ(torch_layout.weight.shape(), (Shape{4, 3}));
  assign(torch_layout.weight, transpose(eddy_layout.weight));
  assign(eddy_layout.bias, random_f64({4}, 61));
  assign(torch_layout.bias, eddy_layout.bias);
  Tensor x = random_f64({2, 5, 3}, 62);
  const Values expected = eddy_layout(reshape(x, {10, 3})).to_vector<double>();
  expect_close(eddy_layout(x), expected);
  expect_close(torch_layout(x), expected);
  EXPECT_EQ(torch_layout(x).shape(), (Shape{2, 5, 4}));
  expect_error([&] { torch_layout(zeros({2, 4}, DType::f64)); }, {"[2, 4]", "expects 3 features"});
}

}  // namespace
}  // namespace eddy::nn
