#pragma once
// Discrete Fourier transforms with numpy.fft semantics, differentiable to any order in both
// modes. Lengths: `n` / `s` truncate or zero-pad the input along each transformed axis before
// the transform (for the inverse real transforms, they give the output length). Norm modes:
//   "backward" (default): forward unscaled, inverse scaled by 1/n;
//   "ortho": both scaled by 1/sqrt(n);
//   "forward": forward scaled by 1/n, inverse unscaled.
// float32/complex64 and float64/complex128 are transformed as they are; real inputs to complex
// transforms are promoted to complex, and half floats are transformed in float32. Backed by FFTW on the CPU (plans cached and reused).

#include <string_view>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy::fft {

// n or s entries of -1 mean "the input's length along that axis", except for the inverse real
// transforms' last axis, where -1 means the default output length 2 (m - 1) for m inputs.
Tensor fft(const Tensor& x, int64_t n = -1, int64_t axis = -1, std::string_view norm = "backward");
Tensor ifft(const Tensor& x, int64_t n = -1, int64_t axis = -1, std::string_view norm = "backward");
Tensor fft2(const Tensor& x, const std::vector<int64_t>& s = {}, const std::vector<int64_t>& axes = {-2, -1},
            std::string_view norm = "backward");
Tensor ifft2(const Tensor& x, const std::vector<int64_t>& s = {}, const std::vector<int64_t>& axes = {-2, -1},
             std::string_view norm = "backward");
// Empty axes: all axes (or the last len(s) axes when s is given), as in NumPy.
Tensor fftn(const Tensor& x, const std::vector<int64_t>& s = {}, const std::vector<int64_t>& axes = {},
            std::string_view norm = "backward");
Tensor ifftn(const Tensor& x, const std::vector<int64_t>& s = {}, const std::vector<int64_t>& axes = {},
             std::string_view norm = "backward");

// Real input -> the non-negative-frequency half spectrum (last transformed axis: n/2 + 1).
Tensor rfft(const Tensor& x, int64_t n = -1, int64_t axis = -1, std::string_view norm = "backward");
// Half spectrum -> real signal of length n (default 2 * (m - 1) for m input entries).
Tensor irfft(const Tensor& x, int64_t n = -1, int64_t axis = -1, std::string_view norm = "backward");
Tensor rfft2(const Tensor& x, const std::vector<int64_t>& s = {}, const std::vector<int64_t>& axes = {-2, -1},
             std::string_view norm = "backward");
Tensor irfft2(const Tensor& x, const std::vector<int64_t>& s = {}, const std::vector<int64_t>& axes = {-2, -1},
              std::string_view norm = "backward");
Tensor rfftn(const Tensor& x, const std::vector<int64_t>& s = {}, const std::vector<int64_t>& axes = {},
             std::string_view norm = "backward");
Tensor irfftn(const Tensor& x, const std::vector<int64_t>& s = {}, const std::vector<int64_t>& axes = {},
              std::string_view norm = "backward");

// The FFT of a signal with Hermitian symmetry, given its half: a real spectrum of length n.
Tensor hfft(const Tensor& x, int64_t n = -1, int64_t axis = -1, std::string_view norm = "backward");
// The inverse of hfft: real input -> half of a Hermitian-symmetric signal.
Tensor ihfft(const Tensor& x, int64_t n = -1, int64_t axis = -1, std::string_view norm = "backward");

// Sample frequencies, in cycles per unit of the spacing d (NumPy's order).
Tensor fftfreq(int64_t n, double d = 1.0, DType dtype = DType::f64);
Tensor rfftfreq(int64_t n, double d = 1.0, DType dtype = DType::f64);
// Moves the zero frequency to the centre of the given axes (all when empty), and back.
Tensor fftshift(const Tensor& x, const std::vector<int64_t>& axes = {});
Tensor ifftshift(const Tensor& x, const std::vector<int64_t>& axes = {});

}  // namespace eddy::fft
