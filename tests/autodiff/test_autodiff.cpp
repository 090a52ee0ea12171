// The autodiff API: derivatives of any order in both modes and their mixtures, the functional
// transformations, gradient bookkeeping (accumulation, no_grad, detach, un-broadcasting) and
// the complex-gradient convention.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "eddy/eddy.h"
#include "eddy/ops/primitive.h"
#include "support/expect_error.h"

namespace eddy {
namespace {

Tensor scalar64(double v) { return tensor<double>({v}); }

TEST(Autodiff, ReverseModeToOrderSix) {
  // d^n/dx^n sin(x) = sin(x + n pi / 2).
  const double x0 = 0.7;
  Function f = [](const Tensor& x) { return sum(sin(x)); };
  Function derivative = f;
  for (int n = 1; n <= 6; ++n) {
    derivative = grad(derivative);
    Function summed = [derivative](const Tensor& x) { return sum(derivative(x)); };
    EXPECT_NEAR(derivative(scalar64(x0)).item<double>(), std::sin(x0 + n * M_PI / 2), 1e-12) << n;
    derivative = summed;
  }
}

// d^n/dx^n (1/x) = (-1)^n n! / x^(n+1). Division's rule divided by square(b), so each order squared
// the power of x it worked with: float32 overflowed to inf from the 6th derivative at x = 0.1, and
// float64 from the 8th at 0.01. log's and sqrt's rules divide too.
TEST(Autodiff, HighDerivativesOfAQuotientStayFinite) {
  for (const auto& [dtype, x0, order] : {std::tuple{DType::f32, 0.1, 6}, std::tuple{DType::f64, 0.01, 8}}) {
    Function derivative = [](const Tensor& x) { return sum(1.0 / x); };
    for (int n = 1; n <= order; ++n) {
      derivative = [inner = grad(derivative)](const Tensor& x) { return sum(inner(x)); };
    }
    const double exact = std::tgamma(order + 1) / std::pow(x0, order + 1);
    const Tensor x = cast(scalar64(x0), dtype);
    EXPECT_NEAR(derivative(x).item<double>() / exact, 1.0, dtype == DType::f32 ? 1e-4 : 1e-10) << order;
    Function along = [](const Tensor& x) { return 1.0 / x; };
    for (int n = 1; n <= order; ++n) {
      along = [inner = along](const Tensor& x) { return jvp(inner, x, ones_like(x)).second; };
    }
    EXPECT_NEAR(along(x).item<double>() / exact, 1.0, dtype == DType::f32 ? 1e-4 : 1e-10) << order;
  }
}

// The angle's derivatives divided by |z|^2 with 1 put where it is 0: where |z|^2 underflowed for a
// nonzero z (below 1e-23 in complex64), they came out i z, 49 orders of magnitude off.
TEST(Autodiff, TheAnglesDerivativeHoldsWhereTheSquaredModulusUnderflows) {
  const Tensor z = complex(tensor<float>({3e-25f, 0.0f}), tensor<float>({4e-25f, 0.0f})).requires_grad_();
  const std::vector<c64> gradient = grad({sum(angle(z))}, {z})[0].to_vector<c64>();
  EXPECT_NEAR(gradient[0].real() / -1.6e24, 1.0, 1e-5);  // i / conj(z)
  EXPECT_NEAR(gradient[0].imag() / 1.2e24, 1.0, 1e-5);
  EXPECT_EQ(gradient[1], c64(0.0f, 0.0f));  // 0 at 0, as PyTorch
  const Tensor tangent = jvp([](const Tensor& a) { return angle(a); }, z.detach(), ones_like(z)).second;
  EXPECT_NEAR(tangent.to_vector<float>()[0] / -1.6e24f, 1.0f, 1e-5f);  // Im(t / z)
  EXPECT_EQ(tangent.to_vector<float>()[1], 0.0f);
}

// What the PINN evaluator measures before nesting another derivative: the nodes behind a value
// and the bytes of the distinct storages they keep, each counted once however often it is read.
TEST(Autodiff, RecordedGraphSizeCountsNodesAndDistinctStorages) {
  Tensor x = randn({4, 8}, DType::f64).requires_grad_();
  Tensor y = sin(x) * x;  // sin(x) and x * sin(x): two nodes keeping x and sin(x)
  const RecordedGraphSize size = recorded_graph_size(y);
  EXPECT_EQ(size.nodes, 2);
  EXPECT_EQ(size.bytes, 2 * 4 * 8 * 8);
  EXPECT_EQ(recorded_graph_size(x).nodes, 0);
  const Tensor dy = grad({y}, {x}, {ones_like(y)}, true)[0];
  EXPECT_GT(recorded_graph_size(dy).nodes, size.nodes);
}

TEST(Autodiff, ForwardModeToOrderFive) {
  // Nested jvp of exp(2x): the n-th derivative is 2^n exp(2x).
  const double x0 = 0.3;
  Function f = [](const Tensor& x) { return exp(2.0 * x); };
  for (int n = 1; n <= 5; ++n) {
    Function inner = f;
    f = [inner](const Tensor& x) { return jvp(inner, x, ones_like(x)).second; };
    EXPECT_NEAR(f(scalar64(x0)).item<double>(), std::pow(2.0, n) * std::exp(2 * x0), 1e-10) << n;
  }
}

TEST(Autodiff, GradOfGradWithCreateGraph) {
  // u = x^3 y^2: u_xxy = 12 x y.
  Tensor x = scalar64(1.3).requires_grad_(), y = scalar64(-0.4).requires_grad_();
  Tensor u = pow(x, 3.0) * pow(y, 2.0);
  Tensor u_x = grad({u}, {x}, {}, true)[0];
  Tensor u_xx = grad({u_x}, {x}, {}, true)[0];
  Tensor u_xxy = grad({u_xx}, {y}, {}, false)[0];
  EXPECT_NEAR(u_xxy.item<double>(), 12 * 1.3 * -0.4, 1e-12);
  EXPECT_FALSE(u_xxy.requires_grad());
}

TEST(Autodiff, HessianVectorProductMatchesHessian) {
  Tensor a = tensor<double>({2, 1, 0, 1, 3, 1, 0, 1, 4}, {3, 3});
  Function f = [a](const Tensor& x) { return sum(x * matmul(a, x)) + sum(pow(x, 4.0)); };
  Tensor x = tensor<double>({0.5, -1.0, 2.0});
  Tensor v = tensor<double>({1.0, 0.5, -0.25});
  Tensor h = hessian(f, x);
  ASSERT_EQ(h.shape(), (Shape{3, 3}));
  auto hv = hvp(f, x, v).to_vector<double>();
  auto expected_h = (a + transpose(a)).to_vector<double>();
  auto xs = x.to_vector<double>();
  for (int i = 0; i < 3; ++i) expected_h[i * 4] += 12 * xs[i] * xs[i];
  auto got_h = h.to_vector<double>();
  auto vs = v.to_vector<double>();
  for (int i = 0; i < 3; ++i) {
    double row = 0;
    for (int j = 0; j < 3; ++j) {
      EXPECT_NEAR(got_h[i * 3 + j], expected_h[i * 3 + j], 1e-12);
      row += expected_h[i * 3 + j] * vs[j];
    }
    EXPECT_NEAR(hv[i], row, 1e-12);
  }
}

// d prod / d x_i is the product of the other entries, exact at zero entries (where prod(x) / x_i
// is 0 / 0) and where the whole product underflows; the second derivatives likewise.
TEST(Autodiff, ProdDerivativesAreTheOtherEntriesProductsAtZerosToo) {
  const std::vector<double> values = {2, 0, 3, -1, 0, 0, 5, 2, 1e-200, 1e-200, 1e-100, 4};
  Tensor x = tensor<double>(values, {3, 4});
  x.requires_grad_();
  Function f = [](const Tensor& v) { return sum(prod(v, {1})); };
  auto product_without = [&](int row, int i, int j) {
    double product = 1;
    for (int k = 0; k < 4; ++k) {
      if (k != i && k != j) product *= values[row * 4 + k];
    }
    return product;
  };
  const std::vector<double> gradient = grad({f(x)}, {x})[0].to_vector<double>();
  const std::vector<double> second = hessian(f, x).to_vector<double>();
  for (int row = 0; row < 3; ++row) {
    for (int i = 0; i < 4; ++i) {
      EXPECT_DOUBLE_EQ(gradient[row * 4 + i], product_without(row, i, i)) << "row " << row << ", entry " << i;
      std::vector<double> one_hot(12, 0.0);
      one_hot[row * 4 + i] = 1;
      EXPECT_DOUBLE_EQ(jvp(f, x.detach(), tensor<double>(one_hot, {3, 4})).second.item<double>(),
                product_without(row, i, i)) << "forward mode, row " << row << ", entry " << i;
      for (int j = 0; j < 12; ++j) {
        const double expected = j / 4 != row || j % 4 == i ? 0.0 : product_without(row, i, j % 4);
        EXPECT_DOUBLE_EQ(second[(row * 4 + i) * 12 + j], expected) << "d2 / dx" << row * 4 + i << " dx" << j;
      }
    }
  }
  // Over one entry the derivative is 1, still recorded as x's: eddy.gradients refused to take
  // its derivative (0) when it was a constant.
  Tensor column = tensor<double>({2, 3}, {2, 1});
  column.requires_grad_();
  const Tensor once = grad({sum(prod(column, {1}))}, {column}, {}, true)[0];
  EXPECT_EQ(once.to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_TRUE(once.requires_grad());
}

TEST(Autodiff, JacobianForwardEqualsReverse) {
  Function f = [](const Tensor& x) {
    return stack({sin(slice(x, 0, 0, 1)) * slice(x, 0, 1, 2), exp(slice(x, 0, 2, 3)), sum(x, {}, true)}, 0);
  };
  Tensor x = tensor<double>({0.2, -0.7, 1.1});
  Tensor forward = jacobian(f, x, JacobianMode::forward);
  Tensor reverse = jacobian(f, x, JacobianMode::reverse);
  ASSERT_EQ(forward.shape(), (Shape{3, 1, 3}));
  ASSERT_EQ(reverse.shape(), forward.shape());
  auto a = forward.to_vector<double>(), b = reverse.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-14);
  EXPECT_NEAR(a[0], std::cos(0.2) * -0.7, 1e-14);  // d out0 / d x0
  EXPECT_NEAR(a[1], std::sin(0.2), 1e-14);         // d out0 / d x1
}

TEST(Autodiff, BackwardAccumulatesIntoLeaves) {
  Tensor w = tensor<double>({1.0, 2.0}).requires_grad_();
  backward(sum(w * w));
  backward(sum(3.0 * w));
  auto g = w.grad().to_vector<double>();
  EXPECT_DOUBLE_EQ(g[0], 2 * 1.0 + 3);
  EXPECT_DOUBLE_EQ(g[1], 2 * 2.0 + 3);
  EXPECT_FALSE(w.grad().requires_grad());
  w.zero_grad();
  EXPECT_FALSE(w.grad().defined());
}

TEST(Autodiff, NoGradAndDetachCutTheGraph) {
  Tensor x = tensor<double>({1.5}).requires_grad_();
  {
    NoGradGuard no_grad;
    EXPECT_FALSE((x * x).requires_grad());
  }
  EXPECT_TRUE((x * x).requires_grad());
  Tensor y = x * x.detach();  // d/dx = x.detach() only
  EXPECT_NEAR(grad({sum(y)}, {x})[0].item<double>(), 1.5, 1e-15);
  // stop_gradient is detach as an op: no derivative in either mode.
  EXPECT_NEAR(grad({sum(x * stop_gradient(x))}, {x})[0].item<double>(), 1.5, 1e-15);
  const auto stopped_square = [](const Tensor& t) { return t * stop_gradient(t); };
  EXPECT_NEAR(jvp(stopped_square, x.detach(), tensor<double>({1.0})).second.item<double>(), 1.5, 1e-15);
}

TEST(Autodiff, BroadcastGradientsAreSummedBack) {
  Tensor a = tensor<double>({1, 2, 3}, {3, 1}).requires_grad_();
  Tensor b = tensor<double>({1, 10, 100, 1000}).requires_grad_();
  auto grads = grad({sum(a * b)}, {a, b});
  ASSERT_EQ(grads[0].shape(), (Shape{3, 1}));
  ASSERT_EQ(grads[1].shape(), (Shape{4}));
  for (double g : grads[0].to_vector<double>()) EXPECT_DOUBLE_EQ(g, 1111);
  for (double g : grads[1].to_vector<double>()) EXPECT_DOUBLE_EQ(g, 6);
}

TEST(Autodiff, GradientWithRespectToIntermediateAndUnusedInputs) {
  Tensor x = tensor<double>({2.0}).requires_grad_();
  Tensor unused = tensor<double>({5.0}).requires_grad_();
  Tensor h = x * x;
  Tensor out = sum(exp(h));
  auto grads = grad({out}, {h, unused, x});
  EXPECT_NEAR(grads[0].item<double>(), std::exp(4.0), 1e-12);
  EXPECT_EQ(grads[1].item<double>(), 0.0);
  EXPECT_NEAR(grads[2].item<double>(), std::exp(4.0) * 4.0, 1e-11);
}

TEST(Autodiff, ComplexGradientIsConjugateWirtinger) {
  // L = |z|^2 = x^2 + y^2: the gradient is dL/dx + i dL/dy = 2z (PyTorch's convention).
  Tensor z = complex(tensor<double>({1.5, -0.5}), tensor<double>({-2.0, 0.25})).requires_grad_();
  Tensor loss = sum(real(z * conj(z)));
  Tensor g = grad({loss}, {z})[0];
  auto zs = z.to_vector<c128>(), gs = g.to_vector<c128>();
  for (size_t i = 0; i < zs.size(); ++i) {
    EXPECT_NEAR(std::abs(gs[i] - 2.0 * zs[i]), 0, 1e-14);
  }
  // So a descent step z -= lr * grad lowers the loss.
  Tensor stepped = z.detach() - 0.1 * g;
  EXPECT_LT(sum(real(stepped * conj(stepped))).item<double>(), loss.item<double>());

  // Holomorphic f: for L = Re(w * f(z)), grad = conj(w * f'(z)).
  Tensor w = complex(scalar64(0.3), scalar64(0.8));
  Tensor z0 = complex(scalar64(0.4), scalar64(-0.2)).requires_grad_();
  Tensor l2 = sum(real(w * exp(z0)));
  c128 expected = std::conj(c128(0.3, 0.8) * std::exp(c128(0.4, -0.2)));
  EXPECT_NEAR(std::abs(grad({l2}, {z0})[0].item<c128>() - expected), 0, 1e-14);
}

TEST(Autodiff, ForwardOverReverseOnComplexInputs) {
  // L = |z|^4 = (x^2+y^2)^2: hvp checked against finite differences of the gradient.
  Function f = [](const Tensor& z) { return sum(square(real(z * conj(z)))); };
  Tensor z = complex(tensor<double>({0.6}), tensor<double>({-0.3}));
  Tensor v = complex(tensor<double>({0.2}), tensor<double>({0.9}));
  Tensor hv = hvp(f, z, v);
  const double h = 1e-6;
  Tensor fd = (grad(f)(z + h * v) - grad(f)(z - h * v)) / (2 * h);
  EXPECT_NEAR(std::abs(hv.item<c128>() - fd.item<c128>()), 0, 1e-7);
}

// A complex tangent or cotangent for a real value was cast to it, its imaginary part dropped
// without a word: jvp of x * x at 1 along 1 + 2i gave 2.
TEST(Autodiff, ComplexDirectionsForRealValuesAreRefused) {
  const Tensor x = tensor<double>({1.0, 2.0});
  const Tensor along = complex(tensor<double>({1.0, 0.0}), tensor<double>({2.0, 1.0}));
  Function square_it = [](const Tensor& a) { return a * a; };
  const std::vector<std::string> message{"complex128 but its float64 value is real", "imaginary part"};
  auto with = [](const std::string& what, std::vector<std::string> words) {
    words.insert(words.begin(), what);
    return words;
  };
  expect_error([&] { jvp(square_it, x, along); }, with("jvp: tangent 0", message));
  expect_error([&] { vjp(square_it, x, along); }, with("vjp: cotangent 0", message));
  expect_error([&] { hvp([](const Tensor& a) { return sum(a * a * a); }, x, along); },
               with("hvp: the direction v", message));
  const Tensor leaf = tensor<double>({1.0, 2.0}).requires_grad_();
  expect_error([&] { grad({leaf * leaf}, {leaf}, {along}); }, with("grad: grad_outputs[0]", message));
  expect_error([&] { backward(leaf * leaf, along); }, with("backward: the gradient given", message));
  // A real direction for a complex value, or one of another real dtype, is cast as before.
  EXPECT_EQ(jvp(square_it, x, tensor<float>({1.0f, 1.0f})).second.to_vector<double>(), (std::vector<double>{2, 4}));
}

// A primitive with reverse rules and no tangent rule has an unknown tangent, not a zero one:
// forward mode refuses it by name (both of eddy's own such primitives have tangent rules now).
// Their gradient came out zeros: a loss made boolean or integer by mistake trained nothing. An
// integer output beside a floating one, seeded (as vjp seeds every output), contributes nothing.
TEST(Autodiff, GradRefusesIntegerOutputsWithNothingToDifferentiate) {
  const Tensor x = tensor<double>({-1.0, 2.0}).requires_grad_();
  const Tensor positives = sum(gt(x, zeros_like(x)));
  expect_error([&] { grad({positives}, {x}); }, {"grad: output 0 is int64, which has no derivative"});
  expect_error([&] { grad({positives}, {x}, {ones_like(positives)}); },
               {"grad: no output is floating-point (output 0 is int64)"});
  const std::vector<Tensor> mixed = grad({x * 2.0, cast(x, DType::i32)}, {x}, {ones_like(x), ones({2}, DType::i32)});
  EXPECT_EQ(mixed[0].to_vector<double>(), (std::vector<double>{2.0, 2.0}));
}

// Forward mode cast an integer primal's tangent to the integers (0.5 to 0); reverse mode failed in
// requires_grad_, naming neither the transformation nor the argument.
TEST(Autodiff, TransformationsRefuseAnIntegerPrimal) {
  const Tensor counts = tensor<int32_t>({1, 2});
  Function as_float = [](const Tensor& a) { return cast(a, DType::f64); };
  expect_error([&] { jvp(as_float, counts, tensor<double>({0.5, 0.5})); }, {"jvp: primal 0 is int32", "cast it"});
  expect_error([&] { vjp(as_float, counts, tensor<double>({1.0, 1.0})); }, {"vjp: primal 0 is int32", "cast it"});
  expect_error([&] { grad([&](const Tensor& a) { return sum(as_float(a)); })(counts); }, {"vjp: primal 0 is int32"});
}

TEST(Autodiff, ForwardModeRefusesAPrimitiveWithOnlyReverseRules) {
  static const Primitive& reverse_only = [] () -> const Primitive& {
    const auto& all = all_primitives();
    Primitive copy = *std::find_if(all.begin(), all.end(), [](const Primitive& p) { return p.name == "sin"; });
    copy.name = "sin_with_reverse_rules_only";
    copy.jvp = nullptr;
    copy.jvp_from_output = nullptr;
    return register_primitive(std::move(copy));
  }();
  const Tensor x = tensor<double>({0.4, 1.1});
  std::string message;
  try {
    jvp([](const Tensor& in) { return dispatch(reverse_only, {in}); }, x, ones_like(x));
  } catch (const Error& error) {
    message = error.what();
  }
  EXPECT_NE(message.find("sin_with_reverse_rules_only has reverse rules but no tangent rule"), std::string::npos)
      << message;
  // Without a tangent coming in, it runs as before.
  EXPECT_NEAR(dispatch(reverse_only, {x}).to_vector<double>()[1], std::sin(1.1), 1e-15);
}

TEST(Autodiff, LongChainsDoNotOverflowTheStack) {
  Tensor x = tensor<double>({1.0}).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0;
  EXPECT_DOUBLE_EQ(grad({sum(y)}, {x})[0].item<double>(), 1.0);
  y = Tensor();  // releasing the graph must not recurse 100000 frames deep (it would crash)
}

// A value a node saved, written in place before the backward pass, was differentiated at its new
// values: the gradient of sum(w x^2) came back as x_new^2 (100 for [2, 3] overwritten with 10).
TEST(Autodiff, ValuesWrittenInPlaceAfterTheyWereUsedAreRefused) {
  Tensor w = tensor<double>({1.0, 1.0}).requires_grad_();
  Tensor x = tensor<double>({2.0, 3.0});
  Tensor loss = sum(w * x * x);
  x.copy_(tensor<double>({10.0, 10.0}));
  expect_error([&] { backward(loss); }, {"backward: input 1 of mul (shape [2], float64) was written in place",
                                         "run the backward pass before the write"});
  // A parameter stepped before the backward pass of the loss computed with it.
  Tensor loss_of_w = sum(square(w));
  {
    NoGradGuard no_grad;
    w.fill_(5.0);
  }
  expect_error([&] { backward(loss_of_w); }, {"(shape [2], float64) was written in place"});
  // An output whose rule reads it (tanh), written through a detached alias.
  Tensor y = tanh(w);
  y.detach().fill_(0.0);
  expect_error([&] { grad({sum(y)}, {w}); }, {"the output of tanh", "was written in place"});
  // Writes after the backward pass, and into tensors the graph did not save, are fine.
  Tensor z = tensor<double>({2.0, 3.0});
  Tensor other = zeros({2}, DType::f64);
  Tensor fine = sum(w * z);
  other.fill_(1.0);
  EXPECT_EQ(grad({fine}, {w})[0].to_vector<double>(), (std::vector<double>{2.0, 3.0}));
  z.fill_(7.0);
}

}  // namespace
}  // namespace eddy
