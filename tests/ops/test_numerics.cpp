// Numerical stability of the composites and correctness of reductions and matmul against
// references computed here by hand or with plain loops.

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "eddy/eddy.h"

namespace eddy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void expect_all_near(const std::vector<double>& actual, const std::vector<double>& expected,
                     double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "element " << i;
  }
}

void expect_all_near(const std::vector<c128>& actual, const std::vector<c128>& expected,
                     double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_LE(std::abs(actual[i] - expected[i]), tolerance)
        << "element " << i << ": " << actual[i] << " vs " << expected[i];
  }
}

// log(sum(exp(x))) with the largest entry factored out by hand.
double reference_logsumexp(const std::vector<double>& x) {
  double top = x[0];
  for (double v : x) top = std::max(top, v);
  double total = 0;
  for (double v : x) total += std::exp(v - top);
  return top + std::log(total);
}

// ---- logsumexp, softmax, log_softmax ----

class LargeLogits : public testing::TestWithParam<std::vector<double>> {};

TEST_P(LargeLogits, Float64MatchesReference) {
  const std::vector<double>& logits = GetParam();
  const double lse = reference_logsumexp(logits);
  Tensor x = tensor<double>(logits);

  Tensor value = logsumexp(x);
  EXPECT_EQ(value.dim(), 0);
  EXPECT_NEAR(value.item<double>(), lse, 1e-12);

  std::vector<double> expected_log_softmax, expected_softmax;
  for (double v : logits) {
    expected_log_softmax.push_back(v - lse);
    expected_softmax.push_back(std::exp(v - lse));
  }
  expect_all_near(log_softmax(x).to_vector<double>(), expected_log_softmax, 1e-12);
  std::vector<double> probabilities = softmax(x).to_vector<double>();
  expect_all_near(probabilities, expected_softmax, 1e-12);
  double total = 0;
  for (double p : probabilities) total += p;
  EXPECT_NEAR(total, 1.0, 1e-12);
}

TEST_P(LargeLogits, Float32StaysFiniteAndAccurate) {
  const std::vector<double>& logits = GetParam();
  const double lse = reference_logsumexp(logits);
  Tensor x = cast(tensor<double>(logits), DType::f32);

  const float value = logsumexp(x).item<float>();
  ASSERT_TRUE(std::isfinite(value));
  EXPECT_NEAR(value, lse, 2e-6 * std::abs(lse));

  std::vector<double> probabilities = softmax(x).to_vector<double>();
  std::vector<double> log_probabilities = log_softmax(x).to_vector<double>();
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    ASSERT_TRUE(std::isfinite(probabilities[i]));
    EXPECT_NEAR(probabilities[i], std::exp(logits[i] - lse), 1e-6) << i;
    EXPECT_NEAR(log_probabilities[i], logits[i] - lse, 1e-6) << i;
    total += probabilities[i];
  }
  EXPECT_NEAR(total, 1.0, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Numerics, LargeLogits,
                         testing::Values(std::vector<double>{1000, 1001, 1002},
                                         std::vector<double>{-1000, -1001},
                                         std::vector<double>{1e4, -1e4, 0},
                                         std::vector<double>{0.5, -0.25, 2.0, 1.0}));

TEST(Numerics, SoftmaxAlongEachAxis) {
  // Rows [1000, 1001, 1002] and [-5, 0, 5]; columns pair them up.
  const std::vector<double> values{1000, 1001, 1002, -5, 0, 5};
  Tensor x = tensor<double>(values, {2, 3});

  std::vector<double> by_row = softmax(x, 1).to_vector<double>();
  for (int i = 0; i < 2; ++i) {
    const std::vector<double> row(values.begin() + 3 * i, values.begin() + 3 * i + 3);
    const double lse = reference_logsumexp(row);
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(by_row[i * 3 + j], std::exp(row[j] - lse), 1e-12);
  }

  Tensor lse_columns = logsumexp(x, 0, /*keepdims=*/true);
  EXPECT_EQ(lse_columns.shape(), (Shape{1, 3}));
  std::vector<double> columns = lse_columns.to_vector<double>();
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(columns[j], reference_logsumexp({values[j], values[3 + j]}), 1e-12) << j;
  }
  // Its errors name softmax (they named log_softmax, which it is computed from).
  try {
    softmax(x, 3);
    ADD_FAILURE() << "axis 3 of a rank-2 tensor was taken";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("softmax: axis 3 is out of range", 0), 0u) << e.what();
  }
}

