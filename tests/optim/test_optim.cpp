// Optimisers, schedules and clipping: first-order trajectories against PyTorch, optimiser state
// round trips and errors, L-BFGS's stopping rules and non-finite handling, and the 10-D
// Rosenbrock function solved to 1e-8.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "eddy/compiler/compile.h"
#include "eddy/eddy.h"
#include "eddy/optim/adam.h"
#include "eddy/optim/clip.h"
#include "eddy/optim/lbfgs.h"
#include "eddy/optim/schedule.h"
#include "eddy/optim/sgd.h"

namespace eddy::optim {
namespace {

using Rows = std::vector<std::vector<double>>;
using Loss = std::function<Tensor(const Tensor&)>;

Tensor parameter(const std::vector<double>& values, DType dtype = DType::f64) {
  Tensor p = cast(tensor(values), dtype);
  p.requires_grad_();
  return p;
}

// The problems of scripts/reference/adam_reference.py.
Tensor quadratic(const Tensor& x) {
  const Tensor a = cast(tensor<double>({1.0, 10.0, 0.1}), x.dtype());
  const Tensor c = cast(tensor<double>({0.3, 0.2, -0.4}), x.dtype());
  return 0.5 * sum(a * square(x - c));
}

Tensor banana(const Tensor& x) {
  const Tensor x0 = slice(x, 0, 0, 1), x1 = slice(x, 0, 1, 2);
  return sum(square(1.0 - x0) + 5.0 * square(x1 - square(x0)));
}

// Parameters after each of `steps` updates.
Rows trajectory(Optimizer& opt, const Loss& f, int steps) {
  Rows rows;
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    backward(f(opt.parameters()[0]));
    opt.step();
    rows.push_back(opt.parameters()[0].to_vector<double>());
  }
  return rows;
}

void expect_rows_near(const Rows& actual, const Rows& expected, double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(actual[i].size(), expected[i].size());
    for (size_t j = 0; j < actual[i].size(); ++j) {
      EXPECT_NEAR(actual[i][j], expected[i][j], tolerance * (1 + std::abs(expected[i][j])))
          << "step " << i + 1 << ", entry " << j;
    }
  }
}

void expect_error(const std::function<void()>& op, const std::string& fragment) {
  try {
    op();
    ADD_FAILURE() << "expected eddy::Error mentioning \"" << fragment << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << "message \"" << e.what() << "\" does not mention \"" << fragment << "\"";
  }
}

// ---- first-order optimisers against PyTorch ----
//
// Reference values from PyTorch 2.15.0 (CPU, float64), printed by
//     python3 scripts/reference/adam_reference.py
// with torch.optim.Adam(lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05, amsgrad=False),
// torch.optim.AdamW(lr=0.1, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1, amsgrad=False) and
// torch.optim.SGD(lr=0.02, momentum=0.9, dampening=0, weight_decay=0.01, nesterov=True).

const AdamOptions kAdam{.learning_rate = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                        .weight_decay = 0.05};
const AdamOptions kAdamW{.learning_rate = 0.1, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6,
                         .weight_decay = 0.1};
const SgdOptions kSgd{.learning_rate = 0.02, .momentum = 0.9, .nesterov = true,
                      .weight_decay = 0.01};

const Rows kAdamQuadratic = {
    {0.9000000013333334, -1.9000000000452488, 0.40000000869565144},
    {0.8006733897787844, -1.8001483167982344, 0.3006053621575968},
    {0.7026555589545608, -1.7005541224192684, 0.20237289448231488},
    {0.6067645208706205, -1.601334620387876, 0.10600678381433105},
    {0.5140325947887467, -1.5026152429693111, 0.012383136030243672},
};
const Rows kAdamBanana = {
    {-1.100000000066578, 1.0999999997701149},
    {-1.0085407318505724, 1.182540524247468},
    {-0.9350695401959003, 1.2192564661498055},
    {-0.8844450544036663, 1.2091288738787518},
    {-0.8546721729602381, 1.1700523306622967},
};
const Rows kAdamWQuadratic = {
    {0.8900001428569387, -1.8800000045454544, 0.39500111109876557},
    {0.7823639021241039, -1.7615366631696245, 0.29189980690070555},
    {0.6782224300984333, -1.6448370414790487, 0.19138061571215692},
    {0.5789703862993294, -1.5301368533192086, 0.09423216810722926},
    {0.4862653797774952, -1.4176779478634545, 0.0013439934669758624},
};
const Rows kAdamWBanana = {
    {-1.0880000066844915, 1.0899999772727325},
    {-0.9887741573451347, 1.1571250717246098},
    {-0.9130050740182584, 1.1716061459025284},
    {-0.8637518070815342, 1.137337133052695},
    {-0.8362798280865719, 1.0744969691161488},
};
const Rows kSgdQuadratic = {
    {0.97302, -1.16324, 0.49639},
    {0.9355734924, -0.28804276880000007, 0.4912560898},
    {0.889653828521688, 0.4396078644761439, 0.484764972364636},
    {0.8371899431843768, 0.9153758488528538, 0.47706933614612823},
    {0.7800150029639046, 1.1145849144265558, 0.4683089483696624},
};
const Rows kSgdBanana = {
    {-0.631064, 1.16682},
    {-0.6329336902986475, 0.9454348817964799},
    {-0.6565761690696836, 0.6773477850980113},
    {-0.6093428225197836, 0.44047445543947045},
    {-0.47787469113041764, 0.24528219809886073},
};

