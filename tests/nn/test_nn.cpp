// Layers against hand-computed values, module bookkeeping (names, state dicts, modes), the
// initialisers, and every PINN model's gradients and second input derivatives against finite
// differences in float64.

#include <gtest/gtest.h>

#include <cmath>

#include "eddy/eddy.h"
#include "eddy/nn/init.h"
#include "eddy/nn/layers.h"
#include "eddy/nn/pinn_models.h"
#include "support/gradient_check.h"

namespace eddy::nn {
namespace {

void assign(Tensor& target, const std::vector<double>& values) {
  NoGradGuard no_grad;
  target.copy_(tensor(values, target.shape()));
}

void expect_values(const Tensor& t, const std::vector<double>& expected, double tolerance = 1e-12) {
  auto got = t.to_vector<double>();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tolerance) << "element " << i;
}

TEST(Layers, LinearComputesXTimesWPlusB) {
  Generator g(0);
  Linear layer(2, 3, g, DType::f64);
  assign(layer.weight, {1, 2, 3, 4, 5, 6});
  assign(layer.bias, {0.5, -0.5, 1});
  Tensor x = tensor<double>({1, -1, 2, 0.5}, {2, 2});
  // [1,-1] @ W = [1-4, 2-5, 3-6]; [2,0.5] @ W = [2+2, 4+2.5, 6+3].
  expect_values(layer(x), {-2.5, -3.5, -2, 4.5, 6, 10});
  EXPECT_THROW(layer(tensor<double>({1, 2, 3}, {1, 3})), Error);
}

TEST(Layers, SequentialNamesNestAndStateDictRoundTrips) {
  Generator g(1);
  auto net = std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
      std::make_shared<Linear>(2, 4, g, DType::f64), std::make_shared<Activation>(ActivationKind::tanh),
      std::make_shared<Linear>(4, 1, g, DType::f64)});
  std::vector<std::string> names;
  for (const auto& [name, p] : net->named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(net->parameter_count(), 2 * 4 + 4 + 4 + 1);

  Generator other_seed(99);
  auto copy = std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
      std::make_shared<Linear>(2, 4, other_seed, DType::f64), std::make_shared<Activation>(ActivationKind::tanh),
      std::make_shared<Linear>(4, 1, other_seed, DType::f64)});
  Tensor x = tensor<double>({0.3, -0.7, 1.1, 0.2}, {2, 2});
  EXPECT_GT(max(abs((*net)(x) - (*copy)(x))).item<double>(), 1e-6);
  copy->load_state_dict(net->state_dict());
  EXPECT_EQ(max(abs((*net)(x) - (*copy)(x))).item<double>(), 0.0);
}

// Moving a module to where it already is leaves its parameters the very tensors an optimiser
// holds (tests/backends/test_cuda_backend.cpp moves one to a GPU).
TEST(Layers, MovingAModuleToItsOwnDeviceKeepsItsParameters) {
  Generator g(2);
  Linear layer(3, 2, g, DType::f64);
  const std::vector<Tensor> before = layer.parameters();
  layer.to(cpu());
  const std::vector<Tensor> after = layer.parameters();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(after[i].same(before[i]));
}

