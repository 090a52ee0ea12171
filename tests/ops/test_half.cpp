// bfloat16 and float16: storage types whose values the kernels compute in float32, rounding the
// result once (to nearest, ties to even). Every figure below is worked out by hand from the two
// formats: bfloat16 keeps 8 significant bits, float16 11, with float16's largest finite value
// 65504.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "eddy/compiler/compile.h"
#include "eddy/eddy.h"
#include "support/expect_error.h"

namespace eddy {
namespace {

std::vector<double> values_of(const Tensor& t) { return t.to_vector<double>(); }

TEST(HalfPrecision, CastsRoundToNearestEven) {
  // 1 + 2^-8 lies halfway between bfloat16's 1 and 1 + 2^-7: the even one, 1, wins; 1 + 3 * 2^-8
  // lies halfway between 1 + 2^-7 and 1 + 2^-6, and 1 + 2^-6 has the even mantissa.
  const Tensor x = tensor<double>({1.0, -2.5, 1.0 + std::ldexp(1.0, -8), 1.0 + 3 * std::ldexp(1.0, -8), 1e-3});
  EXPECT_EQ(values_of(cast(x, DType::bf16)),
            (std::vector<double>{1.0, -2.5, 1.0, 1.0 + std::ldexp(1.0, -6), 0.00099945068359375}));
  // float16: 1 + 2^-11 ties to 1; 70000 is past the largest finite value; 2^-24 is the smallest
  // subnormal.
  const Tensor y = tensor<double>({1.0 + std::ldexp(1.0, -11), 65504.0, 70000.0, std::ldexp(1.0, -24)});
  const std::vector<double> h = values_of(cast(y, DType::f16));
  EXPECT_EQ(h[0], 1.0);
  EXPECT_EQ(h[1], 65504.0);
  EXPECT_TRUE(std::isinf(h[2]));
  EXPECT_EQ(h[3], std::ldexp(1.0, -24));
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(cast(x, DType::bf16).dtype(), DType::bf16);
}

// The vectorised conversion against rounding worked out in double: the two bfloat16 neighbours of
// x (its upper half, and that plus one unit), the nearer kept, the even one on a tie; infinities
// stay, NaN becomes the quiet NaN of its sign. Random bit patterns cover subnormals and ties.
TEST(HalfPrecision, BFloat16RoundingMatchesNearestEvenBitForBit) {
  std::vector<float> values{0.0f, -0.0f, INFINITY, -INFINITY, std::nanf(""), -std::nanf(""),
                            std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()};
  std::mt19937 bits(7);
  for (int i = 0; i < 200000; ++i) values.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits())));
  for (int i = 0; i < 1000; ++i) {  // exact ties: the lower half 0x8000
    values.push_back(std::bit_cast<float>((static_cast<uint32_t>(bits()) & 0xffff0000u) | 0x8000u));
  }
  const std::vector<float> rounded = cast(cast(tensor(values), DType::bf16), DType::f32).to_vector<float>();
  for (size_t i = 0; i < values.size(); ++i) {
    const float x = values[i];
    const uint32_t got = std::bit_cast<uint32_t>(rounded[i]);
    if (std::isnan(x)) {
      ASSERT_EQ(got, std::signbit(x) ? 0xffc00000u : 0x7fc00000u) << i;
      continue;
    }
    if (std::isinf(x)) {
      ASSERT_EQ(got, std::bit_cast<uint32_t>(x)) << i;
      continue;
    }
    const uint32_t lower = std::bit_cast<uint32_t>(x) & 0xffff0000u;
    const double below = std::bit_cast<float>(lower);
    // Past the largest bfloat16 the next value is 2^128 (unbounded exponent), which is inf.
    const bool overflows = ((lower + 0x10000u) & 0x7fffffffu) == 0x7f800000u;
    const double above = overflows ? std::copysign(std::ldexp(1.0, 128), double(x))
                                   : double(std::bit_cast<float>(lower + 0x10000u));
    const double to_below = std::abs(double(x) - below), to_above = std::abs(double(x) - above);
    const uint32_t want = to_below < to_above || (to_below == to_above && ((lower >> 16) & 1u) == 0) ? lower
                                                                                                      : lower + 0x10000u;
    ASSERT_EQ(got, want) << "x = " << x << " (bits " << std::hex << std::bit_cast<uint32_t>(x) << ")";
  }
}