TEST(Numerics, LogsumexpWithInfiniteEntries) {
  // A row that is all -inf has no finite maximum to shift by; the result is still -inf.
  EXPECT_EQ(logsumexp(tensor<double>({-kInf, -kInf})).item<double>(), -kInf);
  std::vector<double> probabilities = softmax(tensor<double>({0.0, -kInf, 0.0})).to_vector<double>();
  expect_all_near(probabilities, {0.5, 0.0, 0.5}, 1e-15);
}

// ---- activations ----

TEST(Numerics, SoftplusAtExtremes) {
  for (DType dtype : {DType::f64, DType::f32}) {
    std::vector<double> out =
        softplus(cast(tensor<double>({100, -100, 0, 1, -1}), dtype)).to_vector<double>();
    for (double v : out) EXPECT_TRUE(std::isfinite(v)) << dtype;
    EXPECT_NEAR(out[0], 100.0, 1e-12) << dtype;
    EXPECT_GE(out[1], 0.0) << dtype;
    EXPECT_LT(out[1], 1e-30) << dtype;  // exactly exp(-100) ~ 3.7e-44
    const double tolerance = dtype == DType::f64 ? 1e-15 : 1e-6;
    EXPECT_NEAR(out[2], std::log(2.0), tolerance) << dtype;
    EXPECT_NEAR(out[3], std::log(1.0 + std::numbers::e), tolerance) << dtype;
    EXPECT_NEAR(out[4], std::log(1.0 + 1.0 / std::numbers::e), tolerance) << dtype;
  }
}

TEST(Numerics, SigmoidAtExtremes) {
  for (DType dtype : {DType::f64, DType::f32}) {
    std::vector<double> out = sigmoid(cast(tensor<double>({100, -100, 0, 2}), dtype)).to_vector<double>();
    for (double v : out) EXPECT_TRUE(std::isfinite(v)) << dtype;
    EXPECT_NEAR(out[0], 1.0, 1e-15) << dtype;
    EXPECT_NEAR(out[1], 0.0, 1e-15) << dtype;
    EXPECT_EQ(out[2], 0.5) << dtype;
    EXPECT_NEAR(out[3], 1.0 / (1.0 + std::exp(-2.0)), dtype == DType::f64 ? 1e-15 : 1e-7) << dtype;
  }
}

TEST(Numerics, ActivationsMatchFormulas) {
  const std::vector<double> points{-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0};
  Tensor x = tensor<double>(points);
  std::vector<double> gelu_expected, silu_expected, relu_expected;
  const double c = std::sqrt(2.0 / std::numbers::pi);
  for (double v : points) {
    gelu_expected.push_back(0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v))));
    silu_expected.push_back(v / (1.0 + std::exp(-v)));
    relu_expected.push_back(v > 0 ? v : 0.0);
  }
  expect_all_near(gelu(x).to_vector<double>(), gelu_expected, 1e-14);
  expect_all_near(silu(x).to_vector<double>(), silu_expected, 1e-14);
  EXPECT_EQ(relu(x).to_vector<double>(), relu_expected);
  // GPT-2's published value of its tanh GELU at 1.
  EXPECT_NEAR(gelu(scalar(1.0, DType::f64)).item<double>(), 0.8411919906, 1e-9);
  // Far from 0, GELU and SiLU become the identity and zero.
  EXPECT_NEAR(gelu(scalar(30.0, DType::f64)).item<double>(), 30.0, 1e-12);
  EXPECT_NEAR(silu(scalar(-50.0, DType::f64)).item<double>(), 0.0, 1e-18);
}

// ---- norms and reductions ----

