// eddy::fft against naive O(n^2) DFTs written here from NumPy's definitions, in every norm mode
// and over odd and even lengths, padding and truncation, axes that are not last or negative and
// non-contiguous inputs; then single precision, round trips, Parseval, the frequency helpers,
// derivatives of a non-linear loss through FFTs, the complex-gradient convention, and errors.

#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "support/scoped_env.h"

#include <cmath>
#include <complex>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "eddy/eddy.h"
#include "eddy/fft/fft.h"
#include "eddy/fft/fft_backend.h"

namespace eddy {
namespace {

// ---- the reference: row-major arrays of complex128 and naive transforms along one axis ----

struct Array {
  Shape shape;
  std::vector<c128> data;
};

Array array_of(const Tensor& x) { return {x.shape(), x.to_vector<c128>()}; }

// Replaces every line along `axis` by `f(line)`, which has `length` entries.
Array map_lines(const Array& a, int64_t axis, int64_t length,
                const std::function<std::vector<c128>(const std::vector<c128>&)>& f) {
  const int64_t outer = std::accumulate(a.shape.begin(), a.shape.begin() + axis, int64_t{1}, std::multiplies<>());
  const int64_t inner = std::accumulate(a.shape.begin() + axis + 1, a.shape.end(), int64_t{1}, std::multiplies<>());
  const int64_t old_length = a.shape[axis];
  Array out{a.shape, {}};
  out.shape[axis] = length;
  out.data.resize(outer * length * inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<c128> line(old_length);
      for (int64_t k = 0; k < old_length; ++k) line[k] = a.data[(o * old_length + k) * inner + i];
      std::vector<c128> result = f(line);
      for (int64_t k = 0; k < length; ++k) out.data[(o * length + k) * inner + i] = result[k];
    }
  }
  return out;
}

// Truncates or zero-pads to n entries.
Array resized(const Array& a, int64_t axis, int64_t n) {
  return map_lines(a, axis, n, [n](std::vector<c128> line) {
    line.resize(n, c128(0));
    return line;
  });
}

// Unscaled: out_k = sum_j x_j exp(sign 2 pi i j k / n).
Array dft(const Array& a, int64_t axis, int sign) {
  return map_lines(a, axis, a.shape[axis], [sign](const std::vector<c128>& x) {
    const size_t n = x.size();
    std::vector<c128> out(n);
    for (size_t k = 0; k < n; ++k) {
      for (size_t j = 0; j < n; ++j) {
        out[k] += x[j] * std::polar(1.0, sign * 2 * M_PI * static_cast<double>(j * k % n) / static_cast<double>(n));
      }
    }
    return out;
  });
}

// The first n / 2 + 1 entries: the non-negative frequencies.
Array half(const Array& a, int64_t axis) { return resized(a, axis, a.shape[axis] / 2 + 1); }

// The full spectrum of length n of a real signal from its half (n / 2 + 1 entries):
// X_{n-k} = conj(X_k).
Array hermitian_full(const Array& a, int64_t axis, int64_t n) {
  return map_lines(a, axis, n, [n](const std::vector<c128>& h) {
    std::vector<c128> full(n);
    for (int64_t k = 0; k < n; ++k) full[k] = k <= n / 2 ? h[k] : std::conj(h[n - k]);
    return full;
  });
}

Array real_part(Array a) {
  for (c128& v : a.data) v = v.real();
  return a;
}

Array scaled(Array a, double factor) {
  for (c128& v : a.data) v *= factor;
  return a;
}

// NumPy's norm factor for a transform over `count` points.
double norm_factor(const std::string& norm, double count, bool inverse) {
  if (norm == "ortho") return 1 / std::sqrt(count);
  if (norm == "backward") return inverse ? 1 / count : 1;
  return inverse ? 1 : 1 / count;
}

double product(const std::vector<int64_t>& lengths) {
  return std::accumulate(lengths.begin(), lengths.end(), 1.0, std::multiplies<>());
}

// The references take resolved axes (non-negative) and lengths; each eddy call below leaves
// out what NumPy would default, so the defaulting is checked too.
Array ref_fftn(Array a, const std::vector<int64_t>& axes, const std::vector<int64_t>& lengths,
               const std::string& norm, bool inverse) {
  for (size_t i = 0; i < axes.size(); ++i) a = dft(resized(a, axes[i], lengths[i]), axes[i], inverse ? 1 : -1);
  return scaled(a, norm_factor(norm, product(lengths), inverse));
}

// The full transform of the real input, cut to its half along the last listed axis.
Array ref_rfftn(Array a, const std::vector<int64_t>& axes, const std::vector<int64_t>& lengths,
                const std::string& norm) {
  return half(ref_fftn(a, axes, lengths, norm, false), axes.back());
}

// Inverse transforms over all but the last axis; along the last, the half spectrum (cut or
// padded to n / 2 + 1) is extended to a Hermitian one, whose inverse transform is real.
Array ref_irfftn(Array a, const std::vector<int64_t>& axes, const std::vector<int64_t>& lengths,
                 const std::string& norm) {
  const int64_t last = axes.back(), n = lengths.back();
  for (size_t i = 0; i + 1 < axes.size(); ++i) a = dft(resized(a, axes[i], lengths[i]), axes[i], 1);
  a = hermitian_full(resized(a, last, n / 2 + 1), last, n);
  return scaled(real_part(dft(a, last, 1)), norm_factor(norm, product(lengths), true));
}

// The forward transform of the Hermitian signal whose half is given: a real spectrum.
Array ref_hfft(const Array& a, int64_t axis, int64_t n, const std::string& norm) {
  Array full = hermitian_full(resized(a, axis, n / 2 + 1), axis, n);
  return scaled(real_part(dft(full, axis, -1)), norm_factor(norm, n, false));
}

// The inverse transform of a real signal, cut to its half.
Array ref_ihfft(const Array& a, int64_t axis, int64_t n, const std::string& norm) {
  return half(scaled(dft(resized(a, axis, n), axis, 1), norm_factor(norm, n, true)), axis);
}

// ---- inputs ----

enum class Layout { contiguous, transposed, strided };

// Standard normal entries (both parts when complex) in the given memory layout: `transposed`
// is a permuted view of a tensor with the reversed shape, `strided` every other row of a
// tensor twice as tall.
Tensor random_input(const Shape& shape, DType dtype, Layout layout, uint64_t seed) {
  Generator gen(seed);
  Shape stored = shape;
  if (layout == Layout::transposed) stored.assign(shape.rbegin(), shape.rend());
  if (layout == Layout::strided) stored[0] *= 2;
  Tensor x = randn(stored, real_dtype(dtype), &gen);
  if (is_complex(dtype)) x = complex(x, randn(stored, real_dtype(dtype), &gen));
  if (layout == Layout::transposed) {
    std::vector<int64_t> reverse(shape.size());
    std::iota(reverse.rbegin(), reverse.rend(), 0);
    x = permute(x, reverse);
  }
  if (layout == Layout::strided) x = slice(x, 0, 0, stored[0], 2);
  return x;
}

double max_abs(const std::vector<c128>& values) {
  double m = 0;
  for (const c128& v : values) m = std::max(m, std::abs(v));
  return m;
}

// Max |a - b| is at most `relative` times the largest |b| (or 1).
void expect_all_close(const Tensor& got, const Array& want, double relative, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape) << what;
  auto values = got.to_vector<c128>();
  const double tolerance = relative * std::max(1.0, max_abs(want.data));
  double worst = 0;
  for (size_t i = 0; i < values.size(); ++i) worst = std::max(worst, std::abs(values[i] - want.data[i]));
  EXPECT_LE(worst, tolerance) << what;
}

