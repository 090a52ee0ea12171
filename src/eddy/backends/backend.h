#pragma once
// The backends layer's public header: the kernel interface every device implements lives in core
// (core/backend.h), so that Tensor's own members can reach kernels; this adds the CPU backend's
// thread control.

#include "eddy/core/backend.h"

namespace eddy {

// Number of threads the CPU kernels and BLAS use.
void set_num_threads(int threads);
int num_threads();

// eddy's own CPU kernels give the same bits at every thread count (backends/cpu/loops.h). Those
// whose results can depend on it, OpenBLAS's own threaded GEMM and FFTW's multi-threaded plans,
// count their runs here: the training loop's thread tuner changes the count only while this
// stays put (solvers/common/thread_tuner.h).
void note_thread_dependent_kernel();
int64_t thread_dependent_kernel_runs();

}  // namespace eddy
