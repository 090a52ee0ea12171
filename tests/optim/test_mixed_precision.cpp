// Autocast (ops/autocast.h) and loss scaling (optim/grad_scaler.h): the pieces of mixed-precision
// training on float32 parameters.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "eddy/eddy.h"
#include "eddy/ops/autocast.h"
#include "eddy/optim/clip.h"
#include "eddy/optim/grad_scaler.h"
#include "eddy/optim/sgd.h"
#include "support/expect_error.h"

namespace eddy::optim {
namespace {

TEST(Autocast, ProductsRunInTheLowDTypeAndGradientsReachFloat32Parameters) {
  Generator gen(4);
  const Tensor x = randn({8, 5}, DType::f32, &gen);
  const Tensor w = randn({5, 3}, DType::f32, &gen).requires_grad_();
  Tensor y, loss;
  {
    AutocastScope autocast(DType::bf16);
    y = matmul(x, w);
    loss = sum(square(y));
  }
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(y.to_vector<double>(), matmul(cast(x, DType::bf16), cast(w, DType::bf16)).to_vector<double>());
  const std::vector<Tensor> g = grad({loss}, {w});
  EXPECT_EQ(g[0].dtype(), DType::f32);
  // The same gradient as the casts written out by hand.
  const Tensor by_hand = sum(square(matmul(cast(x, DType::bf16), cast(w, DType::bf16))));
  EXPECT_EQ(g[0].to_vector<double>(), grad({by_hand}, {w})[0].to_vector<double>());
  // Outside the scope, and for float64, products run as written.
  EXPECT_EQ(matmul(x, w).dtype(), DType::f32);
  AutocastScope autocast(DType::f16);
  EXPECT_EQ(matmul(cast(x, DType::f64), cast(w, DType::f64)).dtype(), DType::f64);
  EXPECT_EQ(matmul(x, w).dtype(), DType::f16);
}

TEST(Autocast, ScopesNestAndOnlySixteenBitDTypesAreTaken) {
  {
    AutocastScope outer(DType::bf16);
    {
      AutocastScope inner(DType::f16);
      EXPECT_EQ(autocast_dtype(), DType::f16);
    }
    EXPECT_EQ(autocast_dtype(), DType::bf16);
  }
  EXPECT_FALSE(autocast_dtype().has_value());
  expect_error([] { AutocastScope scope(DType::f64); }, {"autocast", "bfloat16 or float16", "float64"});
}

// The loss times a power of two, its gradients divided back: the same step as without scaling,
// bit for bit.
TEST(GradScaler, AScaledStepIsThePlainStep) {
  const std::vector<float> start = {0.75f, -1.5f, 2.25f};
  Tensor plain = tensor<float>(start).requires_grad_(), scaled = tensor<float>(start).requires_grad_();
  Sgd plain_sgd({plain}, {.learning_rate = 0.1}), scaled_sgd({scaled}, {.learning_rate = 0.1});
  GradScaler scaler({.initial_scale = 1024.0, .growth_interval = 2});
  for (int step = 0; step < 3; ++step) {
    plain_sgd.zero_grad();
    backward(sum(square(plain) * 0.5));
    plain_sgd.step();
    scaled_sgd.zero_grad();
    backward(scaler.scale(sum(square(scaled) * 0.5)));
    EXPECT_TRUE(scaler.step(scaled_sgd));
  }
  EXPECT_EQ(scaled.to_vector<float>(), plain.to_vector<float>());
  EXPECT_NE(plain.to_vector<float>(), start);  // the steps moved them
  EXPECT_EQ(scaler.current_scale(), 2048.0);  // grown once, after 2 good steps in a row
}

// Clipping between backward and step clipped the scaled gradients (a norm of 327680 for 5), so
// an SGD step came out 65536 times too small; unscale() first makes it the plain clipped step.
TEST(GradScaler, UnscaledGradientsClipAsThePlainOnes) {
  Tensor plain = tensor<float>({3.0f, 4.0f}).requires_grad_(), scaled = tensor<float>({3.0f, 4.0f}).requires_grad_();
  Sgd plain_sgd({plain}, {.learning_rate = 0.1}), scaled_sgd({scaled}, {.learning_rate = 0.1});
  GradScaler scaler;
  backward(sum(square(plain) * 0.5));
  EXPECT_FLOAT_EQ(clip_grad_norm({plain}, 1.0), 5.0);
  plain_sgd.step();
  backward(scaler.scale(sum(square(scaled) * 0.5)));
  scaler.unscale(scaled_sgd);
  expect_error([&] { scaler.unscale(scaled_sgd); }, {"unscaled already since the last scale()"});
  EXPECT_FLOAT_EQ(clip_grad_norm({scaled}, 1.0), 5.0);
  EXPECT_TRUE(scaler.step(scaled_sgd));
  EXPECT_EQ(scaled.to_vector<float>(), plain.to_vector<float>());
  EXPECT_NEAR(plain.to_vector<float>()[0], 2.94f, 1e-6);
}

// Each step() after the first of an optimiser, or unscale() after a step, begins the next
// iteration when no scale() came between (a loss scaled by current_scale() by hand after a first
// scale()): the gradients of the second iteration were left scaled.
TEST(GradScaler, IterationsWithoutScaleStillUnscaleEachStep) {
  Tensor plain = tensor<float>({0.75f, -1.5f}).requires_grad_(), scaled = tensor<float>({0.75f, -1.5f}).requires_grad_();
  Sgd plain_sgd({plain}, {.learning_rate = 0.1}), scaled_sgd({scaled}, {.learning_rate = 0.1});
  GradScaler scaler({.initial_scale = 1024.0, .growth_interval = 100});
  for (int step = 0; step < 3; ++step) {
    plain_sgd.zero_grad();
    backward(sum(square(plain) * 0.5));
    plain_sgd.step();
    scaled_sgd.zero_grad();
    const Tensor loss = sum(square(scaled) * 0.5);
    backward(step == 0 ? scaler.scale(loss) : loss * scaler.current_scale());
    if (step == 1) scaler.unscale(scaled_sgd);
    EXPECT_TRUE(scaler.step(scaled_sgd));
  }
  EXPECT_EQ(scaled.to_vector<float>(), plain.to_vector<float>());
}

// Before any scale() the gradients carry no scale: dividing them by 65536 shrank every step
// that much, silently.
TEST(GradScaler, AStepBeforeAnyScaleIsRefused) {
  Tensor p = tensor<float>({1.0f, 2.0f}).requires_grad_();
  Sgd sgd({p}, {.learning_rate = 0.1});
  GradScaler scaler;
  backward(sum(square(p)));
  expect_error([&] { scaler.step(sgd); }, {"GradScaler::step: no loss was scaled yet", "scale(loss)"});
  expect_error([&] { scaler.unscale(sgd); }, {"GradScaler::unscale: no loss was scaled yet"});
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));
}

