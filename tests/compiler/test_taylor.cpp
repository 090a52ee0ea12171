// Taylor mode against nested reverse mode: values, first derivatives, pure second derivatives,
// the collapsed Laplacian and the weight gradient through them, for MLPs and the PINN models.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "eddy/compiler/compile.h"
#include "eddy/compiler/taylor.h"
#include "eddy/eddy.h"
#include "eddy/nn/layers.h"
#include "eddy/nn/pinn_models.h"
#include "support/expect_error.h"

namespace eddy {
namespace {

using Function = std::function<Tensor(const Tensor&)>;

// d f / d x_i and d^2 f / d x_i^2 of every output column, by reverse over reverse mode.
struct NestedReverse {
  Tensor value;
  std::vector<Tensor> first, second;  // one [N, k] tensor per coordinate
};

NestedReverse nested_reverse(const Function& f, const Tensor& points) {
  const Tensor x = points.detach().requires_grad_();
  NestedReverse out{f(x), {}, {}};
  const int64_t d = x.shape()[1], k = out.value.shape()[1];
  std::vector<std::vector<Tensor>> first(d), second(d);
  for (int64_t c = 0; c < k; ++c) {
    const Tensor u = slice(out.value, 1, c, c + 1);
    const Tensor gradient = grad({u}, {x}, {ones_like(u)}, true)[0];
    for (int64_t i = 0; i < d; ++i) {
      const Tensor u_i = slice(gradient, 1, i, i + 1);
      first[i].push_back(u_i);
      second[i].push_back(slice(grad({u_i}, {x}, {ones_like(u_i)}, true)[0], 1, i, i + 1));
    }
  }
  for (int64_t i = 0; i < d; ++i) {
    out.first.push_back(concat(first[i], 1));
    out.second.push_back(concat(second[i], 1));
  }
  return out;
}

Tensor laplacian_of(const NestedReverse& reference, const std::vector<int64_t>& coordinates) {
  Tensor total = zeros_like(reference.value);
  for (int64_t i : coordinates) total = total + reference.second[i];
  return total;
}

void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what, double tolerance = 1e-10) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const double scale = 1.0 + max(abs(expected)).item<double>();
  EXPECT_LE(max(abs(actual - expected)).item<double>(), tolerance * scale) << what;
}

Tensor points(int64_t n, int64_t d, uint64_t seed = 3) {
  Generator generator(seed);
  return rand({n, d}, DType::f64, &generator) * 2.0 - 1.0;
}

// Value, first derivatives and pure second derivatives of every coordinate, then the collapsed
// Laplacian over all coordinates and over the first two, all against nested reverse mode.
void expect_matches_nested_reverse(const Function& f, const Tensor& x) {
  const NestedReverse reference = nested_reverse(f, x);
  const int64_t d = x.shape()[1];
  std::vector<int64_t> all(d);
  for (int64_t i = 0; i < d; ++i) all[i] = i;

  TaylorOptions per_coordinate;
  per_coordinate.second_coordinates = all;
  per_coordinate.laplacian = true;
  const TaylorJets jets = taylor_jets(f, x, per_coordinate);
  expect_close(jets.value, reference.value, "value");
  ASSERT_EQ(jets.first.size(), static_cast<size_t>(d));
  ASSERT_EQ(jets.second.size(), static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i) {
    expect_close(jets.first[i], reference.first[i], "d/dx_" + std::to_string(i));
    expect_close(jets.second[i], reference.second[i], "d2/dx_" + std::to_string(i) + "^2");
  }
  expect_close(jets.laplacian, laplacian_of(reference, all), "Laplacian from the second derivatives");

  TaylorOptions collapsed;
  collapsed.laplacian = true;
  const TaylorJets collapsed_jets = taylor_jets(f, x, collapsed);
  EXPECT_TRUE(collapsed_jets.second.empty());
  expect_close(collapsed_jets.laplacian, laplacian_of(reference, all), "collapsed Laplacian");

  TaylorOptions partial;
  partial.second_coordinates = {d - 1};
  partial.laplacian = true;
  partial.laplacian_coordinates = {0, 1};
  const TaylorJets partial_jets = taylor_jets(f, x, partial);
  expect_close(partial_jets.second[0], reference.second[d - 1], "d2/dx_last^2 beside a collapsed Laplacian");
  expect_close(partial_jets.laplacian, laplacian_of(reference, {0, 1}), "collapsed Laplacian over x_0, x_1");
}

