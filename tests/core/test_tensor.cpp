// Tensor basics: creation, dtypes, promotion, broadcasting, and views that alias storage.

#include <gtest/gtest.h>

#include <complex>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <vector>

#include "eddy/core/memory.h"
#include "eddy/eddy.h"
#include "support/expect_error.h"

namespace eddy {
namespace {

// ---- creation ----

TEST(TensorCreation, ZerosOnesFull) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0.0f));

  EXPECT_EQ(ones({4}, DType::i64).to_vector<int64_t>(), std::vector<int64_t>(4, 1));
  EXPECT_EQ(full({3}, 2.5, DType::f64).to_vector<double>(), std::vector<double>(3, 2.5));
  EXPECT_EQ(full({2}, c128(1, -2), DType::c128).to_vector<c128>(),
            std::vector<c128>(2, c128(1, -2)));
  EXPECT_EQ(zeros_like(ones({2, 2}, DType::c64)).dtype(), DType::c64);
  EXPECT_EQ(full_like(zeros({5}, DType::i32), 7).to_vector<int32_t>(),
            std::vector<int32_t>(5, 7));
}

TEST(TensorCreation, ScalarIsZeroDimensional) {
  Tensor s = scalar(3.5, DType::f64);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_TRUE(s.shape().empty());
  EXPECT_EQ(s.item<double>(), 3.5);
}

TEST(TensorCreation, Arange) {
  EXPECT_EQ(arange(0, 5).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1, 2, 0.25, DType::f64).to_vector<double>(),
            (std::vector<double>{1.0, 1.25, 1.5, 1.75}));
  EXPECT_EQ(arange(5, 0, -2, DType::i32).to_vector<int32_t>(), (std::vector<int32_t>{5, 3, 1}));
  // A range that steps away from its end is empty, not an error.
  EXPECT_EQ(arange(0, 5, -1).numel(), 0);
}

TEST(TensorCreation, Linspace) {
  EXPECT_EQ(linspace(0, 1, 5, DType::f64).to_vector<double>(),
            (std::vector<double>{0.0, 0.25, 0.5, 0.75, 1.0}));
  EXPECT_EQ(linspace(-3, 3, 1, DType::f64).to_vector<double>(), (std::vector<double>{-3.0}));
  EXPECT_EQ(linspace(0, 1, 0).numel(), 0);
  // The last point is `stop` itself (start + 6 * step missed it by an ulp), and integers are the
  // floors of the float64 points, as NumPy gives them (truncation made [-1, 0, 0, 0, 0, 0, 1]).
  for (int64_t count = 2; count < 200; ++count) {
    EXPECT_EQ(linspace(0, 1, count, DType::f64).to_vector<double>().back(), 1.0) << count;
    EXPECT_EQ(linspace(-1, 1, count, DType::f32).to_vector<float>().back(), 1.0f) << count;
  }
  EXPECT_EQ(linspace(-1, 1, 7, DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{-1, -1, -1, 0, 0, 0, 1}));
}

TEST(TensorCreation, SignOfNanIsNan) {
  const Tensor signs = sign(tensor<double>({std::nan(""), -2, 0, 3}));
  const std::vector<double> values = signs.to_vector<double>();
  EXPECT_TRUE(std::isnan(values[0]));
  EXPECT_EQ(std::vector<double>(values.begin() + 1, values.end()), (std::vector<double>{-1, 0, 1}));
}

TEST(TensorCreation, Eye) {
  Tensor identity = eye(3, DType::f64);
  EXPECT_EQ(identity.shape(), (Shape{3, 3}));
  std::vector<double> values = identity.to_vector<double>();
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(values[i * 3 + j], i == j ? 1.0 : 0.0) << i << "," << j;
  }
}

TEST(TensorCreation, FromBufferCopies) {
  std::vector<int32_t> buffer{1, 2, 3, 4, 5, 6};
  Tensor t = from_buffer(buffer.data(), {2, 3}, DType::i32);
  buffer[0] = 100;  // the tensor owns a copy, so this must not show through
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
}

