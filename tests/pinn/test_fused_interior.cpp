// The PINN solver's fused interior pass: the pass itself against Taylor mode and reverse mode
// through the same network (every stream, both activations, both dtypes, awkward widths and point
// counts), its independence of the thread count, and the training step that uses it against the
// eager step, with the cases it turns away.

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "eddy/compiler/taylor.h"
#include "eddy/eddy.h"
#include "solvers/pinn/problem.h"
#include "solvers/pinn/taylor_mlp_pass.h"
#include "solvers/pinn/training_step.h"
#include "support/expect_error.h"
#include "support/scoped_env.h"

namespace eddy::pinn {
namespace {

struct PassCase {
  std::string name;
  nn::ActivationKind activation;
  DType dtype;
  std::vector<int64_t> widths;  // inputs, hidden..., outputs
  std::vector<int> second;
  int64_t points;
  bool normalised;
};

std::string case_name(const ::testing::TestParamInfo<PassCase>& info) { return info.param.name; }

nn::PlainMlp random_mlp(const PassCase& c, Generator& generator) {
  nn::PlainMlp mlp;
  mlp.activation = c.activation;
  for (size_t l = 0; l + 1 < c.widths.size(); ++l) {
    const double bound = 1.5 / std::sqrt(static_cast<double>(c.widths[l]));
    mlp.weights.push_back((rand({c.widths[l], c.widths[l + 1]}, c.dtype, &generator) * 2.0 - 1.0) * bound);
    mlp.biases.push_back(rand({c.widths[l + 1]}, c.dtype, &generator) * 0.4 - 0.2);
  }
  for (int64_t i = 0; i < c.widths[0]; ++i) {
    mlp.input_scale.push_back(c.normalised ? 0.5 + 0.25 * static_cast<double>(i) : 1.0);
    mlp.input_shift.push_back(c.normalised ? -0.3 * static_cast<double>(i + 1) : 0.0);
  }
  return mlp;
}

// The network as eddy ops, for Taylor mode.
Tensor network(const nn::PlainMlp& mlp, const Tensor& x) {
  const int64_t inputs = x.size(1);
  std::vector<double> scale(mlp.input_scale), shift(mlp.input_shift);
  Tensor h = x * cast(tensor(scale, {inputs}), x.dtype()) + cast(tensor(shift, {inputs}), x.dtype());
  for (size_t l = 0; l < mlp.weights.size(); ++l) {
    h = matmul(h, mlp.weights[l]) + mlp.biases[l];
    if (l + 1 < mlp.weights.size()) h = nn::activate(mlp.activation, h);
  }
  return h;
}

// A per-point loss that weighs every stream of every output differently: the sum over streams s
// and outputs c of w_sc * stream_sc^2 / 2, whose cotangents are w_sc * stream_sc.
double stream_weight(size_t s, size_t c) { return 0.5 + 0.3 * static_cast<double>(s) + 0.7 * static_cast<double>(c); }

template <typename T>
double weighted_squares(const HeadChunk& chunk, size_t outputs) {
  double loss = 0;
  for (size_t k = 0; k < chunk.streams.size(); ++k) {
    const T* stream = static_cast<const T*>(chunk.streams[k]);
    T* cotangent = static_cast<T*>(chunk.cotangents[k]);
    const double w = stream_weight(k / outputs, k % outputs);
    for (int64_t j = 0; j < chunk.capacity; ++j) {
      cotangent[j] = j < chunk.count ? static_cast<T>(w * stream[j]) : T(0);
      if (j < chunk.count) loss += w * static_cast<double>(stream[j]) * stream[j] / 2;
    }
  }
  return loss;
}

class TaylorMlpPassTest : public ::testing::TestWithParam<PassCase> {};

TEST_P(TaylorMlpPassTest, MatchesTaylorModeAndReverseModeThroughTheSameNetwork) {
  const PassCase& c = GetParam();
  Generator generator(7);
  const nn::PlainMlp mlp = random_mlp(c, generator);
  const Tensor points = rand({c.points, c.widths[0]}, c.dtype, &generator) * 2.0 - 1.0;
  const size_t outputs = static_cast<size_t>(c.widths.back());

  std::vector<int64_t> chunks_seen;
  const TaylorMlpResult fused = taylor_mlp_pass(mlp, points, c.second, [&](const HeadChunk& chunk) {
    return c.dtype == DType::f32 ? weighted_squares<float>(chunk, outputs) : weighted_squares<double>(chunk, outputs);
  });

  std::vector<Tensor> parameters;
  for (const Tensor& w : mlp.weights) parameters.push_back(Tensor(w).requires_grad_());
  for (const Tensor& b : mlp.biases) parameters.push_back(Tensor(b).requires_grad_());
  TaylorOptions options;
  options.second_coordinates.assign(c.second.begin(), c.second.end());
  const TaylorJets jets = taylor_jets([&](const Tensor& x) { return network(mlp, x); }, points, options);
  std::vector<Tensor> streams{jets.value};
  streams.insert(streams.end(), jets.first.begin(), jets.first.end());
  streams.insert(streams.end(), jets.second.begin(), jets.second.end());
  ASSERT_EQ(static_cast<int64_t>(streams.size()), taylor_mlp_streams(mlp, c.second));
  Tensor loss = zeros({}, c.dtype);
  for (size_t s = 0; s < streams.size(); ++s) {
    for (size_t o = 0; o < outputs; ++o) {
      const Tensor column = slice(streams[s], 1, static_cast<int64_t>(o), static_cast<int64_t>(o) + 1);
      loss = loss + stream_weight(s, o) * sum(square(column)) / 2.0;
    }
  }
  const std::vector<Tensor> expected = grad({loss}, parameters);

  const double tolerance = c.dtype == DType::f32 ? 2e-4 : 1e-10;
  EXPECT_NEAR(fused.loss, loss.item<double>(), tolerance * loss.item<double>());
  const size_t layers = mlp.weights.size();
  for (size_t l = 0; l < layers; ++l) {
    for (const auto& [got, want, what] : {std::tuple{fused.weights[l], expected[l], "weight"},
                                          std::tuple{fused.biases[l], expected[layers + l], "bias"}}) {
      ASSERT_EQ(got.shape(), want.shape()) << what << " " << l;
      const double scale = max(abs(want)).item<double>();
      EXPECT_GT(scale, 0.0) << what << " " << l;
      EXPECT_LE(max(abs(got - want)).item<double>(), tolerance * scale) << what << " " << l;
    }
  }
}

// Widths that are not multiples of the register tiles (7, 13), point counts that leave a partial
// chunk, several outputs, no second derivatives, seconds in some inputs only.
INSTANTIATE_TEST_SUITE_P(
    Networks, TaylorMlpPassTest,
    ::testing::Values(
        PassCase{"BurgersShapeTanhFloat64", nn::ActivationKind::tanh, DType::f64, {2, 20, 20, 20, 1}, {0}, 1000, true},
        PassCase{"OddWidthsSineFloat64", nn::ActivationKind::sin, DType::f64, {3, 7, 13, 2}, {0, 2}, 333, true},
        PassCase{"NoSecondsTanhFloat64", nn::ActivationKind::tanh, DType::f64, {2, 13, 3}, {}, 70, false},
        PassCase{"OneLayerSineFloat64", nn::ActivationKind::sin, DType::f64, {1, 6, 1}, {0}, 5, false},
        PassCase{"KovasznayShapeTanhFloat32", nn::ActivationKind::tanh, DType::f32, {2, 24, 24, 3}, {0, 1}, 2049,
                 true},
        // GELU's and SiLU's second and third derivatives are stored per layer, not derived.
        PassCase{"BurgersShapeGeluFloat64", nn::ActivationKind::gelu, DType::f64, {2, 20, 20, 20, 1}, {0}, 1000, true},
        PassCase{"OddWidthsSiluFloat64", nn::ActivationKind::silu, DType::f64, {3, 7, 13, 2}, {0, 2}, 333, true},
        PassCase{"NoSecondsGeluFloat64", nn::ActivationKind::gelu, DType::f64, {2, 13, 3}, {}, 70, false},
        PassCase{"TwoSecondsSiluFloat32", nn::ActivationKind::silu, DType::f32, {2, 24, 24, 3}, {0, 1}, 2049, true}),
    case_name);

TEST(TaylorMlpPass, GivesTheSameBitsAtOneAndTwoThreads) {
  const PassCase c{"", nn::ActivationKind::tanh, DType::f32, {2, 20, 20, 1}, {0}, 5000, true};
  Generator generator(3);
  const nn::PlainMlp mlp = random_mlp(c, generator);
  const Tensor points = rand({c.points, 2}, c.dtype, &generator);
  auto run = [&](int threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    const TaylorMlpResult result =
        taylor_mlp_pass(mlp, points, c.second, [](const HeadChunk& chunk) { return weighted_squares<float>(chunk, 1); });
    omp_set_num_threads(before);
    return result;
  };
  const TaylorMlpResult one = run(1), two = run(2);
  EXPECT_EQ(one.loss, two.loss);
  for (size_t l = 0; l < one.weights.size(); ++l) {
    EXPECT_EQ(one.weights[l].to_vector<float>(), two.weights[l].to_vector<float>()) << l;
    EXPECT_EQ(one.biases[l].to_vector<float>(), two.biases[l].to_vector<float>()) << l;
  }
}

TEST(TaylorMlpPass, RefusesWhatItHasNoRulesOrShapesFor) {
  Generator generator(1);
  PassCase c{"", nn::ActivationKind::relu, DType::f64, {2, 4, 1}, {0}, 10, false};
  nn::PlainMlp mlp = random_mlp(c, generator);
  const auto head = [](const HeadChunk&) { return 0.0; };
  expect_error([&] { taylor_mlp_pass(mlp, zeros({10, 2}, DType::f64), {0}, head); }, {"no Taylor rules", "relu"});
  mlp.activation = nn::ActivationKind::tanh;
  expect_error([&] { taylor_mlp_pass(mlp, zeros({10, 3}, DType::f64), {0}, head); }, {"[N, 2]", "[10, 3]"});
  expect_error([&] { taylor_mlp_pass(mlp, zeros({10, 2}, DType::f64), {2}, head); }, {"second derivative in input 2"});
}

// ---- the training step ----

class FusedStepTest : public ::testing::Test {
 protected:
  Problem problem(const std::string& text, const std::vector<std::string>& overrides = {}) {
    config_ = io::Config::parse(text, "fused.yaml", overrides);
    return read_problem(*config_);
  }

