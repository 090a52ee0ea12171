// Darcy datasets: Gaussian random fields, thresholded, solved and written to HDF5.

#include "solvers/classical/darcy_dataset.h"

#include <cmath>
#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "eddy/autodiff/tape.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/hdf5.h"
#include "eddy/io/vtk.h"
#include "eddy/ops/ops.h"
#include "solvers/classical/darcy.h"
#include "solvers/classical/output_dtype.h"

namespace eddy::classical {
namespace {

void check_options(const DarcyDatasetOptions& o) {
  EDDY_CHECK(o.resolution >= 3, "DarcyDatasetOptions: resolution must be >= 3, got ", o.resolution);
  EDDY_CHECK(o.samples >= 1, "DarcyDatasetOptions: samples must be >= 1, got ", o.samples);
  EDDY_CHECK(o.a_low > 0 && o.a_high > 0 && std::isfinite(o.a_low) && std::isfinite(o.a_high),
             "DarcyDatasetOptions: a_low and a_high must be positive and finite, got ", o.a_low,
             " and ", o.a_high);
  EDDY_CHECK(o.alpha > 1, "DarcyDatasetOptions: alpha must be > 1 for a field of finite variance, got ",
             o.alpha);
  EDDY_CHECK(o.tau > 0, "DarcyDatasetOptions: tau must be positive, got ", o.tau);
  EDDY_CHECK(std::isfinite(o.forcing), "DarcyDatasetOptions: forcing must be finite, got ", o.forcing);
  EDDY_CHECK(o.dtype == DType::f32 || o.dtype == DType::f64, "DarcyDatasetOptions: dtype must be float32 or float64");
}

}  // namespace

GaussianRandomField darcy_random_field(const DarcyDatasetOptions& options) {
  GaussianRandomField field;
  field.dim = 2;
  field.length = 2;
  field.resolution = 2 * (options.resolution - 1);
  field.alpha = options.alpha;
  field.tau = options.tau;
  field.sigma = std::pow(options.tau, options.alpha - 1);
  return field;
}

Tensor sample_darcy_coefficient(const DarcyDatasetOptions& options, Generator& generator) {
  check_options(options);
  const int64_t n = options.resolution;
  const Tensor field = slice(slice(squeeze(darcy_random_field(options).sample(1, generator), 0), 0, 0, n), 1, 0, n);
  return contiguous(where(ge(field, zeros_like(field)), full_like(field, options.a_high),
                          full_like(field, options.a_low)));
}

// Only a .h5 is taken off: two datasets "ns_nu1.0e-2" and "ns_nu1.5e-2" had one image, "ns_nu1".
std::string sample_image_path(const std::string& dataset_path) {
  std::string_view stem = dataset_path;
  if (stem.ends_with(".h5")) stem.remove_suffix(3);
  return std::string(stem) + "_sample0.vti";
}

io::Hdf5Writer open_dataset_file(const std::string& path, dist::Communicator& comm) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!parent.empty() && comm.rank() == 0) std::filesystem::create_directories(parent, error);
  // The other ranks wait for rank 0's folder: looking for it at once, they often found it missing.
  Tensor made = tensor(std::vector<int64_t>{error ? 0 : 1});
  if (comm.size() > 1) comm.broadcast(made, 0);
  EDDY_CHECK(made.item<int64_t>() == 1, "generate: output.path ", path, ": cannot make its folder ", parent.string(),
             error ? cat(" (", error.message(), ")") : std::string(" (rank 0 could not)"));
  std::error_code ignored;
  EDDY_CHECK(!std::filesystem::is_regular_file(path, ignored) || io::is_hdf5_file(path), "generate: output.path ", path,
             " exists and is not an HDF5 file (the config itself, say); give the dataset a file of its own");
  // An interrupted generate leaves its unfinished files (NAME.tmp-PID) behind; a running one's
  // are there while it writes. Two runs on one path both reported success, and one's work was lost.
  Tensor writer = tensor(std::vector<int64_t>{0});
  if (comm.rank() == 0) {
    io::remove_abandoned_temporaries_of(path);
    io::remove_abandoned_temporaries_of(sample_image_path(path));
    writer = tensor(std::vector<int64_t>{io::live_writer_of(path)});
  }
  if (comm.size() > 1) comm.broadcast(writer, 0);
  EDDY_CHECK(writer.item<int64_t>() == 0, "generate: output.path ", path, " is being written by another process (pid ",
             writer.item<int64_t>(), ", whose temporary ", io::temporary_for(path, writer.item<int64_t>()),
             " is there); wait for it to end, or give this dataset another output.path; if no such run is going on ",
             "(a killed run's pid now used by another process), remove the temporary");
  return io::Hdf5Writer(path, comm);
}

