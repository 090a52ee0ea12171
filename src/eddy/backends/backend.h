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

// Gives the calling thread, and OpenMP's threads when called outside a parallel region, a stack of
// its own for signal handlers (sigaltstack) where it has none, once per thread. oneDNN's JIT
// float32 GEMM runs with its stack pointer in heap memory (oneDNN issue #4845, in Debian's 2.6
// too): a handler taken there wrote its signal frame over the heap, and a Ctrl-C in `eddy lm
// train` ended, about one time in two, in "corrupted size vs. prev_size". Handlers installed with
// SA_ONSTACK (eddy's interrupt handlers, CPython's) run on these stacks instead. The CPU backend
// calls it before oneDNN's kernels; installers of handlers too.
void give_threads_signal_stacks();

}  // namespace eddy
