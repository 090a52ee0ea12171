#include "eddy/backends/cpu/half.h"

#include <bit>

#include "eddy/backends/cpu/eigen_core.h"
#include "eddy/backends/cpu/kernel_util.h"
#include "eddy/backends/cpu/loops.h"

namespace eddy::cpu_kernels {
namespace {

template <typename Eigen16>
float widen(uint16_t bits) {
  return static_cast<float>(std::bit_cast<Eigen16>(bits));
}

template <typename Eigen16>
uint16_t round_to(float value) {
  return std::bit_cast<uint16_t>(Eigen16(value));
}

// out[i] = f(in[i]) over two strided tensors of one shape.
template <typename In, typename Out, typename F>
void convert_elements(const Tensor& in, const Tensor& out, F f) {
  strided_loop<2>(out.shape(), {byte_ptr(out), byte_ptr(in)}, {out.strides(), in.strides()}, {sizeof(Out), sizeof(In)},
                  [&](const StridedRun<2>& run) {
                    for (int64_t j = 0; j < run.length; ++j) {
                      *reinterpret_cast<Out*>(run.ptr[0] + j * run.stride[0]) =
                          f(*reinterpret_cast<const In*>(run.ptr[1] + j * run.stride[1]));
                    }
                  });
}

}  // namespace

void widen_to_float32(const Tensor& half_src, const Tensor& float32_out) {
  if (half_src.dtype() == DType::bf16) {
    convert_elements<uint16_t, float>(half_src, float32_out, widen<Eigen::bfloat16>);
  } else {
    convert_elements<uint16_t, float>(half_src, float32_out, widen<Eigen::half>);
  }
}

void round_from_float32(const Tensor& float32_src, const Tensor& half_out) {
  if (half_out.dtype() == DType::bf16) {
    convert_elements<float, uint16_t>(float32_src, half_out, round_to<Eigen::bfloat16>);
  } else {
    convert_elements<float, uint16_t>(float32_src, half_out, round_to<Eigen::half>);
  }
}

Tensor float32_copy_if_half(const Tensor& t) {
  if (!is_half(t.dtype())) return t;
  Tensor wide = Tensor::empty(t.shape(), DType::f32);
  widen_to_float32(t, wide);
  return wide;
}

}  // namespace eddy::cpu_kernels