// ---- values against the reference, in every norm ----

struct FftCase {
  std::string name;
  Shape shape;
  bool complex_input;
  Layout layout;
  std::function<Tensor(const Tensor&, const std::string&)> run;
  std::function<Array(const Array&, const std::string&)> reference;
};

// GoogleTest prints parameters with this instead of a byte dump.
void PrintTo(const FftCase& c, std::ostream* out) { *out << c.name; }

std::vector<FftCase> fft_cases() {
  using L = Layout;
  using T = const Tensor&;
  using A = const Array&;
  using N = const std::string&;
  return {
      // ---- fft / ifft ----
      {"fft_last_odd", {3, 5}, true, L::contiguous, [](T x, N m) { return fft::fft(x, -1, -1, m); },
       [](A a, N m) { return ref_fftn(a, {1}, {5}, m, false); }},
      {"fft_axis0_even", {4, 3}, true, L::contiguous, [](T x, N m) { return fft::fft(x, -1, 0, m); },
       [](A a, N m) { return ref_fftn(a, {0}, {4}, m, false); }},
      {"fft_negative_axis_transposed", {3, 4, 5}, true, L::transposed,
       [](T x, N m) { return fft::fft(x, -1, -2, m); }, [](A a, N m) { return ref_fftn(a, {1}, {4}, m, false); }},
      {"fft_zero_padded", {2, 5}, true, L::contiguous, [](T x, N m) { return fft::fft(x, 8, -1, m); },
       [](A a, N m) { return ref_fftn(a, {1}, {8}, m, false); }},
      {"fft_truncated_axis0_strided", {6, 2}, true, L::strided, [](T x, N m) { return fft::fft(x, 4, 0, m); },
       [](A a, N m) { return ref_fftn(a, {0}, {4}, m, false); }},
      {"fft_real_input", {2, 6}, false, L::contiguous, [](T x, N m) { return fft::fft(x, -1, -1, m); },
       [](A a, N m) { return ref_fftn(a, {1}, {6}, m, false); }},
      {"ifft_last_odd", {3, 5}, true, L::contiguous, [](T x, N m) { return fft::ifft(x, -1, -1, m); },
       [](A a, N m) { return ref_fftn(a, {1}, {5}, m, true); }},
      {"ifft_axis0_padded_transposed", {5, 2}, true, L::transposed,
       [](T x, N m) { return fft::ifft(x, 7, 0, m); }, [](A a, N m) { return ref_fftn(a, {0}, {7}, m, true); }},
      {"ifft_truncated_strided", {3, 6}, true, L::strided, [](T x, N m) { return fft::ifft(x, 4, -1, m); },
       [](A a, N m) { return ref_fftn(a, {1}, {4}, m, true); }},
      // ---- fft2 / ifft2 / fftn / ifftn ----
      {"fft2_default_axes", {2, 3, 4}, true, L::contiguous, [](T x, N m) { return fft::fft2(x, {}, {-2, -1}, m); },
       [](A a, N m) { return ref_fftn(a, {1, 2}, {3, 4}, m, false); }},
      // s pairs with axes in the caller's order: axis 2 padded to 6, axis 0 cut to 2.
      {"fft2_s_follows_axes_order", {3, 4, 5}, true, L::contiguous,
       [](T x, N m) { return fft::fft2(x, {6, 2}, {-1, 0}, m); },
       [](A a, N m) { return ref_fftn(a, {2, 0}, {6, 2}, m, false); }},
      {"fft2_real_input_transposed", {4, 3}, false, L::transposed,
       [](T x, N m) { return fft::fft2(x, {}, {-2, -1}, m); },
       [](A a, N m) { return ref_fftn(a, {0, 1}, {4, 3}, m, false); }},
      {"ifft2_padded_transposed", {4, 3}, true, L::transposed,
       [](T x, N m) { return fft::ifft2(x, {5, 3}, {-2, -1}, m); },
       [](A a, N m) { return ref_fftn(a, {0, 1}, {5, 3}, m, true); }},
      {"fftn_all_axes", {2, 3, 4}, true, L::contiguous, [](T x, N m) { return fft::fftn(x, {}, {}, m); },
       [](A a, N m) { return ref_fftn(a, {0, 1, 2}, {2, 3, 4}, m, false); }},
      // s alone transforms the last len(s) axes.
      {"fftn_s_only", {2, 3, 4}, true, L::contiguous, [](T x, N m) { return fft::fftn(x, {5, 2}, {}, m); },
       [](A a, N m) { return ref_fftn(a, {1, 2}, {5, 2}, m, false); }},
      {"fftn_negative_axes_strided", {4, 3, 4}, true, L::strided,
       [](T x, N m) { return fft::fftn(x, {}, {-3, -1}, m); },
       [](A a, N m) { return ref_fftn(a, {0, 2}, {4, 4}, m, false); }},
      {"ifftn_all_axes", {3, 2, 5}, true, L::contiguous, [](T x, N m) { return fft::ifftn(x, {}, {}, m); },
       [](A a, N m) { return ref_fftn(a, {0, 1, 2}, {3, 2, 5}, m, true); }},
      {"ifftn_s_and_axes", {2, 3, 5}, true, L::contiguous, [](T x, N m) { return fft::ifftn(x, {3, 4}, {2, 0}, m); },
       [](A a, N m) { return ref_fftn(a, {2, 0}, {3, 4}, m, true); }},
      // ---- rfft / irfft ----
      {"rfft_even", {3, 6}, false, L::contiguous, [](T x, N m) { return fft::rfft(x, -1, -1, m); },
       [](A a, N m) { return ref_rfftn(a, {1}, {6}, m); }},
      {"rfft_odd", {2, 5}, false, L::contiguous, [](T x, N m) { return fft::rfft(x, -1, -1, m); },
       [](A a, N m) { return ref_rfftn(a, {1}, {5}, m); }},
      {"rfft_axis0_odd", {5, 3}, false, L::contiguous, [](T x, N m) { return fft::rfft(x, -1, 0, m); },
       [](A a, N m) { return ref_rfftn(a, {0}, {5}, m); }},
      {"rfft_zero_padded", {2, 5}, false, L::contiguous, [](T x, N m) { return fft::rfft(x, 8, -1, m); },
       [](A a, N m) { return ref_rfftn(a, {1}, {8}, m); }},
      {"rfft_truncated", {2, 5}, false, L::contiguous, [](T x, N m) { return fft::rfft(x, 3, -1, m); },
       [](A a, N m) { return ref_rfftn(a, {1}, {3}, m); }},
      {"rfft_negative_axis_transposed", {4, 6}, false, L::transposed, [](T x, N m) { return fft::rfft(x, -1, -2, m); },
       [](A a, N m) { return ref_rfftn(a, {0}, {4}, m); }},
      {"irfft_default_n", {2, 4}, true, L::contiguous, [](T x, N m) { return fft::irfft(x, -1, -1, m); },
       [](A a, N m) { return ref_irfftn(a, {1}, {6}, m); }},
      {"irfft_odd_n", {2, 4}, true, L::contiguous, [](T x, N m) { return fft::irfft(x, 7, -1, m); },
       [](A a, N m) { return ref_irfftn(a, {1}, {7}, m); }},
      {"irfft_input_padded", {2, 4}, true, L::contiguous, [](T x, N m) { return fft::irfft(x, 12, -1, m); },
       [](A a, N m) { return ref_irfftn(a, {1}, {12}, m); }},
      {"irfft_input_truncated", {2, 5}, true, L::contiguous, [](T x, N m) { return fft::irfft(x, 4, -1, m); },
       [](A a, N m) { return ref_irfftn(a, {1}, {4}, m); }},
      {"irfft_axis0_strided", {4, 3}, true, L::strided, [](T x, N m) { return fft::irfft(x, -1, 0, m); },
       [](A a, N m) { return ref_irfftn(a, {0}, {6}, m); }},
      {"irfft_real_input", {2, 4}, false, L::contiguous, [](T x, N m) { return fft::irfft(x, 5, -1, m); },
       [](A a, N m) { return ref_irfftn(a, {1}, {5}, m); }},
      // ---- rfft2 / rfftn / irfft2 / irfftn ----
      {"rfft2_default_axes", {2, 4, 6}, false, L::contiguous, [](T x, N m) { return fft::rfft2(x, {}, {-2, -1}, m); },
       [](A a, N m) { return ref_rfftn(a, {1, 2}, {4, 6}, m); }},
      // The half spectrum is along the last listed axis, here axis 0.
      {"rfft2_reversed_axes", {5, 4}, false, L::contiguous, [](T x, N m) { return fft::rfft2(x, {}, {1, 0}, m); },
       [](A a, N m) { return ref_rfftn(a, {1, 0}, {4, 5}, m); }},
      {"rfftn_all_axes_transposed", {3, 4, 5}, false, L::transposed, [](T x, N m) { return fft::rfftn(x, {}, {}, m); },
       [](A a, N m) { return ref_rfftn(a, {0, 1, 2}, {3, 4, 5}, m); }},
      {"rfftn_s_only", {3, 4, 5}, false, L::contiguous, [](T x, N m) { return fft::rfftn(x, {6, 3}, {}, m); },
       [](A a, N m) { return ref_rfftn(a, {1, 2}, {6, 3}, m); }},
      {"rfftn_negative_axes", {3, 2, 4}, false, L::contiguous, [](T x, N m) { return fft::rfftn(x, {}, {0, -1}, m); },
       [](A a, N m) { return ref_rfftn(a, {0, 2}, {3, 4}, m); }},
      {"irfft2_default", {3, 4}, true, L::contiguous, [](T x, N m) { return fft::irfft2(x, {}, {-2, -1}, m); },
       [](A a, N m) { return ref_irfftn(a, {0, 1}, {3, 6}, m); }},
      // Output length 4 along axis 0 (the last listed) uses 3 of its 4 input entries.
      {"irfft2_s_and_axes", {4, 3, 5}, true, L::contiguous, [](T x, N m) { return fft::irfft2(x, {5, 4}, {2, 0}, m); },
       [](A a, N m) { return ref_irfftn(a, {2, 0}, {5, 4}, m); }},
      {"irfftn_all_axes", {2, 3, 4}, true, L::contiguous, [](T x, N m) { return fft::irfftn(x, {}, {}, m); },
       [](A a, N m) { return ref_irfftn(a, {0, 1, 2}, {2, 3, 6}, m); }},
      {"irfftn_s_only_transposed", {2, 3, 4}, true, L::transposed,
       [](T x, N m) { return fft::irfftn(x, {4, 5}, {}, m); },
       [](A a, N m) { return ref_irfftn(a, {1, 2}, {4, 5}, m); }},
      // ---- hfft / ihfft ----
      {"hfft_default_n", {2, 4}, true, L::contiguous, [](T x, N m) { return fft::hfft(x, -1, -1, m); },
       [](A a, N m) { return ref_hfft(a, 1, 6, m); }},
      {"hfft_odd_n", {2, 4}, true, L::contiguous, [](T x, N m) { return fft::hfft(x, 7, -1, m); },
       [](A a, N m) { return ref_hfft(a, 1, 7, m); }},
      {"hfft_input_padded_axis0", {3, 2}, true, L::contiguous, [](T x, N m) { return fft::hfft(x, 10, 0, m); },
       [](A a, N m) { return ref_hfft(a, 0, 10, m); }},
      {"hfft_transposed", {4, 3}, true, L::transposed, [](T x, N m) { return fft::hfft(x, 5, -2, m); },
       [](A a, N m) { return ref_hfft(a, 0, 5, m); }},
      {"ihfft_odd", {2, 5}, false, L::contiguous, [](T x, N m) { return fft::ihfft(x, -1, -1, m); },
       [](A a, N m) { return ref_ihfft(a, 1, 5, m); }},
      {"ihfft_even_axis0", {6, 2}, false, L::contiguous, [](T x, N m) { return fft::ihfft(x, -1, 0, m); },
       [](A a, N m) { return ref_ihfft(a, 0, 6, m); }},
      {"ihfft_padded_strided", {2, 5}, false, L::strided, [](T x, N m) { return fft::ihfft(x, 8, -1, m); },
       [](A a, N m) { return ref_ihfft(a, 1, 8, m); }},
  };
}