// Under autocast, cross_entropy's loss is float32, as PyTorch's autocast runs it: a float16 loss
// passed back the scale, 65536, as a float16 gradient, which is inf, so the first iteration (and
// every one at that scale) was skipped.
TEST(GradScaler, AFloat16ModelStepsAtTheFirstScale) {
  Generator generator(5);
  Tensor w = randn({4, 5}, DType::f32, &generator).requires_grad_();
  Sgd sgd({w}, {.learning_rate = 0.1});
  GradScaler scaler;
  const Tensor x = randn({8, 4}, DType::f32, &generator);
  Tensor loss;
  {
    AutocastScope autocast(DType::f16);
    loss = cross_entropy(matmul(x, w), tensor<int64_t>({0, 1, 2, 3, 4, 0, 1, 2}, {8}));
  }
  EXPECT_EQ(loss.dtype(), DType::f32);
  backward(scaler.scale(loss));
  EXPECT_TRUE(scaler.step(sgd));
  EXPECT_EQ(scaler.skipped_steps(), 0);
}

TEST(GradScaler, AnOverflowSkipsTheStepAndBacksOff) {
  Tensor p = tensor<float>({1.0f, 2.0f}).requires_grad_();
  Sgd sgd({p}, {.learning_rate = 0.1});
  GradScaler scaler({.initial_scale = 1e38});
  backward(scaler.scale(sum(square(p) * 10.0)));  // gradients of 2e39 and 4e39: float32 infinities
  EXPECT_FALSE(scaler.step(sgd));
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_FALSE(p.grad().defined());
  EXPECT_EQ(scaler.current_scale(), 5e37);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  expect_error([] { GradScaler bad({.backoff_factor = 1.5}); }, {"backoff_factor", "(0, 1)", "1.5"});
}

// A resumed run scales as an uninterrupted one: with the scale alone (the good steps in a row
// lost) the growth came a step late (32768 where 65536 was due).
TEST(GradScaler, AResumedScalerScalesAsAnUninterruptedOne) {
  auto iterate = [](GradScaler& scaler, Sgd& sgd, const Tensor& p) {
    sgd.zero_grad();
    backward(scaler.scale(sum(square(p))));
    scaler.step(sgd);
    return scaler.current_scale();
  };
  const GradScalerOptions options{.initial_scale = 16.0, .growth_interval = 3};
  Tensor p = tensor<float>({1.0f, 2.0f}).requires_grad_();
  Sgd sgd({p}, {.learning_rate = 0.01});
  GradScaler uninterrupted(options);
  for (int i = 0; i < 4; ++i) iterate(uninterrupted, sgd, p);
  GradScaler resumed(options);
  resumed.load_state_dict(uninterrupted.state_dict());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(iterate(resumed, sgd, p), iterate(uninterrupted, sgd, p)) << "iteration " << i;
  EXPECT_EQ(resumed.current_scale(), 64.0);

  // Loaded with more good steps in a row than its own interval: it grows at the next good step
  // (the count had to equal the interval, and passed it for ever).
  GradScaler longer({.initial_scale = 16.0, .growth_interval = 5});
  for (int i = 0; i < 4; ++i) iterate(longer, sgd, p);
  GradScaler shorter(options);
  shorter.load_state_dict(longer.state_dict());
  EXPECT_EQ(iterate(shorter, sgd, p), 32.0);

  nn::StateDict bad = uninterrupted.state_dict();
  bad["scale"] = scalar(-1.0, DType::f64);
  expect_error([&] { resumed.load_state_dict(bad); }, {"\"scale\" must be finite and positive", "-1"});
  bad = uninterrupted.state_dict();
  bad["growth_factor"] = scalar(2.0, DType::f64);
  expect_error([&] { resumed.load_state_dict(bad); }, {"unexpected key \"growth_factor\""});
  bad.erase("growth_factor");
  bad.erase("skipped_steps");
  expect_error([&] { resumed.load_state_dict(bad); }, {"missing key \"skipped_steps\""});
}

}  // namespace
}  // namespace eddy::optim
