#pragma once
// The 16-bit floats on the CPU: conversions to and from float32 (Eigen's bfloat16 and half, which
// round to nearest even), and the way every kernel takes them, by computing in float32.

#include <functional>
#include <initializer_list>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy::cpu_kernels {

// out = src rounded or widened, between float32 and a 16-bit float; any strides, one shape.
void widen_to_float32(const Tensor& half_src, const Tensor& float32_out);
void round_from_float32(const Tensor& float32_src, const Tensor& half_out);
// The same from float64, rounded once (not through a float32 rounded to nearest).
void round_from_float64(const Tensor& float64_src, const Tensor& half_out);

// A float32 copy of a 16-bit tensor (dense), or the tensor itself.
Tensor float32_copy_if_half(const Tensor& t);

// out = a b (out += a b when accumulating) for 16-bit a and b of one dtype and a 16-bit or float32
// out, any strides, batched over the leading dimensions, in oneDNN's native 16-bit kernels with
// float32 accumulation (half_matmul.cpp). Returns false, running nothing, where those do not apply
// (other dtypes, an empty product, a dtype or layout oneDNN has no fast kernel for).
bool native_half_matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate);

// When an input or `out` holds 16-bit floats: runs kernel(wide_inputs, wide_out) on float32
// copies of the 16-bit inputs (the others as they are) and rounds its float32 result into `out`,
// then returns true. Returns false, running nothing, when no operand is a 16-bit float. The
// inputs are held by reference: every eager kernel asks, and most answer no.
template <typename Kernel>
bool computed_in_float32(std::initializer_list<std::reference_wrapper<const Tensor>> inputs, const Tensor& out,
                         Kernel&& kernel) {
  bool any = is_half(out.dtype());
  for (const Tensor& t : inputs) any = any || is_half(t.dtype());
  if (!any) return false;
  std::vector<Tensor> wide;
  for (const Tensor& t : inputs) wide.push_back(float32_copy_if_half(t));
  const Tensor wide_out = is_half(out.dtype()) ? Tensor::empty(out.shape(), DType::f32) : out;
  kernel(wide, wide_out);
  if (is_half(out.dtype())) round_from_float32(wide_out, out);
  return true;
}

}  // namespace eddy::cpu_kernels
