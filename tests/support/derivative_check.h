#pragma once
// Checks reverse-mode derivatives of orders 1..max_order of a float64 function of several
// tensors against central differences along random directions.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "eddy/eddy.h"

namespace eddy {

// With G_0 = <w, f(x)> for a random w and G_k = sum_i <u_ki, dG_{k-1}/dx_i> for random u_k,
// compares <dG_{k-1}/dx, d> with (G_{k-1}(x + h d) - G_{k-1}(x - h d)) / 2h for each order k.
// Every input is differentiated; pass integer inputs through the closure instead.
inline void expect_derivatives_match_central_differences(
    const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs, int max_order,
    const std::string& label, uint64_t seed = 17, double step = 1e-5, double tolerance = 1e-6) {
  Generator generator(seed);
  auto random_like = [&](const Tensor& t) { return randn(t.shape(), DType::f64, &generator); };
  const Tensor w = random_like(f(inputs));
  std::vector<std::vector<Tensor>> probes(max_order);
  for (auto& level : probes) {
    for (const Tensor& x : inputs) level.push_back(random_like(x));
  }
  std::function<Tensor(const std::vector<Tensor>&, int, bool)> g = [&](const std::vector<Tensor>& x, int level,
                                                                       bool keep_graph) {
    if (level == 0) return sum(w * f(x));
    std::vector<Tensor> grads = grad({g(x, level - 1, true)}, x, {}, keep_graph);
    Tensor total = scalar(0.0, DType::f64);
    for (size_t i = 0; i < x.size(); ++i) total = total + sum(probes[level - 1][i] * grads[i]);
    return total;
  };
  auto leaves_at = [&](const std::vector<Tensor>& direction, double h) {
    std::vector<Tensor> out;
    for (size_t i = 0; i < inputs.size(); ++i) out.push_back((inputs[i] + h * direction[i]).detach().requires_grad_());
    return out;
  };
  for (int order = 1; order <= max_order; ++order) {
    std::vector<Tensor> direction;
    for (const Tensor& x : inputs) direction.push_back(random_like(x));
    std::vector<Tensor> at = leaves_at(direction, 0);
    std::vector<Tensor> grads = grad({g(at, order - 1, true)}, at);
    double analytic = 0;
    for (size_t i = 0; i < at.size(); ++i) analytic += sum(grads[i] * direction[i]).item<double>();
    const double plus = g(leaves_at(direction, step), order - 1, false).item<double>();
    const double minus = g(leaves_at(direction, -step), order - 1, false).item<double>();
    const double numeric = (plus - minus) / (2 * step);
    EXPECT_NEAR(analytic, numeric, tolerance * (1 + std::abs(numeric))) << label << ", order " << order;
  }
}

}  // namespace eddy