class FftValues : public ::testing::TestWithParam<std::tuple<FftCase, std::string>> {};

TEST_P(FftValues, MatchesNaiveDft) {
  const auto& [c, norm] = GetParam();
  Tensor x = random_input(c.shape, c.complex_input ? DType::c128 : DType::f64, c.layout, 7);
  ASSERT_EQ(x.is_contiguous(), c.layout == Layout::contiguous);
  expect_all_close(c.run(x, norm), c.reference(array_of(x), norm), 1e-12, c.name + " " + norm);
}

// Single precision in, single precision out, within float32 rounding of the double result on
// the same (rounded) input.
TEST_P(FftValues, SinglePrecisionAgreesWithDouble) {
  const auto& [c, norm] = GetParam();
  Tensor x = random_input(c.shape, c.complex_input ? DType::c64 : DType::f32, c.layout, 8);
  Tensor single = c.run(x, norm);
  Tensor wide = c.run(cast(x, c.complex_input ? DType::c128 : DType::f64), norm);
  EXPECT_EQ(single.dtype(), wide.dtype() == DType::c128 ? DType::c64 : DType::f32) << c.name;
  expect_all_close(single, array_of(wide), 1e-5, c.name + " " + norm);
}

INSTANTIATE_TEST_SUITE_P(Fft, FftValues,
                         ::testing::Combine(::testing::ValuesIn(fft_cases()),
                                            ::testing::Values("backward", "ortho", "forward")),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "_" + std::get<1>(info.param);
                         });

