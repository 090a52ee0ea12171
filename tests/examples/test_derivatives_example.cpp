// The derivatives example's quantities against finite differences, in float64: each derivative
// against a central difference of the one below it, and the weight gradient of the loss along a
// random direction in weight space.

#include <gtest/gtest.h>

#include "tanh_mlp.h"

namespace eddy::examples {
namespace {

constexpr double kStep = 1e-5;

class DerivativesExample : public ::testing::Test {
 protected:
  TanhMlp mlp = TanhMlp::create({2, 16, 16, 1}, DType::f64, 3);
  Tensor x = tensor<double>({-0.8, -0.1, 0.35, 0.9}, {4, 1});
  Tensor t = tensor<double>({0.05, 0.5, 0.25, 0.95}, {4, 1});

  PinnDerivatives at(const Tensor& xs, const Tensor& ts) const {
    return pinn_derivatives(mlp, xs.detach().requires_grad_(), ts.detach().requires_grad_());
  }

  static void expect_close(const Tensor& got, const Tensor& want, double tolerance, const char* what) {
    auto g = got.to_vector<double>(), w = want.to_vector<double>();
    ASSERT_EQ(g.size(), w.size());
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], tolerance * (1 + std::abs(w[i]))) << what << " point " << i;
  }
};

TEST_F(DerivativesExample, EachDerivativeMatchesCentralDifferences) {
  PinnDerivatives d = at(x, t);
  PinnDerivatives xp = at(x + kStep, t), xm = at(x - kStep, t);
  PinnDerivatives tp = at(x, t + kStep), tm = at(x, t - kStep);
  auto central = [](const Tensor& plus, const Tensor& minus) { return (plus - minus) / (2 * kStep); };
  expect_close(d.u_x, central(xp.u, xm.u), 1e-8, "u_x");
  expect_close(d.u_t, central(tp.u, tm.u), 1e-8, "u_t");
  expect_close(d.u_xx, central(xp.u_x, xm.u_x), 1e-8, "u_xx");
  expect_close(d.u_xxx, central(xp.u_xx, xm.u_xx), 1e-7, "u_xxx");
  // And the third derivative straight from u, with a wider stencil: a check independent of the
  // lower-order autodiff results.
  const double h = 1e-3;
  auto u_at = [&](double shift) { return at(x + shift, t).u; };
  Tensor fd3 = (u_at(2 * h) - 2.0 * u_at(h) + 2.0 * u_at(-h) - u_at(-2 * h)) / (2 * h * h * h);
  expect_close(d.u_xxx, fd3, 1e-4, "u_xxx from u");
}

TEST_F(DerivativesExample, WeightGradientMatchesDirectionalDifference) {
  Tensor loss = residual_loss(at(x, t));
  std::vector<Tensor> params = mlp.parameters();
  std::vector<Tensor> grads = grad({loss}, params);
  Generator gen(9);
  std::vector<Tensor> directions;
  double directional = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    directions.push_back(randn(params[i].shape(), DType::f64, &gen));
    directional += sum(grads[i] * directions[i]).item<double>();
  }
  auto loss_shifted = [&](double h) {
    TanhMlp moved = mlp;
    for (size_t l = 0; l < mlp.weights.size(); ++l) {
      moved.weights[l] = (mlp.weights[l] + h * directions[l]).detach();
      moved.biases[l] = (mlp.biases[l] + h * directions[mlp.weights.size() + l]).detach();
    }
    return residual_loss(pinn_derivatives(moved, x.detach().requires_grad_(), t.detach().requires_grad_()))
        .item<double>();
  };
  const double fd = (loss_shifted(kStep) - loss_shifted(-kStep)) / (2 * kStep);
  EXPECT_NEAR(directional, fd, 1e-7 * (1 + std::abs(fd)));
  EXPECT_GT(std::abs(directional), 1e-6);  // the check is not vacuous
}

}  // namespace
}  // namespace eddy::examples