// 2^62 x 4 float64 are 2^67 bytes, which wrap around to 0 in 64 bits: a tensor of that shape
// over no memory.
TEST(TensorCreation, SizeThatOverflowsIsRefused) {
  expect_error([] { Tensor::empty({int64_t{1} << 62, 4}, DType::f64); },
               {"empty: shape [4611686018427387904, 4] of float64 is too large to address (2^63 bytes or more)"});
  expect_error([] { Tensor::abstract({0, int64_t{1} << 62, 4}, DType::f64); }, {"abstract: shape"});
  EXPECT_EQ(Tensor::empty({0, int64_t{1} << 40}, DType::f64).numel(), 0);
}

// Each of these went through: a view past its storage (fill_ segfaulted), a complex value's
// imaginary part dropped by full, a size -1 made by expand, an infinite or NaN arange.
TEST(TensorCreation, ViewsValuesAndSizesOutOfRangeAreRefused) {
  const Tensor four = ones({4});
  expect_error([&] { make_view(four, {100000}, {1}, 0); },
               {"make_view: shape [100000] with strides [1] from offset 0 reaches elements 0 to 99999 of a storage of 4 "
                "float32 elements"});
  expect_error([&] { make_view(four, {2}, {1}, -1); }, {"reaches elements -1 to 0"});
  EXPECT_EQ(make_view(four, {2}, {3}, 0).to_vector<float>(), (std::vector<float>{1, 1}));
  expect_error([] { full({2}, {1.0, 2.0}, DType::f32); },
               {"full: the value (1,2) has an imaginary part, which a float32 tensor cannot hold"});
  expect_error([] { scalar({1.0, 2.0}, DType::i32); }, {"has an imaginary part, which a int32 tensor cannot hold"});
  expect_error([] { expand(ones({1, 3}), {-1, 3}); }, {"expand: the shape [-1, 3] has a negative size"});
  expect_error([] { arange(0, std::numeric_limits<double>::infinity(), 1); },
               {"arange: start, stop and step must be finite"});
  expect_error([] { arange(0, std::nan(""), 1); }, {"arange: start, stop and step must be finite"});
  expect_error([] { arange(0, 1e300, 1e-300); }, {"elements, more than any tensor can hold"});
}

// More than the machine has is refused with the shape and both sizes (it was a bare
// std::bad_alloc). 4 TiB is beyond any machine this runs on and far from overflowing.
TEST(TensorCreation, SizeBeyondTheMachinesMemoryIsRefused) {
  if (usable_memory().bytes == 0) GTEST_SKIP() << "this system does not say how much memory it has";
  expect_error([] { Tensor::empty({int64_t{1} << 20, int64_t{1} << 20}, DType::f32); },
               {"a tensor of shape [1048576, 1048576] of float32 needs 4.00 TiB", usable_memory_note()});
}

TEST(TensorCreation, TensorFromVector) {
  Tensor t = tensor<double>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(t.shape(), (Shape{2, 2}));
  EXPECT_EQ(t.dtype(), DType::f64);
  EXPECT_EQ(tensor<int64_t>({7, 8, 9}).shape(), (Shape{3}));
}

TEST(TensorCreation, FromBlobAliasesAndReleases) {
  std::vector<float> buffer{1, 2, 3, 4, 5, 6};
  int releases = 0;
  void* released = nullptr;
  {
    Tensor t = from_blob(buffer.data(), {2, 3}, DType::f32, [&](void* p) {
      ++releases;
      released = p;
    });
    EXPECT_EQ(t.data<float>(), buffer.data());
    buffer[4] = 50;  // no copy: writes to the buffer are visible through the tensor
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 50, 6}));

    Tensor view = slice(t, 0, 1, 2);
    t = Tensor();
    EXPECT_EQ(releases, 0) << "released while a view still refers to the memory";
    view.fill_(0);
  }
  EXPECT_EQ(releases, 1);
  EXPECT_EQ(released, buffer.data());
  EXPECT_EQ(buffer, (std::vector<float>{1, 2, 3, 0, 0, 0}));
}