// A float64 value is rounded once: through float32 rounded to nearest, 1 + 2^-11 + 2^-40 landed on
// float16's halfway point 1 + 2^-11 and went to the even 1 (NumPy gives 1 + 2^-10).
TEST(HalfPrecision, Float64ValuesAreRoundedOnce) {
  const Tensor wide = tensor<double>({1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40),
                                      std::ldexp(1.0, -25) + std::ldexp(1.0, -60), 2049.0000001, 1e39, -1e-50});
  const std::vector<double> half = values_of(cast(wide, DType::f16));
  EXPECT_EQ(half[0], 1 + std::ldexp(1.0, -10));
  EXPECT_EQ(half[1], std::ldexp(1.0, -24));  // float16's smallest subnormal
  EXPECT_EQ(half[2], 2050.0);
  EXPECT_TRUE(std::isinf(half[3]));
  EXPECT_EQ(half[4], 0.0);
  EXPECT_TRUE(std::signbit(half[4]));
  const std::vector<double> brain = values_of(cast(tensor<double>({1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40),
                                                                   1e39, 3.0}), DType::bf16));
  EXPECT_EQ(brain, (std::vector<double>{1 + std::ldexp(1.0, -7), INFINITY, 3.0}));
}

TEST(HalfPrecision, OpsComputeInFloat32AndRoundOnce) {
  const Tensor a = cast(tensor<float>({1.0f, 3.0f, 0.1f}), DType::bf16);
  const Tensor b = cast(tensor<float>({std::ldexp(1.0f, -8), 5.0f, 0.2f}), DType::bf16);
  const Tensor sum = a + b;
  EXPECT_EQ(sum.dtype(), DType::bf16);
  // Each sum is the float32 sum of the two bfloat16 operands, rounded: 1 + 2^-8 ties down to 1.
  const Tensor expected = cast(cast(a, DType::f32) + cast(b, DType::f32), DType::bf16);
  EXPECT_EQ(values_of(sum), values_of(expected));
  EXPECT_EQ(values_of(sum)[0], 1.0);
  EXPECT_EQ(values_of(tanh(a)), values_of(cast(tanh(cast(a, DType::f32)), DType::bf16)));
  // The primitives with loops of their own (erf, log1p, expm1, sinh, cosh) refused 16-bit input.
  using Function = Tensor (*)(const Tensor&);
  for (Function f : {Function(erf), Function(log1p), Function(expm1), Function(sinh), Function(cosh)}) {
    EXPECT_EQ(values_of(f(a)), values_of(cast(f(cast(a, DType::f32)), DType::bf16)));
  }
}

TEST(HalfPrecision, ProductsAndSumsAccumulateInFloat32) {
  // 4096 ones: summed in bfloat16 the total would stop at 256 (256 + 1 rounds back to 256).
  const Tensor row = ones({1, 4096}, DType::bf16), column = ones({4096, 1}, DType::bf16);
  EXPECT_EQ(matmul(row, column).item<double>(), 4096.0);
  EXPECT_EQ(matmul(row, column).dtype(), DType::bf16);
  EXPECT_EQ(sum(row).item<double>(), 4096.0);
  EXPECT_EQ(sum(ones({3000}, DType::f16)).item<double>(), 3000.0);
  // A product onto an addend: the float32 product summed onto the addend, rounded once.
  const Tensor a = cast(randn({3, 5}), DType::bf16), b = cast(randn({5, 2}), DType::bf16);
  const Tensor addend = cast(randn({2}), DType::bf16);
  const Tensor wide = matmul_add(cast(a, DType::f32), cast(b, DType::f32), cast(addend, DType::f32));
  EXPECT_EQ(matmul_add(a, b, addend).dtype(), DType::bf16);
  EXPECT_EQ(values_of(matmul_add(a, b, addend)), values_of(cast(wide, DType::bf16)));
}

