// The reference solution of the Allen-Cahn benchmark (Raissi et al. 2019; jaxpi, PirateNets):
//   u_t = 1e-4 u_xx - 5 (u^3 - u),  x in [-1, 1] periodic,  t in [0, 1],  u(0, x) = x^2 cos(pi x),
// from eddy's own spectral solver (solvers/classical/phase_field.h), written to data/allen_cahn.h5
// for `make bench-accuracy` and examples/pinn/allen_cahn.yaml.
//
// The solver's form is u_s = eps^2 u_xx - (u^3 - u); with s = 5 t it is the problem above, with
// eps^2 = 1e-4 / 5. Its semi-implicit scheme is first order in time, so the reference is the
// Richardson extrapolation 2 u(dt / 2) - u(dt), second order; the program prints how far that is
// from the extrapolation at half the step (the time error) and from the solve on half the grid
// spacing (the space error), both far below a PINN's error.
//
//   build/bench/allen_cahn_reference [--out data/allen_cahn.h5]

#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>
#include <vector>

#include "eddy/eddy.h"
#include "eddy/io/hdf5.h"
#include "solvers/classical/phase_field.h"

using namespace eddy;

namespace {

constexpr double kDiffusion = 1e-4, kReaction = 5, kFinalTime = 1;
constexpr int64_t kRecordedTimes = 201;  // t = 0, 0.005, ..., 1, as the published data

// u at the recorded times, [kRecordedTimes, n], from n grid points and `steps_per_record` steps
// of the solver between records.
Tensor solve(int64_t n, int64_t steps_per_record) {
  std::vector<double> initial(n);
  for (int64_t j = 0; j < n; ++j) {
    const double x = -1 + 2.0 * static_cast<double>(j) / static_cast<double>(n);
    initial[j] = x * x * std::cos(std::numbers::pi * x);
  }
  const double record_interval = kReaction * kFinalTime / static_cast<double>(kRecordedTimes - 1);
  const classical::AllenCahnOptions options{.epsilon = std::sqrt(kDiffusion / kReaction),
                                            .dt = record_interval / static_cast<double>(steps_per_record),
                                            .steps = steps_per_record,
                                            .length = 2,
                                            .dimensions = 1};
  std::vector<Tensor> records{tensor(initial, {n})};
  NoGradGuard no_grad;
  for (int64_t k = 1; k < kRecordedTimes; ++k) records.push_back(classical::allen_cahn(records.back(), options));
  return stack(records);
}

Tensor extrapolated(int64_t n, int64_t steps_per_record) {
  return 2.0 * solve(n, 2 * steps_per_record) - solve(n, steps_per_record);
}

double relative_l2(const Tensor& a, const Tensor& b) {
  return std::sqrt(sum(square(a - b)).item<double>() / sum(square(b)).item<double>());
}

}  // namespace

int main(int argc, char** argv) {
  std::string out = "data/allen_cahn.h5";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--out FILE.h5]\n", argv[0]);
      return 2;
    }
  }
  // Solved on 1024 points and stored on every second one, the 512 of the published data.
  const int64_t solved = 1024, n = 512, steps_per_record = 100;
  const Tensor reference = extrapolated(solved, steps_per_record);
  const double time_error = relative_l2(reference, extrapolated(solved, 2 * steps_per_record));
  const Tensor finer = slice(extrapolated(2 * solved, steps_per_record), -1, 0, 2 * solved, 2);
  const double space_error = relative_l2(reference, finer);
  std::printf("Allen-Cahn reference: %lld points, time error %.2e, space error %.2e (relative L2)\n",
              static_cast<long long>(solved), time_error, space_error);

  // The periodic point x = 1 repeats x = -1, so the reference covers the whole closed interval.
  const Tensor stored = slice(reference, -1, 0, solved, solved / n);
  const Tensor u = concat({stored, slice(stored, -1, 0, 1)}, -1);
  io::Hdf5Writer writer(out);
  writer.write("x", linspace(-1.0, 1.0, n + 1, DType::f64));
  writer.write("t", linspace(0.0, kFinalTime, kRecordedTimes, DType::f64));
  writer.write("u", u);
  writer.set_attribute("/", "equation", "u_t = 1e-4 u_xx - 5 (u^3 - u), x in [-1, 1] periodic, u(0, x) = x^2 cos(pi x)");
  writer.set_attribute("/", "made_by", "bench/accuracy/allen_cahn_reference.cpp");
  writer.set_attribute("/", "time_error", time_error);
  writer.set_attribute("/", "space_error", space_error);
  writer.commit();
  std::printf("wrote %s: x (%lld), t (%lld), u (%lld, %lld) indexed [t, x]\n", out.c_str(),
              static_cast<long long>(n + 1), static_cast<long long>(kRecordedTimes),
              static_cast<long long>(kRecordedTimes), static_cast<long long>(n + 1));
  return 0;
}