TEST(TensorCreation, FromBlobWithStrides) {
  // A column-major 2x3 matrix: element (i, j) lives at i + 2 * j.
  std::vector<double> column_major{1, 4, 2, 5, 3, 6};
  Tensor t = from_blob(column_major.data(), {2, 3}, DType::f64, [](void*) {}, {1, 2});
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

// ---- dtypes ----

template <typename T>
void expect_round_trip(const std::vector<T>& values, DType expected) {
  Tensor t = tensor<T>(values);
  EXPECT_EQ(t.dtype(), expected);
  EXPECT_EQ(dtype_of<T>(), expected);
  EXPECT_EQ(t.to_vector<T>(), values);
  EXPECT_EQ(slice(t, 0, 1, 2).item<T>(), values[1]);
  EXPECT_EQ(t.data<T>()[2], values[2]);
}

TEST(TensorDType, EveryDTypeRoundTrips) {
  expect_round_trip<float>({1.5f, -2.25f, 3e30f}, DType::f32);
  expect_round_trip<double>({1e-300, -2.5, 1e300}, DType::f64);
  expect_round_trip<c64>({c64(1, 2), c64(-3, 0.5f), c64(0, -1)}, DType::c64);
  expect_round_trip<c128>({c128(1e-200, 2), c128(-3, 1e200), c128(0, -1)}, DType::c128);
  expect_round_trip<int32_t>({INT32_MIN, -1, INT32_MAX}, DType::i32);
  expect_round_trip<int64_t>({INT64_MIN, 0, INT64_MAX}, DType::i64);
  expect_round_trip<bool>({true, false, true}, DType::b8);
}

TEST(TensorDType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::c128), 16u);
  EXPECT_EQ(dtype_size(DType::b8), 1u);
  EXPECT_EQ(dtype_name(DType::c64), "complex64");
  EXPECT_EQ(dtype_name(DType::i64), "int64");
}

TEST(TensorDType, ToVectorConverts) {
  EXPECT_EQ(tensor<int32_t>({1, -2}).to_vector<double>(), (std::vector<double>{1.0, -2.0}));
  EXPECT_EQ(tensor<bool>({true, false}).to_vector<float>(), (std::vector<float>{1.0f, 0.0f}));
  EXPECT_EQ(tensor<double>({0.5, -1.5}).to_vector<c64>(),
            (std::vector<c64>{c64(0.5f, 0), c64(-1.5f, 0)}));
  EXPECT_EQ(cast(tensor<double>({2.0, 0.0}), DType::b8).to_vector<bool>(),
            (std::vector<bool>{true, false}));
}

TEST(TensorDType, ReadsSixteenBitFloatsAsTheirBits) {
  EXPECT_EQ(tensor<double>({1.5}).item<bfloat16>().bits, 0x3FC0);
  EXPECT_EQ(cast(tensor<double>({-2.0}), DType::f16).to_vector<float16>()[0].bits, 0xC000);
}

// Only the element types of a dtype are accepted: another (long long is not int64_t on Linux)
// fails to compile here rather than to link later.
template <typename T>
concept ReadableAs = requires(const Tensor& t) { t.item<T>(); };
static_assert(ReadableAs<float> && ReadableAs<bfloat16> && !ReadableAs<long long> && !ReadableAs<uint32_t>);

TEST(TensorDType, PromotionRule) {
  EXPECT_EQ(promote(DType::i32, DType::f32), DType::f32);
  EXPECT_EQ(promote(DType::f32, DType::c128), DType::c128);
  EXPECT_EQ(promote(DType::c64, DType::f64), DType::c128);
  EXPECT_EQ(promote(DType::c64, DType::f32), DType::c64);
  EXPECT_EQ(promote(DType::i32, DType::i64), DType::i64);
  EXPECT_EQ(promote(DType::b8, DType::i32), DType::i32);
  EXPECT_EQ(promote(DType::i64, DType::f32), DType::f32);
  EXPECT_EQ(promote(DType::f32, DType::f64), DType::f64);
}

TEST(TensorDType, BinaryOpsPromote) {
  Tensor sum_if = tensor<int32_t>({1, 2}) + tensor<float>({0.5f, 0.25f});
  EXPECT_EQ(sum_if.dtype(), DType::f32);
  EXPECT_EQ(sum_if.to_vector<float>(), (std::vector<float>{1.5f, 2.25f}));

  Tensor product = tensor<float>({2.0f, 3.0f}) * tensor<c128>({c128(1, 1), c128(0, -2)});
  EXPECT_EQ(product.dtype(), DType::c128);
  EXPECT_EQ(product.to_vector<c128>(), (std::vector<c128>{c128(2, 2), c128(0, -6)}));

  Tensor widened = tensor<int32_t>({3}) - tensor<int64_t>({5});
  EXPECT_EQ(widened.dtype(), DType::i64);
  EXPECT_EQ(widened.item<int64_t>(), -2);

  EXPECT_EQ((tensor<bool>({true}) + tensor<int32_t>({4})).dtype(), DType::i32);
  EXPECT_EQ((tensor<c64>({c64(1, 0)}) + tensor<double>({1.0})).dtype(), DType::c128);
  // A C++ double takes the tensor's dtype instead of widening it.
  EXPECT_EQ((tensor<float>({1.0f}) * 2.0).dtype(), DType::f32);
}