TEST(Numerics, NormOfComplexVector) {
  Tensor z = tensor<c128>({c128(3, 4), c128(1, -2), c128(0, 1)});
  Tensor n = norm(z);
  EXPECT_EQ(n.dtype(), DType::f64);
  EXPECT_NEAR(n.item<double>(), std::sqrt(25.0 + 5.0 + 1.0), 1e-14);
  Tensor single = norm(cast(z, DType::c64));
  EXPECT_EQ(single.dtype(), DType::f32);
  EXPECT_NEAR(single.item<float>(), std::sqrt(31.0), 1e-5);
}

TEST(Numerics, NormAlongAxis) {
  Tensor m = tensor<double>({3, 4, 0, 6, 8, 0}, {2, 3});
  Tensor rows = norm(m, {1}, /*keepdims=*/true);
  EXPECT_EQ(rows.shape(), (Shape{2, 1}));
  expect_all_near(rows.to_vector<double>(), {5.0, 10.0}, 1e-14);
  expect_all_near(norm(m, {0}).to_vector<double>(), {std::sqrt(45.0), std::sqrt(80.0), 0.0}, 1e-14);
}

TEST(Numerics, ReductionValuesAndShapes) {
  //  [[ 1, -2,  3],
  //   [ 4,  5, -6]]
  Tensor x = tensor<double>({1, -2, 3, 4, 5, -6}, {2, 3});

  Tensor total_mean = mean(x);
  EXPECT_EQ(total_mean.dim(), 0);
  EXPECT_NEAR(total_mean.item<double>(), 5.0 / 6.0, 1e-15);
  expect_all_near(mean(x, {0}).to_vector<double>(), {2.5, 1.5, -1.5}, 1e-15);
  Tensor row_means = mean(x, {1}, true);
  EXPECT_EQ(row_means.shape(), (Shape{2, 1}));
  expect_all_near(row_means.to_vector<double>(), {2.0 / 3.0, 1.0}, 1e-15);

  EXPECT_EQ(prod(x).item<double>(), 720.0);
  EXPECT_EQ(prod(x, {1}).to_vector<double>(), (std::vector<double>{-6, -120}));
  Tensor column_products = prod(x, {0}, true);
  EXPECT_EQ(column_products.shape(), (Shape{1, 3}));
  EXPECT_EQ(column_products.to_vector<double>(), (std::vector<double>{4, -10, -18}));

  EXPECT_EQ(max(x).item<double>(), 5.0);
  EXPECT_EQ(min(x).item<double>(), -6.0);
  Tensor column_max = max(x, {0}, true);
  EXPECT_EQ(column_max.shape(), (Shape{1, 3}));
  EXPECT_EQ(column_max.to_vector<double>(), (std::vector<double>{4, 5, 3}));
  Tensor row_min = min(x, {-1});
  EXPECT_EQ(row_min.shape(), (Shape{2}));
  EXPECT_EQ(row_min.to_vector<double>(), (std::vector<double>{-2, -6}));
  EXPECT_EQ(max(x, {0, 1}, true).shape(), (Shape{1, 1}));

  EXPECT_EQ(sum(tensor<int32_t>({1, 2, 3}, {3})).item<int64_t>(), 6);
  EXPECT_EQ(sum(tensor<bool>({true, false, true})).item<int64_t>(), 2);
  EXPECT_EQ(prod(tensor<c128>({c128(0, 1), c128(0, 1)})).item<c128>(), c128(-1, 0));
}

TEST(Numerics, ReductionsOverNonContiguousAndMiddleAxes) {
  Generator generator(17);
  Tensor base = randn({3, 4, 5}, DType::f64, &generator);
  const std::vector<double> v = base.to_vector<double>();
  auto at = [&](int i, int j, int k) { return v[(i * 4 + j) * 5 + k]; };

  // Sum over axes 0 and 2, and max over axis 1, of the [5, 4, 3] transposed view.
  Tensor turned = permute(base, {2, 1, 0});
  std::vector<double> sums = sum(turned, {0, 2}).to_vector<double>();
  std::vector<double> maxima = max(turned, {1}).to_vector<double>();
  for (int j = 0; j < 4; ++j) {
    double expected = 0;
    for (int i = 0; i < 3; ++i) {
      for (int k = 0; k < 5; ++k) expected += at(i, j, k);
    }
    EXPECT_NEAR(sums[j], expected, 1e-12) << j;
  }
  for (int k = 0; k < 5; ++k) {
    for (int i = 0; i < 3; ++i) {
      double expected = -kInf;
      for (int j = 0; j < 4; ++j) expected = std::max(expected, at(i, j, k));
      EXPECT_EQ(maxima[k * 3 + i], expected) << k << "," << i;
    }
  }
}

