#pragma once
// The public op API. Every function here is differentiable to any order, in forward and reverse
// mode, for inexact dtypes. Binary ops broadcast (NumPy rules) and promote dtypes
// (bool < int32 < int64 < float32 < float64 < complex); a C++ double acts like a scalar of the
// other operand's dtype when that is floating or complex, and of float32 beside an integer or
// bool tensor (int32 * 2.5 is float32), as a Python float beside a PyTorch integer tensor.

#include <complex>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "eddy/core/rng.h"
#include "eddy/core/tensor.h"

namespace eddy {

// ---- creation ----
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = default_device());
Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = default_device());
Tensor full(const Shape& shape, std::complex<double> value, DType dtype = DType::f32,
            Device device = default_device());
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
Tensor full_like(const Tensor& like, std::complex<double> value);
// A 0-d tensor.
Tensor scalar(std::complex<double> value, DType dtype = DType::f32, Device device = default_device());
// [start, stop) in steps of `step`.
Tensor arange(double start, double stop, double step = 1, DType dtype = DType::f32,
              Device device = default_device());
// `count` evenly spaced values from start to stop inclusive, the last exactly `stop`; for an integer
// dtype, the floors of the float64 values (as NumPy).
Tensor linspace(double start, double stop, int64_t count, DType dtype = DType::f32,
                Device device = default_device());
// Uniform on [0, 1) and standard normal; element i depends only on (seed, offset + i). These
// advance the generator, a side effect a captured graph cannot replay, so a traced function
// draws with a key instead (below).
Tensor rand(const Shape& shape, DType dtype = DType::f32, Generator* generator = nullptr);
Tensor randn(const Shape& shape, DType dtype = DType::f32, Generator* generator = nullptr);
// An explicit random key: an int64 tensor [seed, offset]. uniform(key, ...) and normal(key, ...)
// draw element i from (seed, offset + i), the numbers rand and randn give at that generator
// state; a draw of n elements and one keyed offset + n are independent. Pass the key into a
// compiled function as an input to get fresh numbers on each call.
Tensor random_key(uint64_t seed, uint64_t offset = 0);
Tensor uniform(const Tensor& key, const Shape& shape, DType dtype = DType::f32);
Tensor normal(const Tensor& key, const Shape& shape, DType dtype = DType::f32);
Tensor eye(int64_t n, DType dtype = DType::f32, Device device = default_device());
// Copies `shape`'s worth of elements of `dtype` from host memory at `data` to `device`.
Tensor from_buffer(const void* data, const Shape& shape, DType dtype, Device device = default_device());
// Wraps external memory without copying (on `device`: a GPU address for a cuda one); `release`
// runs when the last view is gone.
Tensor from_blob(void* data, const Shape& shape, DType dtype, std::function<void(void*)> release,
                 const Shape& strides = {}, Device device = cpu());
template <ElementType T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, Device device = default_device()) {
  EDDY_CHECK(static_cast<int64_t>(values.size()) == numel(shape), "tensor: ", values.size(),
             " values do not fill shape ", shape);
  if constexpr (std::is_same_v<T, bool>) {
    // std::vector<bool> is bit-packed and has no data(); eddy stores one byte per bool.
    const std::vector<uint8_t> bytes(values.begin(), values.end());
    return from_buffer(bytes.data(), shape, DType::b8, device);
  } else {
    return from_buffer(values.data(), shape, dtype_of<T>(), device);
  }
}
template <ElementType T>
Tensor tensor(const std::vector<T>& values) {
  return tensor(values, Shape{static_cast<int64_t>(values.size())});
}

// ---- elementwise ----
Tensor neg(const Tensor& x);
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// exp, log, sin, cos, tanh, gelu, sqrt, abs, sign, pow, maximum, minimum, ...: the math functions.
#define EDDY_UNARY_FUNCTION(name, declaration) Tensor name(const Tensor& x);
#define EDDY_BINARY_FUNCTION(name, declaration) Tensor name(const Tensor& a, const Tensor& b);
#include "eddy/ops/math_functions.def"

// The math functions by name, for the languages that call them by name (Python, the PINN
// expressions): every row of math_functions.def, with the public function above.
struct MathFunction {
  std::string_view name;
  int arity;                                          // 1 or 2
  Tensor (*unary)(const Tensor& x);                   // arity 1
  Tensor (*binary)(const Tensor& a, const Tensor& b);  // arity 2
};
std::span<const MathFunction> math_functions();
// The row named `name`, or null.
const MathFunction* math_function_named(std::string_view name);
Tensor pow(const Tensor& a, double exponent);

