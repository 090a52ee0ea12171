#pragma once
// Code generation for fused elementwise groups. A group becomes one loop over its domain's
// elements; each outside input is read through the cheapest access its shape allows. The loop
// either stores every element or, with a reduction epilogue, sums them into a smaller output. The
// loop body is the same scalar code for both targets: C++ for the system compiler (CPU) and CUDA
// C++ for NVRTC. Complex values are std::complex<float> and std::complex<double>, whose layout
// (real part, then imaginary) is that of eddy's complex64 and complex128 elements; loops that hold
// them render for the CPU only.
//
// Sums accumulate in the dtype being summed, float32 in float32, as the eager CPU reduction does
// (backends/cpu/reduce.cpp); only the order of the additions differs, so results agree with the
// eager ones to float rounding of the sum of |terms|, not bit for bit.

#include <string>
#include <string_view>
#include <vector>

#include "eddy/compiler/fusion.h"

namespace eddy::compiler {

// How a fused loop over a domain of shape [outer, inner] reads one input.
enum class Access {
  dense,             // the input has the domain's shape: element i
  scalar,            // one element, broadcast everywhere
  repeated_row,      // the input is the inner block, repeated over the outer one (x + bias)
  repeated_column,   // the input is the outer block, repeated over the inner one
  materialised,      // any other broadcast: expanded to the domain's shape before the loop
};

struct KernelInput {
  ValueId value;
  DType dtype;
  Access access;
};

// A value a loop stores besides its root's (Epilogue::none only): element i at index i.
struct KernelSideOutput {
  ValueId value;
  DType dtype;
};

// A fused group ready to render, and everything its caller needs to run it.
struct KernelPlan {
  std::string name;                  // the generated function's symbol
  std::vector<KernelInput> inputs;   // in the order the generated function takes them
  ValueId output;
  Shape domain;                      // the shape the loop runs over: the elementwise values'
  int64_t outer = 1, inner = 1;      // the domain is walked as [outer, inner]
  Epilogue epilogue = Epilogue::none;
  Shape output_shape;                // the domain, or the sum's shape with an epilogue
  DType output_dtype;
  std::string body;                  // the scalar statements of one element; see render_*
  std::string element;               // the variable holding the element that is stored or summed
  std::vector<KernelSideOutput> side_outputs;  // outputs[1], outputs[2], ...
  bool complex_values = false;       // some value the loop reads, computes or stores is complex
};

// Decides accesses and renders the scalar body. Scalar constants are written into the code as
// exact hexadecimal literals; other inputs are read through pointers. A sum over one axis of a
// [N, C] domain walks it as [N, C], whatever its inputs' accesses would prefer.
KernelPlan plan_kernel(const Graph& graph, const FusionGroup& group, std::string name);

// The tensor a kernel reads for `input`, given the input's value: dense, and expanded to the
// domain first when its access is Access::materialised.
Tensor kernel_operand(const KernelPlan& plan, const KernelInput& input, const Tensor& value);

// A C++ translation unit with one extern "C" function per plan:
//   void NAME(const void* const* inputs, void* const* outputs, int64_t outer, int64_t inner)
// outputs[0] receives the root's values (or the sum), outputs[1..] the side outputs.
// Loops of at least `parallel_grain` elements run on OpenMP threads, in blocks that the threads
// take as they become free (cpu_kernels::for_each_block). A sum gives each block its own partial
// sums (vectorised with `omp simd`) and adds them in block order, so a result is the same at
// every thread count. The function writes every output element, also when the domain is empty.
std::string render_cpu_source(const std::vector<KernelPlan>& plans, int64_t parallel_grain);

// A CUDA translation unit with one extern "C" __global__ function per plan, taking the inputs,
// the root's output and the side outputs as separate pointers, then outer and inner.
// Elementwise kernels run one thread per element. Sums over an axis run one thread per output
// element, looping over the summed axis; a sum to one element runs a grid-stride loop per thread
// and adds each thread's partial sum to out[0] with atomicAdd, so its launcher zeroes out[0] first
// (and the order of the additions, so the last bits, vary from launch to launch). A plan with
// complex values is an error: NVRTC has no std::complex.
std::string render_cuda_source(const std::vector<KernelPlan>& plans);

}  // namespace eddy::compiler