// A transform this large gets a multi-threaded FFTW plan (small ones are single-threaded).
TEST(Fft, LargeTransformMatchesTheReference) {
  Tensor z = random_input({128, 256}, DType::c128, Layout::contiguous, 9);
  expect_all_close(slice(fft::fft(z), 0, 0, 2), ref_fftn(array_of(slice(z, 0, 0, 2)), {1}, {256}, "backward", false),
                   1e-12, "fft [128, 256]");
}

// irfft2 over batches large enough for threaded plans, through each of the FFTW backend's c2r
// schemes (two stages, a copy, and the faster of the two as measured), in chunks of several
// entries, or one, or one entry on all threads.
TEST(Fft, LargeIrfft2RoundTrips) {
  const int threads = num_threads();
  for (const char* scheme : {"two_stages", "copy", static_cast<const char*>(nullptr)}) {
    const ScopedEnv forced("EDDY_FFTW_C2R", scheme);  // unset: measured
    for (int t : {1, 2}) {
      set_num_threads(t);
      for (const Shape& shape : {Shape{5, 96, 96}, Shape{3, 256, 300}, Shape{1, 300, 256}, Shape{2, 400, 400}}) {
        for (DType dtype : {DType::f64, DType::f32}) {
          Tensor x = random_input(shape, dtype, Layout::contiguous, 4);
          Tensor back = fft::irfft2(fft::rfft2(x), {shape[1], shape[2]});
          expect_all_close(back, array_of(x), dtype == DType::f64 ? 1e-12 : 1e-5,
                           "irfft2(rfft2) " + to_string(shape) + " threads " + std::to_string(t) + " scheme " +
                               (scheme ? scheme : "measured"));
        }
      }
    }
  }
  set_num_threads(threads);
}

