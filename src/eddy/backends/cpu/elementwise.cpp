// Elementwise CPU kernels: copy/cast, fill, unary, binary, where, arange and random draws.

#include "eddy/backends/cpu/eigen_core.h"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <type_traits>

#include "eddy/backends/cpu/cpu_backend.h"
#include "eddy/backends/cpu/half.h"
#include "eddy/backends/cpu/kernel_util.h"
#include "eddy/backends/cpu/loops.h"
#include "eddy/core/gelu_constants.h"
#include "eddy/core/rng.h"

namespace eddy::cpu_kernels {
namespace {

template <typename T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

template <typename T>
T& at(char* base, int64_t stride, int64_t j) {
  return *reinterpret_cast<T*>(base + j * stride);
}

// out = scalar(in) elementwise; `vectorised` handles contiguous runs with Eigen expressions.
template <typename In, typename Out, typename Scalar, typename Vectorised>
void map_unary(const Tensor& in, const Tensor& out, Scalar scalar, Vectorised vectorised) {
  strided_loop<2>(out.shape(), {byte_ptr(out), byte_ptr(in)}, {out.strides(), in.strides()},
                  {sizeof(Out), sizeof(In)}, [&](const StridedRun<2>& run) {
                    if (run.stride[0] == sizeof(Out) && run.stride[1] == sizeof(In)) {
                      ArrayMap<Out> o(reinterpret_cast<Out*>(run.ptr[0]), run.length);
                      ConstArrayMap<In> i(reinterpret_cast<const In*>(run.ptr[1]), run.length);
                      vectorised(o, i);
                    } else {
                      for (int64_t j = 0; j < run.length; ++j) {
                        at<Out>(run.ptr[0], run.stride[0], j) =
                            scalar(at<In>(run.ptr[1], run.stride[1], j));
                      }
                    }
                  });
}

template <typename In, typename Out, typename Scalar>
void map_unary(const Tensor& in, const Tensor& out, Scalar scalar) {
  map_unary<In, Out>(in, out, scalar, [&](auto& o, const auto& i) { o = i.unaryExpr(scalar); });
}

// out = f(dense, row) (or f(row, dense) when kRowFirst), `row` repeated over `rows` rows of
// `dense` and `out`. Nothing aliases: out is always a fresh tensor.
template <bool kRowFirst, typename Dense, typename Row, typename Out, typename F>
void map_with_repeated_row(const Dense* __restrict dense, const Row* __restrict row, Out* __restrict out,
                           int64_t rows, int64_t row_length, F f) {
  parallel_rows(rows, row_length, [&](int64_t first_row, int64_t end_row) {
    for (int64_t r = first_row; r < end_row; ++r) {
      const Dense* __restrict x = dense + r * row_length;
      Out* __restrict o = out + r * row_length;
      for (int64_t j = 0; j < row_length; ++j) {
        if constexpr (kRowFirst) {
          o[j] = f(row[j], x[j]);
        } else {
          o[j] = f(x[j], row[j]);
        }
      }
    }
  });
}

// out = f(a, b); contiguous and scalar-broadcast runs get plain loops the compiler vectorises.
template <typename A, typename B, typename Out, typename F>
void map_binary(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  // A row repeated over the leading axes (x + bias): strided_loop cannot merge those axes, so it
  // would walk the rows one by one with a multi-index each, which cost up to 3x Eigen's time on
  // [10000, 20] + [20] (docs/benchmarks.md).
  if (out.is_contiguous() && out.numel() > 0) {
    const A* a_data = reinterpret_cast<const A*>(byte_ptr(a));
    const B* b_data = reinterpret_cast<const B*>(byte_ptr(b));
    Out* out_data = reinterpret_cast<Out*>(byte_ptr(out));
    const int64_t numel = out.numel();
    if (a.is_contiguous()) {
      if (const int64_t row_length = repeated_row_length(out.shape(), b.strides())) {
        map_with_repeated_row<false>(a_data, b_data, out_data, numel / row_length, row_length, f);
        return;
      }
    } else if (b.is_contiguous()) {
      if (const int64_t row_length = repeated_row_length(out.shape(), a.strides())) {
        map_with_repeated_row<true>(b_data, a_data, out_data, numel / row_length, row_length, f);
        return;
      }
    }
  }
  strided_loop<3>(out.shape(), {byte_ptr(out), byte_ptr(a), byte_ptr(b)},
                  {out.strides(), a.strides(), b.strides()}, {sizeof(Out), sizeof(A), sizeof(B)},
                  [&](const StridedRun<3>& run) {
                    Out* o = reinterpret_cast<Out*>(run.ptr[0]);
                    const A* x = reinterpret_cast<const A*>(run.ptr[1]);
                    const B* y = reinterpret_cast<const B*>(run.ptr[2]);
                    const int64_t n = run.length;
                    bool dense_out = run.stride[0] == sizeof(Out);
                    if (dense_out && run.stride[1] == sizeof(A) && run.stride[2] == sizeof(B)) {
                      for (int64_t j = 0; j < n; ++j) o[j] = f(x[j], y[j]);
                    } else if (dense_out && run.stride[1] == sizeof(A) && run.stride[2] == 0) {
                      const B yv = *y;
                      for (int64_t j = 0; j < n; ++j) o[j] = f(x[j], yv);
                    } else if (dense_out && run.stride[1] == 0 && run.stride[2] == sizeof(B)) {
                      const A xv = *x;
                      for (int64_t j = 0; j < n; ++j) o[j] = f(xv, y[j]);
                    } else {
                      for (int64_t j = 0; j < n; ++j) {
                        at<Out>(run.ptr[0], run.stride[0], j) =
                            f(at<A>(run.ptr[1], run.stride[1], j), at<B>(run.ptr[2], run.stride[2], j));
                      }
                    }
                  });
}

// NaN's sign is NaN, as in NumPy and PyTorch (x != x only for NaN).
template <typename T>
T sign_of(T x) {
  return x != x ? x : static_cast<T>((T(0) < x) - (x < T(0)));
}

// x^y of complex values: 1 where y = 0 (glibc's cpow gives NaN at 0^0), and by repeated squaring
// for an integer y below 100 in size, as NumPy computes it: exp(y log x) gave (2i)^2 = -4 + 4.9e-16i.
// The compiler's generated kernels (codegen.cpp, complex_pow) and the CUDA ones (pow_of) compute
// the same.
template <typename C>
C complex_power(C x, C y) {
  if (y == C(0)) return C(1);
  if (y.imag() == 0 && std::abs(y.real()) < 100 && y.real() == std::trunc(y.real())) {
    C result(1), base = x;
    for (auto n = static_cast<int>(std::abs(y.real())); n > 0; n >>= 1) {
      if (n & 1) result *= base;
      base *= base;
    }
    return y.real() < 0 ? C(1) / result : result;
  }
  return std::pow(x, y);
}

// Eigen's vectorised exp clamps its argument near the smallest normal number's log, so exp(-inf)
// and exp(-720) come out as ~1e-308 instead of 0 and denormals; those entries are redone
// (logsumexp of all -inf entries depends on exp(-inf) == 0). A vectorised minimum decides whether
// any entry needs it: an entry-by-entry check took as long as the exp itself. Below the log of the
// smallest denormal, less 1, exp rounds to 0, which is set directly: std::exp takes its slow
// underflow path there (errno), and a causal mask's entries, at the lowest finite value, are half
// of a language model's attention scores. At the other end, float32's exp overflowed to inf from
// 127.5 ln 2 = 88.376, where the largest float32 lies at 88.723 (its 2^128 scale step); the entries
// within 1 of the largest finite value's log are redone the same way.
template <typename Out, typename In>
void exp_full_range(Out& o, const In& i) {
  using T = typename In::Scalar;
  const T clamp = std::log(std::numeric_limits<T>::min()) + T(1);
  const T rounds_to_zero = std::log(std::numeric_limits<T>::denorm_min()) - T(1);
  const T near_overflow = std::log(std::numeric_limits<T>::max()) - T(1);
  o = i.exp();
  if (i.size() == 0) return;
  const bool low = i.template minCoeff<Eigen::PropagateNumbers>() < clamp;
  const bool high = i.template maxCoeff<Eigen::PropagateNumbers>() > near_overflow;
  if (!low && !high) return;
  for (Eigen::Index j = 0; j < i.size(); ++j) {
    if (i[j] < rounds_to_zero) {
      o[j] = T(0);
    } else if (i[j] < clamp || i[j] > near_overflow) {
      o[j] = std::exp(i[j]);
    }
  }
}

// Eigen vectorises tanh for float only; for double it calls std::tanh per element, which made
// tanh most of a float64 PINN step. This runs in L1-sized blocks on Eigen's vectorised exp and
// log: tanh|x| = e / (e + 2) with e = expm1(2|x|), and expm1 by Kahan's accurate formula
// (u - 1) * y / log(u), u = exp(y). Measured within 2 ulp of std::tanh; tanh|x| = 1 for |x| > 20.
template <typename Out, typename In>
void tanh_vectorised(Out& o, const In& i) {
  using T = typename In::Scalar;
  if constexpr (std::is_same_v<T, float>) {
    o = i.tanh();
  } else {
    constexpr Eigen::Index kBlock = 256;
    using Block = Eigen::Array<T, kBlock, 1>;
    Block y, u, log_u, expm1;
    for (Eigen::Index start = 0; start < i.size(); start += kBlock) {
      const Eigen::Index n = std::min(kBlock, i.size() - start);
      auto x = i.segment(start, n);
      y.head(n) = T(2) * x.abs().min(T(20));
      u.head(n) = y.head(n).exp();
      log_u.head(n) = u.head(n).log();
      expm1.head(n) = (log_u.head(n) == T(0)).select(y.head(n), (u.head(n) - T(1)) * y.head(n) / log_u.head(n));
      // tanh(-0) is -0: x.sign() is +0 there, so a zero passes through as it is.
      o.segment(start, n) = (x == T(0)).select(x, expm1.head(n) / (expm1.head(n) + T(2)) * x.sign());
    }
  }
}

// GELU's tanh approximation, 0.5 x (1 + tanh(c (x + 0.044715 x^3))) with c = sqrt(2 / pi), in the
// order of operations of PyTorch's gelu(approximate="tanh"), in one pass over the run: float's
// tanh is an Eigen packet op, so the whole formula is one expression; double's goes through
// tanh_vectorised a block at a time, the tanh's argument held in `o` while the block is in L1.
// (Three passes over a whole run made the compiled FNO step, whose largest GELU runs as this
// kernel, slower than the fused loop it replaced.)
template <typename Out, typename In>
void gelu_vectorised(Out& o, const In& i) {
  using T = typename In::Scalar;
  if constexpr (std::is_same_v<T, float>) {
    o = T(0.5) * i * (T(1) + (T(kGeluScale) * (i + T(kGeluCubic) * (i * i * i))).tanh());
  } else {
    constexpr Eigen::Index kBlock = 256;
    for (Eigen::Index start = 0; start < i.size(); start += kBlock) {
      const Eigen::Index n = std::min(kBlock, i.size() - start);
      const auto x = i.segment(start, n);
      auto y = o.segment(start, n);
      y = T(kGeluScale) * (x + T(kGeluCubic) * (x * x * x));
      tanh_vectorised(y, y);
      y = T(0.5) * x * (T(1) + y);
    }
  }
}

// Eigen's loop over a run computes the elements before the destination's first aligned packet,
// and those after its last whole one, with its scalar functions, whose last bits differ from the
// packet functions': exp, log, tanh and sin gave other bits at another thread count (the runs are
// cut where the threads' blocks are) and for a view at another offset or stride. So every
// element goes through the packet code: a run's aligned middle directly, its ends and strided
// runs through an aligned buffer, padded with a copy of its first value.
constexpr int64_t kPacketBytes = 64;  // AVX-512's packet, a multiple of narrower ones
constexpr int64_t kBufferBytes = 1024;

template <typename T, typename Vectorised>
void through_buffer(const StridedRun<2>& run, int64_t first, int64_t count, const Vectorised& vectorised) {
  constexpr int64_t capacity = kBufferBytes / sizeof(T), packet = kPacketBytes / sizeof(T);
  alignas(kPacketBytes) T in_buffer[capacity];
  alignas(kPacketBytes) T out_buffer[capacity];
  for (int64_t start = first; start < first + count; start += capacity) {
    const int64_t n = std::min(capacity, first + count - start), padded = (n + packet - 1) / packet * packet;
    for (int64_t j = 0; j < n; ++j) in_buffer[j] = at<T>(run.ptr[1], run.stride[1], start + j);
    std::fill(in_buffer + n, in_buffer + padded, in_buffer[0]);
    ArrayMap<T> o(out_buffer, padded);
    ConstArrayMap<T> i(in_buffer, padded);
    vectorised(o, i);
    for (int64_t j = 0; j < n; ++j) at<T>(run.ptr[0], run.stride[0], start + j) = out_buffer[j];
  }
}

template <typename T, typename Vectorised>
void map_packets(const Tensor& in, const Tensor& out, const Vectorised& vectorised) {
  constexpr int64_t element = sizeof(T), packet = kPacketBytes / element;
  strided_loop<2>(out.shape(), {byte_ptr(out), byte_ptr(in)}, {out.strides(), in.strides()}, {element, element},
                  [&](const StridedRun<2>& run) {
                    if (run.stride[0] != element || run.stride[1] != element) {
                      return through_buffer<T>(run, 0, run.length, vectorised);
                    }
                    const auto address = reinterpret_cast<uintptr_t>(run.ptr[0]);
                    const int64_t head = address % element != 0
                                             ? run.length
                                             : std::min(run.length, static_cast<int64_t>(
                                                                        (kPacketBytes - address % kPacketBytes) %
                                                                        kPacketBytes / element));
                    const int64_t middle = (run.length - head) / packet * packet;
                    through_buffer<T>(run, 0, head, vectorised);
                    if (middle > 0) {
                      ArrayMap<T> o(reinterpret_cast<T*>(run.ptr[0]) + head, middle);
                      ConstArrayMap<T> i(reinterpret_cast<const T*>(run.ptr[1]) + head, middle);
                      vectorised(o, i);
                    }
                    through_buffer<T>(run, head + middle, run.length - head - middle, vectorised);
                  });
}

// Transcendental functions: Eigen's vectorised versions on real runs, the scalar ones on complex.
template <typename T, typename Scalar, typename Vectorised>
void transcendental(const Tensor& in, const Tensor& out, Scalar scalar, Vectorised vectorised) {
  if constexpr (is_complex_v<T>) {
    map_unary<T, T>(in, out, scalar);
  } else {
    map_packets<T>(in, out, vectorised);
  }
}

// Eigen's vectorised log treats subnormal inputs as the smallest normal number (log(1e-310) came
// out as -708.4, not -713.8, and float32's log of a softmax's tiny entries as -87.3); those
// entries are redone, once a vectorised minimum of the results says there may be some (a test
// of every entry took four times as long as the log itself).
template <typename Out, typename In>
void log_with_subnormals(Out& o, const In& i) {
  using T = typename In::Scalar;
  o = i.log();
  // Every result is at least log(smallest normal) but those of 0 (-inf) and of the clamped entries.
  const T floor = std::log(std::numeric_limits<T>::min());
  if (i.size() == 0 || !(o.template minCoeff<Eigen::PropagateNumbers>() <= floor)) return;
  for (Eigen::Index j = 0; j < i.size(); ++j) {
    if (i[j] > 0 && i[j] < std::numeric_limits<T>::min()) o[j] = std::log(i[j]);
  }
}

}  // namespace

void CpuBackend::copy(const Tensor& src, const Tensor& out) {
  // Straight across from or to float32: through a float32 copy, casting a float32 tensor to
  // bfloat16 (each product's operands under autocast) copied it whole first.
  if (is_half(out.dtype()) && src.dtype() == DType::f32) return round_from_float32(src, out);
  if (is_half(out.dtype()) && src.dtype() == DType::f64) return round_from_float64(src, out);
  if (is_half(src.dtype()) && out.dtype() == DType::f32) return widen_to_float32(src, out);
  if (is_half(src.dtype()) || is_half(out.dtype())) {  // through float32, which holds either exactly
    const Tensor wide = Tensor::empty(src.shape(), DType::f32);
    if (is_half(src.dtype())) widen_to_float32(src, wide); else copy(src, wide);
    if (is_half(out.dtype())) round_from_float32(wide, out); else copy(wide, out);
    return;
  }
  EDDY_DISPATCH_ALL(out.dtype(), To, {
    EDDY_DISPATCH_ALL(src.dtype(), From, {
      map_unary<From, To>(src, out, [](From v) { return convert<To>(v); });
    });
  });
}

void CpuBackend::fill(const Tensor& out, std::complex<double> value) {
  if (computed_in_float32({}, out, [&](const auto&, const Tensor& wide) { fill(wide, value); })) return;
  EDDY_DISPATCH_ALL(out.dtype(), T, {
    const T v = convert<T>(value);
    if (out.is_contiguous()) {  // a vectorised store loop; the strided walk below is not
      std::fill_n(out.data<T>(), out.numel(), v);
      return;
    }
    strided_loop<1>(out.shape(), {byte_ptr(out)}, {out.strides()}, {sizeof(T)},
                    [&](const StridedRun<1>& run) {
                      for (int64_t j = 0; j < run.length; ++j) at<T>(run.ptr[0], run.stride[0], j) = v;
                    });
  });
}

void CpuBackend::unary(UnaryKernel kind, const Tensor& in, const Tensor& out) {
  if (computed_in_float32({in}, out, [&](const auto& x, const Tensor& o) { unary(kind, x[0], o); })) return;
  const DType dtype = in.dtype();
  switch (kind) {
    case UnaryKernel::neg:
      EDDY_DISPATCH_NUMERIC(dtype, T, "neg", map_unary<T, T>(in, out, [](T x) { return T(-x); }));
      return;
    case UnaryKernel::exp:
      EDDY_DISPATCH_INEXACT(dtype, T, "exp", transcendental<T>(in, out, [](T x) { return std::exp(x); },
                                                          [](auto& o, const auto& i) { exp_full_range(o, i); }));
      return;
    case UnaryKernel::log:
      EDDY_DISPATCH_INEXACT(dtype, T, "log", transcendental<T>(in, out, [](T x) { return std::log(x); },
                                                          [](auto& o, const auto& i) { log_with_subnormals(o, i); }));
      return;
    case UnaryKernel::sin:
      EDDY_DISPATCH_INEXACT(dtype, T, "sin", transcendental<T>(in, out, [](T x) { return std::sin(x); },
                                                          [](auto& o, const auto& i) { o = i.sin(); }));
      return;
    case UnaryKernel::cos:
      EDDY_DISPATCH_INEXACT(dtype, T, "cos", transcendental<T>(in, out, [](T x) { return std::cos(x); },
                                                          [](auto& o, const auto& i) { o = i.cos(); }));
      return;
    case UnaryKernel::tanh:
      EDDY_DISPATCH_INEXACT(dtype, T, "tanh", transcendental<T>(in, out, [](T x) { return std::tanh(x); },
                                                           [](auto& o, const auto& i) { tanh_vectorised(o, i); }));
      return;
    case UnaryKernel::gelu: {
      const auto vectorised = [](auto& o, const auto& i) { gelu_vectorised(o, i); };
      if (dtype == DType::f32) return map_packets<float>(in, out, vectorised);
      if (dtype == DType::f64) return map_packets<double>(in, out, vectorised);
      unsupported("gelu", dtype);
    }
    case UnaryKernel::sqrt:
      // Not Eigen's packet sqrt, which under EIGEN_FAST_MATH is an approximate reciprocal root and a
      // Newton step: NaN at +inf, 0 for subnormals, +0 for -0 and up to 3 ulp off from 8 elements
      // on, where the compiled kernels' sqrt is the correctly rounded hardware one.
      EDDY_DISPATCH_INEXACT(dtype, T, "sqrt", map_unary<T, T>(in, out, [](T x) { return std::sqrt(x); }));
      return;
    case UnaryKernel::abs:
      switch (dtype) {
        case DType::c64: map_unary<c64, float>(in, out, [](c64 x) { return std::abs(x); }); return;
        case DType::c128: map_unary<c128, double>(in, out, [](c128 x) { return std::abs(x); }); return;
        default:
          // 0 - x at zero too: |-0.0| is +0.0 (x < 0 ? -x : x kept -0.0, and 1 / |x| was -inf).
          EDDY_DISPATCH_REAL(dtype, T, "abs",
                             map_unary<T, T>(in, out, [](T x) { return x <= T(0) ? T(T(0) - x) : x; }));
          return;
      }
    case UnaryKernel::sign:
      EDDY_DISPATCH_REAL(dtype, T, "sign", map_unary<T, T>(in, out, [](T x) { return sign_of(x); }));
      return;
    case UnaryKernel::real:
    case UnaryKernel::imag:
    case UnaryKernel::angle: {
      auto part = [kind](auto z) {
        if (kind == UnaryKernel::real) return z.real();
        if (kind == UnaryKernel::imag) return z.imag();
        return std::arg(z);
      };
      if (dtype == DType::c64) map_unary<c64, float>(in, out, part);
      else if (dtype == DType::c128) map_unary<c128, double>(in, out, part);
      else unsupported("real/imag/angle", dtype);
      return;
    }
    case UnaryKernel::conj:
      if (dtype == DType::c64) map_unary<c64, c64>(in, out, [](c64 z) { return std::conj(z); });
      else if (dtype == DType::c128) map_unary<c128, c128>(in, out, [](c128 z) { return std::conj(z); });
      else unsupported("conj", dtype);
      return;
  }
}

namespace {

template <typename T>
void apply_in_blocks(void (*function)(const T*, T*, int64_t), const Tensor& in, const Tensor& out) {
  const T* from = static_cast<const T*>(in.raw_data());
  T* to = static_cast<T*>(out.raw_data());
  parallel_rows(out.numel(), 1, [&](int64_t begin, int64_t end) { function(from + begin, to + begin, end - begin); });
}

// x / y rounded toward 0 for integers, where C++ leaves two cases undefined: division by zero
// gives 0, and the lowest value over -1 (which x86 stops the process for, with SIGFPE) the
// wrapped negation, the lowest value again, as NumPy gives.
template <typename T>
T integer_quotient(T x, T y) {
  if (y == T(0)) return T(0);
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    if (y == T(-1)) return static_cast<T>(-static_cast<std::make_unsigned_t<T>>(x));
  }
  return T(x / y);
}

}  // namespace