// A sum over the leading axis large enough to be shared out over threads, four rows at a time
// (backends/cpu/reduce.cpp): a row count that is not a multiple of four, on two threads and on one,
// in float64 and complex128.
TEST(Numerics, LargeColumnSumsMatchLoops) {
  const int threads_before = num_threads();
  Generator generator(19);
  constexpr int64_t kRows = 10003, kWidth = 20;
  for (DType dtype : {DType::f64, DType::c128}) {
    Tensor x = is_complex(dtype) ? complex(randn({kRows, kWidth}, DType::f64, &generator),
                                           randn({kRows, kWidth}, DType::f64, &generator))
                                 : randn({kRows, kWidth}, dtype, &generator);
    const std::vector<c128> values = x.to_vector<c128>();
    std::vector<c128> expected(kWidth);
    for (int64_t i = 0; i < kRows; ++i) {
      for (int64_t j = 0; j < kWidth; ++j) expected[static_cast<size_t>(j)] += values[static_cast<size_t>(i * kWidth + j)];
    }
    for (int threads : {2, 1}) {
      set_num_threads(threads);
      SCOPED_TRACE(testing::Message() << dtype_name(dtype) << ", " << threads << " threads");
      Tensor sums = sum(x, {0}, true);
      ASSERT_EQ(sums.shape(), (Shape{1, kWidth}));
      expect_all_near(sums.to_vector<c128>(), expected, 1e-10);
    }
  }
  set_num_threads(threads_before);
}

// Large sums and thin products are cut into blocks by their size alone, whose partial sums are
// added in block order (backends/cpu/loops.h): the same bits at every thread count.
TEST(Numerics, SumsAndThinProductsAreTheSameAtEveryThreadCount) {
  const int threads_before = num_threads();
  Generator generator(23);
  const Tensor tall = randn({20011, 20}, DType::f32, &generator);
  const Tensor wide = randn({20, 20011}, DType::f32, &generator);
  const Tensor square_weights = randn({20, 20}, DType::f32, &generator);
  const Tensor one_row = randn({1, 20011}, DType::f32, &generator);
  // The last three: a feature-major layer, its output layer, and that layer's weight gradient.
  auto results = [&] {
    return std::vector<Tensor>{sum(tall, {0}, false),   sum(tall),
                               sum(tall, {1}, false),   matmul(wide, tall),
                               matmul(tall, square_weights), matmul(transpose(square_weights), wide),
                               matmul(slice(square_weights, 0, 0, 1), wide), matmul(one_row, tall)};
  };
  set_num_threads(1);
  const std::vector<Tensor> one_thread = results();
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    const std::vector<Tensor> several = results();
    for (size_t k = 0; k < several.size(); ++k) {
      ASSERT_EQ(several[k].shape(), one_thread[k].shape());
      EXPECT_EQ(std::memcmp(several[k].raw_data(), one_thread[k].raw_data(), several[k].numel() * sizeof(float)), 0)
          << "result " << k << " on " << threads << " threads differs from one thread's";
    }
  }
  set_num_threads(threads_before);
}

// ---- matmul ----

// Row-major matrix data with explicit strides, so references can index transposed or broadcast
// operands without going through eddy.
struct Strided {
  std::vector<c128> data;
  Shape strides;
  c128 at(const std::vector<int64_t>& index) const {
    int64_t offset = 0;
    for (size_t d = 0; d < index.size(); ++d) offset += index[d] * strides[d];
    return data[offset];
  }
};

Tensor random_matrix(const Shape& shape, DType dtype, Generator& generator) {
  if (is_complex(dtype)) {
    const DType real_type = real_dtype(dtype);
    return complex(randn(shape, real_type, &generator), randn(shape, real_type, &generator));
  }
  return randn(shape, dtype, &generator);
}

