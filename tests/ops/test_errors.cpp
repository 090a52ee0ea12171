// Bad input throws eddy::Error, never aborts, and the message names the op and the offending
// shape, dtype, axis or index, so a user can tell what went wrong without a debugger.

#include <gtest/gtest.h>

#include "support/expect_error.h"

#include <functional>
#include <string>
#include <vector>

#include "eddy/eddy.h"

namespace eddy {
namespace {


// ---- elementwise ----

TEST(Errors, AddNonBroadcastableShapes) {
  expect_error([] { add(ones({2, 3}), ones({4})); }, {"add", "[2, 3]", "[4]"});
}

TEST(Errors, ExpOfIntTensor) {
  expect_error([] { exp(ones({3}, DType::i32)); }, {"exp", "int32"});
}

TEST(Errors, WhereWithNonBoolCondition) {
  expect_error([] { where(ones({2}), ones({2}), zeros({2})); }, {"where", "bool", "float32"});
}

TEST(Errors, OrderingComplexNumbers) {
  expect_error([] { lt(ones({2}, DType::c64), zeros({2}, DType::c64)); }, {"lt", "complex64"});
}

TEST(Errors, UndefinedTensorPassedToOps) {
  expect_error([] { exp(Tensor()); }, {"exp", "undefined"});
  expect_error([] { add(Tensor(), ones({2})); }, {"add", "undefined"});
  expect_error([] { mul(ones({2}), Tensor()); }, {"mul", "undefined"});
  expect_error([] { matmul(ones({2, 2}), Tensor()); }, {"matmul", "undefined"});
}

// ---- reductions ----

TEST(Errors, SumAxisOutOfRange) {
  expect_error([] { sum(ones({2, 3}), {2}); }, {"sum", "axis 2", "rank 2"});
  expect_error([] { sum(ones({2, 3}), {-3}); }, {"sum", "axis -3", "rank 2"});
}

TEST(Errors, SumDuplicateAxes) {
  expect_error([] { sum(ones({2, 3}), {1, -1}); }, {"sum", "[1, -1]", "axis 1"});
}

TEST(Errors, MaxOverEmptyAxis) {
  expect_error([] { max(zeros({0, 3}), {0}); }, {"max", "axis 0", "[0, 3]"});
}

// ---- movement ----

TEST(Errors, ReshapeToWrongElementCount) {
  expect_error([] { reshape(ones({2, 3}), {4}); }, {"reshape", "[2, 3]", "[4]"});
}

TEST(Errors, ReshapeWithTwoInferredDimensions) {
  expect_error([] { reshape(ones({2, 3}), {-1, -1}); }, {"reshape", "[-1, -1]"});
}

TEST(Errors, PermuteWithNonPermutation) {
  expect_error([] { permute(ones({2, 3}), {0, 0}); }, {"permute", "[0, 0]", "rank-2"});
  expect_error([] { permute(ones({2, 3}), {0, 1, 2}); }, {"permute", "[2, 3]"});
}

TEST(Errors, TransposeAxisOutOfRange) {
  expect_error([] { transpose(ones({2, 3}), 0, 2); }, {"transpose", "axis 2"});
}

TEST(Errors, ExpandToIncompatibleShape) {
  expect_error([] { expand(ones({2, 3}), {4, 3}); }, {"expand", "[2, 3]", "[4, 3]"});
}

TEST(Errors, SqueezeAxisThatIsNotOne) {
  expect_error([] { squeeze(ones({2, 3}), 1); }, {"squeeze", "axis 1", "[2, 3]"});
}

TEST(Errors, SliceWithZeroStep) {
  expect_error([] { slice(ones({4}), 0, 0, 4, 0); }, {"slice", "step", "got 0"});
}

TEST(Errors, PadWithNegativeWidth) {
  expect_error([] { pad(ones({2}), {-1}, {0}); }, {"pad", "[-1]"});
}

TEST(Errors, ConcatOfMismatchedShapes) {
  expect_error([] { concat({ones({2, 3}), ones({2, 4})}, 0); }, {"concat", "[2, 4]", "[2, 3]"});
}

TEST(Errors, ConcatOfEmptyList) {
  expect_error([] { concat({}, 0); }, {"concat", "at least one"});
}

TEST(Errors, StackOfDifferentShapes) {
  expect_error([] { stack({ones({2}), ones({3})}); }, {"stack", "[2]", "[3]"});
}

// ---- indexing ----

TEST(Errors, GatherIndexOutOfRange) {
  expect_error([] { gather(ones({3}), 0, tensor<int64_t>({0, 5})); },
               {"gather", "index 5", "size 3"});
}

TEST(Errors, GatherWithFloatIndex) {
  expect_error([] { gather(ones({3}), 0, zeros({2})); }, {"gather", "float32"});
}

TEST(Errors, IndexSelectWithMatrixIndex) {
  expect_error([] { index_select(ones({3, 2}), 0, zeros({2, 2}, DType::i64)); },
               {"index_select", "1-D", "[2, 2]"});
}

TEST(Errors, IndexSelectOutOfRange) {
  expect_error([] { index_select(ones({3, 2}), 0, tensor<int64_t>({1, 7})); },
               {"index_select", "index 7", "size 3"});
  expect_error([] { index_select(ones({3, 2}), 0, tensor<int32_t>({-4})); },
               {"index_select", "index -4", "size 3"});
  // -3 is the first row, as in Python.
  EXPECT_EQ(index_select(arange(0, 3), 0, tensor<int64_t>({-3})).item<float>(), 0.0f);
}

TEST(Errors, ScatterAddIndexAndSourceShapesDiffer) {
  expect_error([] { scatter_add(zeros({3}), 0, tensor<int64_t>({0, 1}), ones({3})); },
               {"scatter_add", "[2]", "[3]"});
}

// ---- linear algebra ----

TEST(Errors, MatmulInnerDimensionMismatch) {
  expect_error([] { matmul(ones({2, 3}), ones({4, 5})); }, {"matmul", "[2, 3]", "[4, 5]"});
  expect_error([] { matmul_add(ones({2, 3}), ones({3, 5}), ones({3})); }, {"matmul_add", "addend", "[3]", "[2, 5]"});
  expect_error([] { matmul_add(ones({2, 3}), ones({3, 5}), ones({2, 5}, DType::f64)); }, {"matmul_add", "float32", "float64"});
}

TEST(Errors, MatmulOfIntTensors) {
  expect_error([] { matmul(ones({2, 2}, DType::i32), ones({2, 2}, DType::i32)); },
               {"matmul", "int32"});
}

TEST(Errors, MatmulOfZeroDimensionalTensor) {
  expect_error([] { matmul(scalar(2.0), ones({2})); }, {"matmul", "[]", "[2]"});
}

TEST(Errors, MatmulBatchShapesDoNotBroadcast) {
  expect_error([] { matmul(ones({2, 3, 4}), ones({5, 4, 1})); }, {"matmul", "[2]", "[5]"});
}

// ---- autodiff ----

TEST(Errors, RequiresGradOnIntTensor) {
  expect_error([] { ones({2}, DType::i32).requires_grad_(); }, {"requires_grad_", "int32"});
}

TEST(Errors, GradOfNonScalarWithoutGradOutputs) {
  Tensor x = ones({3}).requires_grad_();
  Tensor y = x * x;
  expect_error([&] { grad({y}, {x}); }, {"grad", "[3]", "grad_outputs"});
}

TEST(Errors, GradOutputsWithWrongShape) {
  Tensor x = ones({3}).requires_grad_();
  Tensor y = x * x;
  expect_error([&] { grad({y}, {x}, {ones({2})}); }, {"grad", "[2]", "[3]"});
}

TEST(Errors, JvpTangentShapeMismatch) {
  Function f = [](const Tensor& x) { return exp(x); };
  expect_error([&] { jvp(f, ones({3}), ones({2})); }, {"jvp", "[2]", "[3]"});
}

TEST(Errors, CopyIntoLeafThatRequiresGrad) {
  Tensor leaf = zeros({2}).requires_grad_();
  expect_error([&] { leaf.copy_(ones({2})); }, {"copy_", "requires grad"});
  expect_error([&] { leaf.fill_(1); }, {"fill_", "requires grad"});
  // The same write is allowed where it cannot corrupt a recorded graph.
  {
    NoGradGuard no_grad;
    leaf.copy_(ones({2}));
  }
  EXPECT_EQ(leaf.to_vector<float>(), (std::vector<float>{1, 1}));
}

// ---- tensors, creation and settings ----

TEST(Errors, ItemOfMultiElementTensor) {
  expect_error([] { ones({2, 2}).item<float>(); }, {"item", "[2, 2]"});
}

TEST(Errors, DataWithWrongType) {
  expect_error([] { ones({2}, DType::f64).data<float>(); }, {"data<float32>", "float64"});
}

TEST(Errors, TensorWithWrongValueCount) {
  expect_error([] { tensor<float>({1, 2, 3}, {2, 2}); }, {"tensor", "3 values", "[2, 2]"});
}

TEST(Errors, RandWithIntDType) {
  expect_error([] { rand({2}, DType::i32); }, {"rand", "int32"});
  expect_error([] { randn({2}, DType::c64); }, {"randn", "complex64"});
}

TEST(Errors, ArangeWithZeroStep) {
  expect_error([] { arange(0, 1, 0); }, {"arange", "step"});
}

TEST(Errors, SetNumThreadsToZero) {
  const int before = num_threads();
  expect_error([] { set_num_threads(0); }, {"set_num_threads", "got 0"});
  EXPECT_EQ(num_threads(), before);
}

}  // namespace
}  // namespace eddy
