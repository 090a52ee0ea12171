#pragma once
// Darcy training data as in the Fourier neural operator paper (Li et al., ICLR 2021): random
// two-phase coefficients from a thresholded Gaussian random field, and their solutions u of
// -div(a grad u) = f (solvers/classical/darcy.h). `eddy generate` with `solver: darcy`
// (solvers/classical/dataset.h) writes its files through write_darcy_dataset.

#include <cstdint>
#include <ostream>
#include <string>

#include "eddy/core/dtype.h"
#include "eddy/core/rng.h"
#include "eddy/core/tensor.h"
#include "eddy/dist/communicator.h"
#include "eddy/io/hdf5.h"
#include "solvers/classical/grf.h"

namespace eddy::classical {

// The field is a GaussianRandomField with covariance tau^(2 alpha - 2) (-Laplacian + tau^2)^(-alpha)
// (the FNO data's, up to a scale the threshold ignores), sampled on the periodic square of side 2
// and cut to [0, 1]^2, so that opposite edges of the unit square are not correlated through the
// periodic wrap-around. The coefficient is a_high where the field is >= 0 and a_low elsewhere; f
// is the constant `forcing`. alpha > 1 keeps the field's variance finite in 2-D.
struct DarcyDatasetOptions {
  int64_t resolution = 64;  // n: nodes per side of the unit square, boundary included
  int64_t samples = 16;
  uint64_t seed = 0;
  double a_high = 12;
  double a_low = 3;
  double alpha = 2;
  double tau = 3;
  double forcing = 1;
  DType dtype = DType::f64;  // stored precision of a, u and x (the solve is float64)
  std::string config = {};   // when not empty, stored as the string dataset "config"
  bool vtk = false;          // also <path without .h5>_sample0.vti with a and u of sample 0
};

// The field on the periodic square [0, 2)^2 at 2 (n - 1) points per side: its first n x n nodes
// are those of the unit square, x_i = i / (n - 1).
GaussianRandomField darcy_random_field(const DarcyDatasetOptions& options);

// The thresholded [n, n] float64 coefficient of one sample, drawn from `generator`.
Tensor sample_darcy_coefficient(const DarcyDatasetOptions& options, Generator& generator);

// Writes options.samples pairs to an HDF5 file, atomically (folders are created):
//   a  [samples, n, n]  coefficients, a[k, i, j] at (x, y) = (x_i, x_j)
//   u  [samples, n, n]  solutions, 0 on the boundary
//   x  [n]              node coordinates x_i = i / (n - 1), both axes
//   config              options.config, when given
// and every option as an attribute of "/", plus "solver" = "darcy", "scheme", "face_average" =
// "harmonic" and "equation". Sample k is the k-th draw of one Generator seeded with options.seed,
// so a file is reproducible from its attributes (the seed is stored as a double: exact below
// 2^53). Bad options throw eddy::Error naming the option. Progress goes to `log` when given.
void write_darcy_dataset(const DarcyDatasetOptions& options, const std::string& path, std::ostream* log = nullptr);

// The dataset file `path` opened for writing by `comm`'s ranks, its folder made first by rank 0:
// the generators open it before they solve, so that a path that cannot be written fails before
// the work, with an error that names output.path.
io::Hdf5Writer open_dataset_file(const std::string& path, dist::Communicator& comm);

// The image of a dataset's first sample beside it: <path without .h5>_sample0.vti.
std::string sample_image_path(const std::string& dataset_path);

// Commits `writer`'s dataset at `path`, an earlier dataset's image there removed first (by
// `comm`'s rank 0): the new image is moved in after the dataset, so a run stopped between the two
// left the new dataset beside the old one's image. Without the image, or stopped, none is there.
void commit_dataset(io::Hdf5Writer& writer, const std::string& path, dist::Communicator& comm);

}  // namespace eddy::classical