std::vector<c128> values_of(const Tensor& t) { return t.to_vector<c128>(); }

class MatmulAgainstLoops : public testing::TestWithParam<DType> {
 protected:
  Generator generator_{42};
};

TEST_P(MatmulAgainstLoops, TwoDimensional) {
  Tensor a = random_matrix({3, 4}, GetParam(), generator_);
  Tensor b = random_matrix({4, 5}, GetParam(), generator_);
  Tensor out = matmul(a, b);
  ASSERT_EQ(out.shape(), (Shape{3, 5}));
  EXPECT_EQ(out.dtype(), GetParam());
  Strided sa{values_of(a), {4, 1}}, sb{values_of(b), {5, 1}};
  std::vector<c128> expected;
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      c128 total = 0;
      for (int64_t k = 0; k < 4; ++k) total += sa.at({i, k}) * sb.at({k, j});
      expected.push_back(total);
    }
  }
  expect_all_near(values_of(out), expected, 1e-12);
}

TEST_P(MatmulAgainstLoops, BatchedBroadcasting) {
  Tensor a = random_matrix({2, 1, 3, 4}, GetParam(), generator_);
  Tensor b = random_matrix({5, 4, 2}, GetParam(), generator_);
  Tensor out = matmul(a, b);
  ASSERT_EQ(out.shape(), (Shape{2, 5, 3, 2}));
  Strided sa{values_of(a), {12, 12, 4, 1}}, sb{values_of(b), {8, 2, 1}};
  std::vector<c128> expected;
  for (int64_t p = 0; p < 2; ++p) {
    for (int64_t q = 0; q < 5; ++q) {
      for (int64_t i = 0; i < 3; ++i) {
        for (int64_t j = 0; j < 2; ++j) {
          c128 total = 0;
          for (int64_t k = 0; k < 4; ++k) total += sa.at({p, 0, i, k}) * sb.at({q, k, j});
          expected.push_back(total);
        }
      }
    }
  }
  expect_all_near(values_of(out), expected, 1e-12);
}

TEST_P(MatmulAgainstLoops, NonContiguousOperands) {
  // a is the transpose of a stored [4, 3] matrix, b every other column of a stored [4, 10] one,
  // and c a [3, 4] matrix broadcast over a batch of 2 with a zero stride.
  Tensor a_storage = random_matrix({4, 3}, GetParam(), generator_);
  Tensor b_storage = random_matrix({4, 10}, GetParam(), generator_);
  Tensor a = transpose(a_storage);
  Tensor b = slice(b_storage, 1, 0, 10, 2);
  ASSERT_FALSE(a.is_contiguous());
  ASSERT_FALSE(b.is_contiguous());
  Strided sa{values_of(a_storage), {1, 3}};  // a[i][k] = a_storage[k][i]
  Strided sb{values_of(b_storage), {10, 2}};  // b[k][j] = b_storage[k][2 j]

  Tensor out = matmul(a, b);
  ASSERT_EQ(out.shape(), (Shape{3, 5}));
  std::vector<c128> expected;
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      c128 total = 0;
      for (int64_t k = 0; k < 4; ++k) total += sa.at({i, k}) * sb.at({k, j});
      expected.push_back(total);
    }
  }
  expect_all_near(values_of(out), expected, 1e-12);

  // Both operands transposed views.
  Tensor bt_storage = random_matrix({3, 4}, GetParam(), generator_);
  Strided sbt{values_of(bt_storage), {1, 4}};  // bt[k][j] = bt_storage[j][k]
  Tensor both = matmul(a, transpose(bt_storage));
  expected.clear();
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      c128 total = 0;
      for (int64_t k = 0; k < 4; ++k) total += sa.at({i, k}) * sbt.at({k, j});
      expected.push_back(total);
    }
  }
  expect_all_near(values_of(both), expected, 1e-12);

  Tensor c = random_matrix({3, 4}, GetParam(), generator_);
  Tensor batch = random_matrix({2, 4, 2}, GetParam(), generator_);
  Tensor broadcast = matmul(expand(unsqueeze(c, 0), {2, 3, 4}), batch);
  Strided sc{values_of(c), {4, 1}}, sbatch{values_of(batch), {8, 2, 1}};
  expected.clear();
  for (int64_t p = 0; p < 2; ++p) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        c128 total = 0;
        for (int64_t k = 0; k < 4; ++k) total += sc.at({i, k}) * sbatch.at({p, k, j});
        expected.push_back(total);
      }
    }
  }
  expect_all_near(values_of(broadcast), expected, 1e-12);
}