// A compiled step's gradients carry its history, which holds its program, whose graph holds the
// parameters: stored on them with it, that was a cycle, and every compiled solve in a process
// leaked its programs. set_grads stores gradients detached.
TEST(SetGrads, StoresGradientsWithoutTheirHistory) {
  Tensor w = ones({3}).requires_grad_();
  const Tensor with_history = w * 2.0;
  ASSERT_TRUE(with_history.requires_grad());
  set_grads({w}, {with_history});
  EXPECT_FALSE(w.grad().requires_grad());
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

TEST(Adam, MatchesPyTorchTrajectory) {
  Adam on_quadratic({parameter({1.0, -2.0, 0.5})}, kAdam);
  expect_rows_near(trajectory(on_quadratic, quadratic, 5), kAdamQuadratic, 1e-13);
  Adam on_banana({parameter({-1.2, 1.0})}, kAdam);
  expect_rows_near(trajectory(on_banana, banana, 5), kAdamBanana, 1e-13);
}

TEST(AdamW, MatchesPyTorchTrajectory) {
  AdamW on_quadratic({parameter({1.0, -2.0, 0.5})}, kAdamW);
  expect_rows_near(trajectory(on_quadratic, quadratic, 5), kAdamWQuadratic, 1e-13);
  AdamW on_banana({parameter({-1.2, 1.0})}, kAdamW);
  expect_rows_near(trajectory(on_banana, banana, 5), kAdamWBanana, 1e-13);
}

// Through the compiler, as `eddy lm train` runs them: the same PyTorch trajectories, each
// parameter's update one fused loop.
TEST(Adam, CompiledUpdatesMatchPyTorchTrajectory) {
  std::vector<std::shared_ptr<CompiledFunction>> compiled;
  int calls = 0;
  auto compile_update = [&](Adam::Update update) {
    compiled.push_back(std::make_shared<CompiledFunction>(std::move(update)));
    return Adam::Update([program = compiled.back(), &calls](const std::vector<Tensor>& in) {
      ++calls;
      return (*program)(in);
    });
  };
  AdamW on_quadratic({parameter({1.0, -2.0, 0.5})}, kAdamW);
  on_quadratic.run_updates_through(compile_update);
  expect_rows_near(trajectory(on_quadratic, quadratic, 5), kAdamWQuadratic, 1e-13);
  Adam on_banana({parameter({-1.2, 1.0})}, kAdam);
  on_banana.run_updates_through(compile_update);
  expect_rows_near(trajectory(on_banana, banana, 5), kAdamBanana, 1e-13);
  EXPECT_EQ(calls, 10);
  ASSERT_EQ(compiled.size(), 2u);
  for (const auto& program : compiled) {
    EXPECT_EQ(program->stats().traces, 1);
    EXPECT_EQ(program->stats().last.fused_kernels, 1u);
  }
}

TEST(AdamW, DiffersFromAdamWithTheSameWeightDecay) {
  // Same options: only the placement of weight decay differs, and the trajectories part.
  Adam adam({parameter({1.0, -2.0, 0.5})}, kAdamW);
  AdamW adamw({parameter({1.0, -2.0, 0.5})}, kAdamW);
  const Rows a = trajectory(adam, quadratic, 3), b = trajectory(adamw, quadratic, 3);
  EXPECT_GT(std::abs(a[2][0] - b[2][0]), 1e-4);
}

TEST(Sgd, NesterovMatchesPyTorchTrajectory) {
  Sgd on_quadratic({parameter({1.0, -2.0, 0.5})}, kSgd);
  expect_rows_near(trajectory(on_quadratic, quadratic, 5), kSgdQuadratic, 1e-13);
  Sgd on_banana({parameter({-1.2, 1.0})}, kSgd);
  expect_rows_near(trajectory(on_banana, banana, 5), kSgdBanana, 1e-13);
}

TEST(Sgd, PlainStepIsLearningRateTimesGradient) {
  Sgd sgd({parameter({1.0, -2.0, 0.5})}, {.learning_rate = 0.1});
  const Rows rows = trajectory(sgd, quadratic, 1);
  // grad = a * (x - c) = (0.7, -22, 0.09)
  expect_rows_near(rows, {{1.0 - 0.07, -2.0 + 2.2, 0.5 - 0.009}}, 1e-15);
}

TEST(Adam, Float32FollowsTheFloat64Reference) {
  Adam adam({parameter({1.0, -2.0, 0.5}, DType::f32)}, kAdam);
  const Rows rows = trajectory(adam, quadratic, 5);
  EXPECT_EQ(adam.parameters()[0].dtype(), DType::f32);
  expect_rows_near(rows, kAdamQuadratic, 1e-5);
}

TEST(Optimizer, UpdatesInPlaceSoViewsSeeTheNewValues) {
  Tensor p = parameter({1.0, -2.0, 0.5});
  const Tensor view = slice(p.detach(), 0, 1, 2);
  Adam adam({p}, kAdam);
  trajectory(adam, quadratic, 1);
  EXPECT_TRUE(adam.parameters()[0].same(p));
  EXPECT_DOUBLE_EQ(view.item<double>(), kAdamQuadratic[0][1]);
}

TEST(Optimizer, SkipsParametersWithoutGradient) {
  Tensor used = parameter({1.0, -2.0, 0.5}), unused = parameter({4.0});
  Adam adam({used, unused}, kAdam);
  backward(quadratic(used));
  adam.step();
  EXPECT_EQ(unused.item<double>(), 4.0);
  EXPECT_NE(used.to_vector<double>()[0], 1.0);
}

TEST(Optimizer, ZeroGradClearsGradients) {
  Tensor p = parameter({1.0, -2.0, 0.5});
  Sgd sgd({p}, {});
  backward(quadratic(p));
  ASSERT_TRUE(p.grad().defined());
  sgd.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

TEST(Optimizer, LearningRateCanBeChangedBetweenSteps) {
  Sgd sgd({parameter({1.0, -2.0, 0.5})}, {.learning_rate = 0.1});
  sgd.set_learning_rate(0.2);
  EXPECT_EQ(sgd.learning_rate(), 0.2);
  EXPECT_NEAR(trajectory(sgd, quadratic, 1)[0][0], 1.0 - 0.14, 1e-15);
  expect_error([&] { sgd.set_learning_rate(-1); }, "learning rate");
  expect_error([&] { sgd.set_learning_rate(NAN); }, "learning rate");
}

TEST(Optimizer, RejectsBadOptionsAndParameters) {
  expect_error([] { Adam({parameter({1.0})}, {.beta1 = 1.0}); }, "beta1");
  expect_error([] { Adam({parameter({1.0})}, {.beta2 = -0.1}); }, "beta2");
  expect_error([] { Adam({parameter({1.0})}, {.eps = 0}); }, "eps");
  expect_error([] { AdamW({parameter({1.0})}, {.weight_decay = -1}); }, "weight_decay");
  expect_error([] { Sgd({parameter({1.0})}, {.nesterov = true}); }, "nesterov");
  expect_error([] { Sgd({parameter({1.0})}, {.momentum = 1.5}); }, "momentum");
  expect_error([] { Sgd({tensor<double>({1.0}).requires_grad_() * 2.0}, {}); }, "computed from other tensors");
  expect_error([] { Sgd({}, {}); }, "no parameters");
}

// ---- optimiser state ----

TEST(OptimizerState, AdamRoundTripContinuesTheTrajectory) {
  Tensor p = parameter({1.0, -2.0, 0.5});
  Adam first({p}, kAdam);
  trajectory(first, quadratic, 3);
  const nn::StateDict state = first.state_dict();
  for (const char* key : {"adam.step", "adam.m.0", "adam.v.0"}) EXPECT_TRUE(state.count(key)) << key;
  EXPECT_EQ(state.at("adam.step").dim(), 0);
  EXPECT_EQ(state.at("adam.step").item<int64_t>(), 3);

  const std::vector<double> saved_m = state.at("adam.m.0").to_vector<double>();
  trajectory(first, quadratic, 1);  // a saved state is a snapshot, not a view of the optimiser
  EXPECT_EQ(state.at("adam.m.0").to_vector<double>(), saved_m);
  EXPECT_NE(first.state_dict().at("adam.m.0").to_vector<double>(), saved_m);

  Tensor q = parameter(kAdamQuadratic[2]);
  Adam second({q}, kAdam);
  second.load_state_dict(state);
  EXPECT_EQ(second.steps(), 3);
  const Rows rest = trajectory(second, quadratic, 2);
  expect_rows_near(rest, {kAdamQuadratic[3], kAdamQuadratic[4]}, 1e-13);
}

TEST(OptimizerState, SgdMomentumRoundTrip) {
  Sgd first({parameter({1.0, -2.0, 0.5})}, kSgd);
  trajectory(first, quadratic, 2);
  Sgd second({parameter(kSgdQuadratic[1])}, kSgd);
  second.load_state_dict(first.state_dict());
  expect_rows_near(trajectory(second, quadratic, 1), {kSgdQuadratic[2]}, 1e-13);
}

TEST(OptimizerState, LoadRejectsMissingKeysAndMismatchesNamingTheKey) {
  Tensor p = parameter({1.0, -2.0, 0.5});
  Adam adam({p}, kAdam);
  trajectory(adam, quadratic, 1);
  const nn::StateDict good = adam.state_dict();

  nn::StateDict missing = good;
  missing.erase("adam.v.0");
  expect_error([&] { adam.load_state_dict(missing); }, "missing key \"adam.v.0\"");

  nn::StateDict wrong_shape = good;
  wrong_shape["adam.m.0"] = zeros({2}, DType::f64);
  expect_error([&] { adam.load_state_dict(wrong_shape); }, "\"adam.m.0\" has shape [2]");

  nn::StateDict wrong_dtype = good;
  wrong_dtype["adam.m.0"] = zeros({3}, DType::f32);
  expect_error([&] { adam.load_state_dict(wrong_dtype); }, "\"adam.m.0\" has dtype");

  // Moments no run could have written: a negative second moment would make the first step after a
  // resume NaN, a non-finite first moment every step after it.
  nn::StateDict negative = good;
  negative["adam.v.0"] = tensor(std::vector<double>{1e-3, -1e-3, 0.0});
  expect_error([&] { adam.load_state_dict(negative); }, "\"adam.v.0\" holds negative values (the least is -0.001)");
  nn::StateDict negative_steps = good;
  negative_steps["adam.step"] = scalar(-1, DType::i64);
  expect_error([&] { adam.load_state_dict(negative_steps); }, "\"adam.step\" is -1; a step count is not negative");
  nn::StateDict not_finite = good;
  not_finite["adam.m.0"] = tensor(std::vector<double>{0.0, std::nan(""), 0.0});
  expect_error([&] { adam.load_state_dict(not_finite); }, "\"adam.m.0\" holds non-finite values");

  // A failed load changes nothing: the next step still follows the reference.
  nn::StateDict partly_bad = good;
  partly_bad["adam.step"] = scalar(7, DType::i64);
  partly_bad["adam.m.0"] = zeros({3}, DType::f32);
  expect_error([&] { adam.load_state_dict(partly_bad); }, "adam.m.0");
  EXPECT_EQ(adam.steps(), 1);
  expect_rows_near(trajectory(adam, quadratic, 1), {kAdamQuadratic[1]}, 1e-13);

  AdamW adamw({parameter({1.0, -2.0, 0.5})}, kAdamW);
  expect_error([&] { adamw.load_state_dict(good); }, "missing key \"adamw.step\"");
}

// ---- schedules ----

TEST(Schedule, ValuesAtKnownSteps) {
  EXPECT_EQ(ConstantSchedule(0.3).learning_rate(1000), 0.3);

  const StepSchedule step(1.0, 10, 0.5);
  EXPECT_EQ(step.learning_rate(0), 1.0);
  EXPECT_EQ(step.learning_rate(9), 1.0);
  EXPECT_EQ(step.learning_rate(10), 0.5);
  EXPECT_EQ(step.learning_rate(25), 0.25);

  EXPECT_NEAR(ExponentialSchedule(2.0, 0.9).learning_rate(3), 2.0 * 0.729, 1e-15);

  const CosineWithWarmupSchedule cosine(1.0, 4, 14, 0.1);
  EXPECT_DOUBLE_EQ(cosine.learning_rate(0), 0.25);
  EXPECT_DOUBLE_EQ(cosine.learning_rate(3), 1.0);
  EXPECT_DOUBLE_EQ(cosine.learning_rate(4), 1.0);
  EXPECT_DOUBLE_EQ(cosine.learning_rate(9), 0.55);  // halfway down the cosine
  EXPECT_DOUBLE_EQ(cosine.learning_rate(14), 0.1);
  EXPECT_DOUBLE_EQ(cosine.learning_rate(100), 0.1);
  EXPECT_DOUBLE_EQ(CosineWithWarmupSchedule(1.0, 0, 2).learning_rate(0), 1.0);

  const PiecewiseSchedule piecewise({10, 20}, {1.0, 0.1, 0.01});
  EXPECT_EQ(piecewise.learning_rate(0), 1.0);
  EXPECT_EQ(piecewise.learning_rate(9), 1.0);
  EXPECT_EQ(piecewise.learning_rate(10), 0.1);
  EXPECT_EQ(piecewise.learning_rate(19), 0.1);
  EXPECT_EQ(piecewise.learning_rate(20), 0.01);
  EXPECT_EQ(piecewise.learning_rate(1 << 30), 0.01);
}

TEST(Schedule, DrivesAnOptimizer) {
  Sgd sgd({parameter({1.0})}, {.learning_rate = 1});
  const StepSchedule schedule(0.1, 1, 0.5);
  Tensor x = sgd.parameters()[0];
  for (int64_t step = 0; step < 3; ++step) {
    sgd.set_learning_rate(schedule.learning_rate(step));
    sgd.zero_grad();
    backward(sum(x));  // gradient 1: each step moves x by the learning rate
    sgd.step();
  }
  EXPECT_NEAR(x.item<double>(), 1.0 - 0.1 - 0.05 - 0.025, 1e-15);
}

TEST(Schedule, RejectsBadArguments) {
  expect_error([] { StepSchedule(1.0, 10, -0.5); }, "gamma");
  expect_error([] { StepSchedule(1.0, 0, 0.5); }, "period");
  expect_error([] { ExponentialSchedule(1.0, 0); }, "gamma");
  expect_error([] { ConstantSchedule(-1); }, "value");
  expect_error([] { CosineWithWarmupSchedule(1.0, 10, 10); }, "warmup < total");
  expect_error([] { CosineWithWarmupSchedule(0.1, 0, 10, 0.2); }, "floor");
  expect_error([] { PiecewiseSchedule({10, 10}, {1, 2, 3}); }, "strictly increasing");
  expect_error([] { PiecewiseSchedule({10, 5}, {1, 2, 3}); }, "strictly increasing");
  expect_error([] { PiecewiseSchedule({10}, {1}); }, "need 2 values");
  expect_error([] { ConstantSchedule(1).learning_rate(-1); }, "step must be >= 0");
}

// ---- gradient clipping ----

TEST(ClipGradNorm, ScalesToTheMaximumAndReturnsTheNormBefore) {
  Tensor a = parameter({3.0, 0.0}), b = parameter({0.0, 0.0, 0.0}, DType::f32);
  Tensor unused = parameter({1.0});
  backward(sum(a * a) / 2.0 + sum(b * cast(tensor<double>({4.0, 0.0, 0.0}), DType::f32)));
  // grads (3, 0) and (4, 0, 0): total norm 5.
  const double norm = clip_grad_norm({a, b, unused}, 1.0);
  EXPECT_NEAR(norm, 5.0, 1e-12);
  const auto ga = a.grad().to_vector<double>(), gb = b.grad().to_vector<double>();
  EXPECT_NEAR(ga[0], 0.6, 1e-6);
  EXPECT_NEAR(gb[0], 0.8, 1e-6);
  EXPECT_EQ(b.grad().dtype(), DType::f32);
  EXPECT_LE(std::hypot(ga[0], gb[0]), 1.0);
  EXPECT_FALSE(unused.grad().defined());
}

TEST(ClipGradNorm, LeavesSmallAndNonFiniteGradientsAlone) {
  Tensor a = parameter({0.3, 0.4});
  backward(sum(a));  // a broadcast-view gradient (1, 1)
  EXPECT_NEAR(clip_grad_norm({a}, 10.0), std::sqrt(2.0), 1e-15);
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{1.0, 1.0}));

  Tensor c = parameter({1.0, 2.0});
  backward(sum(c * tensor<double>({INFINITY, 1.0})));
  EXPECT_TRUE(std::isinf(clip_grad_norm({c}, 1.0)));
  EXPECT_EQ(c.grad().to_vector<double>()[1], 1.0);

  expect_error([&] { clip_grad_norm({a}, 0.0); }, "max_norm");
}