TEST(Fft, UnknownC2rSchemeIsAnError) {
  const ScopedEnv forced("EDDY_FFTW_C2R", "in_place");
  expect_error([] { fft::irfft2(random_input({2, 8, 5}, DType::c128, Layout::contiguous, 1)); },
               {"EDDY_FFTW_C2R", "in_place", "two_stages", "copy"});
}

// A misspelt effort fell back to FFTW_MEASURE, losing estimate's bit-for-bit runs without a word.
// (Read by the first transform, and kept; the function itself reads the variable every time.)
TEST(Fft, UnknownPlannerEffortIsAnError) {
  const ScopedEnv forced("EDDY_FFTW_PLANNER", "Estimate");
  expect_error([] { fft::fftw_planner_flags(); }, {"EDDY_FFTW_PLANNER is 'Estimate'", "estimate, measure or patient"});
}

// ---- identities ----

void expect_tensors_close(const Tensor& got, const Tensor& want, double tolerance, const std::string& what) {
  expect_all_close(got, array_of(want), tolerance, what);
}

class FftNorms : public ::testing::TestWithParam<std::string> {};

TEST_P(FftNorms, RoundTrips) {
  const std::string norm = GetParam();
  Tensor z = random_input({3, 7}, DType::c128, Layout::contiguous, 1);
  expect_tensors_close(fft::ifft(fft::fft(z, -1, -1, norm), -1, -1, norm), z, 1e-13, "ifft(fft)");
  expect_tensors_close(fft::ifftn(fft::fftn(z, {}, {}, norm), {}, {}, norm), z, 1e-13, "ifftn(fftn)");
  for (int64_t n : {7, 8}) {
    Tensor x = random_input({3, n}, DType::f64, Layout::contiguous, 2);
    expect_tensors_close(fft::irfft(fft::rfft(x, -1, -1, norm), n, -1, norm), x, 1e-13,
                         "irfft(rfft) n=" + std::to_string(n));
    Tensor columns = transpose(x);  // along axis 0, non-contiguous
    expect_tensors_close(fft::irfft(fft::rfft(columns, -1, 0, norm), n, 0, norm), columns, 1e-13,
                         "irfft(rfft) axis 0 n=" + std::to_string(n));
    expect_tensors_close(fft::hfft(fft::ihfft(x, -1, -1, norm), n, -1, norm), x, 1e-13,
                         "hfft(ihfft) n=" + std::to_string(n));
  }
  Tensor volume = random_input({2, 4, 5}, DType::f64, Layout::contiguous, 3);
  expect_tensors_close(fft::irfftn(fft::rfftn(volume, {}, {}, norm), {2, 4, 5}, {}, norm), volume, 1e-13,
                       "irfftn(rfftn)");
  expect_tensors_close(fft::irfft2(fft::rfft2(volume, {}, {0, 2}, norm), {2, 5}, {0, 2}, norm), volume,
                       1e-13, "irfft2(rfft2) over axes 0, 2");
}