// Thin products large enough to be shared out over threads (backends/cpu/linalg.cpp): by blocks
// of rows, or by blocks of a long inner dimension whose partial products are then added, with
// each operand stored as is or transposed; on two threads and on one. At 20 x 20 the long
// dimension is also cut into several calls of OpenBLAS's small-matrix kernel (2500 rows each), and
// the products with an inner or output dimension of 1 or 2 (a PINN's input and output layers)
// take that kernel too. The last four are a feature-major PINN's products ([w, w] @ [w, points]
// and its input and output layers), shared out by blocks of columns.
const std::vector<std::array<int64_t, 3>> kThinShapes = {
    {1500, 20, 24}, {20, 1500, 24}, {6000, 20, 20}, {20, 6000, 20}, {6000, 2, 20}, {6000, 20, 1},
    {20, 20, 6000}, {20, 2, 6000}, {1, 20, 6000}, {20, 1, 6000}};
// Products of one row (a decoding step's projections), which go through GEMV: a wide and a long
// weight matrix, and one small enough for the thin path.
const std::vector<std::array<int64_t, 3>> kOneRowShapes = {{1, 300, 700}, {1, 2000, 64}, {1, 5, 3}};

// [n, k] @ [k, m] for each shape, each operand stored as is or transposed, on two threads and one.
// The loop reference is computed once for both thread counts: under the sanitizers it costs far
// more than the products it checks.
void expect_products_match_loops(DType dtype, double tolerance, Generator& generator,
                                 const std::vector<std::array<int64_t, 3>>& shapes) {
  const int threads_before = num_threads();
  for (const auto& [n, k, m] : shapes) {
    for (bool transpose_a : {false, true}) {
      for (bool transpose_b : {false, true}) {
        Tensor a_storage = random_matrix(transpose_a ? Shape{k, n} : Shape{n, k}, dtype, generator);
        Tensor b_storage = random_matrix(transpose_b ? Shape{m, k} : Shape{k, m}, dtype, generator);
        const std::vector<c128> a = values_of(a_storage), b = values_of(b_storage);
        const int64_t a_row = transpose_a ? 1 : k, a_column = transpose_a ? n : 1;
        const int64_t b_row = transpose_b ? 1 : m, b_column = transpose_b ? k : 1;
        std::vector<c128> expected;
        expected.reserve(n * m);
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < m; ++j) {
            c128 total = 0;
            for (int64_t p = 0; p < k; ++p) total += a[i * a_row + p * a_column] * b[p * b_row + j * b_column];
            expected.push_back(total);
          }
        }
        for (int threads : {2, 1}) {
          set_num_threads(threads);
          Tensor out = matmul(transpose_a ? transpose(a_storage) : a_storage,
                              transpose_b ? transpose(b_storage) : b_storage);
          ASSERT_EQ(out.shape(), (Shape{n, m}));
          SCOPED_TRACE(testing::Message() << dtype_name(dtype) << ", " << threads << " threads, [" << n << ", " << k
                                          << "] @ [" << k << ", " << m << "], transposed a " << transpose_a << ", b "
                                          << transpose_b);
          expect_all_near(values_of(out), expected, tolerance);
        }
      }
    }
  }
  set_num_threads(threads_before);
}

TEST_P(MatmulAgainstLoops, ThinProductsSharedOverThreads) {
  expect_products_match_loops(GetParam(), 1e-10, generator_, kThinShapes);
}

TEST_P(MatmulAgainstLoops, OneRowProducts) { expect_products_match_loops(GetParam(), 1e-10, generator_, kOneRowShapes); }