// torch's factor min(1, max_norm / (N + 1e-6)) also scales a norm just under max_norm: a norm
// of exactly max_norm was left as it was, 2e-7 off torch's trajectory.
TEST(ClipGradNorm, ScalesANormAtMaxNormAsTorchDoes) {
  Tensor a = parameter({0.0, 0.0});
  backward(sum(a * tensor<double>({3.0, 4.0})));
  EXPECT_EQ(clip_grad_norm({a}, 5.0), 5.0);
  const auto g = a.grad().to_vector<double>();
  EXPECT_EQ(g[0], 3.0 * (5.0 / (5.0 + 1e-6)));
  EXPECT_EQ(g[1], 4.0 * (5.0 / (5.0 + 1e-6)));
}

// ---- L-BFGS ----

// The chained Rosenbrock function, sum_i 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2; minimum 0 at
// x = (1, ..., 1).
Tensor rosenbrock(const Tensor& x) {
  const int64_t n = x.size(0);
  const Tensor head = slice(x, 0, 0, n - 1), tail = slice(x, 0, 1, n);
  return sum(100.0 * square(tail - square(head)) + square(1.0 - head));
}

Closure closure_for(const Tensor& x, const Loss& f, int* calls = nullptr) {
  return [x, f, calls] {
    Tensor(x).zero_grad();
    Tensor loss = f(x);
    backward(loss);
    if (calls) ++*calls;
    return loss;
  };
}

