#pragma once
// The backends layer's public header: the kernel interface every device implements lives in core
// (core/backend.h), so that Tensor's own members can reach kernels; this adds the CPU backend's
// thread control.

#include "eddy/core/backend.h"

namespace eddy {

// Number of threads the CPU kernels and BLAS use.
void set_num_threads(int threads);
int num_threads();

}  // namespace eddy