INSTANTIATE_TEST_SUITE_P(Fft, FftNorms, ::testing::Values("backward", "ortho", "forward"));

double energy(const Tensor& x) { return sum(square(abs(x))).item<double>(); }

TEST(Fft, Parseval) {
  const int64_t n = 7;
  Tensor z = random_input({n}, DType::c128, Layout::contiguous, 4);
  EXPECT_NEAR(energy(z), energy(fft::fft(z)) / n, 1e-12);
  EXPECT_NEAR(energy(z), energy(fft::fft(z, -1, -1, "ortho")), 1e-12);
  Tensor image = random_input({4, 6}, DType::c128, Layout::contiguous, 5);
  EXPECT_NEAR(energy(image), energy(fft::fft2(image)) / 24, 1e-12);
}

// ---- frequencies, shifts and roll ----

void expect_values(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  auto values = got.to_vector<double>();
  ASSERT_EQ(values.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(values[i], want[i], 1e-6 * (1 + std::abs(want[i]))) << what << " " << i;
  }
}

TEST(Fft, FrequencyGrids) {
  // numpy.fft.fftfreq(5, d=0.5) and fftfreq(6, d=0.1).
  expect_values(fft::fftfreq(5, 0.5), {0, 0.4, 0.8, -0.8, -0.4}, "fftfreq(5, 0.5)");
  expect_values(fft::fftfreq(6, 0.1), {0, 1 / 0.6, 2 / 0.6, -3 / 0.6, -2 / 0.6, -1 / 0.6}, "fftfreq(6, 0.1)");
  expect_values(fft::fftfreq(1), {0}, "fftfreq(1)");
  expect_values(fft::rfftfreq(5, 0.5), {0, 0.4, 0.8}, "rfftfreq(5, 0.5)");
  expect_values(fft::rfftfreq(6, 0.1), {0, 1 / 0.6, 2 / 0.6, 3 / 0.6}, "rfftfreq(6, 0.1)");
  EXPECT_EQ(fft::fftfreq(4).dtype(), DType::f64);
  EXPECT_EQ(fft::rfftfreq(4, 2.0, DType::f32).dtype(), DType::f32);
  expect_values(fft::rfftfreq(4, 2.0, DType::f32), {0, 0.125, 0.25}, "rfftfreq(4, 2) float32");
}

TEST(Fft, ShiftPutsZeroFrequencyInTheCentre) {
  expect_values(fft::fftshift(fft::fftfreq(5)), {-0.4, -0.2, 0, 0.2, 0.4}, "fftshift(fftfreq(5))");
  expect_values(fft::fftshift(fft::fftfreq(6)), {-0.5, -2 / 6.0, -1 / 6.0, 0, 1 / 6.0, 2 / 6.0},
                "fftshift(fftfreq(6))");
  expect_values(fft::ifftshift(fft::fftshift(fft::fftfreq(5))), {0, 0.2, 0.4, -0.4, -0.2}, "ifftshift back");
}

// out[(i + shift) mod n] = x[i] along one axis of a [3, 5] tensor, from the flat index.
std::vector<double> rolled(const std::vector<double>& x, int64_t shift, int64_t axis) {
  const int64_t rows = 3, cols = 5;
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      int64_t to_r = r, to_c = c;
      if (axis == 0) to_r = ((r + shift) % rows + rows) % rows;
      else to_c = ((c + shift) % cols + cols) % cols;
      out[to_r * cols + to_c] = x[r * cols + c];
    }
  }
  return out;
}

