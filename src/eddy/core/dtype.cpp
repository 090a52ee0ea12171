#include "eddy/core/dtype.h"

#include <charconv>
#include <cmath>
#include <ostream>

#include "eddy/core/error.h"

namespace eddy {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::c64: return 8;
    case DType::c128: return 16;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::b8: return 1;
    case DType::bf16: return 2;
    case DType::f16: return 2;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::c64: return "complex64";
    case DType::c128: return "complex128";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::b8: return "bool";
    case DType::bf16: return "bfloat16";
    case DType::f16: return "float16";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& out, DType dtype) { return out << dtype_name(dtype); }

void no_half_form(DType dtype) {
  throw Error(cat("internal: a kernel without a ", dtype, " form was reached (16-bit floats are computed in "
                  "float32); please report"));
}

DType real_dtype(DType dtype) {
  if (dtype == DType::c64) return DType::f32;
  if (dtype == DType::c128) return DType::f64;
  return dtype;
}

DType complex_dtype(DType dtype) {
  if (dtype == DType::f64 || dtype == DType::c128 || dtype == DType::i64) return DType::c128;
  return DType::c64;
}

bool value_fits(double value, DType dtype) {
  if (dtype != DType::i32 && dtype != DType::i64) return true;
  const double whole = std::trunc(value);
  const double end = dtype == DType::i32 ? 0x1p31 : 0x1p63;  // -end is the lowest value
  return std::isfinite(whole) && whole >= -end && whole < end;
}

void require_value_fits(std::string_view op, std::complex<double> value, DType dtype) {
  // full({2}, {1, 2}, f32) gave [1, 1].
  EDDY_CHECK(value.imag() == 0 || is_complex(dtype), op, ": the value ", value, " has an imaginary part, which a ",
             dtype, " tensor cannot hold");
  if (value_fits(value.real(), dtype)) return;
  char digits[32];  // every digit: with six, 2147483648 read as 2.14748e+09, which looks in range
  const auto written = std::to_chars(digits, digits + sizeof(digits), value.real());
  throw Error(cat(op, ": the value ", std::string_view(digits, written.ptr), " does not fit in ", dtype));
}

int kind_rank(DType d) {
  if (d == DType::b8) return 0;
  if (is_integral(d)) return 1;
  if (is_floating(d)) return 2;
  return 3;
}

namespace {
bool is_double_precision(DType d) { return d == DType::f64 || d == DType::c128; }
}  // namespace

DType promote(DType a, DType b) {
  if (a == b) return a;
  int ka = kind_rank(a), kb = kind_rank(b);
  if (ka == 3 || kb == 3) {
    bool wide = is_double_precision(a) || is_double_precision(b);
    return wide ? DType::c128 : DType::c64;
  }
  if (ka != kb) return ka > kb ? a : b;
  // bfloat16 and float16 hold different ranges and precisions: float32 holds both (as in PyTorch).
  if (is_half(a) && is_half(b)) return DType::f32;
  // Same kind, different types: the wider one.
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

}  // namespace eddy