// A dense network: Linear layers with `activation` between them.
class Mlp : public nn::Module {
 public:
  Mlp(const std::vector<int64_t>& widths, Function activation, uint64_t seed) : activation_(std::move(activation)) {
    Generator generator(seed);
    for (size_t l = 0; l + 1 < widths.size(); ++l) {
      layers_.push_back(register_module("layer." + std::to_string(l),
                                        std::make_shared<nn::Linear>(widths[l], widths[l + 1], generator, DType::f64)));
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (size_t l = 0; l < layers_.size(); ++l) {
      h = layers_[l]->forward(h);
      if (l + 1 < layers_.size()) h = activation_(h);
    }
    return h;
  }

 private:
  Function activation_;
  std::vector<std::shared_ptr<nn::Linear>> layers_;
};

Function tanh_activation = [](const Tensor& h) { return tanh(h); };
Function sin_activation = [](const Tensor& h) { return sin(h); };

TEST(Taylor, TanhMlpMatchesNestedReverse) {
  Mlp mlp({3, 32, 32, 2}, tanh_activation, 1);
  expect_matches_nested_reverse([&](const Tensor& x) { return mlp(x); }, points(16, 3));
}

TEST(Taylor, SinMlpMatchesNestedReverse) {
  Mlp mlp({3, 32, 32, 2}, sin_activation, 2);
  expect_matches_nested_reverse([&](const Tensor& x) { return mlp(x); }, points(16, 3));
}

TEST(Taylor, ProductAndQuotientOfTwoNetworksMatchNestedReverse) {
  Mlp u({3, 16, 16, 1}, tanh_activation, 4);
  Mlp v({3, 16, 1}, sin_activation, 5);
  auto positive_v = [&](const Tensor& x) { return exp(v(x)); };
  expect_matches_nested_reverse([&](const Tensor& x) { return u(x) * v(x); }, points(12, 3));
  expect_matches_nested_reverse([&](const Tensor& x) { return u(x) / positive_v(x); }, points(12, 3));
  // pow, sqrt and log have no second-order rule of their own: Taylor mode differentiates their
  // tangent rules (sqrt's written from its output) once more.
  expect_matches_nested_reverse(
      [&](const Tensor& x) {
        return concat({u(x) * u(x), pow(positive_v(x), 1.5), sqrt(1.0 + square(u(x))), log(1.0 + square(v(x)))}, 1);
      },
      points(12, 3));
}

nn::PinnModelOptions pinn_options(nn::PinnArchitecture architecture, nn::ActivationKind activation) {
  nn::PinnModelOptions o;
  o.architecture = architecture;
  o.inputs = 3;
  o.outputs = 2;
  o.width = 16;
  o.depth = 2;
  o.activation = activation;
  o.dtype = DType::f64;
  o.seed = 7;
  return o;
}

TEST(Taylor, PinnModelsMatchNestedReverse) {
  using nn::ActivationKind;
  using nn::PinnArchitecture;
  std::vector<std::pair<std::string, nn::PinnModelOptions>> cases;
  for (PinnArchitecture architecture : {PinnArchitecture::mlp, PinnArchitecture::modified_mlp, PinnArchitecture::resnet}) {
    for (ActivationKind activation : {ActivationKind::tanh, ActivationKind::sin, ActivationKind::gelu,
                                      ActivationKind::silu, ActivationKind::softplus, ActivationKind::relu}) {
      cases.emplace_back("architecture " + std::to_string(static_cast<int>(architecture)) + ", " +
                             std::string(nn::activation_name(activation)),
                         pinn_options(architecture, activation));
    }
  }
  nn::PinnModelOptions mapped = pinn_options(PinnArchitecture::modified_mlp, ActivationKind::tanh);
  mapped.input_lower = {-1.0, 0.0, -2.0};
  mapped.input_upper = {1.0, 2.0, 0.5};
  mapped.periodic_axes = {0};
  mapped.periods = {2.0};
  mapped.fourier_features = 8;
  mapped.weight_factorization = true;
  mapped.adaptive_activation = true;
  cases.emplace_back("normalised, periodic, Fourier features, factorised, adaptive", mapped);
  nn::PinnModelOptions periodic_resnet = pinn_options(PinnArchitecture::resnet, ActivationKind::sin);
  periodic_resnet.periodic_axes = {1, 2};
  periodic_resnet.periods = {1.0, 3.0};
  cases.emplace_back("periodic resnet", periodic_resnet);
  nn::PinnModelOptions pirate_net = pinn_options(PinnArchitecture::pirate_net, ActivationKind::tanh);
  pirate_net.fourier_features = 6;
  cases.emplace_back("pirate_net", pirate_net);

  for (const auto& [name, options] : cases) {
    SCOPED_TRACE(name);
    std::shared_ptr<nn::Module> model = nn::make_pinn_model(options);
    // PirateNet's blocks start switched off (skip weights 0); switch them on so that they count.
    nn::StateDict state = model->state_dict();
    for (auto& [key, value] : state) {
      if (key.rfind("skip.", 0) == 0) value = full({}, 0.4, value.dtype());
    }
    model->load_state_dict(state);
    expect_matches_nested_reverse([&](const Tensor& x) { return model->forward(x); }, points(10, 3));
  }
}

// grad of sum(Laplacian^2) over the weights: the PINN training signal.
std::vector<Tensor> weight_gradient(const nn::Module& model, const Tensor& laplacian) {
  return grad({sum(square(laplacian))}, model.parameters());
}

void expect_weight_gradient_matches_nested_reverse(nn::Module& model) {
  const Function f = [&](const Tensor& x) { return model(x); };
  const Tensor x = points(10, 3);
  TaylorOptions options;
  options.laplacian = true;
  const std::vector<Tensor> taylor = weight_gradient(model, taylor_jets(f, x, options).laplacian);
  const std::vector<Tensor> nested = weight_gradient(model, laplacian_of(nested_reverse(f, x), {0, 1, 2}));
  ASSERT_EQ(taylor.size(), nested.size());
  for (size_t p = 0; p < taylor.size(); ++p) expect_close(taylor[p], nested[p], "parameter " + std::to_string(p));
}

TEST(Taylor, WeightGradientThroughTheLaplacianMatchesNestedReverse) {
  Mlp mlp({3, 32, 32, 2}, tanh_activation, 1);
  expect_weight_gradient_matches_nested_reverse(mlp);
  nn::PinnModelOptions options = pinn_options(nn::PinnArchitecture::modified_mlp, nn::ActivationKind::sin);
  options.fourier_features = 4;
  options.weight_factorization = true;
  options.adaptive_activation = true;
  expect_weight_gradient_matches_nested_reverse(*nn::make_pinn_model(options));
}

TEST(Taylor, OperatorTracesOnceAndSeesWeightUpdates) {
  Mlp mlp({3, 8, 1}, tanh_activation, 9);
  int calls = 0;
  const Function f = [&](const Tensor& x) {
    ++calls;
    return mlp(x);
  };
  TaylorOptions options;
  options.laplacian = true;
  TaylorOperator laplacian(f, options);
  const Tensor x = points(6, 3), y = points(6, 3, 4);
  laplacian(x);
  const TaylorJets before_update = laplacian(y);
  EXPECT_EQ(calls, 1);
  {
    NoGradGuard no_grad;
    for (Tensor& parameter : mlp.parameters()) parameter.copy_(parameter * 1.5 + 0.1);
  }
  const TaylorJets updated = laplacian(y);
  EXPECT_EQ(calls, 1);
  EXPECT_GT(max(abs(updated.laplacian - before_update.laplacian)).item<double>(), 1e-3);
  expect_close(updated.laplacian, laplacian_of(nested_reverse(f, y), {0, 1, 2}), "after the update");
  laplacian(points(7, 3));
  EXPECT_EQ(calls, 3);  // a new batch size traces again (and the reference above ran f once)
}

// Taylor mode's work is eddy ops, so a compiled training step captures it whole and fuses it.
TEST(Taylor, ComposesWithCompile) {
  Mlp mlp({3, 16, 16, 1}, tanh_activation, 3);
  TaylorOptions options;
  options.laplacian = true;
  const compiler::TensorFunction step = [&](const std::vector<Tensor>& in) {
    const TaylorJets jets = taylor_jets([&](const Tensor& x) { return mlp(x); }, in[0], options);
    std::vector<Tensor> out = grad({sum(square(jets.laplacian))}, mlp.parameters());
    out.insert(out.begin(), jets.laplacian);
    return out;
  };
  CompiledFunction compiled = compile(step);
  compiled({points(8, 3)});
  const Tensor x = points(8, 3, 5);
  const std::vector<Tensor> fused = compiled({x}), eager = step({x});
  EXPECT_EQ(compiled.stats().traces, 1);
  EXPECT_GT(compiled.stats().last.fused_kernels, 0u);
  ASSERT_EQ(fused.size(), eager.size());
  for (size_t i = 0; i < fused.size(); ++i) expect_close(fused[i], eager[i], "output " + std::to_string(i));
}

TEST(Taylor, RefusesPrimitivesWithoutARule) {
  const Function row_max = [](const Tensor& x) { return max(tanh(x), {1}, true); };
  expect_error([&] { taylor_jets(row_max, points(4, 3)); }, {"no Taylor rule for max", "nested reverse mode"});
}

// A primitive whose output moves with x but that has only reverse rules (checkpoint's segment,
// fused attention's backward pass) must be refused, not taken for a constant: its jet would be
// silently zero.
TEST(Taylor, RefusesPrimitivesWithOnlyReverseRules) {
  const Tensor weight = randn({3, 4}, DType::f64).requires_grad_();
  const Function checkpointed = [&](const Tensor& x) {
    return checkpoint([](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(matmul(in[0], in[1]))}; },
                      {x, weight})[0];
  };
  expect_error([&] { taylor_jets(checkpointed, points(4, 3)); }, {"no Taylor rule for checkpoint", "nested reverse mode"});
}

TEST(Taylor, RefusesInputsThatAreNotPoints) {
  const Function f = [](const Tensor& x) { return tanh(x); };
  expect_error([&] { taylor_jets(f, randn({5}, DType::f64)); }, {"taylor_jets", "[N, d]", "[5]"});
  TaylorOptions options;
  options.second_coordinates = {3};
  expect_error([&] { taylor_jets(f, points(4, 3), options); }, {"second coordinate 3", "0..2"});
  options.second_coordinates = {};
  options.laplacian_coordinates = {1, 1};
  expect_error([&] { taylor_jets(f, points(4, 3), options); }, {"Laplacian coordinate 1", "twice"});
  expect_error([&] { taylor_jets([](const Tensor& x) { return sum(x); }, points(4, 3)); }, {"[N, k]", "[]"});
}

}  // namespace
}  // namespace eddy
