// optim::least_squares against what a least-squares solution is: exact on a consistent system,
// the normal equations on an inconsistent one, the minimum norm on a rank-deficient one.

#include <gtest/gtest.h>

#include "eddy/eddy.h"
#include "eddy/optim/least_squares.h"
#include "support/expect_error.h"

namespace eddy::optim {
namespace {

double largest_difference(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item<double>(); }

TEST(LeastSquares, SolvesAConsistentOverdeterminedSystemExactly) {
  Generator generator(4);
  const Tensor a = randn({40, 6}, DType::f64, &generator);
  const Tensor x = randn({6, 3}, DType::f64, &generator);
  const Tensor solution = least_squares(a, matmul(a, x));
  ASSERT_EQ(solution.shape(), Shape({6, 3}));
  EXPECT_LT(largest_difference(solution, x), 1e-12);
}

TEST(LeastSquares, MeetsTheNormalEquationsOnAnInconsistentSystem) {
  Generator generator(5);
  const Tensor a = randn({50, 5}, DType::f64, &generator);
  const Tensor b = randn({50, 2}, DType::f64, &generator);
  const Tensor solution = least_squares(a, b);
  // The residual is orthogonal to A's columns, and not zero: the system has no exact solution.
  EXPECT_LT(max(abs(matmul(transpose(a), matmul(a, solution) - b))).item<double>(), 1e-11);
  EXPECT_GT(max(abs(matmul(a, solution) - b)).item<double>(), 0.1);
}

TEST(LeastSquares, TakesTheMinimumNormSolutionOfARankDeficientSystem) {
  // Two equal columns: every x0 + x1 = 2 fits [1, 1] x = 2 exactly; the shortest is (1, 1).
  const Tensor a = tensor<double>({1, 1, 2, 2, 3, 3}, {3, 2});
  const Tensor solution = least_squares(a, tensor<double>({2, 4, 6}, {3, 1}));
  EXPECT_LT(largest_difference(solution, tensor<double>({1, 1}, {2, 1})), 1e-12);
  // Fewer rows than columns: the minimum-norm interpolant.
  const Tensor wide = least_squares(tensor<double>({1, 2, 2}, {1, 3}), tensor<double>({9}, {1, 1}));
  EXPECT_LT(largest_difference(wide, tensor<double>({1, 2, 2}, {3, 1})), 1e-12);
}

TEST(LeastSquares, KeepsTheDtypeOfA) {
  const Tensor a = tensor<float>({1, 0, 0, 2, 0, 0}, {3, 2});
  const Tensor solution = least_squares(a, tensor<float>({3, 4, 0}, {3, 1}));
  EXPECT_EQ(solution.dtype(), DType::f32);
  EXPECT_LT(largest_difference(cast(solution, DType::f64), tensor<double>({3, 2}, {2, 1})), 1e-6);
}

TEST(LeastSquares, RefusesMismatchedShapesAndNonFiniteEntries) {
  expect_error([] { least_squares(zeros({3, 2}, DType::f64), zeros({4, 1}, DType::f64)); },
               {"least_squares: A has 3 rows but B has 4"});
  expect_error([] { least_squares(zeros({3}, DType::f64), zeros({3, 1}, DType::f64)); },
               {"least_squares: expects float32 or float64 matrices", "[3]"});
  expect_error([] { least_squares(full({2, 2}, std::nan(""), DType::f64), zeros({2, 1}, DType::f64)); },
               {"least_squares: A has a non-finite entry"});
}

}  // namespace
}  // namespace eddy::optim
