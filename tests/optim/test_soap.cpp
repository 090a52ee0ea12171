// SOAP: faster than Adam where the curvature is a rotated Kronecker product, AdamW step for step
// where the eigenbases are (permuted) identities, state round trips bit for bit, and errors naming
// the option or key; and the LAPACK eigendecomposition it refreshes its bases with.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "eddy/eddy.h"
#include "eddy/optim/adam.h"
#include "eddy/optim/soap.h"
#include "eddy/optim/symmetric_eigen.h"

namespace eddy::optim {
namespace {

using Loss = std::function<Tensor(const std::vector<Tensor>&)>;

// A fresh leaf holding a copy of `values`.
Tensor parameter(const Tensor& values) {
  Tensor p = copy_of(values.detach());
  p.requires_grad_();
  return p;
}

// Deterministic entries in [-1, 1], different for each `seed`.
Tensor pattern(const Shape& shape, double seed) {
  std::vector<double> values(numel(shape));
  for (size_t k = 0; k < values.size(); ++k) values[k] = std::sin(1.7 * static_cast<double>(k) + seed);
  return tensor(values, shape);
}

// An orthogonal [n, n] matrix: the eigenvectors of a symmetric pattern.
Tensor orthogonal(int64_t n, double seed) {
  const Tensor x = pattern({n, n}, seed);
  return *symmetric_eigenvectors(x + transpose(x));
}

// U diag(10^(span k / (n - 1))) U^T: condition number 10^span, eigenvectors U.
Tensor rotated_ill_conditioned(int64_t n, double span, double seed) {
  std::vector<double> scale(n);
  for (int64_t k = 0; k < n; ++k) scale[k] = std::pow(10.0, span * static_cast<double>(k) / static_cast<double>(n - 1));
  const Tensor u = orthogonal(n, seed);
  return matmul(u * tensor(scale), transpose(u));
}

// f(W) = 1/2 tr((W - W*)^T A (W - W*) B): Hessian B (x) A, condition number 10^5.
struct KroneckerQuadratic {
  Tensor a = rotated_ill_conditioned(8, 3, 0.3), b = rotated_ill_conditioned(6, 2, 1.1);
  Tensor target = pattern({8, 6}, 2.0);
  Tensor operator()(const Tensor& w) const {
    const Tensor d = w - target;
    return 0.5 * sum(d * matmul(matmul(a, d), b));
  }
};

double step_once(Optimizer& opt, const Loss& f) {
  opt.zero_grad();
  const Tensor loss = f(opt.parameters());
  backward(loss);
  opt.step();
  return loss.item<double>();
}

// Steps until the loss is below `target` (the loss before each step counts), or `limit` + 1.
int64_t steps_to(Optimizer& opt, const Loss& f, double target, int64_t limit) {
  for (int64_t step = 0; step < limit; ++step) {
    if (step_once(opt, f) < target) return step;
  }
  return limit + 1;
}

// The fewest steps, over `rates`, in which `make(rate)` reaches `target`; a run stops once it has
// taken as many steps as the best so far.
int64_t best_steps(const std::function<std::unique_ptr<Optimizer>(double)>& make, const std::vector<double>& rates,
                   const Loss& f, double target, int64_t limit) {
  int64_t best = limit + 1;
  for (double rate : rates) {
    std::unique_ptr<Optimizer> opt = make(rate);
    best = std::min(best, steps_to(*opt, f, target, best - 1));
  }
  return best;
}

TEST(Soap, BeatsAdamOnARotatedIllConditionedKroneckerQuadratic) {
  const KroneckerQuadratic quadratic;
  const Loss f = [&](const std::vector<Tensor>& p) { return quadratic(p[0]); };
  const Tensor start = zeros({8, 6}, DType::f64);
  const double target = 1e-6 * quadratic(start).item<double>();
  const int64_t limit = 2500;
  // Grids of four rates a factor of about 3 apart, each around its optimiser's best.
  const int64_t adam = best_steps(
      [&](double lr) { return std::make_unique<Adam>(std::vector{parameter(start)}, AdamOptions{.learning_rate = lr}); },
      {1.0, 0.3, 0.1, 0.03}, f, target, limit);
  const int64_t soap = best_steps(
      [&](double lr) { return std::make_unique<Soap>(std::vector{parameter(start)}, SoapOptions{.learning_rate = lr}); },
      {0.1, 0.03, 0.01, 0.003}, f, target, limit);
  std::cout << "steps to 1e-6 of the initial loss, best learning rate: Adam " << adam << ", SOAP " << soap << "\n";
  EXPECT_LE(soap, limit);
  EXPECT_LT(4 * soap, adam);
}

// f = 1/2 sum_i d_i (W_ii - c_i)^2 + 1/2 sum_k e_k (b_k - h_k)^2, W [5, 3]: G G^T and G^T G stay
// diagonal, so every eigenbasis is a permutation of the identity and SOAP must take AdamW's steps.
Tensor diagonal_loss(const std::vector<Tensor>& p) {
  const Tensor on_diagonal = tensor<double>({1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {5, 3});
  const Tensor w_ii = sum(p[0] * on_diagonal, {1});  // W_ii for i < 3, then 0
  const Tensor d = tensor<double>({3.0, 0.2, 40.0, 0, 0}), c = tensor<double>({1.0, -2.0, 0.5, 0, 0});
  const Tensor e = tensor<double>({0.5, 7.0}), h = tensor<double>({-1.0, 0.3});
  return 0.5 * sum(d * square(w_ii - c)) + 0.5 * sum(e * square(p[1] - h));
}

std::vector<Tensor> diagonal_start() {
  return {parameter(pattern({5, 3}, 0.5)), parameter(tensor<double>({0.2, 0.9}))};
}

std::vector<std::vector<double>> run(Optimizer& opt, const Loss& f, int steps) {
  std::vector<std::vector<double>> values;
  for (int i = 0; i < steps; ++i) {
    step_once(opt, f);
    for (const Tensor& p : opt.parameters()) values.push_back(p.to_vector<double>());
  }
  return values;
}

void expect_same_steps(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b,
                       double tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = 0; j < a[i].size(); ++j) {
      ASSERT_NEAR(a[i][j], b[i][j], tolerance * (1 + std::abs(b[i][j]))) << "record " << i << ", entry " << j;
    }
  }
}

TEST(Soap, TakesAdamWStepsWhereTheEigenbasesArePermutedIdentities) {
  const AdamOptions adam{.learning_rate = 0.05, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
  AdamW adamw(diagonal_start(), adam);
  const auto expected = run(adamw, diagonal_loss, 60);
  // Refreshed once (after step 1), and after every step: the eigenvalues change order as the
  // diagonal converges, so V must follow its basis vectors through the permutations.
  for (int64_t frequency : {int64_t{1} << 40, int64_t{1}}) {
    Soap soap(diagonal_start(), {.learning_rate = adam.learning_rate, .beta1 = adam.beta1, .beta2 = adam.beta2,
                                 .precondition_frequency = frequency, .eps = adam.eps, .weight_decay = adam.weight_decay});
    SCOPED_TRACE("precondition_frequency " + std::to_string(frequency));
    expect_same_steps(run(soap, diagonal_loss, 60), expected, 1e-12);
  }
}

// A layer of 2 inputs and 9 outputs: G^T G has rank 2 at most, so 7 of its eigenvalues are zero
// and LAPACK's basis of that space is arbitrary. With it, a change of 1e-13 in the data changed the
// steps after the first refresh by O(learning rate); the steps must move by as little as the data.
TEST(Soap, StepsDependContinuouslyOnTheGradientsWhereAFactorIsRankDeficient) {
  const Tensor inputs = pattern({40, 2}, 0.7), start = pattern({2, 9}, 0.3);
  const auto steps_for = [&](double shift) {
    const Tensor targets = tanh(pattern({40, 9}, 1.1)) * (1 + shift);
    const Loss f = [&](const std::vector<Tensor>& p) { return mean(square(tanh(matmul(inputs, p[0])) - targets)); };
    Soap soap({parameter(start)}, {.learning_rate = 0.05, .precondition_frequency = 2});
    return run(soap, f, 12);
  };
  expect_same_steps(steps_for(1e-13), steps_for(0), 1e-9);
}

TEST(Soap, WithoutPreconditionedSidesIsAdamW) {
  const KroneckerQuadratic quadratic;
  const Loss f = [&](const std::vector<Tensor>& p) { return quadratic(p[0]); };
  AdamW adamw({parameter(zeros({8, 6}, DType::f64))}, {.learning_rate = 0.01, .beta1 = 0.95, .beta2 = 0.95,
                                                        .weight_decay = 0.01});
  Soap soap({parameter(zeros({8, 6}, DType::f64))},
            {.learning_rate = 0.01, .weight_decay = 0.01, .max_preconditioner_dimension = 0});
  expect_same_steps(run(soap, f, 30), run(adamw, f, 30), 1e-12);
  EXPECT_EQ(soap.state_dict().count("soap.left.0"), 0u);
}

TEST(Soap, StateRoundTripContinuesBitForBit) {
  const KroneckerQuadratic quadratic;
  const Loss f = [&](const std::vector<Tensor>& p) { return quadratic(p[0]) + sum(square(p[1] - 0.3)); };
  const SoapOptions options{.learning_rate = 0.02, .precondition_frequency = 3, .weight_decay = 0.01};
  Soap first({parameter(zeros({8, 6}, DType::f64)), parameter(ones({6}, DType::f64))}, options);
  run(first, f, 7);  // refreshed at 1, 3 and 6; the next refresh, at 9, comes after the load
  const nn::StateDict state = first.state_dict();
  for (const char* key : {"soap.step", "soap.m.0", "soap.v.0", "soap.left.0", "soap.left_basis.0", "soap.right.0",
                          "soap.right_basis.0", "soap.m.1", "soap.v.1"}) {
    EXPECT_TRUE(state.count(key)) << key;
  }
  EXPECT_EQ(state.count("soap.left.1"), 0u);  // a vector is not preconditioned
  EXPECT_EQ(state.at("soap.left_basis.0").shape(), Shape({8, 8}));
  EXPECT_EQ(state.at("soap.right.0").shape(), Shape({6, 6}));

  Soap second({parameter(first.parameters()[0]), parameter(first.parameters()[1])}, options);
  second.load_state_dict(state);
  EXPECT_EQ(second.steps(), 7);
  EXPECT_EQ(run(second, f, 10), run(first, f, 10));
}

TEST(Soap, RejectsBadOptionsAndStateNamingThem) {
  auto make = [](const SoapOptions& options) { Soap({parameter(zeros({2, 2}, DType::f64))}, options); };
  auto expect_error = [](const std::function<void()>& op, const std::string& fragment) {
    try {
      op();
      ADD_FAILURE() << "expected eddy::Error mentioning \"" << fragment << "\"";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_error([&] { make({.beta1 = 1.0}); }, "soap: beta1 must lie in [0, 1)");
  expect_error([&] { make({.beta2 = -0.1}); }, "soap: beta2");
  expect_error([&] { make({.shampoo_beta = 1.5}); }, "soap: shampoo_beta");
  expect_error([&] { make({.precondition_frequency = 0}); }, "soap: precondition_frequency must be at least 1, got 0");
  expect_error([&] { make({.eps = 0}); }, "soap: eps");
  expect_error([&] { make({.weight_decay = -1}); }, "soap: weight_decay");
  expect_error([&] { make({.max_preconditioner_dimension = -1}); }, "soap: max_preconditioner_dimension");
  expect_error([&] { make({.learning_rate = NAN}); }, "soap: learning rate");

  Soap soap({parameter(zeros({2, 3}, DType::f64))}, {});
  nn::StateDict state = soap.state_dict();
  state.erase("soap.right_basis.0");
  expect_error([&] { soap.load_state_dict(state); }, "missing key \"soap.right_basis.0\"");
  state["soap.right_basis.0"] = zeros({2, 2}, DType::f64);
  expect_error([&] { soap.load_state_dict(state); }, "\"soap.right_basis.0\" has shape [2, 2]");
}

TEST(Soap, Float32ParametersDescend) {
  const KroneckerQuadratic quadratic;
  const Loss f = [&](const std::vector<Tensor>& p) { return quadratic(cast(p[0], DType::f64)); };
  Soap soap({parameter(zeros({8, 6}, DType::f32))}, {.learning_rate = 0.03});
  const double first = step_once(soap, f);
  double last = first;
  for (int i = 0; i < 200; ++i) last = step_once(soap, f);
  EXPECT_EQ(soap.state_dict().at("soap.left_basis.0").dtype(), DType::f32);
  EXPECT_LT(last, 1e-3 * first);
}

TEST(SymmetricEigenvectors, DiagonaliseInAscendingOrder) {
  const Tensor x = pattern({7, 7}, 0.9);
  const Tensor a = x + transpose(x);
  const Tensor q = *symmetric_eigenvectors(a);
  const std::vector<double> d = matmul(matmul(transpose(q), a), q).to_vector<double>();
  for (int64_t i = 0; i < 7; ++i) {
    for (int64_t j = 0; j < 7; ++j) {
      if (i != j) {
        EXPECT_NEAR(d[i * 7 + j], 0, 1e-13);
      }
    }
    if (i > 0) {
      EXPECT_LT(d[(i - 1) * 8], d[i * 8]);
    }
  }
  const std::vector<double> identity = matmul(transpose(q), q).to_vector<double>();
  for (int64_t k = 0; k < 49; ++k) EXPECT_NEAR(identity[k], k % 8 == 0 ? 1 : 0, 1e-14);
  EXPECT_EQ(symmetric_eigenvectors(cast(a, DType::f32))->dtype(), DType::f32);
  const Tensor bad = tensor<double>({1, NAN, NAN, 1}, {2, 2});
  EXPECT_FALSE(symmetric_eigenvectors(bad).has_value());
  EXPECT_THROW(symmetric_eigenvectors(zeros({2, 3}, DType::f64)), Error);
}

}  // namespace
}  // namespace eddy::optim