  // The step's notes, and its loss, terms and gradients against the eager step's at the state's
  // points, before and after the weights move.
  std::vector<std::string> expect_fused_step_matches_eager(const Problem& p, double tolerance) {
    PinnState state(p);
    state.sample(0);
    std::vector<std::string> notes;
    TrainingStep eager(state, false, {});
    TrainingStep compiled(state, true, [&](const std::string& line) { notes.push_back(line); });
    const std::vector<Tensor> trainable = state.trainable();
    for (int move = 0; move < 2; ++move) {
      SCOPED_TRACE(cat("move ", move));
      const StepEvaluation a = eager.evaluate(), b = compiled.evaluate();
      EXPECT_NEAR(b.loss.item<double>(), a.loss.item<double>(), tolerance * a.loss.item<double>());
      for (size_t c = 0; c < a.terms.size(); ++c) EXPECT_NEAR(b.terms[c], a.terms[c], tolerance * a.terms[c]) << c;
      for (size_t i = 0; i < trainable.size(); ++i) {
        const double scale = max(abs(a.gradients[i])).item<double>();
        EXPECT_LE(max(abs(b.gradients[i] - a.gradients[i])).item<double>(), tolerance * scale) << "gradient " << i;
      }
      NoGradGuard no_grad;
      for (size_t i = 0; i < trainable.size(); ++i) Tensor(trainable[i]).copy_(trainable[i] - 0.05 * a.gradients[i]);
      state.set_adaptive_weights(std::vector<double>(p.conditions.size(), 2.0 + move));
    }
    return notes;
  }

