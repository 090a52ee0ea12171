#pragma once
// Darcy training data as in the Fourier neural operator paper (Li et al., ICLR 2021): random
// two-phase coefficients from a thresholded Gaussian random field, and their solutions u of
// -div(a grad u) = f (solvers/classical/darcy.h).

#include <cstdint>
#include <string>

#include "eddy/core/rng.h"
#include "eddy/core/tensor.h"

namespace eddy::classical {

// The field is sum_k c_k xi_k exp(2 pi i k.x), xi_k unit complex normals (xi_-k = conj(xi_k)),
// c_k = tau^(alpha - 1) (4 pi^2 |k|^2 + tau^2)^(-alpha / 2) and c_0 = 0: the covariance
// (-Laplacian + tau^2)^(-alpha) of the FNO data, up to scale, which the threshold ignores.
// The coefficient is a_high where the field is >= 0 and a_low elsewhere; f is the constant
// `forcing`. alpha > 1 keeps the field's variance finite in 2-D.
struct DarcyDatasetOptions {
  int64_t resolution = 64;  // n: nodes per side of the unit square, boundary included
  int64_t samples = 16;
  uint64_t seed = 0;
  double a_high = 12;
  double a_low = 3;
  double alpha = 2;
  double tau = 3;
  double forcing = 1;
};

// One [n, n] float64 sample of the Gaussian random field, drawn from `generator`. It is sampled
// by FFT on the periodic square of side 2 and cut to [0, 1]^2, so opposite edges of the unit
// square are not correlated through the periodic wrap-around.
Tensor sample_gaussian_random_field(const DarcyDatasetOptions& options, Generator& generator);

// The thresholded coefficient of one sample.
Tensor sample_darcy_coefficient(const DarcyDatasetOptions& options, Generator& generator);

// Writes options.samples pairs to an HDF5 file, atomically: datasets "a" and "u", float64
// [samples, n, n], and every option as an attribute of "/", plus "face_average" = "harmonic" and
// "equation". Sample k is the k-th draw of one Generator seeded with options.seed, so a file is
// reproducible from its attributes (the seed is stored as a double: exact below 2^53). Bad
// options throw eddy::Error naming the option.
void write_darcy_dataset(const DarcyDatasetOptions& options, const std::string& path);

}  // namespace eddy::classical