double max_error_from(const Tensor& x, double target) {
  double worst = 0;
  for (double v : x.to_vector<double>()) worst = std::max(worst, std::abs(v - target));
  return worst;
}

// The documented budget for this test (docs/optim.md): at most 100 iterations and 150
// evaluations in one step() call.
TEST(Lbfgs, SolvesTenDimensionalRosenbrockTo1e8) {
  std::vector<double> start(10);
  for (size_t i = 0; i < start.size(); ++i) start[i] = i % 2 == 0 ? -1.2 : 1.0;
  Tensor x = parameter(start);
  Lbfgs lbfgs({x}, {.max_iterations = 100, .max_evaluations = 150, .tolerance_grad = 1e-10,
                    .tolerance_change = 0});
  int calls = 0;
  const LbfgsReport report = lbfgs.step(closure_for(x, rosenbrock, &calls));
  SCOPED_TRACE(report.message);
  EXPECT_EQ(report.stop, LbfgsStop::gradient_tolerance);
  EXPECT_TRUE(report.converged());
  EXPECT_LE(max_error_from(x, 1.0), 1e-8);
  EXPECT_LE(report.iterations, 100);
  EXPECT_EQ(report.evaluations, calls);
  EXPECT_LE(report.gradient_max_abs, 1e-10);
  EXPECT_NEAR(report.loss, rosenbrock(x.detach()).item<double>(), 1e-30);
  EXPECT_EQ(report.non_finite_evaluations, 0);
  std::printf("Rosenbrock-10: %s; max |x - 1| = %.3g\n", report.message.c_str(),
              max_error_from(x, 1.0));
}

