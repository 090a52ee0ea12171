// Wall time of a Navier-Stokes rollout on slabs: `ns_slabs [RESOLUTION] [STEPS]` as a plain process
// (the one-process solver) or under `mpirun -np N` (the grid cut in N slabs, dist::rfft2). The
// first step, which plans the transforms, is not timed; rank 0 prints the best of 3 runs and the
// max |w| of the result, which is the same for any number of ranks.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "eddy/autodiff/tape.h"
#include "eddy/dist/collectives.h"
#include "eddy/eddy.h"
#include "solvers/classical/grf.h"
#include "solvers/classical/navier_stokes.h"

int main(int argc, char** argv) {
  using namespace eddy;
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 256, steps = argc > 2 ? std::atoll(argv[2]) : 50;
  dist::Communicator& world = dist::default_communicator();
  NoGradGuard no_grad;
  classical::GaussianRandomField field;
  field.resolution = n;
  Generator generator(0);
  const Tensor w0 = field.sample(1, generator);
  const dist::SlabRows rows = dist::slab_rows(n, n, world);
  const classical::NavierStokes2d solver(n, 1e-3, scalar(1e-3, DType::f64),
                                         slice(classical::NavierStokes2d::fno_forcing(n), 0, rows.start, rows.stop()),
                                         &world);
  const Tensor slab = slice(w0, 1, rows.start, rows.stop());
  solver.solve(slab, {1});

  double best = 1e300;
  Tensor w;
  for (int run = 0; run < 3; ++run) {
    world.barrier();
    const auto start = std::chrono::steady_clock::now();
    w = solver.solve(slab, {steps})[0];
    world.barrier();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double max_w = dist::all_reduce(max(abs(w)), dist::ReduceOp::max, world).item<double>();
  if (world.rank() == 0) {
    std::printf("%lld^2, %lld steps, %d rank(s): %.3f s (best of 3), max |w| = %.15g\n", static_cast<long long>(n),
                static_cast<long long>(steps), world.size(), best, max_w);
  }
  return 0;
}