TEST(Layers, LoadStateDictRejectsMismatches) {
  Generator g(2);
  Linear layer(2, 3, g, DType::f64);
  StateDict state = layer.state_dict();
  StateDict missing = state;
  missing.erase("bias");
  auto message_of = [&](const StateDict& s) {
    try {
      layer.load_state_dict(s);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message_of(missing).find("missing key \"bias\""), std::string::npos);
  StateDict wrong_shape = state;
  wrong_shape["weight"] = zeros({3, 2}, DType::f64);
  EXPECT_NE(message_of(wrong_shape).find("[3, 2]"), std::string::npos);
  StateDict wrong_dtype = state;
  wrong_dtype["bias"] = zeros({3}, DType::f32);
  EXPECT_NE(message_of(wrong_dtype).find("float32"), std::string::npos);
  StateDict extra = state;
  extra["gamma"] = zeros({3}, DType::f64);
  EXPECT_NE(message_of(extra).find("unexpected key \"gamma\""), std::string::npos);
}

// A repeated name kept one entry in state_dict(), so a checkpoint saved and loaded without error
// restored one of the two tensors.
TEST(Layers, ARepeatedRegistrationNameIsRefused) {
  struct Identity : Module {
    Tensor forward(const Tensor& x) override { return x; }
  };
  struct Twice : Identity {
    Tensor first = zeros({2}), second = zeros({2});
    explicit Twice(const std::string& clash) {
      register_parameter("w", first);
      if (clash == "parameter") register_parameter("w", second);
      if (clash == "buffer") register_buffer("w", second);
      if (clash == "module") register_module("w", std::make_shared<Identity>());
    }
  };
  for (const std::string clash : {"parameter", "buffer", "module"}) {
    try {
      Twice twice(clash);
      ADD_FAILURE() << "a second \"w\" as a " << clash << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("register_" + clash + ": \"w\" is registered already"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Layers, LayerNormEmbeddingDropout) {
  LayerNorm norm(4, 1e-5, DType::f64);
  Tensor x = tensor<double>({1, 2, 3, 6}, {1, 4});
  const double mu = 3, var = (4 + 1 + 0 + 9) / 4.0;
  std::vector<double> expected;
  for (double v : {1.0, 2.0, 3.0, 6.0}) expected.push_back((v - mu) / std::sqrt(var + 1e-5));
  expect_values(norm(x), expected);

  Generator g(3);
  Embedding embedding(5, 2, g, DType::f64);
  Tensor rows = embedding(tensor<int64_t>({4, 0, 4}, {3}));
  ASSERT_EQ(rows.shape(), (Shape{3, 2}));
  auto table = embedding.weight.to_vector<double>();
  expect_values(rows, {table[8], table[9], table[0], table[1], table[8], table[9]});
  // -1 read the last row (index_select takes Python's negative indices), as -100 padding would.
  try {
    embedding(tensor<int32_t>({0, -1}, {2}));
    ADD_FAILURE() << "id -1 was taken";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "Embedding: ids must be in [0, 5), got -1 in ids of shape [2]");
  }

  Dropout dropout(0.25, 7);
  Tensor ones_in = ones({1000}, DType::f64);
  Tensor dropped = dropout(ones_in);
  auto values = dropped.to_vector<double>();
  int zeros_seen = 0;
  for (double v : values) {
    EXPECT_TRUE(v == 0 || std::abs(v - 1 / 0.75) < 1e-12);
    zeros_seen += v == 0;
  }
  EXPECT_GT(zeros_seen, 180);
  EXPECT_LT(zeros_seen, 320);
  dropout.eval();
  EXPECT_TRUE(dropout(ones_in).same(ones_in));
  EXPECT_THROW(Dropout(1.0), Error);
  // bfloat16 input (a bias-free projection under autocast): drawn in its own dtype, whose draws
  // are multiples of 1/256, p = 0.001 dropped 1/256 of the entries (3.9 times too many).
  Dropout rare(0.001, 3);
  const int64_t n = 1 << 20;
  const double dropped_share = 1.0 - mean(cast(ne(rare(ones({n}, DType::bf16)), zeros({n}, DType::bf16)),
                                                    DType::f64)).item<double>();
  EXPECT_NEAR(dropped_share, 0.001, 0.0002);
}

TEST(Layers, AdaptiveActivationStartsAsThePlainOne) {
  AdaptiveActivation adaptive(ActivationKind::sin, 10.0, DType::f64);
  Tensor x = tensor<double>({-1.0, 0.3, 2.0});
  EXPECT_LT(max(abs(adaptive(x) - sin(x))).item<double>(), 1e-15);
  ASSERT_EQ(adaptive.parameters().size(), 1u);
  EXPECT_THROW(parse_activation("swish"), Error);
  EXPECT_EQ(parse_activation("gelu"), ActivationKind::gelu);
}

TEST(Init, SeededReproducibleAndScaled) {
  Tensor a = Tensor::empty({200, 300}, DType::f64), b = Tensor::empty({200, 300}, DType::f64);
  Generator ga(5), gb(5);
  set_num_threads(1);
  init::xavier_uniform(a, ga);
  set_num_threads(2);
  init::xavier_uniform(b, gb);
  EXPECT_EQ(max(abs(a - b)).item<double>(), 0.0);
  const double bound = std::sqrt(6.0 / 500);
  EXPECT_LE(max(abs(a)).item<double>(), bound);
  EXPECT_GT(max(abs(a)).item<double>(), 0.99 * bound);

  Tensor k = Tensor::empty({400, 500}, DType::f64);
  Generator gk(6);
  init::kaiming_normal(k, gk);
  const double variance = mean(square(k)).item<double>();
  EXPECT_NEAR(variance, 2.0 / 400, 0.05 * 2.0 / 400);
  init::constant(k, 0.25);
  EXPECT_EQ(min(k).item<double>(), 0.25);
}

TEST(Init, SkippingRandomInitialisationFillsZerosDrawsNothingAndNests) {
  Generator seeded(7);
  const Embedding drawn(5, 3, seeded);
  Generator generator(7);
  {
    init::SkipRandomInitialisation outer;
    {
      init::SkipRandomInitialisation inner;
      const Linear layer(4, 3, generator);
      EXPECT_EQ(max(abs(layer.weight)).item<double>(), 0.0);
    }
    const Embedding skipped(5, 3, generator);  // still skipping: the outer scope is open
    EXPECT_EQ(max(abs(skipped.weight)).item<double>(), 0.0);
  }
  // Nothing was drawn inside, so the generator gives what a fresh one gives.
  const Embedding after(5, 3, generator);
  EXPECT_EQ(max(abs(after.weight - drawn.weight)).item<double>(), 0.0);
  EXPECT_GT(max(abs(after.weight)).item<double>(), 0.0);
}

struct ModelCase {
  std::string name;
  PinnModelOptions options;
};

std::vector<ModelCase> model_cases() {
  PinnModelOptions base;
  base.inputs = 2;
  base.outputs = 2;
  base.width = 8;
  base.depth = 2;
  base.dtype = DType::f64;
  base.seed = 4;
  std::vector<ModelCase> cases;
  cases.push_back({"mlp", base});
  PinnModelOptions o = base;
  o.architecture = PinnArchitecture::modified_mlp;
  cases.push_back({"modified_mlp", o});
  o = base;
  o.architecture = PinnArchitecture::resnet;
  cases.push_back({"resnet", o});
  o = base;
  o.fourier_features = 6;
  o.fourier_scale = 0.5;
  cases.push_back({"fourier_features", o});
  o = base;
  o.weight_factorization = true;
  cases.push_back({"weight_factorization", o});
  o = base;
  o.periodic_axes = {0};
  o.periods = {2.0};
  o.input_lower = {-1, 0};
  o.input_upper = {1, 2};
  cases.push_back({"periodic_normalised", o});
  o = base;
  o.adaptive_activation = true;
  o.activation = ActivationKind::sin;
  cases.push_back({"adaptive_sin", o});
  return cases;
}

class PinnModelTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(PinnModelTest, WeightGradientAndSecondInputDerivativeMatchFiniteDifferences) {
  auto model = make_pinn_model(GetParam().options);
  Tensor x = tensor<double>({0.2, 0.4, -0.5, 1.3, 0.9, 0.1}, {3, 2});
  Tensor out = (*model)(x);
  ASSERT_EQ(out.shape(), (Shape{3, 2}));

  // Weight gradient of a loss built from u and u_xx, along a random direction.
  auto loss_of = [&]() {
    Tensor xs = x.detach().requires_grad_();
    Tensor u = (*model)(xs);
    Tensor u0 = slice(u, 1, 0, 1);
    Tensor u_x = grad({u0}, {xs}, {ones_like(u0)}, true)[0];
    Tensor u_xx = grad({slice(u_x, 1, 0, 1)}, {xs}, {ones({3, 1}, DType::f64)}, true)[0];
    return sum(square(u)) + sum(square(u_xx));
  };
  expect_weight_gradient_matches_finite_difference(*model, loss_of);

  // d^2 u / dx^2 against a second central difference of u.
  Tensor xs = x.detach().requires_grad_();
  Tensor u0 = slice((*model)(xs), 1, 0, 1);
  Tensor u_x = grad({u0}, {xs}, {ones_like(u0)}, true)[0];
  Tensor u_xx = slice(grad({slice(u_x, 1, 0, 1)}, {xs}, {ones({3, 1}, DType::f64)})[0], 1, 0, 1);
  const double e = 1e-4;
  Tensor dx = tensor<double>({e, 0}, {1, 2});
  Tensor fd = (slice((*model)(x + dx), 1, 0, 1) - 2.0 * slice((*model)(x), 1, 0, 1) + slice((*model)(x - dx), 1, 0, 1)) /
              (e * e);
  EXPECT_LT(max(abs(u_xx - fd)).item<double>(), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Models, PinnModelTest, ::testing::ValuesIn(model_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(PinnModels, PeriodicEmbeddingMakesTheModelPeriodic) {
  PinnModelOptions o;
  o.inputs = 2;
  o.periodic_axes = {1};
  o.periods = {0.5};
  o.dtype = DType::f64;
  auto model = make_pinn_model(o);
  Tensor x = tensor<double>({0.1, 0.2, -0.3, 0.05}, {2, 2});
  Tensor shifted = x + tensor<double>({0, 0.5}, {1, 2});
  EXPECT_LT(max(abs((*model)(x) - (*model)(shifted))).item<double>(), 1e-12);
}

// Sets every pirate_net block's skip weight (0 at initialisation, where the blocks do not count).
void set_skip_weights(Module& model, double value) {
  StateDict state = model.state_dict();
  for (auto& [name, tensor] : state) {
    if (name.rfind("skip.", 0) == 0) tensor = full({}, value, tensor.dtype());
  }
  model.load_state_dict(state);
}

PinnModelOptions pirate_net_options() {
  PinnModelOptions o;
  o.architecture = PinnArchitecture::pirate_net;
  o.inputs = 2;
  o.outputs = 2;
  o.width = 8;
  o.depth = 2;
  o.fourier_features = 5;
  o.dtype = DType::f64;
  o.seed = 3;
  return o;
}

TEST(PinnModels, PirateNetStartsAsALinearModelOfTheEmbedding) {
  auto model = make_pinn_model(pirate_net_options());
  const Tensor x = tensor<double>({0.2, 0.4, -0.5, 1.3, 0.9, 0.1}, {3, 2});
  const Tensor before = (*model)(x);
  // With every skip weight 0, changing a block's weights changes nothing.
  StateDict state = model->state_dict();
  ASSERT_TRUE(state.count("skip.1"));
  ASSERT_TRUE(state.count("block.1.2.weight"));
  state.at("block.1.2.weight") = state.at("block.1.2.weight") + 1.0;
  model->load_state_dict(state);
  EXPECT_LT(max(abs((*model)(x) - before)).item<double>(), 1e-15);
  set_skip_weights(*model, 0.5);
  EXPECT_GT(max(abs((*model)(x) - before)).item<double>(), 1e-3);
}

// What the output layer reads, and a column set to given weights: output = features . w + b,
// for plain and for weight-factorised output layers, the other column untouched.
TEST(PinnModels, OutputLayerColumnIsAnAffineFunctionOfItsInputs) {
  for (bool factorized : {false, true}) {
    PinnModelOptions o = pirate_net_options();
    o.weight_factorization = factorized;
    auto model = make_pinn_model(o);
    set_skip_weights(*model, 0.4);  // the blocks count: the features are not just the embedding
    const Tensor x = tensor<double>({0.2, 0.4, -0.5, 1.3, 0.9, 0.1, 0.0, -0.7}, {4, 2});
    const Tensor before = (*model)(x);
    const Tensor features = output_layer_inputs(*model, x);
    ASSERT_EQ(features.shape(), Shape({4, 10}));  // 2 x fourier_features
    const Tensor weights = arange(0, 10, 1, DType::f64) * 0.1 - 0.3;
    set_output_layer_column(*model, 1, weights, 0.25);
    const Tensor after = (*model)(x);
    const Tensor expected = reshape(matmul(features, reshape(weights, {10, 1})), {4}) + 0.25;
    EXPECT_LT(max(abs(slice(after, 1, 1, 2) - reshape(expected, {4, 1}))).item<double>(), 1e-12) << factorized;
    EXPECT_EQ(max(abs(slice(after, 1, 0, 1) - slice(before, 1, 0, 1))).item<double>(), 0.0) << factorized;
  }
  auto model = make_pinn_model(pirate_net_options());
  EXPECT_THROW(set_output_layer_column(*model, 2, zeros({10}, DType::f64), 0.0), Error);
  EXPECT_THROW(set_output_layer_column(*model, 0, zeros({9}, DType::f64), 0.0), Error);
  Generator generator(0);
  Linear other(2, 2, generator);
  EXPECT_THROW(output_layer_inputs(other, zeros({1, 2})), Error);
}

TEST(PinnModels, PirateNetGradientsMatchFiniteDifferences) {
  auto model = make_pinn_model(pirate_net_options());
  set_skip_weights(*model, 0.3);
  const Tensor x = tensor<double>({0.2, 0.4, -0.5, 1.3, 0.9, 0.1}, {3, 2});
  expect_weight_gradient_matches_finite_difference(*model, [&] {
    Tensor xs = x.detach().requires_grad_();
    Tensor u0 = slice((*model)(xs), 1, 0, 1);
    Tensor u_x = grad({u0}, {xs}, {ones_like(u0)}, true)[0];
    return sum(square(u0)) + sum(square(u_x));
  });
}

TEST(PinnModels, BadOptionsNameTheField) {
  PinnModelOptions o;
  o.width = 0;
  EXPECT_THROW(make_pinn_model(o), Error);
  o = PinnModelOptions();
  o.periodic_axes = {3};
  o.periods = {1.0};
  try {
    make_pinn_model(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.periodic"), std::string::npos);
  }
  EXPECT_THROW(parse_architecture("transformer"), Error);
  o = pirate_net_options();
  o.fourier_features = 0;
  try {
    make_pinn_model(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pirate_net needs model.fourier_features > 0"), std::string::npos);
  }
}

}  // namespace
}  // namespace eddy::nn