// ---- broadcasting ----

TEST(TensorBroadcast, ColumnPlusRow) {
  Tensor column = tensor<double>({1, 2, 3}, {3, 1});
  Tensor row = tensor<double>({10, 20, 30, 40});
  Tensor out = column + row;
  ASSERT_EQ(out.shape(), (Shape{3, 4}));
  std::vector<double> values = out.to_vector<double>();
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) EXPECT_EQ(values[i * 4 + j], (i + 1) + 10.0 * (j + 1));
  }
  EXPECT_EQ((row + column).to_vector<double>(), values);
}

TEST(TensorBroadcast, ZeroDimensionalScalar) {
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor out = scalar(2.0) * x;
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  Tensor both_scalars = scalar(2.0, DType::f64) + scalar(3.0, DType::f64);
  EXPECT_EQ(both_scalars.dim(), 0);
  EXPECT_EQ(both_scalars.item<double>(), 5.0);
}

TEST(TensorBroadcast, MiddleAxes) {
  // [2, 1, 3] with [4, 1]: out[i][j][k] = a[i][k] * b[j].
  Tensor a = tensor<int64_t>({1, 2, 3, 4, 5, 6}, {2, 1, 3});
  Tensor b = tensor<int64_t>({1, 10, 100, 1000}, {4, 1});
  Tensor out = a * b;
  ASSERT_EQ(out.shape(), (Shape{2, 4, 3}));
  std::vector<int64_t> values = out.to_vector<int64_t>();
  const int64_t pow10[] = {1, 10, 100, 1000};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < 3; ++k) {
        EXPECT_EQ(values[(i * 4 + j) * 3 + k], (i * 3 + k + 1) * pow10[j]);
      }
    }
  }
}

// ---- views ----

// A [2, 3, 4] tensor holding 0..23 in row-major order.
Tensor counting_block() { return reshape(arange(0, 24, 1, DType::f64), {2, 3, 4}); }

TEST(TensorViews, ViewsShareStorage) {
  Tensor base = counting_block();
  const Storage* storage = base.storage().get();
  EXPECT_EQ(slice(base, 1, 1, 3).storage().get(), storage);
  EXPECT_EQ(permute(base, {2, 0, 1}).storage().get(), storage);
  EXPECT_EQ(transpose(base).storage().get(), storage);
  EXPECT_EQ(reshape(base, {6, 4}).storage().get(), storage);
  EXPECT_EQ(reshape(base, {-1}).storage().get(), storage);
  EXPECT_EQ(unsqueeze(base, 1).storage().get(), storage);
  EXPECT_EQ(squeeze(slice(base, 0, 0, 1), 0).storage().get(), storage);
  EXPECT_EQ(expand(slice(base, 2, 0, 1), {2, 3, 5}).storage().get(), storage);
  EXPECT_EQ(flatten(base).storage().get(), storage);
}

TEST(TensorViews, Contiguity) {
  Tensor base = counting_block();
  EXPECT_TRUE(base.is_contiguous());
  EXPECT_TRUE(reshape(base, {4, 6}).is_contiguous());
  EXPECT_TRUE(unsqueeze(base, 0).is_contiguous());
  EXPECT_TRUE(slice(base, 0, 1, 2).is_contiguous());  // one whole block, at an offset
  EXPECT_FALSE(slice(base, 1, 1, 3).is_contiguous());
  EXPECT_FALSE(slice(base, 2, 0, 4, 2).is_contiguous());
  EXPECT_FALSE(transpose(base).is_contiguous());
  EXPECT_FALSE(permute(base, {1, 0, 2}).is_contiguous());
  EXPECT_FALSE(expand(ones({3, 1}), {3, 4}).is_contiguous());
  // Swapping an axis of size 1 does not change the memory order.
  EXPECT_TRUE(transpose(ones({1, 5})).is_contiguous());
}