// float32 takes OpenBLAS's sgemm and sgemv kernels, separate code paths from the double ones; sums
// of up to 6000 products of unit normals are good to about 1e-4 there.
TEST(Numerics, ThinAndOneRowFloat32ProductsMatchLoops) {
  Generator generator(43);
  expect_products_match_loops(DType::f32, 2e-3, generator, kThinShapes);
  expect_products_match_loops(DType::f32, 2e-3, generator, kOneRowShapes);
}

TEST_P(MatmulAgainstLoops, VectorOperands) {
  Tensor u = random_matrix({4}, GetParam(), generator_);
  Tensor v = random_matrix({4}, GetParam(), generator_);
  Tensor m = random_matrix({3, 4}, GetParam(), generator_);
  Tensor batch = random_matrix({2, 4, 3}, GetParam(), generator_);
  std::vector<c128> su = values_of(u), sv = values_of(v);
  Strided sm{values_of(m), {4, 1}}, sbatch{values_of(batch), {12, 3, 1}};

  Tensor dot = matmul(u, v);  // [4] @ [4] -> []
  EXPECT_EQ(dot.dim(), 0);
  c128 expected_dot = 0;
  for (int k = 0; k < 4; ++k) expected_dot += su[k] * sv[k];
  expect_all_near(values_of(dot), {expected_dot}, 1e-12);

  Tensor matrix_vector = matmul(m, v);  // [3, 4] @ [4] -> [3]
  ASSERT_EQ(matrix_vector.shape(), (Shape{3}));
  std::vector<c128> expected;
  for (int64_t i = 0; i < 3; ++i) {
    c128 total = 0;
    for (int64_t k = 0; k < 4; ++k) total += sm.at({i, k}) * sv[k];
    expected.push_back(total);
  }
  expect_all_near(values_of(matrix_vector), expected, 1e-12);

  Tensor vector_matrix = matmul(u, transpose(m));  // [4] @ [4, 3] -> [3]
  ASSERT_EQ(vector_matrix.shape(), (Shape{3}));
  expected.clear();
  for (int64_t j = 0; j < 3; ++j) {
    c128 total = 0;
    for (int64_t k = 0; k < 4; ++k) total += su[k] * sm.at({j, k});
    expected.push_back(total);
  }
  expect_all_near(values_of(vector_matrix), expected, 1e-12);

  Tensor batched = matmul(u, batch);  // [4] @ [2, 4, 3] -> [2, 3]
  ASSERT_EQ(batched.shape(), (Shape{2, 3}));
  expected.clear();
  for (int64_t p = 0; p < 2; ++p) {
    for (int64_t j = 0; j < 3; ++j) {
      c128 total = 0;
      for (int64_t k = 0; k < 4; ++k) total += su[k] * sbatch.at({p, k, j});
      expected.push_back(total);
    }
  }
  expect_all_near(values_of(batched), expected, 1e-12);

  Tensor batch_vector = matmul(transpose(batch), v);  // [2, 3, 4] @ [4] -> [2, 3]
  ASSERT_EQ(batch_vector.shape(), (Shape{2, 3}));
  expected.clear();
  for (int64_t p = 0; p < 2; ++p) {
    for (int64_t i = 0; i < 3; ++i) {
      c128 total = 0;
      for (int64_t k = 0; k < 4; ++k) total += sbatch.at({p, k, i}) * sv[k];
      expected.push_back(total);
    }
  }
  expect_all_near(values_of(batch_vector), expected, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Numerics, MatmulAgainstLoops, testing::Values(DType::f64, DType::c128),
                         [](const testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST(Numerics, MatmulPromotesAndHandlesEmptyInnerDimension) {
  Tensor ints = tensor<int32_t>({1, 2, 3, 4}, {2, 2});
  Tensor out = matmul(ints, eye(2, DType::f64));
  EXPECT_EQ(out.dtype(), DType::f64);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1, 2, 3, 4}));
  // A sum over nothing is zero.
  EXPECT_EQ(matmul(ones({2, 0}, DType::f64), ones({0, 3}, DType::f64)).to_vector<double>(),
            std::vector<double>(6, 0.0));
}