TEST(Fft, ShiftsOfAMatrix) {
  Tensor x = reshape(arange(0, 15, 1, DType::f64), {3, 5});
  auto values = x.to_vector<double>();
  // fftshift rolls each axis by n / 2, ifftshift by -(n / 2): different for odd n.
  expect_values(fft::fftshift(x), rolled(rolled(values, 1, 0), 2, 1), "fftshift all axes");
  expect_values(fft::fftshift(x, {-1}), rolled(values, 2, 1), "fftshift last axis");
  expect_values(fft::ifftshift(x), rolled(rolled(values, -1, 0), -2, 1), "ifftshift all axes");
  expect_values(fft::ifftshift(fft::fftshift(x)), values, "ifftshift(fftshift)");
  expect_values(fft::fftshift(fft::ifftshift(transpose(x), {0}), {0}), transpose(x).to_vector<double>(),
                "fftshift(ifftshift) of a transposed view");
}

TEST(Fft, Roll) {
  Tensor x = reshape(arange(0, 15, 1, DType::f64), {3, 5});
  auto values = x.to_vector<double>();
  expect_values(roll(x, 2, 1), rolled(values, 2, 1), "roll 2 along axis 1");
  expect_values(roll(x, -1, 0), rolled(values, -1, 0), "roll -1 along axis 0");
  expect_values(roll(x, 7, -1), rolled(values, 7, 1), "roll past the length");
  expect_values(roll(x, 0, 0), values, "roll 0");
}

// ---- derivatives through FFTs ----

using TensorList = std::vector<Tensor>;
constexpr double kStep = 1e-5;

double real_dot(const Tensor& a, const Tensor& b) { return sum(real(conj(a) * b)).item<double>(); }
Tensor real_dot_tensor(const Tensor& a, const Tensor& b) { return sum(real(conj(a) * b)); }

// Non-linear in both a real image x and a complex signal z.
class FftLoss : public ::testing::Test {
 protected:
  Tensor w = random_input({3, 3}, DType::f64, Layout::contiguous, 20);  // weights on rfft2's [3, 3] output
  TensorList primals{random_input({3, 4}, DType::f64, Layout::contiguous, 21),
                     random_input({5}, DType::c128, Layout::contiguous, 22)};
  TensorList v{random_input({3, 4}, DType::f64, Layout::contiguous, 23),
               random_input({5}, DType::c128, Layout::contiguous, 24)};
  TensorList u{random_input({3, 4}, DType::f64, Layout::contiguous, 25),
               random_input({5}, DType::c128, Layout::contiguous, 26)};

  Tensor loss(const TensorList& xs) const {
    return sum(square(abs(fft::rfft2(xs[0]))) * w) + sum(pow(real(fft::fft(xs[1])), 3.0));
  }
  static TensorList moved(const TensorList& xs, const TensorList& direction, double h) {
    return {xs[0] + h * direction[0], xs[1] + h * direction[1]};
  }
  static double dot(const TensorList& a, const TensorList& b) { return real_dot(a[0], b[0]) + real_dot(a[1], b[1]); }
  static TensorList leaves(const TensorList& xs) {
    return {xs[0].detach().requires_grad_(), xs[1].detach().requires_grad_()};
  }
  TensorList gradient(const TensorList& xs, bool create_graph) const {
    TensorList at = leaves(xs);
    return grad({loss(at)}, at, {}, create_graph);
  }
  // d/dv loss, in forward mode.
  Tensor directional(const TensorList& xs) const {
    MultiFunction f = [this](const TensorList& ys) { return TensorList{loss(ys)}; };
    return jvp(f, xs, v).second[0];
  }
  double central_difference(const std::function<double(const TensorList&)>& g, const TensorList& direction) const {
    return (g(moved(primals, direction, kStep)) - g(moved(primals, direction, -kStep))) / (2 * kStep);
  }
  static void expect_close(double ad, double fd, const char* what) {
    EXPECT_NEAR(ad, fd, 1e-6 * (1 + std::abs(fd))) << what;
  }
};

TEST_F(FftLoss, ReverseModeOrders1And2) {
  expect_close(dot(gradient(primals, false), v),
               central_difference([this](const TensorList& xs) { return loss(xs).item<double>(); }, v), "order 1");
  // d/du <grad L, v>, by differentiating the recorded gradient.
  TensorList at = leaves(primals);
  TensorList g = grad({loss(at)}, at, {}, true);
  TensorList second = grad({real_dot_tensor(g[0], v[0]) + real_dot_tensor(g[1], v[1])}, at, {}, false);
  expect_close(dot(second, u),
               central_difference([this](const TensorList& xs) { return dot(gradient(xs, false), v); }, u),
               "order 2");
}

TEST_F(FftLoss, ForwardModeOrders1And2) {
  expect_close(directional(primals).item<double>(),
               central_difference([this](const TensorList& xs) { return loss(xs).item<double>(); }, v), "order 1");
  MultiFunction first = [this](const TensorList& xs) { return TensorList{directional(xs)}; };
  expect_close(jvp(first, primals, u).second[0].item<double>(),
               central_difference([this](const TensorList& xs) { return directional(xs).item<double>(); }, u),
               "order 2");
}