// Comparisons return bool tensors and carry no derivative.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
// condition ? a : b, elementwise with broadcasting; condition is bool.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor cast(const Tensor& x, DType dtype);
// x's values on `device` (x itself when it is there already); differentiable, the cotangent
// returning to x's device.
Tensor to(const Tensor& x, Device device);

// ---- complex ----
Tensor real(const Tensor& z);
Tensor imag(const Tensor& z);
// Identity on real tensors.
Tensor conj(const Tensor& z);
Tensor complex(const Tensor& re, const Tensor& im);
Tensor angle(const Tensor& z);

// ---- reductions (empty axes = all axes) ----
Tensor sum(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor prod(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor max(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor min(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
// The index of x's first NaN or infinity in row-major order, one entry per axis; nullopt where
// every value is finite (an integer or boolean tensor's always are). For errors that say where.
std::optional<std::vector<int64_t>> first_non_finite(const Tensor& x);

// ---- movement ----
Tensor reshape(const Tensor& x, const Shape& shape);  // one dimension may be -1
Tensor permute(const Tensor& x, const std::vector<int64_t>& perm);
Tensor transpose(const Tensor& x, int64_t a = -2, int64_t b = -1);
Tensor expand(const Tensor& x, const Shape& shape);  // broadcast_to
Tensor squeeze(const Tensor& x, int64_t axis);
Tensor unsqueeze(const Tensor& x, int64_t axis);
Tensor flatten(const Tensor& x);
// Python-style slice of one axis: negative start/stop count from the end; step > 0.
Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t stop, int64_t step = 1);
// Zero padding: before[i] and after[i] elements on axis i.
Tensor pad(const Tensor& x, const std::vector<int64_t>& before, const std::vector<int64_t>& after);
Tensor flip(const Tensor& x, const std::vector<int64_t>& axes);
Tensor concat(const std::vector<Tensor>& tensors, int64_t axis = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t axis = 0);
// Circular shift: element i moves to (i + shift) mod n along `axis`.
Tensor roll(const Tensor& x, int64_t shift, int64_t axis);
// The tensor itself if dense, otherwise a dense copy.
Tensor contiguous(const Tensor& x);
// x's values as a new node of the recorded graph (a view): grad(..., {identity(x)}) stops there
// and gives the derivative through the uses of this node only, where grad(..., {x}) would also
// walk into x's history and take every path to x.
Tensor identity(const Tensor& x);
// x's values (a view), through which no derivative passes in either mode: Tensor::detach as an
// op, so that a recorded graph holds it (a detached handle names the same value as x there).
Tensor stop_gradient(const Tensor& x);
// Sums a broadcast result back down to `shape` (the reverse of expand).
Tensor sum_to_shape(const Tensor& x, const Shape& shape);

// ---- indexing ----
// torch.gather: out[i][j] = x[i][index[i][j]] along `axis`.
Tensor gather(const Tensor& x, int64_t axis, const Tensor& index);
// Selects entries of a 1-D index along `axis`.
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index);
// base with src added at the positions index names along `axis` (index has src's shape).
Tensor scatter_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src);

// ---- linear algebra ----
// Batched, broadcasting matmul; 1-D operands are treated as vectors, as in NumPy.
Tensor matmul(const Tensor& a, const Tensor& b);
// a @ b + c in one GEMM, c broadcast to the product's shape; a and b of rank >= 2 and the same
// dtype as c. What the compiler makes of a product whose only use is a sum that nothing else
// would fuse with (a linear layer's bias); it has no Taylor-mode rule (compiler/taylor.h).
Tensor matmul_add(const Tensor& a, const Tensor& b, const Tensor& c);

// ---- composites (built from the primitives above) ----
Tensor square(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor softplus(const Tensor& x);
Tensor relu(const Tensor& x);
// (gelu, GELU's tanh approximation as GPT-2 uses it, is a math function above.)
// GELU itself, x * Phi(x) = x (1 + erf(x / sqrt 2)) / 2: PyTorch's gelu(approximate="none").
Tensor gelu_exact(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor logsumexp(const Tensor& x, int64_t axis = -1, bool keepdims = false);
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);
// sqrt(sum |x|^2) over axes (all when empty).
Tensor norm(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor mse_loss(const Tensor& prediction, const Tensor& target);
enum class Reduction { mean, sum };
// -log softmax(logits)[target], from logits [..., classes] (real floating) and integer targets
// of the leading shape [...]. Targets equal to ignore_index count for nothing; `mean` divides
// by how many targets are not ignored (NaN when none is, as in PyTorch). Any other target
// outside [0, classes) is an error.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean);

// ---- operators ----
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

}  // namespace eddy