// A closure that returns the loss without computing gradients was reported converged at once.
TEST(Lbfgs, AClosureThatLeavesNoGradientIsRefused) {
  Tensor x = parameter({-1.2, 1.0});
  Lbfgs lbfgs({x}, {.max_iterations = 7});
  try {
    lbfgs.step([&] { return rosenbrock(x); });
    ADD_FAILURE() << "no gradient was taken for convergence";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("after the closure no parameter has a gradient"), std::string::npos);
  }
}

TEST(Lbfgs, LeavesTheFinalGradientInGrad) {
  Tensor x = parameter({-1.2, 1.0, -1.2, 1.0});
  Lbfgs lbfgs({x}, {.max_iterations = 7});
  const LbfgsReport report = lbfgs.step(closure_for(x, rosenbrock));
  ASSERT_EQ(report.stop, LbfgsStop::max_iterations);
  EXPECT_EQ(report.iterations, 7);
  const std::vector<double> left = x.grad().to_vector<double>();
  closure_for(x, rosenbrock)();
  const std::vector<double> fresh = x.grad().to_vector<double>();
  for (size_t i = 0; i < fresh.size(); ++i) EXPECT_NEAR(left[i], fresh[i], 1e-12);
  EXPECT_DOUBLE_EQ(report.loss, rosenbrock(x.detach()).item<double>());
}

