#include "eddy/backends/cpu/half.h"

#include <bit>
#include <cmath>

#include "eddy/backends/cpu/eigen_core.h"
#include "eddy/backends/cpu/kernel_util.h"
#include "eddy/backends/cpu/loops.h"

namespace eddy::cpu_kernels {
namespace {

// bfloat16 is float32's upper half: widening is a shift, and rounding to nearest even adds
// 0x7fff plus the kept part's lowest bit before the shift (a NaN, which the carry could turn into
// inf, becomes the quiet NaN of its sign, as Eigen and PyTorch round it). Integer operations only,
// so the loops below vectorise; through Eigen's conversions, called by pointer element by
// element, the casts around bfloat16 products took 29% of a language model's training step under
// autocast.
float widen_bfloat16(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

uint16_t round_to_bfloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(nan ? ((bits >> 16) & 0x8000u) | 0x7fc0u : rounded);
}

float widen_float16(uint16_t bits) { return static_cast<float>(std::bit_cast<Eigen::half>(bits)); }

uint16_t round_to_float16(float value) { return std::bit_cast<uint16_t>(Eigen::half(value)); }

// float64 narrowed to float32 rounding to odd: toward zero, with the lowest bit set when anything
// was dropped. Rounded once more to 16 bits (8 or 11 significant bits, far fewer than float32's
// 24), that is the float64 value rounded once; through float32 rounded to nearest, a value just
// past a 16-bit halfway point could land on it and then round to even (about 1 float16 cast in
// 15,000 differed from NumPy's).
float narrowed_to_odd(double value) {
  float narrowed = static_cast<float>(value);
  if (std::isnan(value) || static_cast<double>(narrowed) == value) return narrowed;
  if (std::isinf(narrowed) || std::abs(static_cast<double>(narrowed)) > std::abs(value)) {
    narrowed = std::nextafter(narrowed, 0.0f);
  }
  return std::bit_cast<float>(std::bit_cast<uint32_t>(narrowed) | 1u);
}

// out[i] = f(in[i]) over two strided tensors of one shape; contiguous runs in a loop the compiler
// vectorises, and two contiguous tensors in blocks over the threads.
template <typename In, typename Out, typename F>
void convert_elements(const Tensor& in, const Tensor& out, F f) {
  if (in.is_contiguous() && out.is_contiguous()) {
    Out* __restrict__ to = reinterpret_cast<Out*>(byte_ptr(out));
    const In* __restrict__ from = reinterpret_cast<const In*>(byte_ptr(in));
    for_each_block(out.numel(), block_count(out.numel(), kBlockGrain), [&](int64_t, int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) to[j] = f(from[j]);
    });
    return;
  }
  strided_loop<2>(out.shape(), {byte_ptr(out), byte_ptr(in)}, {out.strides(), in.strides()}, {sizeof(Out), sizeof(In)},
                  [&](const StridedRun<2>& run) {
                    if (run.stride[0] == sizeof(Out) && run.stride[1] == sizeof(In)) {
                      Out* __restrict__ to = reinterpret_cast<Out*>(run.ptr[0]);
                      const In* __restrict__ from = reinterpret_cast<const In*>(run.ptr[1]);
                      for (int64_t j = 0; j < run.length; ++j) to[j] = f(from[j]);
                      return;
                    }
                    for (int64_t j = 0; j < run.length; ++j) {
                      *reinterpret_cast<Out*>(run.ptr[0] + j * run.stride[0]) =
                          f(*reinterpret_cast<const In*>(run.ptr[1] + j * run.stride[1]));
                    }
                  });
}

}  // namespace

void widen_to_float32(const Tensor& half_src, const Tensor& float32_out) {
  if (half_src.dtype() == DType::bf16) {
    convert_elements<uint16_t, float>(half_src, float32_out, [](uint16_t b) { return widen_bfloat16(b); });
  } else {
    convert_elements<uint16_t, float>(half_src, float32_out, [](uint16_t b) { return widen_float16(b); });
  }
}

void round_from_float32(const Tensor& float32_src, const Tensor& half_out) {
  if (half_out.dtype() == DType::bf16) {
    convert_elements<float, uint16_t>(float32_src, half_out, [](float x) { return round_to_bfloat16(x); });
  } else {
    convert_elements<float, uint16_t>(float32_src, half_out, [](float x) { return round_to_float16(x); });
  }
}

void round_from_float64(const Tensor& float64_src, const Tensor& half_out) {
  if (half_out.dtype() == DType::bf16) {
    convert_elements<double, uint16_t>(float64_src, half_out,
                                       [](double x) { return round_to_bfloat16(narrowed_to_odd(x)); });
  } else {
    convert_elements<double, uint16_t>(float64_src, half_out,
                                       [](double x) { return round_to_float16(narrowed_to_odd(x)); });
  }
}

Tensor float32_copy_if_half(const Tensor& t) {
  if (!is_half(t.dtype())) return t;
  Tensor wide = Tensor::empty(t.shape(), DType::f32);
  widen_to_float32(t, wide);
  return wide;
}

}  // namespace eddy::cpu_kernels
