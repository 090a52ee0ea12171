#pragma once
// Checks a module's weight gradient against a central finite difference in float64.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "eddy/eddy.h"
#include "eddy/nn/module.h"

namespace eddy {

// Compares grad(loss) . d with (loss(w + h d) - loss(w - h d)) / 2h for a random direction d
// over all of the module's parameters (float64), restoring the weights afterwards.
inline void expect_weight_gradient_matches_finite_difference(nn::Module& model, const std::function<Tensor()>& loss,
                                                             uint64_t seed = 11, double tolerance = 1e-6) {
  std::vector<Tensor> params = model.parameters();
  std::vector<Tensor> grads = grad({loss()}, params);
  Generator generator(seed);
  std::vector<Tensor> directions;
  double ad = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    directions.push_back(randn(params[i].shape(), DType::f64, &generator));
    ad += sum(grads[i] * directions[i]).item<double>();
  }
  const double h = 1e-6;
  auto shift = [&](double step) {
    NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(params[i] + step * directions[i]);
  };
  shift(h);
  const double plus = loss().item<double>();
  shift(-2 * h);
  const double minus = loss().item<double>();
  shift(h);
  EXPECT_NEAR(ad, (plus - minus) / (2 * h), tolerance * (1 + std::abs(ad)));
}

}  // namespace eddy
