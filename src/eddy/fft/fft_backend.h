#pragma once
// The FFT kernel interface a device implements: unnormalised transforms on dense tensors, no op
// semantics (lengths, norms and autodiff live in fft.cpp). FFTW implements it on the CPU; a
// cuFFT implementation registers itself for DeviceType::cuda the same way.

#include <vector>

#include "eddy/core/tensor.h"

namespace eddy::fft {

class FftBackend {
 public:
  virtual ~FftBackend() = default;
  // out = sum_j in_j exp(-+2 pi i j k / n) over each of `axes` (minus sign when forward);
  // in and out are dense complex tensors of one shape.
  virtual void c2c(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes,
                   bool forward) = 0;
  // Real in -> half spectrum over `axes` (forward): halved along the last listed axis
  // (out.shape[a] = in.shape[a] / 2 + 1 there), full along the others.
  virtual void r2c(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes) = 0;
  // Half spectrum in -> real out (backward) over `axes`, times `scale`: the full transforms along
  // all but the last listed axis, then the half-spectrum one, whose length is
  // out.shape[axes.back()]; `in` is left untouched. The scale is here, not a separate op, because
  // an implementation that must copy its input anyway (FFTW's c2r destroys it) can apply it
  // during the copy instead of in another pass over the output.
  virtual void c2r(const Tensor& in, const Tensor& out, const std::vector<int64_t>& axes, double scale) = 0;
};

FftBackend& fft_backend_for(Device device);

// FFTW's planner flag for EDDY_FFTW_PLANNER: FFTW_ESTIMATE, FFTW_MEASURE (also when unset) or
// FFTW_PATIENT, for the serial and the distributed transforms alike. Any other value throws,
// naming the variable: a misspelt `estimate` fell back to measure, losing its bit-for-bit runs.
unsigned fftw_planner_flags();
void register_fft_backend(DeviceType type, FftBackend* backend);

}  // namespace eddy::fft
