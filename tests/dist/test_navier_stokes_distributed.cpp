// The 2-D Navier-Stokes solver on slabs (a communicator given) against the one-process solver on
// the whole grid: every rank computes both, from the same initial vorticity, and compares its rows.
// Run as a plain process and under `mpirun -np 2`, like test_distributed_fft.cpp.

#include <gtest/gtest.h>

#include "eddy/dist/collectives.h"
#include "eddy/dist/distributed_fft.h"
#include "eddy/eddy.h"
#include "solvers/classical/grf.h"
#include "solvers/classical/navier_stokes.h"
#include "support/expect_error.h"

namespace eddy::classical {
namespace {

dist::Communicator& world() { return dist::default_communicator(); }

double max_abs(const Tensor& t) { return max(abs(t)).item<double>(); }

Tensor my_rows(const Tensor& whole, const NavierStokes2d& solver) {
  const dist::SlabRows& rows = solver.slab_rows();
  return slice(whole, whole.dim() - 2, rows.start, rows.stop());
}

// A batch of two initial vorticities from the FNO prior, the same on every rank.
Tensor initial_vorticity(int64_t n, DType dtype) {
  GaussianRandomField field;
  field.resolution = n;
  Generator generator(3);
  return cast(field.sample(2, generator), dtype);
}

struct Pair {
  NavierStokes2d serial, slabs;
};

Pair solvers(int64_t n, const Tensor& nu, DType dtype) {
  const Tensor forcing = NavierStokes2d::fno_forcing(n, dtype);
  const dist::SlabRows rows = dist::slab_rows(n, n);
  return {NavierStokes2d(n, 0.01, nu, forcing),
          NavierStokes2d(n, 0.01, nu, slice(forcing, 0, rows.start, rows.stop()), &world())};
}

TEST(DistributedNavierStokes, RolloutEqualsTheOneProcessRolloutsRows) {
  for (DType dtype : {DType::f64, DType::f32}) {
    for (int64_t n : {32, 27}) {
      const auto [serial, slabs] = solvers(n, scalar(1e-3, dtype), dtype);
      const Tensor w0 = initial_vorticity(n, dtype);
      const std::vector<Tensor> expected = serial.solve(w0, {5, 20});
      const std::vector<Tensor> got = slabs.solve(my_rows(w0, slabs), {5, 20});
      const double tolerance = dtype == DType::f64 ? 1e-12 : 1e-5;
      for (size_t k = 0; k < got.size(); ++k) {
        ASSERT_EQ(got[k].shape(), my_rows(expected[k], slabs).shape());
        EXPECT_LT(max_abs(got[k] - my_rows(expected[k], slabs)), tolerance * max_abs(expected[k]))
            << dtype << " n = " << n << ", record " << k << " on rank " << world().rank();
      }
      // The flow moved: equal results are not just the initial field twice.
      EXPECT_GT(max_abs(expected[1] - w0), 0.01 * max_abs(w0));
    }
  }
}

// d/dw0 and d/dnu of L = <weights, w(T)>: the slab solver's gradient on each rank is that rank's
// rows of the one-process gradient (and the ranks' shares of d/dnu add up to it), with and without
// checkpointed segments, whose recomputation runs the distributed transforms again in backward.
TEST(DistributedNavierStokes, GradientOfARolloutEqualsTheOneProcessGradient) {
  const int64_t n = 24;
  const Tensor w0 = initial_vorticity(n, DType::f64);
  Generator generator(5);
  const Tensor weights = randn({2, n, n}, DType::f64, &generator);
  for (int64_t checkpoint_every : {0, 3}) {
    auto gradients = [&](bool distributed) {
      const Tensor nu = scalar(1e-2, DType::f64).requires_grad_();
      const auto [serial, slabs] = solvers(n, nu, DType::f64);
      const NavierStokes2d& solver = distributed ? slabs : serial;
      const Tensor initial = my_rows(w0, solver).detach().requires_grad_();
      const Tensor final_state = solver.solve(initial, {6}, checkpoint_every)[0];
      return grad({sum(my_rows(weights, solver) * final_state)}, {initial, nu});
    };
    const std::vector<Tensor> expected = gradients(false), got = gradients(true);
    const dist::SlabRows rows = dist::slab_rows(n, n);
    EXPECT_LT(max_abs(got[0] - slice(expected[0], 1, rows.start, rows.stop())), 1e-11 * max_abs(expected[0]))
        << "checkpoint_every " << checkpoint_every << " on rank " << world().rank();
    const double nu_gradient = dist::all_reduce(got[1]).item<double>();
    EXPECT_NEAR(nu_gradient, expected[1].item<double>(), 1e-10 * std::abs(expected[1].item<double>()));
    EXPECT_GT(std::abs(expected[1].item<double>()), 1e-3);
  }
}

TEST(DistributedNavierStokes, RejectsFieldsThatAreNotThisRanksRows) {
  const int64_t n = 16;
  const dist::SlabRows rows = dist::slab_rows(n, n);
  const Tensor forcing = NavierStokes2d::fno_forcing(n);
  NavierStokes2d slabs(n, 0.01, scalar(1e-3, DType::f64), slice(forcing, 0, rows.start, rows.stop()), &world());
  expect_error([&] { slabs.solve(zeros({rows.count + 1, n}, DType::f64), {1}); },
               {"NavierStokes2d", cat("[..., ", rows.count, ", ", n, "]"), cat("[", rows.count + 1, ", ", n, "]")});
  if (world().size() > 1) {
    expect_error([&] { NavierStokes2d(n, 0.01, scalar(1e-3, DType::f64), forcing, &world()); },
                 {"NavierStokes2d", "forcing", cat("[", rows.count, ", ", n, "]"),
                  cat("rows [", rows.start, ", ", rows.stop(), ") on rank ", world().rank()), cat("[", n, ", ", n, "]")});
  }
}

}  // namespace
}  // namespace eddy::classical