// bfloat16 products run in oneDNN's 16-bit kernels where the CPU has them (AMX, AVX-512 BF16),
// and otherwise as float32 products: either way, whatever the operands' strides and batching,
// each element is the exact product of the bfloat16 values up to float32 sums and one rounding.
TEST(HalfPrecision, ProductsOfAnyLayoutAreTheExactProductRounded) {
  auto bf16_randn = [](const Shape& shape) { return cast(randn(shape), DType::bf16); };
  auto expect_rounded_product = [](const Tensor& a, const Tensor& b, const Tensor& addend, const Tensor& product) {
    SCOPED_TRACE(cat("[", a.shape(), "] @ [", b.shape(), "]"));
    Tensor exact = matmul(cast(a, DType::f64), cast(b, DType::f64));
    if (addend.defined()) exact = exact + cast(addend, DType::f64);
    const Tensor magnitude = matmul(abs(cast(a, DType::f64)), abs(cast(b, DType::f64)));
    ASSERT_EQ(product.dtype(), DType::bf16);
    ASSERT_EQ(product.shape(), exact.shape());
    const std::vector<double> got = values_of(product), want = values_of(exact), size = values_of(magnitude);
    const double sum_error = 2.0 * static_cast<double>(a.shape().back()) * std::ldexp(1.0, -24);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_LE(std::abs(got[i] - want[i]), std::ldexp(std::abs(want[i]), -8) + sum_error * (size[i] + 1.0))
          << "element " << i;
    }
  };
  auto expect_product = [&](const Tensor& a, const Tensor& b) { expect_rounded_product(a, b, Tensor(), matmul(a, b)); };
  const Tensor a = bf16_randn({200, 96}), b = bf16_randn({96, 130});
  expect_product(a, b);
  expect_product(transpose(bf16_randn({96, 200})), b);
  expect_product(a, transpose(bf16_randn({130, 96})));
  expect_product(transpose(bf16_randn({96, 200})), transpose(bf16_randn({130, 96})));
  expect_product(slice(bf16_randn({400, 96}), 0, 0, 400, 2), slice(bf16_randn({96, 300}), 1, 10, 140));
  expect_product(bf16_randn({3, 40, 24}), bf16_randn({3, 24, 50}));
  expect_product(bf16_randn({2, 3, 40, 24}), bf16_randn({24, 50}));
  expect_product(transpose(bf16_randn({4, 24, 40})), transpose(bf16_randn({4, 50, 24})));
  expect_product(bf16_randn({7, 5}), bf16_randn({5, 3}));
  // Rows that overlap (memory shared through DLPack can look so): oneDNN takes no such layout,
  // and its refusal had escaped as a bare exception.
  expect_product(make_view(bf16_randn({100}), {40, 33}, {1, 1}, 0), bf16_randn({33, 4}));
  const Tensor addend = bf16_randn({130});
  expect_rounded_product(a, b, addend, matmul_add(a, b, addend));
}

// Drawn in float32 and rounded, about one bfloat16 draw in 500 came out 1.0. Now each is
// k / 2^8 (bfloat16) or k / 2^11 (float16), exact in the type: below 1, and covering the grid.
TEST(HalfPrecision, UniformDrawsStayBelowOne) {
  for (const auto& [dtype, levels] : {std::pair{DType::bf16, 256.0}, std::pair{DType::f16, 2048.0}}) {
    const std::vector<double> draws = values_of(rand({200000}, dtype));
    double largest = 0, smallest = 1;
    for (double u : draws) {
      ASSERT_LT(u, 1.0) << dtype;
      ASSERT_GE(u, 0.0) << dtype;
      ASSERT_EQ(u * levels, std::floor(u * levels)) << dtype << " draw " << u;
      largest = std::max(largest, u);
      smallest = std::min(smallest, u);
    }
    EXPECT_EQ(largest, 1.0 - 1.0 / levels) << dtype;
    EXPECT_EQ(smallest, 0.0) << dtype;
  }
}

TEST(HalfPrecision, PromotionFollowsPyTorch) {
  EXPECT_EQ(promote(DType::bf16, DType::f16), DType::f32);
  EXPECT_EQ(promote(DType::bf16, DType::f32), DType::f32);
  EXPECT_EQ(promote(DType::f16, DType::f64), DType::f64);
  EXPECT_EQ(promote(DType::bf16, DType::i64), DType::bf16);
  EXPECT_EQ(promote(DType::f16, DType::c64), DType::c64);
  EXPECT_EQ((ones({2}, DType::bf16) + ones({2}, DType::f16)).dtype(), DType::f32);
}

TEST(HalfPrecision, GradientsKeepTheParametersDType) {
  const Tensor w = cast(tensor<float>({0.5f, -1.25f, 2.0f}), DType::bf16).detach().requires_grad_();
  const std::vector<Tensor> g = grad({sum(square(w))}, {w});
  EXPECT_EQ(g[0].dtype(), DType::bf16);
  EXPECT_EQ(values_of(g[0]), (std::vector<double>{1.0, -2.5, 4.0}));
}

TEST(HalfPrecision, CompiledFunctionsRunThemUnfused) {
  CompiledFunction step([](const std::vector<Tensor>& x) { return std::vector<Tensor>{tanh(x[0] * x[1]) + 1.0}; });
  Generator gen(8);
  const std::vector<Tensor> inputs{cast(randn({64}, DType::f32, &gen), DType::bf16),
                                   cast(randn({64}, DType::f32, &gen), DType::bf16)};
  step(inputs);
  const Tensor compiled = step(inputs)[0];
  EXPECT_EQ(step.stats().last.fused_kernels, 0u);
  EXPECT_EQ(values_of(compiled), values_of(tanh(inputs[0] * inputs[1]) + 1.0));
}

TEST(HalfPrecision, WhatHasNoHalfFormSaysSo) {
  expect_error([] { Tensor::empty({2}, DType::bf16).data<float>(); }, {"bfloat16"});
}

}  // namespace
}  // namespace eddy