 private:
  std::unique_ptr<io::Config> config_;
};

const char* kBurgers = R"(dtype: float64
geometry:
  space: {type: interval, min: -1, max: 1}
  time: {min: 0, max: 1}
fields: [u]
parameters: {nu: 0.01}
equations: {burgers: u_t + u*u_x - nu*u_xx}
conditions:
  pde: {type: interior, equation: burgers, points: 700}
  initial: {type: initial, field: u, value: -sin(pi*x), points: 50}
  walls: {type: dirichlet, on: x == -1 || x == 1, field: u, value: 0, points: 50}
model: {architecture: mlp, width: 12, depth: 3, activation: tanh}
training: {adam: {steps: 1}}
)";

// Two fields, two interior equations with Laplacians, products of fields and first derivatives,
// a sine network.
const char* kCoupled = R"(dtype: float64
geometry: {space: {type: rectangle, min: [0, 0], max: [1, 2]}}
fields: [u, v]
parameters: {k: 3}
equations:
  first: laplacian(u) + v*u_x - k*sin(pi*x)
  second: laplacian(v) - u*v_y + exp(-u)
conditions:
  pde_u: {type: interior, equation: first, points: 300}
  pde_v: {type: interior, equation: second, points: 200}
  walls: {type: dirichlet, field: u, value: 0, points: 40}
model: {architecture: mlp, width: 9, depth: 2, activation: sin}
training: {adam: {steps: 1}}
)";

