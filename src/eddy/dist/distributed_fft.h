#pragma once
// The 2-D real FFT of a field distributed over ranks in slabs, through FFTW-MPI.
//
// A field [..., n0, n1] is cut along axis -2: rank r holds rows [start_r, start_r + count_r), as
// FFTW-MPI's fftw_mpi_local_size_2d decides (slab_rows), and every leading (batch) axis whole.
// The half spectrum [..., n0, n1 / 2 + 1] is cut the same way, in the serial layout (not FFTW's
// transposed one): rank r's spectrum rows are rows [start_r, start_r + count_r) of what
// eddy::fft::rfft2 gives for the whole field, so a pointwise spectral multiplier on a slab is the
// same row slice of the serial multiplier.
//
// Both transforms are eddy primitives whose JVP and VJP rules are these same transforms, so
// derivatives of any order flow through them, in the SPMD convention of collectives.h (the
// function differentiated is the sum over ranks of each rank's scalar). They are collective:
// every rank calls them in the same order with the same n0, n1 and batch axes. On one rank they
// are eddy::fft::rfft2 / irfft2; a build without MPI (EDDY_WITH_MPI off) has only that.

#include <cstdint>

#include "eddy/dist/communicator.h"

namespace eddy::dist {

// The rows of axis -2 that this rank holds, of n0 in all, for a real transform of n0 x n1.
struct SlabRows {
  int64_t start = 0;
  int64_t count = 0;
  int64_t stop() const { return start + count; }
};
SlabRows slab_rows(int64_t n0, int64_t n1, Communicator& comm = default_communicator());

// This rank's rows of the unnormalised 2-D real FFT over the last two axes of the field whose rows
// [slab_rows(n0, n1).start, .stop()) are `slab` [..., count, n1] (float32 or float64):
// [..., count, n1 / 2 + 1] complex.
Tensor rfft2(const Tensor& slab, int64_t n0, Communicator& comm = default_communicator());

// The inverse, irfft2 with norm "backward" (times 1 / (n0 n1)): this rank's rows of the real
// field n0 x n1 whose half spectrum has rows `spectrum_slab` [..., count, n1 / 2 + 1] (complex64
// or complex128) here: [..., count, n1] real.
Tensor irfft2(const Tensor& spectrum_slab, int64_t n0, int64_t n1, Communicator& comm = default_communicator());

}  // namespace eddy::dist