TEST(Lbfgs, StopRequestedEndsTheCallAtTheCurrentPoint) {
  // Asked before every iteration: true the fourth time leaves the point of three iterations.
  Tensor x = parameter({-1.2, 1.0, -1.2, 1.0});
  int asked = 0;
  Lbfgs lbfgs({x}, {.stop_requested = [&] { return ++asked == 4; }});
  const LbfgsReport report = lbfgs.step(closure_for(x, rosenbrock));
  EXPECT_EQ(report.stop, LbfgsStop::interrupted) << report.message;
  EXPECT_FALSE(report.converged());
  EXPECT_EQ(report.iterations, 3);
  EXPECT_DOUBLE_EQ(report.loss, rosenbrock(x.detach()).item<double>());
  Tensor y = parameter({-1.2, 1.0, -1.2, 1.0});
  Lbfgs three({y}, {.max_iterations = 3});
  three.step(closure_for(y, rosenbrock));
  EXPECT_EQ(x.to_vector<double>(), y.to_vector<double>());
}

TEST(Lbfgs, MaxEvaluationsCountsEveryClosureCall) {
  Tensor x = parameter({-1.2, 1.0, -1.2, 1.0});
  Lbfgs lbfgs({x}, {.max_evaluations = 10});
  int calls = 0;
  const LbfgsReport report = lbfgs.step(closure_for(x, rosenbrock, &calls));
  EXPECT_EQ(report.stop, LbfgsStop::max_evaluations);
  EXPECT_EQ(report.evaluations, 10);
  EXPECT_EQ(calls, 10);
  EXPECT_GE(report.iterations, 1);
  EXPECT_LT(report.loss, report.initial_loss);
}