TEST(TensorViews, PermuteAndTransposeValues) {
  Tensor base = counting_block();
  Tensor permuted = permute(base, {2, 0, 1});  // out[k][i][j] = base[i][j][k]
  ASSERT_EQ(permuted.shape(), (Shape{4, 2, 3}));
  std::vector<double> values = permuted.to_vector<double>();
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) EXPECT_EQ(values[(k * 2 + i) * 3 + j], i * 12 + j * 4 + k);
    }
  }
  Tensor transposed = transpose(base, 0, 2);  // out[k][j][i] = base[i][j][k]
  ASSERT_EQ(transposed.shape(), (Shape{4, 3, 2}));
  values = transposed.to_vector<double>();
  for (int k = 0; k < 4; ++k) {
    for (int j = 0; j < 3; ++j) {
      for (int i = 0; i < 2; ++i) EXPECT_EQ(values[(k * 3 + j) * 2 + i], i * 12 + j * 4 + k);
    }
  }
}

TEST(TensorViews, WritesThroughBaseAreSeenByViews) {
  Tensor base = counting_block();
  Tensor window = slice(base, 1, 1, 2);
  Tensor turned = permute(base, {2, 1, 0});
  Tensor widened = expand(slice(base, 2, 3, 4), {2, 3, 6});
  base.fill_(7);
  EXPECT_EQ(window.to_vector<double>(), std::vector<double>(8, 7.0));
  EXPECT_EQ(turned.to_vector<double>(), std::vector<double>(24, 7.0));
  EXPECT_EQ(widened.to_vector<double>(), std::vector<double>(36, 7.0));
}

TEST(TensorViews, WritesThroughViewsAreSeenByBase) {
  Tensor base = zeros({3, 4}, DType::f64);
  slice(base, 1, 1, 2).copy_(tensor<double>({1, 2, 3}, {3, 1}));
  slice(transpose(base), 0, 3, 4).fill_(9);  // column 3 of base
  slice(reshape(base, {12}), 0, 0, 1).fill_(-1);
  squeeze(slice(slice(unsqueeze(base, 0), 1, 2, 3), 2, 0, 1), 0).fill_(5);  // base[2][0]
  std::vector<double> expected{-1, 1, 0, 9,
                               0,  2, 0, 9,
                               5,  3, 0, 9};
  EXPECT_EQ(base.to_vector<double>(), expected);
}

TEST(TensorViews, CopyBroadcastsAndCasts) {
  Tensor target = zeros({2, 3}, DType::f64);
  target.copy_(tensor<int32_t>({4, 5, 6}));
  EXPECT_EQ(target.to_vector<double>(), (std::vector<double>{4, 5, 6, 4, 5, 6}));
}

// C++ leaves these conversions undefined (INT_MIN on x86, whatever an optimiser assumes elsewhere).
TEST(TensorViews, CastsOfFloatsToIntegersTruncateAndSaturate) {
  const double huge = 1e20, nan = std::nan("");
  for (DType from : {DType::f32, DType::f64, DType::bf16, DType::c64}) {
    const Tensor values = cast(tensor<double>({nan, huge, -huge, 2.7, -2.7, 2147483520.0}), from);
    EXPECT_EQ(cast(values, DType::i32).to_vector<int32_t>(),
              (std::vector<int32_t>{0, INT32_MAX, INT32_MIN, 2, -2, from == DType::bf16 ? INT32_MAX : 2147483520}))
        << from;
    EXPECT_EQ(cast(values, DType::i64).to_vector<int64_t>(),
              (std::vector<int64_t>{0, INT64_MAX, INT64_MIN, 2, -2, from == DType::bf16 ? 2147483648 : 2147483520}))
        << from;
  }
}