void CpuBackend::apply(const ArrayFunction& function, const Tensor& in, const Tensor& out) {
  if (computed_in_float32({in}, out, [&](const auto& x, const Tensor& o) { apply(function, x[0], o); })) return;
  switch (out.dtype()) {
    case DType::f32: return apply_in_blocks(function.f32, in, out);
    case DType::f64: return apply_in_blocks(function.f64, in, out);
    case DType::c64: return apply_in_blocks(function.c64, in, out);
    case DType::c128: return apply_in_blocks(function.c128, in, out);
    default: throw Error(cat("apply: no array function for ", out.dtype()));
  }
}

// x op y, with integers wrapping on overflow as NumPy's do: computed unsigned, where C++ defines
// the wrap (signed overflow is undefined, and the sanitizer build stops on it).
template <typename T, typename Op>
T wrapping(T x, T y, Op op) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using Unsigned = std::make_unsigned_t<T>;
    return static_cast<T>(op(static_cast<Unsigned>(x), static_cast<Unsigned>(y)));
  } else {
    return T(op(x, y));
  }
}

void CpuBackend::binary(BinaryKernel kind, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (computed_in_float32({a, b}, out, [&](const auto& x, const Tensor& o) { binary(kind, x[0], x[1], o); })) return;
  const DType dtype = a.dtype();
  switch (kind) {
    case BinaryKernel::add:
      EDDY_DISPATCH_NUMERIC(dtype, T, "add", map_binary<T, T, T>(a, b, out, [](T x, T y) { return wrapping(x, y, std::plus<>()); }));
      return;
    case BinaryKernel::sub:
      EDDY_DISPATCH_NUMERIC(dtype, T, "sub", map_binary<T, T, T>(a, b, out, [](T x, T y) { return wrapping(x, y, std::minus<>()); }));
      return;
    case BinaryKernel::mul:
      EDDY_DISPATCH_NUMERIC(dtype, T, "mul", map_binary<T, T, T>(a, b, out, [](T x, T y) { return wrapping(x, y, std::multiplies<>()); }));
      return;
    case BinaryKernel::div:
      if (is_integral(dtype)) {
        EDDY_DISPATCH_REAL(dtype, T, "div", map_binary<T, T, T>(a, b, out, integer_quotient<T>));
        return;
      }
      EDDY_DISPATCH_INEXACT(dtype, T, "div", map_binary<T, T, T>(a, b, out, [](T x, T y) { return T(x / y); }));
      return;
    case BinaryKernel::pow:
      EDDY_DISPATCH_INEXACT(dtype, T, "pow", map_binary<T, T, T>(a, b, out, [](T x, T y) {
        if constexpr (is_complex_v<T>) {
          return complex_power(x, y);
        } else {
          return T(std::pow(x, y));
        }
      }));
      return;
    case BinaryKernel::maximum:
      EDDY_DISPATCH_REAL(dtype, T, "maximum", map_binary<T, T, T>(a, b, out, [](T x, T y) { return x > y || x != x ? x : y; }));
      return;
    case BinaryKernel::minimum:
      EDDY_DISPATCH_REAL(dtype, T, "minimum", map_binary<T, T, T>(a, b, out, [](T x, T y) { return x < y || x != x ? x : y; }));
      return;
    case BinaryKernel::eq:
      EDDY_DISPATCH_ALL(dtype, T, map_binary<T, T, bool>(a, b, out, [](T x, T y) { return x == y; }));
      return;
    case BinaryKernel::ne:
      EDDY_DISPATCH_ALL(dtype, T, map_binary<T, T, bool>(a, b, out, [](T x, T y) { return x != y; }));
      return;
    case BinaryKernel::lt:
      EDDY_DISPATCH_REAL(dtype, T, "lt", map_binary<T, T, bool>(a, b, out, [](T x, T y) { return x < y; }));
      return;
    case BinaryKernel::le:
      EDDY_DISPATCH_REAL(dtype, T, "le", map_binary<T, T, bool>(a, b, out, [](T x, T y) { return x <= y; }));
      return;
    case BinaryKernel::gt:
      EDDY_DISPATCH_REAL(dtype, T, "gt", map_binary<T, T, bool>(a, b, out, [](T x, T y) { return x > y; }));
      return;
    case BinaryKernel::ge:
      EDDY_DISPATCH_REAL(dtype, T, "ge", map_binary<T, T, bool>(a, b, out, [](T x, T y) { return x >= y; }));
      return;
    case BinaryKernel::complex:
      if (dtype == DType::f32) {
        map_binary<float, float, c64>(a, b, out, [](float x, float y) { return c64(x, y); });
      } else if (dtype == DType::f64) {
        map_binary<double, double, c128>(a, b, out, [](double x, double y) { return c128(x, y); });
      } else {
        unsupported("complex", dtype);
      }
      return;
  }
}