TEST(Lbfgs, ChangeToleranceComparesTheRelativeDecrease) {
  // On a non-negative loss f_k - f_{k+1} <= max(|f_k|, |f_k+1|) always: tolerance 1 stops after
  // exactly one iteration, and tolerance 0 never fires on a decreasing loss.
  Tensor x = parameter({-1.2, 1.0});
  Lbfgs one({x}, {.tolerance_change = 1});
  const LbfgsReport report = one.step(closure_for(x, rosenbrock));
  EXPECT_EQ(report.stop, LbfgsStop::change_tolerance);
  EXPECT_EQ(report.iterations, 1);

  Tensor y = parameter({-1.2, 1.0});
  Lbfgs never({y}, {.max_iterations = 10, .tolerance_change = 0});
  EXPECT_EQ(never.step(closure_for(y, rosenbrock)).stop, LbfgsStop::max_iterations);
}

TEST(Lbfgs, GradientToleranceCanStopBeforeAnyIteration) {
  Tensor x = parameter({1.0, 1.0, 1.0});
  Lbfgs lbfgs({x}, {});
  const LbfgsReport report = lbfgs.step(closure_for(x, rosenbrock));
  EXPECT_EQ(report.stop, LbfgsStop::gradient_tolerance);
  EXPECT_EQ(report.iterations, 0);
  EXPECT_EQ(report.evaluations, 1);
}

TEST(Lbfgs, SolvesAQuadraticInFewIterations) {
  Tensor x = parameter({1.0, -2.0, 0.5});
  Lbfgs lbfgs({x}, {});
  const LbfgsReport report = lbfgs.step(closure_for(x, quadratic));
  EXPECT_TRUE(report.converged()) << report.message;
  EXPECT_LE(report.iterations, 15) << report.message;
  expect_rows_near({x.to_vector<double>()}, {{0.3, 0.2, -0.4}}, 1e-9);
}

TEST(Lbfgs, WorksOnFloat32AndSeveralParameters) {
  Tensor a = parameter({-1.2, 1.0}, DType::f32), b = parameter({-1.2, 1.0}, DType::f64);
  Lbfgs lbfgs({a, b}, {});
  const LbfgsReport report = lbfgs.step([&] {
    lbfgs.zero_grad();
    Tensor loss = rosenbrock(concat({cast(a, DType::f64), b}));
    backward(loss);
    return loss;
  });
  EXPECT_LT(report.loss, 1e-8) << report.message;
  EXPECT_EQ(a.dtype(), DType::f32);
  EXPECT_LE(max_error_from(a, 1.0), 1e-3) << report.message;
  EXPECT_LE(max_error_from(b, 1.0), 1e-3) << report.message;
}

TEST(Lbfgs, NonFiniteStartIsReportedAndNothingMoves) {
  Tensor x = parameter({1.0, 2.0});
  Lbfgs lbfgs({x}, {});
  const LbfgsReport report = lbfgs.step(closure_for(x, [](const Tensor& p) {
    return sum(log(p - 5.0));  // NaN everywhere near the start
  }));
  EXPECT_EQ(report.stop, LbfgsStop::non_finite);
  EXPECT_FALSE(report.converged());
  EXPECT_EQ(report.evaluations, 1);
  EXPECT_EQ(report.non_finite_evaluations, 1);
  EXPECT_NE(report.message.find("starting point"), std::string::npos) << report.message;
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{1.0, 2.0}));
}

TEST(Lbfgs, StepsAroundANonFiniteRegion) {
  // (x - 1)^2 is NaN beyond x = 1.5 (0 * sqrt(1.5 - x)); the first trial from x = -3 with
  // learning rate 10 lands at x = 7, so the line search must back off.
  Tensor x = parameter({-3.0});
  Lbfgs lbfgs({x}, {.learning_rate = 10});
  const LbfgsReport report = lbfgs.step(closure_for(x, [](const Tensor& p) {
    return sum(square(p - 1.0) + 0.0 * sqrt(1.5 - p));
  }));
  EXPECT_TRUE(report.converged()) << report.message;
  EXPECT_GE(report.non_finite_evaluations, 1);
  EXPECT_NEAR(x.item<double>(), 1.0, 1e-8);
}