// A source that broadcasts with the target but to a larger shape was written past the target's
// end (x[0] = ones((2, 4)) crashed the Python process).
TEST(TensorViews, CopyRefusesASourceLargerThanTheTarget) {
  Tensor x = zeros({3, 4}, DType::f64);
  Tensor row = squeeze(slice(x, 0, 0, 1), 0);
  expect_error([&] { row.copy_(ones({2, 4}, DType::f64)); },
               {"copy_: a source of shape [2, 4] does not broadcast to the target's shape [4]"});
  expect_error([] { zeros({1}, DType::f64).copy_(ones({1000}, DType::f64)); },
               {"copy_: a source of shape [1000] does not broadcast to the target's shape [1]"});
  EXPECT_EQ(x.to_vector<double>(), std::vector<double>(12, 0.0));
}

// Writes into a broadcast view left each shared element with the last value written there, and
// complex values into a real tensor lost their imaginary parts, both without a word.
TEST(TensorViews, WritesThatWouldLoseValuesAreRefused) {
  Tensor row = zeros({3}, DType::f64);
  expect_error([&] { expand(row, {2, 3}).copy_(tensor<double>({1, 2, 3, 4, 5, 6}, {2, 3})); },
               {"copy_: the tensor of shape [2, 3] repeats its elements along axis 0"});
  expect_error([&] { expand(row, {2, 3}).fill_(1.0); }, {"fill_", "repeats its elements along axis 0"});
  expect_error([&] { row.copy_(complex(ones({3}, DType::f64), ones({3}, DType::f64))); },
               {"copy_: a complex128 source into a float64 tensor would drop its imaginary parts"});
  expect_error([&] { row.fill_({1.0, 2.0}); }, {"fill_: the value (1,2) has an imaginary part"});
  EXPECT_EQ(row.to_vector<double>(), (std::vector<double>{0, 0, 0}));
}

// Integers wrap on overflow, as NumPy's do (computed unsigned: signed overflow is undefined
// behaviour, which the sanitizer build stops on), and print whole.
TEST(TensorValues, IntegersWrapOnOverflowAndPrintWhole) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max(), kMin = std::numeric_limits<int32_t>::min();
  EXPECT_EQ((tensor<int32_t>({kMax}) + tensor<int32_t>({1})).item<int32_t>(), kMin);
  EXPECT_EQ((tensor<int32_t>({kMin}) - tensor<int32_t>({1})).item<int32_t>(), kMax);
  EXPECT_EQ((tensor<int32_t>({kMax}) * tensor<int32_t>({2})).item<int32_t>(), -2);
  EXPECT_EQ(sum(tensor<int32_t>({kMax, 1})).item<int32_t>(), kMin);
  std::ostringstream printed;
  printed << tensor<int64_t>({1234567, 9007199254740993LL});
  EXPECT_NE(printed.str().find("values=[1234567, 9007199254740993]"), std::string::npos) << printed.str();
}

// The copy read elements it had already written: x[1:4] = x[0:3] gave [0, 0, 0, 0, 4, 5].
TEST(TensorViews, CopyBetweenOverlappingViewsReadsBeforeWriting) {
  Tensor x = arange(0, 6, 1, DType::f64);
  slice(x, 0, 1, 4).copy_(slice(x, 0, 0, 3));
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{0, 0, 1, 2, 4, 5}));
  Tensor y = arange(0, 6, 1, DType::f64);
  slice(y, 0, 0, 3).copy_(slice(y, 0, 1, 4));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 2, 3, 3, 4, 5}));
  Tensor z = reshape(arange(0, 6, 1, DType::f64), {2, 3});
  slice(z, 1, 1, 3).copy_(slice(z, 1, 0, 2));
  EXPECT_EQ(z.to_vector<double>(), (std::vector<double>{0, 0, 1, 3, 3, 4}));
}

TEST(TensorViews, ContiguousCopiesOnlyWhenNeeded) {
  Tensor base = counting_block();
  Tensor same = contiguous(base);
  EXPECT_EQ(same.storage().get(), base.storage().get());

  Tensor block = slice(base, 0, 1, 2);  // contiguous, at an offset
  EXPECT_EQ(contiguous(block).storage().get(), base.storage().get());

  Tensor transposed = transpose(base);
  Tensor dense = contiguous(transposed);
  EXPECT_NE(dense.storage().get(), base.storage().get());
  EXPECT_TRUE(dense.is_contiguous());
  EXPECT_EQ(dense.shape(), transposed.shape());
  EXPECT_EQ(dense.strides(), contiguous_strides(transposed.shape()));
  EXPECT_EQ(dense.to_vector<double>(), transposed.to_vector<double>());
  // The copy is independent of its source.
  dense.fill_(0);
  EXPECT_EQ(base.to_vector<double>()[5], 5.0);

  // Reshaping a non-contiguous view also has to copy.
  EXPECT_NE(reshape(transposed, {24}).storage().get(), base.storage().get());
}

