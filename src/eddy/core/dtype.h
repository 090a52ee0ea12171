#pragma once
// Element types. Complex types are std::complex<float/double>; bool is stored as one byte.
// bfloat16 and float16 are storage types: a tensor keeps their 16 bits, and the backends compute
// in float32, rounding the result back (docs/optim.md, "Half precision").

#include <complex>
#include <cstdint>
#include <type_traits>
#include <iosfwd>
#include <string_view>

namespace eddy {

enum class DType : uint8_t { f32, f64, c64, c128, i32, i64, b8, bf16, f16 };

using c64 = std::complex<float>;
using c128 = std::complex<double>;
// The bits of a bfloat16 (float32's exponent, 8 bits of mantissa) and of an IEEE half.
struct bfloat16 {
  uint16_t bits = 0;
};
struct float16 {
  uint16_t bits = 0;
};

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
std::ostream& operator<<(std::ostream& out, DType dtype);

inline bool is_complex(DType d) { return d == DType::c64 || d == DType::c128; }
inline bool is_half(DType d) { return d == DType::bf16 || d == DType::f16; }
inline bool is_floating(DType d) { return d == DType::f32 || d == DType::f64 || is_half(d); }
// Floating or complex: the types that carry derivatives.
inline bool is_inexact(DType d) { return is_floating(d) || is_complex(d); }
inline bool is_integral(DType d) { return d == DType::i32 || d == DType::i64 || d == DType::b8; }

// The real type with the same precision (c64 -> f32); identity on real types.
DType real_dtype(DType dtype);
// The complex type with the same precision (f32 -> c64); identity on complex types.
DType complex_dtype(DType dtype);
// Throws for a 16-bit float reaching code that has no form for it (EDDY_DISPATCH_ALL).
[[noreturn]] void no_half_form(DType dtype);

// Whether `dtype` holds `value`: any value for a floating or complex type; for an integer type a
// finite number whose integer part is in the type's range (the C++ cast of another is undefined:
// full(1e20, int32) gave -2^31). Values in range are truncated toward zero, as NumPy's full does.
bool value_fits(double value, DType dtype);
// Refuses, naming `op`, a value that value_fits says `dtype` cannot hold, or one with an imaginary
// part for a real dtype.
void require_value_fits(std::string_view op, std::complex<double> value, DType dtype);

// The kinds in promotion order: bool 0 < integers 1 < real floats 2 < complex 3.
int kind_rank(DType d);
// The smallest type both operands convert to without loss of kind: bool < ints < floats < complex,
// and complex precision is the wider of the two operands' precisions.
DType promote(DType a, DType b);

// The C++ types that hold a dtype's elements. Constraining on it turns a call with another type
// (long long, uint32_t) into a compile error that names the type, where it was a link error.
template <typename T>
concept ElementType = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, c64> ||
                      std::is_same_v<T, c128> || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> ||
                      std::is_same_v<T, bool> || std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

template <ElementType T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<c64>() { return DType::c64; }
template <> constexpr DType dtype_of<c128>() { return DType::c128; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<bool>() { return DType::b8; }
template <> constexpr DType dtype_of<bfloat16>() { return DType::bf16; }
template <> constexpr DType dtype_of<float16>() { return DType::f16; }

}  // namespace eddy

// Runs the body with `T` bound to the C++ type of `dtype`, for every dtype but the 16-bit floats,
// which kernels convert to float32 first (their C++ types hold bits, not numbers).
#define EDDY_DISPATCH_ALL(dtype, T, ...)                       \
  switch (dtype) {                                             \
    case ::eddy::DType::f32: { using T = float; __VA_ARGS__; break; }        \
    case ::eddy::DType::f64: { using T = double; __VA_ARGS__; break; }       \
    case ::eddy::DType::c64: { using T = ::eddy::c64; __VA_ARGS__; break; }  \
    case ::eddy::DType::c128: { using T = ::eddy::c128; __VA_ARGS__; break; } \
    case ::eddy::DType::i32: { using T = int32_t; __VA_ARGS__; break; }      \
    case ::eddy::DType::i64: { using T = int64_t; __VA_ARGS__; break; }      \
    case ::eddy::DType::b8: { using T = bool; __VA_ARGS__; break; }          \
    case ::eddy::DType::bf16:                                                \
    case ::eddy::DType::f16: ::eddy::no_half_form(dtype);                    \
  }