TEST_F(FftLoss, MixedModesOrder2) {
  // Forward-over-reverse: the Hessian along v, read along u.
  // vjp, not grad on detached leaves: detaching would drop the tangents being pushed through.
  MultiFunction gradient_fn = [this](const TensorList& xs) {
    MultiFunction f = [this](const TensorList& ys) { return TensorList{loss(ys)}; };
    return vjp(f, xs, {scalar(1.0, DType::f64)}).second;
  };
  TensorList hv = jvp(gradient_fn, primals, v).second;
  const double fd = central_difference([this](const TensorList& xs) { return dot(gradient(xs, false), u); }, v);
  expect_close(dot(hv, u), fd, "forward-over-reverse");
  // Reverse-over-forward: the gradient of the directional derivative.
  TensorList at = leaves(primals);
  expect_close(dot(grad({directional(at)}, at, {}, false), u), fd, "reverse-over-forward");
}

// PyTorch's convention: the gradient is dL/dRe + i dL/dIm. For L = sum |fft(z)|^2 = n sum |z|^2
// that is 2 n z (and 2 z with the unitary "ortho" transform).
TEST(FftGradient, ComplexGradientConvention) {
  const int64_t n = 6;
  Tensor z = random_input({n}, DType::c128, Layout::contiguous, 30).requires_grad_();
  Tensor g = grad({sum(square(abs(fft::fft(z))))}, {z}, {}, false)[0];
  expect_tensors_close(g, 2.0 * n * z.detach(), 1e-12, "backward norm");
  Tensor g_ortho = grad({sum(square(abs(fft::fft(z, -1, -1, "ortho"))))}, {z}, {}, false)[0];
  expect_tensors_close(g_ortho, 2.0 * z.detach(), 1e-12, "ortho norm");
}

// ---- errors ----


TEST(FftErrors, BadArgumentsNameTheOp) {
  Tensor z = zeros({3, 4}, DType::c64);
  Tensor x = zeros({3, 4}, DType::f32);
  expect_error([&] { fft::fft(z, -1, 2); }, {"fft", "axis 2"});
  expect_error([&] { fft::fft(scalar(3.0, DType::c64)); }, {"fft: names axis -1 of a tensor of rank 0, which has no axes"});
  expect_error([&] { fft::rfft(x, -1, -3); }, {"rfft", "axis -3"});
  expect_error([&] { fft::fft(z, 0); }, {"fft", "positive", "0"});
  expect_error([&] { fft::ifft(z, -4); }, {"ifft", "positive", "-4"});
  expect_error([&] { fft::irfftn(z, {4, 0}); }, {"irfftn", "positive"});
  expect_error([&] { fft::fft(zeros({4}, DType::i32)); }, {"fft", "int32"});
  expect_error([&] { fft::rfft(zeros({4}, DType::i64)); }, {"rfft", "int64"});
  expect_error([&] { fft::rfft(z); }, {"rfft", "complex64"});
  expect_error([&] { fft::rfftn(z); }, {"rfftn", "complex64"});
  expect_error([&] { fft::ihfft(z); }, {"ihfft", "complex64"});
  expect_error([&] { fft::ifft(z, -1, -1, "orthogonal"); }, {"ifft", "norm", "orthogonal"});
  expect_error([&] { fft::rfft2(x, {}, {-2, -1}, "Backward"); }, {"rfft2", "norm", "Backward"});
  expect_error([&] { fft::fft2(z, {4}, {0, 1}); }, {"fft2", "s has 1", "2 axes"});
  expect_error([&] { fft::fftn(z, {2, 3, 4}); }, {"fftn", "s has 3", "[3, 4]"});
  expect_error([&] { fft::fftn(z, {}, {0, -2}); }, {"fftn", "-2", "repeated"});
  expect_error([&] { fft::irfft2(z, {}, {1, 1}); }, {"irfft2", "repeated"});
  expect_error([&] { fft::irfft(zeros({2, 1}, DType::c64)); }, {"irfft", "output length", "0"});
  expect_error([&] { fft::hfft(zeros({1}, DType::c64)); }, {"hfft", "output length", "0"});
  expect_error([&] { fft::hfft(z, 0); }, {"hfft", "positive"});
  // An empty axis has nothing to transform unless n or s pads it.
  expect_error([&] { fft::rfft(zeros({0}, DType::f64)); }, {"rfft", "empty", "[0]"});
  expect_error([&] { fft::fft2(zeros({2, 0}, DType::c64)); }, {"fft2", "axis 1", "empty"});
  expect_error([&] { fft::irfftn(zeros({0, 3}, DType::c64)); }, {"irfftn", "axis 0", "empty"});
  EXPECT_EQ(fft::fft(zeros({2, 0}, DType::c64), 3).shape(), (Shape{2, 3}));
  expect_error([&] { fft::fftfreq(0); }, {"fftfreq", "positive"});
  expect_error([&] { fft::rfftfreq(4, 0.0); }, {"rfftfreq", "non-zero"});
  expect_error([&] { fft::fftshift(x, {2}); }, {"fftshift", "axis 2"});
}

}  // namespace
}  // namespace eddy
