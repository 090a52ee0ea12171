#pragma once
// A small operator-learning set for the training tests: u = random Fourier modes 1..modes on a
// periodic grid, and its low-pass exp(-0.1 k^2) per mode, a linear operator an FNO can represent.

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "eddy/eddy.h"
#include "eddy/io/hdf5.h"

namespace eddy {

struct SmoothingSplit {
  std::string name;
  int64_t samples;
  int64_t points;
};

// Writes <split>/u and <split>/smooth, [samples, points] float64, for each split, both times `scale`.
inline void write_smoothing_data(const std::string& path, const std::vector<SmoothingSplit>& splits, int modes,
                                 uint64_t seed, double scale = 1) {
  io::Hdf5Writer out(path);
  Generator generator(seed);
  for (const SmoothingSplit& split : splits) {
    const Tensor x = arange(0, static_cast<double>(split.points), 1, DType::f64) *
                     (2 * std::numbers::pi / static_cast<double>(split.points));
    Tensor u = zeros({split.samples, split.points}, DType::f64);
    Tensor smooth = zeros({split.samples, split.points}, DType::f64);
    for (int k = 1; k <= modes; ++k) {
      const Tensor a = randn({split.samples, 1}, DType::f64, &generator);
      const Tensor b = randn({split.samples, 1}, DType::f64, &generator);
      const Tensor mode = a * cos(double(k) * x) + b * sin(double(k) * x);
      u = u + mode;
      smooth = smooth + std::exp(-0.1 * k * k) * mode;
    }
    out.write(split.name + "/u", u * scale);
    out.write(split.name + "/smooth", smooth * scale);
  }
  out.commit();
}

}  // namespace eddy
