#pragma once
// The CUDA source of the eager backend's kernels (kernel_source.cpp), for NVRTC.

namespace eddy::cuda {

extern const char* const kKernelSource;

}  // namespace eddy::cuda