void commit_dataset(io::Hdf5Writer& writer, const std::string& path, dist::Communicator& comm) {
  if (comm.rank() == 0) io::remove_stale_file(sample_image_path(path), "generate: output.path's sample image");
  writer.commit();
}

void write_darcy_dataset(const DarcyDatasetOptions& options, const std::string& path, std::ostream* log) {
  check_options(options);
  NoGradGuard no_grad;
  const std::unique_ptr<dist::Communicator> alone = dist::make_single_process_communicator();
  io::Hdf5Writer writer = open_dataset_file(path, *alone);
  const int64_t n = options.resolution;
  const Tensor f = full({n, n}, options.forcing, DType::f64);
  Generator generator(options.seed);
  std::vector<Tensor> a, u;
  const int64_t log_every = std::max<int64_t>(1, options.samples / 20);
  for (int64_t k = 0; k < options.samples; ++k) {
    a.push_back(sample_darcy_coefficient(options, generator));
    u.push_back(darcy_solve(a.back(), f));
    if (log && ((k + 1) % log_every == 0 || k + 1 == options.samples)) {
      *log << "generate: " << k + 1 << " / " << options.samples << " samples\n";
    }
  }
  const std::string rescale = "scale the coefficients (coefficient.high, coefficient.low) and the forcing";
  const Tensor a_all = in_output_dtype(stack(a), options.dtype, "the darcy coefficient a", rescale);
  const Tensor u_all = in_output_dtype(stack(u), options.dtype, "the darcy solution u", rescale);

  writer.write("a", a_all);
  writer.write("u", u_all);
  writer.write("x", arange(0, static_cast<double>(n), 1, options.dtype) / static_cast<double>(n - 1));
  if (!options.config.empty()) writer.write_string("config", options.config);
  writer.set_attribute("/", "solver", "darcy");
  writer.set_attribute("/", "resolution", n);
  writer.set_attribute("/", "samples", options.samples);
  writer.set_attribute("/", "seed", static_cast<int64_t>(options.seed));
  writer.set_attribute("/", "a_high", options.a_high);
  writer.set_attribute("/", "a_low", options.a_low);
  writer.set_attribute("/", "alpha", options.alpha);
  writer.set_attribute("/", "tau", options.tau);
  writer.set_attribute("/", "forcing", options.forcing);
  writer.set_attribute("/", "face_average", "harmonic");
  writer.set_attribute("/", "scheme",
                       "vertex-centred finite volumes (a control volume around each node), harmonic face averages, "
                       "sparse LDLT");
  writer.set_attribute("/", "equation",
                       "-div(a grad u) = f on [0, 1]^2, u = 0 on the boundary; a[k, i, j] at (x, y) = "
                       "(i, j) / (resolution - 1); a = a_high where a Gaussian random field with covariance "
                       "(-Laplacian + tau^2)^(-alpha) is >= 0, a_low elsewhere");
  commit_dataset(writer, path, *alone);
  if (options.vtk) {
    const double h = 1.0 / static_cast<double>(n - 1);
    io::write_vti(sample_image_path(path), {0, 0}, {h, h}, {n, n},
                  {{"a", reshape(a.front(), {-1})}, {"u", reshape(u.front(), {-1})}});
  }
}

}  // namespace eddy::classical