TEST(Numerics, ExpUnderflowsToZeroAndDenormals) {
  // Vectorised exp implementations clamp large negative arguments; eddy must not.
  auto values = exp(tensor<double>({-INFINITY, -720.0, -745.2, -100.0})).to_vector<double>();
  EXPECT_EQ(values[0], 0.0);
  EXPECT_DOUBLE_EQ(values[1], std::exp(-720.0));
  EXPECT_EQ(values[2], std::exp(-745.2));
  EXPECT_DOUBLE_EQ(values[3], std::exp(-100.0));
  EXPECT_EQ(exp(tensor<float>({-INFINITY})).item<float>(), 0.0f);
}

// eddy's float32 exp of each of `floats` is std::exp's bit for bit (NaN stays NaN); returns them.
std::vector<float> expect_std_exp(const std::vector<float>& floats) {
  const std::vector<float> values = exp(tensor(floats)).to_vector<float>();
  for (size_t k = 0; k < floats.size(); ++k) {
    if (std::isnan(floats[k])) {
      EXPECT_TRUE(std::isnan(values[k]));
    } else {
      EXPECT_EQ(values[k], std::exp(floats[k])) << "x = " << floats[k];
    }
  }
  return values;
}

// Within 1 of the largest finite value's log, exp is std::exp's: float32's vectorised exp overflowed
// to inf from 88.376, where exp stays finite up to 88.7228. Past that it is inf, as is exp(inf).
TEST(Numerics, ExpStaysFiniteUpToTheLargestValue) {
  std::vector<float> floats{INFINITY, 88.7229f, std::nanf("")};
  for (float x = 87.75f; x < 88.7228f; x += 0.03125f) floats.push_back(x);
  floats.push_back(88.7228f);
  const std::vector<float> float_values = expect_std_exp(floats);
  EXPECT_TRUE(std::isinf(float_values[1]));
  EXPECT_TRUE(std::isfinite(float_values.back()));
  const double doubles[] = {708.8, 709.5, 709.78, 709.79};
  for (double x : doubles) EXPECT_EQ(exp(tensor<double>({x})).item<double>(), std::exp(x)) << "x = " << x;
}

// Below the smallest normal number's log, exp is std::exp's, bit for bit, down to and past where
// it rounds to zero (set directly there, without std::exp's slow underflow path); NaN stays NaN.
TEST(Numerics, ExpMatchesStdExpThroughTheDenormalsToZero) {
  std::vector<float> floats{std::numeric_limits<float>::lowest(), std::nanf("")};
  for (float x = -86.5f; x > -110.0f; x -= 0.125f) floats.push_back(x);
  expect_std_exp(floats);
  std::vector<double> doubles{std::numeric_limits<double>::lowest()};
  for (double x = -707.5; x > -760.0; x -= 0.125) doubles.push_back(x);
  const std::vector<double> double_values = exp(tensor(doubles)).to_vector<double>();
  for (size_t k = 0; k < doubles.size(); ++k) EXPECT_EQ(double_values[k], std::exp(doubles[k])) << "x = " << doubles[k];
}

TEST(Numerics, Float64TanhIsAccurateOverEveryScale) {
  // eddy's vectorised double tanh against std::tanh, from subnormal-adjacent to saturated inputs.
  std::vector<double> xs;
  for (double magnitude = 1e-300; magnitude < 40; magnitude *= 1.37) {
    xs.push_back(magnitude);
    xs.push_back(-magnitude);
  }
  auto ys = tanh(tensor(xs)).to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_NEAR(ys[i], std::tanh(xs[i]), 5e-16 * std::abs(std::tanh(xs[i]))) << "x = " << xs[i];
  }
  auto special = tanh(tensor<double>({0.0, INFINITY, -INFINITY, 1000.0})).to_vector<double>();
  EXPECT_EQ(special[0], 0.0);
  EXPECT_EQ(special[1], 1.0);
  EXPECT_EQ(special[2], -1.0);
  EXPECT_EQ(special[3], 1.0);
  EXPECT_TRUE(std::isnan(tanh(tensor<double>({NAN})).item<double>()));
}

}  // namespace
}  // namespace eddy
