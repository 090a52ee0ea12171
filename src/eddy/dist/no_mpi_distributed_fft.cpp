// A build without MPI (EDDY_WITH_MPI off): every run is one rank, which holds the whole grid, and
// the distributed transforms are the serial ones.

#include "eddy/dist/distributed_fft.h"

#include "eddy/dist/distributed_fft_checks.h"
#include "eddy/fft/fft.h"

namespace eddy::dist {

SlabRows slab_rows(int64_t n0, int64_t n1, Communicator&) {
  EDDY_CHECK(n0 > 0 && n1 > 0, "dist::slab_rows: the grid must have positive sizes, got ", n0, " x ", n1);
  return SlabRows{0, n0};
}

Tensor rfft2(const Tensor& slab, int64_t n0, Communicator& comm) {
  EDDY_CHECK(slab.defined() && slab.dim() >= 2, "dist::rfft2: needs at least 2 axes (rows and columns of the grid), got ",
             slab.defined() ? cat(slab.shape()) : std::string("an undefined tensor"));
  detail::check_slab("dist::rfft2", slab, n0, slab.size(-1), false, slab_rows(n0, slab.size(-1), comm), comm);
  return fft::rfft2(slab);
}

Tensor irfft2(const Tensor& spectrum_slab, int64_t n0, int64_t n1, Communicator& comm) {
  detail::check_slab("dist::irfft2", spectrum_slab, n0, n1, true, slab_rows(n0, n1, comm), comm);
  return fft::irfft2(spectrum_slab, {n0, n1});
}

}  // namespace eddy::dist
