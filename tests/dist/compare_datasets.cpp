// compare_datasets ONE.h5 OTHER.h5: exits 0 when the datasets `eddy generate` writes for the
// evolution equations (a, u, t, x) have the same shapes and dtypes in both files and values that
// differ by at most 1e-12 of their magnitude (rounding: FFTW may measure different plans in
// different processes), else prints what differs and exits 1.

#include <cmath>
#include <cstdio>
#include <string>

#include "eddy/eddy.h"
#include "eddy/io/hdf5.h"

int main(int argc, char** argv) {
  using namespace eddy;
  if (argc != 3) {
    std::fprintf(stderr, "usage: compare_datasets ONE.h5 OTHER.h5\n");
    return 2;
  }
  const std::string one = argv[1], other = argv[2];
  bool same = true;
  for (const char* name : {"a", "u", "t", "x"}) {
    const Tensor x = io::read_hdf5(one, name), y = io::read_hdf5(other, name);
    if (x.shape() != y.shape() || x.dtype() != y.dtype()) {
      std::printf("%s: %s %s in %s, %s %s in %s\n", name, cat(x.shape()).c_str(), cat(x.dtype()).c_str(), one.c_str(),
                  cat(y.shape()).c_str(), cat(y.dtype()).c_str(), other.c_str());
      same = false;
      continue;
    }
    const double difference = max(abs(cast(x, DType::f64) - cast(y, DType::f64))).item<double>();
    const double magnitude = max(abs(cast(x, DType::f64))).item<double>();
    const bool close = difference <= 1e-12 * magnitude;
    std::printf("%s %s: max |difference| %.3e (max |value| %.3e)%s\n", name, cat(x.shape()).c_str(), difference,
                magnitude, close ? "" : ": DIFFERENT");
    same = same && close && magnitude > 0;
  }
  std::printf("compare_datasets: %s\n", same ? "the files agree" : "the files differ");
  return same ? 0 : 1;
}