void CpuBackend::where(const Tensor& condition, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (computed_in_float32({a, b}, out, [&](const auto& x, const Tensor& o) { where(condition, x[0], x[1], o); })) {
    return;
  }
  EDDY_DISPATCH_ALL(out.dtype(), T, {
    strided_loop<4>(out.shape(), {byte_ptr(out), byte_ptr(condition), byte_ptr(a), byte_ptr(b)},
                    {out.strides(), condition.strides(), a.strides(), b.strides()},
                    {sizeof(T), sizeof(bool), sizeof(T), sizeof(T)}, [&](const StridedRun<4>& run) {
                      for (int64_t j = 0; j < run.length; ++j) {
                        at<T>(run.ptr[0], run.stride[0], j) = at<bool>(run.ptr[1], run.stride[1], j)
                                                                  ? at<T>(run.ptr[2], run.stride[2], j)
                                                                  : at<T>(run.ptr[3], run.stride[3], j);
                      }
                    });
  });
}

void CpuBackend::arange(const Tensor& out, double start, double step) {
  if (computed_in_float32({}, out, [&](const auto&, const Tensor& o) { arange(o, start, step); })) return;
  EDDY_DISPATCH_REAL(out.dtype(), T, "arange", {
    T* o = out.data<T>();
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
}

namespace {
constexpr double kTwoToMinus24 = 1.0 / 16777216.0;
constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;

// Uniform in [0, 1) with the full mantissa of T, from Philox words.
template <typename T>
T uniform_from(const std::array<uint32_t, 4>& w, int pair) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>((w[pair] >> 8) * kTwoToMinus24);
  } else {
    uint64_t bits = (uint64_t{w[2 * pair]} << 32 | w[2 * pair + 1]) >> 11;
    return static_cast<double>(bits) * kTwoToMinus53;
  }
}

template <typename T, typename Draw>
void fill_random(const Tensor& out, Draw draw) {
  T* o = out.data<T>();
  const int64_t n = out.numel();
  parallel_rows(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) o[i] = draw(i);
  });
}
}  // namespace

