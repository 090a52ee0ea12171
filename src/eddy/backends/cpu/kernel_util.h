#pragma once
// Type helpers shared by the CPU kernels: conversions between element types and the dtype
// switches that instantiate a kernel body for the types it supports.

#include <complex>
#include <limits>
#include <string_view>
#include <type_traits>

#include "eddy/core/error.h"
#include "eddy/core/tensor.h"

namespace eddy::cpu_kernels {

template <typename T> struct is_complex_t : std::false_type {};
template <typename T> struct is_complex_t<std::complex<T>> : std::true_type {};
template <typename T> inline constexpr bool is_complex_v = is_complex_t<T>::value;

// A float's value as an integer type: rounded toward zero, saturated at the type's range, NaN to 0,
// as CUDA's conversions (and Rust's `as`, and XLA's) give them. C++ leaves a float out of range
// undefined: NaN and 1e20 came out as INT_MIN on x86, and an optimiser may assume they never occur.
template <typename To, typename From>
To saturating_integer(From value) {
  constexpr From lowest = static_cast<From>(std::numeric_limits<To>::min());  // -2^31 or -2^63, exact
  if (value != value) return 0;
  if (value <= lowest) return std::numeric_limits<To>::min();
  if (value >= -lowest) return std::numeric_limits<To>::max();
  return static_cast<To>(value);
}

template <typename To, typename From>
To convert(From value) {
  if constexpr (is_complex_v<From> && !is_complex_v<To>) {
    return convert<To>(value.real());
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To> && !std::is_same_v<To, bool>) {
    return saturating_integer<To>(value);
  } else if constexpr (is_complex_v<To> && !is_complex_v<From>) {
    return To(static_cast<typename To::value_type>(value));
  } else if constexpr (is_complex_v<To> && is_complex_v<From>) {
    return To(static_cast<typename To::value_type>(value.real()),
              static_cast<typename To::value_type>(value.imag()));
  } else {
    return static_cast<To>(value);
  }
}

[[noreturn]] inline void unsupported(std::string_view kernel, DType dtype) {
  throw Error(cat("cpu kernel ", kernel, " does not support dtype ", dtype));
}

#define EDDY_DISPATCH_INEXACT(dtype, T, name, ...)                          \
  switch (dtype) {                                                          \
    case DType::f32: { using T = float; __VA_ARGS__; break; }               \
    case DType::f64: { using T = double; __VA_ARGS__; break; }              \
    case DType::c64: { using T = c64; __VA_ARGS__; break; }                 \
    case DType::c128: { using T = c128; __VA_ARGS__; break; }               \
    default: unsupported(name, dtype);                                      \
  }
#define EDDY_DISPATCH_REAL(dtype, T, name, ...)                             \
  switch (dtype) {                                                          \
    case DType::f32: { using T = float; __VA_ARGS__; break; }               \
    case DType::f64: { using T = double; __VA_ARGS__; break; }              \
    case DType::i32: { using T = int32_t; __VA_ARGS__; break; }             \
    case DType::i64: { using T = int64_t; __VA_ARGS__; break; }             \
    default: unsupported(name, dtype);                                      \
  }
#define EDDY_DISPATCH_NUMERIC(dtype, T, name, ...)                          \
  switch (dtype) {                                                          \
    case DType::f32: { using T = float; __VA_ARGS__; break; }               \
    case DType::f64: { using T = double; __VA_ARGS__; break; }              \
    case DType::c64: { using T = c64; __VA_ARGS__; break; }                 \
    case DType::c128: { using T = c128; __VA_ARGS__; break; }               \
    case DType::i32: { using T = int32_t; __VA_ARGS__; break; }             \
    case DType::i64: { using T = int64_t; __VA_ARGS__; break; }             \
    default: unsupported(name, dtype);                                      \
  }

}  // namespace eddy::cpu_kernels