TEST_F(FusedStepTest, BurgersInteriorRunsFusedAndEqualsTheEagerStep) {
  const std::vector<std::string> notes = expect_fused_step_matches_eager(problem(kBurgers), 1e-10);
  ASSERT_FALSE(notes.empty());
  EXPECT_EQ(notes[0], "conditions.pde: one pass per chunk of points (fused_interior)");
}

TEST_F(FusedStepTest, TwoFieldsWithLaplaciansRunFusedAndEqualTheEagerStep) {
  const std::vector<std::string> notes = expect_fused_step_matches_eager(problem(kCoupled), 1e-10);
  ASSERT_GE(notes.size(), 2u);
  EXPECT_EQ(notes[0], "conditions.pde_u: one pass per chunk of points (fused_interior)");
  EXPECT_EQ(notes[1], "conditions.pde_v: one pass per chunk of points (fused_interior)");
}

// An inverse problem: the equation's viscosity is learned, and its gradient comes from the pass.
TEST_F(FusedStepTest, ALearnableParameterGetsItsGradientFromThePass) {
  const std::vector<std::string> notes =
      expect_fused_step_matches_eager(problem(kBurgers, {"parameters.nu={learnable: true, initial: 0.02}"}), 1e-10);
  EXPECT_EQ(notes[0], "conditions.pde: one pass per chunk of points (fused_interior)");
}

TEST_F(FusedStepTest, GeluAndSiluNetworksRunFusedAndEqualTheEagerStep) {
  for (const char* activation : {"gelu", "silu"}) {
    SCOPED_TRACE(activation);
    const std::vector<std::string> notes =
        expect_fused_step_matches_eager(problem(kBurgers, {std::string("model.activation=") + activation}), 1e-10);
    EXPECT_EQ(notes[0], "conditions.pde: one pass per chunk of points (fused_interior)");
  }
}

TEST_F(FusedStepTest, Float32StepAgreesToFloatRounding) {
  const std::vector<std::string> notes = expect_fused_step_matches_eager(problem(kBurgers, {"dtype=float32"}), 2e-4);
  EXPECT_EQ(notes[0], "conditions.pde: one pass per chunk of points (fused_interior)");
}

// What the pass cannot carry runs in the compiled step as before, and the note says why.
TEST_F(FusedStepTest, TurnsAwayWhatItCannotCarryAndSaysWhy) {
  struct Refusal {
    std::vector<std::string> overrides;
    std::string reason;
  };
  const std::vector<Refusal> refusals{
      {{"equations.burgers=u_t + u*u_x - nu*u_xt"}, "needs a derivative other than the fields' values"},
      {{"model.architecture=modified_mlp"}, "not fused (the model has the modified_mlp architecture)"},
      {{"model.activation=softplus"}, "not fused (the softplus activation)"},
      {{"model.width=32"}, "not fused (hidden layers of width 32: the pass is faster up to 28)"},
      {{"training.causal={chunks: 4, epsilon: 1}"}, "not fused (causal weighting)"},
  };
  for (const Refusal& refusal : refusals) {
    SCOPED_TRACE(refusal.overrides[0]);
    const std::vector<std::string> notes = expect_fused_step_matches_eager(problem(kBurgers, refusal.overrides), 1e-10);
    ASSERT_FALSE(notes.empty());
    EXPECT_NE(notes[0].find(refusal.reason), std::string::npos) << notes[0];
  }
  const ScopedEnv disabled("EDDY_COMPILER_DISABLE", "fused_interior");
  const std::vector<std::string> notes = expect_fused_step_matches_eager(problem(kBurgers), 1e-10);
  EXPECT_EQ(notes[0], "conditions.pde: not fused (EDDY_COMPILER_DISABLE names fused_interior)");
}

}  // namespace
}  // namespace eddy::pinn
