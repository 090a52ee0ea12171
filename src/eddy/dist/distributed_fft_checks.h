#pragma once
// Internal to src/eddy/dist: the argument checks of dist::rfft2 and dist::irfft2, shared by the
// builds with and without MPI so that both reject bad input with the same messages.

#include <string_view>

#include "eddy/dist/distributed_fft.h"
#include "eddy/ops/op_helpers.h"

namespace eddy::dist::detail {

// `slab` must be this rank's rows of a real field [..., n0, n1] (spectrum = false) or of its half
// spectrum [..., n0, n1 / 2 + 1] (spectrum = true).
inline void check_slab(std::string_view op, const Tensor& slab, int64_t n0, int64_t n1, bool spectrum,
                       const SlabRows& rows, const Communicator& comm) {
  EDDY_CHECK(slab.defined(), op, ": undefined tensor");
  EDDY_CHECK(n0 > 0 && n1 > 0, op, ": the grid must have positive sizes, got ", n0, " x ", n1);
  if (spectrum) {
    eddy::detail::check_dtype(op, slab, is_complex(slab.dtype()), "a complex64 or complex128 half spectrum");
  } else {
    eddy::detail::check_dtype(op, slab, is_floating(slab.dtype()), "a float32 or float64 tensor");
  }
  EDDY_CHECK(slab.dim() >= 2, op, ": needs at least 2 axes (rows and columns of the grid), got shape ", slab.shape());
  const int64_t columns = spectrum ? n1 / 2 + 1 : n1;
  EDDY_CHECK(slab.size(-2) == rows.count && slab.size(-1) == columns, op, ": rank ", comm.rank(), " of ",
             comm.size(), " holds rows [", rows.start, ", ", rows.stop(), ") of the ", n0, " x ", columns,
             spectrum ? " half spectrum" : " grid", ", so its slab must be [..., ", rows.count, ", ", columns,
             "]; got shape ", slab.shape());
}

}  // namespace eddy::dist::detail
