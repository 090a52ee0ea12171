// Darcy datasets: the random field's spectrum and grid, and a tiny file written and read back
// (values, reproducibility, attributes).

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <numbers>

#include "eddy/eddy.h"
#include "eddy/io/hdf5.h"
#include "solvers/classical/darcy.h"
#include "solvers/classical/darcy_dataset.h"
#include "support/expect_error.h"

namespace eddy::classical {
namespace {

namespace fs = std::filesystem;

double read_double_attribute(const std::string& path, const std::string& name) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t attribute = H5Aopen(file, name.c_str(), H5P_DEFAULT);
  double value = std::nan("");
  H5Aread(attribute, H5T_NATIVE_DOUBLE, &value);
  H5Aclose(attribute);
  H5Fclose(file);
  return value;
}

// The field is a GaussianRandomField (whose variance tests/classical/test_grf.cpp checks) on the
// periodic square of side 2 whose first n x n nodes are those of the unit square, x_i = i / (n - 1),
// with the spectrum c_k^2 = tau^(2 alpha - 2) (4 pi^2 |k|^2 + tau^2)^(-alpha), k in cycles per
// unit length, written out here independently.
TEST(DarcyDataset, FieldIsTheDocumentedSpectrumOnTheSide2Square) {
  const DarcyDatasetOptions options{.resolution = 17, .alpha = 2.5, .tau = 4};
  const GaussianRandomField field = darcy_random_field(options);
  const int64_t m = 2 * (options.resolution - 1);
  ASSERT_EQ(field.resolution, m);
  EXPECT_EQ(field.dim, 2);
  EXPECT_DOUBLE_EQ(field.length / static_cast<double>(m), 1.0 / static_cast<double>(options.resolution - 1));
  const std::vector<double> lambda = field.eigenvalues().to_vector<double>();
  ASSERT_EQ(lambda.size(), static_cast<size_t>(m * (m / 2 + 1)));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j <= m / 2; ++j) {
      const double kx = (i <= m / 2 ? i : i - m) / 2.0, ky = j / 2.0;  // cycles per unit length
      const double k_squared = 4 * std::numbers::pi * std::numbers::pi * (kx * kx + ky * ky);
      const double expected = i + j == 0 ? 0.0
                                         : std::pow(options.tau, 2 * options.alpha - 2) *
                                               std::pow(k_squared + options.tau * options.tau, -options.alpha);
      EXPECT_NEAR(lambda[i * (m / 2 + 1) + j], expected, 1e-12 * expected) << "mode " << i << ", " << j;
    }
  }
}

TEST(DarcyDataset, TinyDatasetIsWrittenAndReadBack) {
  const fs::path dir = fs::temp_directory_path() / ("eddy_darcy_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "darcy.h5").string();
  const DarcyDatasetOptions options{.resolution = 12, .samples = 3, .seed = 5};
  write_darcy_dataset(options, path);

  EXPECT_EQ(io::list_hdf5_datasets(path), (std::vector<std::string>{"a", "u", "x"}));
  const Tensor a = io::read_hdf5(path, "a"), u = io::read_hdf5(path, "u");
  EXPECT_EQ(a.shape(), (Shape{3, 12, 12}));
  EXPECT_EQ(u.shape(), (Shape{3, 12, 12}));
  EXPECT_EQ(u.dtype(), DType::f64);
  EXPECT_LT(max(abs(io::read_hdf5(path, "x") - arange(0, 12, 1, DType::f64) / 11.0)).item<double>(), 1e-15);

  Generator generator(options.seed);
  const Tensor f = ones({12, 12}, DType::f64);
  for (int64_t k = 0; k < 3; ++k) {
    const Tensor a_k = squeeze(slice(a, 0, k, k + 1), 0), u_k = squeeze(slice(u, 0, k, k + 1), 0);
    EXPECT_EQ(a_k.to_vector<double>(), sample_darcy_coefficient(options, generator).to_vector<double>())
        << "sample " << k << " is the k-th draw of Generator(seed)";
    const double highs = sum(cast(eq(a_k, full_like(a_k, 12.0)), DType::f64)).item<double>();
    const double lows = sum(cast(eq(a_k, full_like(a_k, 3.0)), DType::f64)).item<double>();
    EXPECT_EQ(highs + lows, 144.0);
    EXPECT_EQ(u_k.to_vector<double>(), darcy_solve(a_k, f).to_vector<double>());
    // f = 1 > 0, so u > 0 inside (maximum principle); the compliance sum(f u) = f^T A^-1 f falls
    // as a grows, so it lies between those of a = a_high and a = a_low everywhere.
    EXPECT_GT(min(slice(slice(u_k, 0, 1, 11), 1, 1, 11)).item<double>(), 0.0);
    const double compliance = sum(u_k).item<double>();
    EXPECT_LT(compliance, sum(darcy_solve(full_like(a_k, 3.0), f)).item<double>());
    EXPECT_GT(compliance, sum(darcy_solve(full_like(a_k, 12.0), f)).item<double>());
  }
  EXPECT_GT(max(a).item<double>(), min(a).item<double>()) << "both phases appear";
  EXPECT_EQ(read_double_attribute(path, "resolution"), 12.0);
  EXPECT_EQ(read_double_attribute(path, "seed"), 5.0);
  EXPECT_EQ(read_double_attribute(path, "a_high"), 12.0);
  EXPECT_EQ(read_double_attribute(path, "tau"), 3.0);
  fs::remove_all(dir);
}

TEST(DarcyDataset, BadOptionsNameTheOption) {
  expect_error([] { write_darcy_dataset({.resolution = 2}, "unused.h5"); }, {"resolution", "2"});
  expect_error([] { write_darcy_dataset({.samples = 0}, "unused.h5"); }, {"samples", "0"});
  expect_error([] { write_darcy_dataset({.a_low = -3}, "unused.h5"); }, {"a_low", "-3"});
  expect_error([] { write_darcy_dataset({.alpha = 1}, "unused.h5"); }, {"alpha", "1"});
  EXPECT_FALSE(fs::exists("unused.h5"));
}

// Coefficients above about 1e154 overflowed the face coefficient's 2 a b and every solution was
// NaN, written as a valid dataset; a float32 file took a coefficient of 1e39 as inf.
TEST(DarcyDataset, ExtremeCoefficientsSolveOrAreRefused) {
  const fs::path dir = fs::temp_directory_path() / ("eddy_darcy_extreme_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "big.h5").string();
  write_darcy_dataset({.resolution = 8, .samples = 2, .a_high = 1e160, .a_low = 1e150, .dtype = DType::f64}, path);
  const Tensor u = io::read_hdf5(path, "u");
  EXPECT_TRUE(std::isfinite(sum(abs(u)).item<double>()));
  EXPECT_GT(max(abs(u)).item<double>(), 0.0);
  expect_error([&] { write_darcy_dataset({.resolution = 8, .samples = 2, .a_high = 1e39, .dtype = DType::f32},
                                         (dir / "f32.h5").string()); },
               {"the darcy coefficient a of sample 0 reaches |value| = 1e+39, beyond float32's largest",
                "output.dtype: float64"});
  EXPECT_FALSE(fs::exists(dir / "f32.h5"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace eddy::classical