TEST(TensorViews, StridedSlices) {
  Tensor x = arange(0, 10, 1, DType::i64);
  Tensor odd = slice(x, 0, 1, 10, 2);
  EXPECT_EQ(odd.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 5, 7, 9}));
  EXPECT_EQ(odd.strides(), (Shape{2}));
  EXPECT_EQ(odd.storage().get(), x.storage().get());
  EXPECT_EQ(slice(x, 0, 0, 9, 3).to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(slice(x, 0, -3, 10).to_vector<int64_t>(), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(slice(x, 0, 2, -5).to_vector<int64_t>(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(slice(x, 0, 8, 100).to_vector<int64_t>(), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(slice(x, 0, 6, 2).numel(), 0);

  // Step 2 on the inner axis of a matrix, then on the outer one.
  Tensor m = reshape(arange(0, 20, 1, DType::f64), {4, 5});
  Tensor every_other_column = slice(m, 1, 0, 5, 2);
  ASSERT_EQ(every_other_column.shape(), (Shape{4, 3}));
  std::vector<double> values = every_other_column.to_vector<double>();
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(values[i * 3 + j], i * 5 + 2 * j);
  }
  Tensor corners = slice(every_other_column, 0, 1, 4, 2);
  EXPECT_EQ(corners.to_vector<double>(), (std::vector<double>{5, 7, 9, 15, 17, 19}));
  // Writing through a strided view touches only the selected elements.
  corners.fill_(-1);
  values = m.to_vector<double>();
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 5; ++j) {
      const bool selected = i % 2 == 1 && j % 2 == 0;
      EXPECT_EQ(values[i * 5 + j], selected ? -1.0 : i * 5 + j) << i << "," << j;
    }
  }
}

TEST(TensorMovement, Flip) {
  Tensor m = tensor<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(flip(m, {1}).to_vector<int32_t>(), (std::vector<int32_t>{3, 2, 1, 6, 5, 4}));
  EXPECT_EQ(flip(m, {0}).to_vector<int32_t>(), (std::vector<int32_t>{4, 5, 6, 1, 2, 3}));
  EXPECT_EQ(flip(m, {0, -1}).to_vector<int32_t>(), (std::vector<int32_t>{6, 5, 4, 3, 2, 1}));
  EXPECT_EQ(flip(transpose(m), {0}).to_vector<int32_t>(),
            (std::vector<int32_t>{3, 6, 2, 5, 1, 4}));
}

TEST(TensorMovement, Pad) {
  Tensor m = tensor<double>({1, 2, 3, 4}, {2, 2});
  Tensor padded = pad(m, {1, 0}, {0, 2});
  ASSERT_EQ(padded.shape(), (Shape{3, 4}));
  EXPECT_EQ(padded.to_vector<double>(), (std::vector<double>{0, 0, 0, 0,
                                                             1, 2, 0, 0,
                                                             3, 4, 0, 0}));
  EXPECT_EQ(pad(tensor<float>({5}), {2}, {1}).to_vector<float>(),
            (std::vector<float>{0, 0, 5, 0}));
}

TEST(TensorMovement, Concat) {
  Tensor a = tensor<double>({1, 2, 3, 4}, {2, 2});
  Tensor b = tensor<double>({5, 6}, {1, 2});
  Tensor c = tensor<double>({7, 8}, {2, 1});
  Tensor rows = concat({a, b}, 0);
  EXPECT_EQ(rows.shape(), (Shape{3, 2}));
  EXPECT_EQ(rows.to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  Tensor columns = concat({a, c, a}, -1);
  EXPECT_EQ(columns.shape(), (Shape{2, 5}));
  EXPECT_EQ(columns.to_vector<double>(), (std::vector<double>{1, 2, 7, 1, 2, 3, 4, 8, 3, 4}));
  // Non-contiguous inputs are read through their strides.
  EXPECT_EQ(concat({transpose(a), b}, 0).to_vector<double>(),
            (std::vector<double>{1, 3, 2, 4, 5, 6}));
}

TEST(TensorMovement, Stack) {
  Tensor a = tensor<int64_t>({1, 2, 3});
  Tensor b = tensor<int64_t>({4, 5, 6});
  Tensor outer = stack({a, b}, 0);
  EXPECT_EQ(outer.shape(), (Shape{2, 3}));
  EXPECT_EQ(outer.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  Tensor inner = stack({a, b}, 1);
  EXPECT_EQ(inner.shape(), (Shape{3, 2}));
  EXPECT_EQ(inner.to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(stack({scalar(1, DType::i64), scalar(2, DType::i64)}).shape(), (Shape{2}));
}

// Reading values as a type that cannot hold them is refused, as PyTorch's item<T>() refuses it:
// a complex value's imaginary part was dropped, and 1e20 or NaN read as int32 came back as -2^31.
TEST(TensorValues, ConversionsThatLoseTheValueAreRefused) {
  const Tensor z = complex(tensor<double>({1.0, 3.0}), tensor<double>({0.0, 2.0}));
  expect_error([&] { z.to_vector<double>(); }, {"element 1 of the complex128 tensor is (3,2)", "real() or abs()"});
  EXPECT_EQ(complex(tensor<double>({1.5}), tensor<double>({0.0})).item<double>(), 1.5);
  expect_error([&] { tensor<double>({1e20}).item<int32_t>(); }, {"is 1e+20, which int32 cannot hold"});
  expect_error([&] { tensor<float>({NAN}).item<int64_t>(); }, {"is nan, which int64 cannot hold"});
  EXPECT_EQ(tensor<double>({-2147483648.0, 2147483647.9}).to_vector<int32_t>(),
            (std::vector<int32_t>{-2147483647 - 1, 2147483647}));
  EXPECT_EQ(tensor<double>({-7.9}).item<int64_t>(), -7);
  // An int64 read as int32 wrapped around (5e9 came back 705032704).
  expect_error([&] { tensor<int64_t>({1, 5000000000LL}).to_vector<int32_t>(); },
               {"element 1 of the int64 tensor is 5000000000, which int32 cannot hold"});
  expect_error([&] { tensor<int64_t>({-3000000000LL}).item<int32_t>(); }, {"-3000000000, which int32 cannot hold"});
  EXPECT_EQ(tensor<int64_t>({-2147483648LL, 2147483647LL}).to_vector<int32_t>(),
            (std::vector<int32_t>{-2147483647 - 1, 2147483647}));
}

// A value an integer tensor cannot hold is refused where one is made or filled: the C++ cast is
// undefined, and full(1e20, int32), scalar(1e19, int64) and fill_(NaN) gave the lowest integer.
TEST(TensorValues, IntegerTensorsRefuseValuesPastTheirRange) {
  expect_error([&] { full({2}, 1e20, DType::i32); }, {"full: the value 1e+20 does not fit in int32"});
  expect_error([&] { scalar(1e19, DType::i64); }, {"does not fit in int64"});
  expect_error([&] { full({1}, NAN, DType::i32); }, {"the value nan does not fit in int32"});
  expect_error([&] { zeros({2}, DType::i32).fill_(5e9); }, {"fill_: the value 5e+09 does not fit in int32"});
  EXPECT_EQ(full({2}, -2147483648.0, DType::i32).to_vector<int32_t>(), (std::vector<int32_t>(2, -2147483647 - 1)));
  EXPECT_EQ(full({1}, 2.9, DType::i64).item<int64_t>(), 2);
  EXPECT_EQ(full({1}, 1e300, DType::f32).item<float>(), INFINITY);
}

// Autodiff members of an undefined (or moved-from) tensor throw, as the others do; they crashed.
TEST(TensorValues, AutodiffMembersOfAnUndefinedTensorThrow) {
  Tensor moved = tensor<double>({1.0});
  const Tensor taken = std::move(moved);
  expect_error([&] { (void)moved.grad(); }, {"undefined tensor"});  // NOLINT(bugprone-use-after-move)
  expect_error([&] { (void)moved.is_leaf(); }, {"undefined tensor"});  // NOLINT(bugprone-use-after-move)
  expect_error([&] { moved.zero_grad(); }, {"undefined tensor"});  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(taken.is_leaf());
}

}  // namespace
}  // namespace eddy