TEST(Lbfgs, RestoresTheLastGoodPointWhenEveryTrialIsNonFinite) {
  Tensor x = parameter({0.5, -0.25});
  const std::vector<double> start = x.to_vector<double>();
  int calls = 0;
  Lbfgs lbfgs({x}, {});
  const LbfgsReport report = lbfgs.step([&] {
    x.zero_grad();
    Tensor loss = sum(square(x)) * (calls++ == 0 ? 1.0 : NAN);
    backward(loss);
    return loss;
  });
  EXPECT_EQ(report.stop, LbfgsStop::non_finite) << report.message;
  EXPECT_EQ(report.iterations, 0);
  EXPECT_EQ(report.non_finite_evaluations, report.evaluations - 1);
  EXPECT_EQ(x.to_vector<double>(), start);
  EXPECT_DOUBLE_EQ(report.loss, 0.3125);
}

TEST(Lbfgs, RestoresTheLastGoodPointWhenTheClosureThrows) {
  // Thrown at the first trial: the last good point is the start. Thrown later: it is the last
  // accepted point, not the trial being evaluated.
  for (int throw_at : {2, 6}) {
    const std::vector<double> start{-1.2, 1.0};
    Tensor x = parameter(start);
    std::vector<double> trial;
    int calls = 0;
    Lbfgs lbfgs({x}, {});
    EXPECT_THROW(lbfgs.step([&] {
      if (++calls == throw_at) {
        trial = x.to_vector<double>();
        throw std::runtime_error("simulated failure");
      }
      return closure_for(x, rosenbrock)();
    }),
                 std::runtime_error);
    if (throw_at == 2) {
      EXPECT_EQ(x.to_vector<double>(), start);
    } else {
      EXPECT_NE(x.to_vector<double>(), trial);
      EXPECT_LT(rosenbrock(x.detach()).item<double>(), rosenbrock(tensor(start)).item<double>());
    }
  }
}

TEST(Lbfgs, NoProgressWhenNoTrialLowersTheLoss) {
  // The gradient says "go down" (+1), but the loss is smallest exactly at the start.
  Tensor x = parameter({1.0});
  Lbfgs lbfgs({x}, {});
  const LbfgsReport report = lbfgs.step([&] {
    x.zero_grad();
    backward(sum(x));
    return sum(square(x.detach() - 1.0)) + 5.0;
  });
  EXPECT_EQ(report.stop, LbfgsStop::no_progress) << report.message;
  EXPECT_EQ(report.iterations, 0);
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{1.0}));
}

TEST(Lbfgs, StateRoundTripContinuesIdentically) {
  Tensor x = parameter({-1.2, 1.0, -1.2, 1.0});
  Lbfgs first({x}, {.max_iterations = 5});
  first.step(closure_for(x, rosenbrock));
  const nn::StateDict state = first.state_dict();
  ASSERT_GE(state.at("lbfgs.history").item<int64_t>(), 1);
  EXPECT_EQ(state.at("lbfgs.s.0").shape(), (Shape{4}));

  Tensor y = parameter(x.to_vector<double>());
  Lbfgs second({y}, {.max_iterations = 5});
  second.load_state_dict(state);
  first.step(closure_for(x, rosenbrock));
  second.step(closure_for(y, rosenbrock));
  EXPECT_EQ(x.to_vector<double>(), y.to_vector<double>());

  nn::StateDict missing = state;
  missing.erase("lbfgs.y.0");
  expect_error([&] { second.load_state_dict(missing); }, "missing key \"lbfgs.y.0\"");
  nn::StateDict wrong = state;
  wrong["lbfgs.s.0"] = zeros({3}, DType::f64);
  expect_error([&] { second.load_state_dict(wrong); }, "\"lbfgs.s.0\" has shape [3]");
}

TEST(Lbfgs, RejectsBadOptions) {
  expect_error([] { Lbfgs({parameter({1.0})}, {.max_iterations = 0}); }, "max_iterations");
  expect_error([] { Lbfgs({parameter({1.0})}, {.max_evaluations = 1}); }, "max_evaluations");
  expect_error([] { Lbfgs({parameter({1.0})}, {.tolerance_grad = -1}); }, "tolerance_grad");
  expect_error([] { Lbfgs({parameter({1.0})}, {.history_size = 0}); }, "history_size");
  expect_error([] { Lbfgs({parameter({1.0})}, {.line_search = {.c1 = 0.9, .c2 = 0.1}}); },
               "c1 < c2");
  Tensor x = parameter({1.0});
  Lbfgs lbfgs({x}, {});
  expect_error([&] { lbfgs.step([&] { return x * 1.0 + zeros({2}, DType::f64); }); },
               "one-element loss");
}

}  // namespace
}  // namespace eddy::optim