void CpuBackend::random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) {
  if (is_half(out.dtype())) {
    // k / 2^bits with the 16-bit type's own significand (8 bits for bfloat16, 11 for float16), as
    // PyTorch draws them, each exact in it: float32 draws rounded to nearest came out 1.0 (4,037
    // of 2M in bfloat16), outside [0, 1).
    const int bits = out.dtype() == DType::bf16 ? std::numeric_limits<Eigen::bfloat16>::digits
                                                : std::numeric_limits<Eigen::half>::digits;
    const float step = std::ldexp(1.0f, -bits);
    Tensor wide = Tensor::empty(out.shape(), DType::f32);
    fill_random<float>(wide, [&](int64_t i) {
      return static_cast<float>(philox4x32(offset + i, seed)[0] >> (32 - bits)) * step;
    });
    round_from_float32(wide, out);
    return;
  }
  switch (out.dtype()) {
    case DType::f32:
      fill_random<float>(out, [&](int64_t i) { return uniform_from<float>(philox4x32(offset + i, seed), 0); });
      return;
    case DType::f64:
      fill_random<double>(out, [&](int64_t i) { return uniform_from<double>(philox4x32(offset + i, seed), 0); });
      return;
    default: unsupported("random_uniform", out.dtype());
  }
}

void CpuBackend::random_normal(const Tensor& out, uint64_t seed, uint64_t offset) {
  if (computed_in_float32({}, out, [&](const auto&, const Tensor& o) { random_normal(o, seed, offset); })) return;
  // Box-Muller on two uniforms from the same counter; 1 - u keeps the log argument in (0, 1].
  auto normal = [&](auto zero, int64_t i) {
    using T = decltype(zero);
    auto words = philox4x32(offset + i, seed);
    T u1 = T(1) - uniform_from<T>(words, 0);
    T u2 = uniform_from<T>(words, 1);
    return static_cast<T>(std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi_v<T> * u2));
  };
  switch (out.dtype()) {
    case DType::f32: fill_random<float>(out, [&](int64_t i) { return normal(0.0f, i); }); return;
    case DType::f64: fill_random<double>(out, [&](int64_t i) { return normal(0.0, i); }); return;
    default: unsupported("random_normal", out.dtype());
  }
}

}  // namespace eddy::cpu_kernels
