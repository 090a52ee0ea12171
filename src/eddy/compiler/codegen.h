#pragma once
// Code generation for fused elementwise groups. A group becomes one loop over its output's
// elements; each outside input is read through the cheapest access its shape allows. The loop
// body is the same scalar code for both targets: C++ for the system compiler (CPU) and CUDA C++
// for NVRTC.

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

// A fused group ready to render, and everything its caller needs to run it.
struct KernelPlan {
  std::string name;                  // the generated function's symbol
  std::vector<KernelInput> inputs;   // in the order the generated function takes them
  ValueId output;
  Shape domain;                      // the output's shape
  int64_t inner = 1;                 // the domain is walked as [numel / inner, inner]
  DType output_dtype;
  std::string body;                  // the scalar statements of one element; see render_*
};

// Whether a primitive of this name can be rendered inside a fused loop.
bool has_scalar_expression(std::string_view primitive_name);

// Decides accesses and renders the scalar body. Scalar constants are written into the code as
// exact hexadecimal literals; other inputs are read through pointers.
KernelPlan plan_kernel(const Graph& graph, const FusionGroup& group, std::string name);

// A C++ translation unit with one extern "C" function per plan:
//   void NAME(const void* const* inputs, void* output, int64_t outer, int64_t inner)
// Loops of at least `parallel_grain` elements run on OpenMP threads.
std::string render_cpu_source(const std::vector<KernelPlan>& plans, int64_t parallel_grain);

// A CUDA translation unit with one extern "C" __global__ function per plan, same arguments,
// one thread per element.
std::string render_cuda_source(const std::vector<KernelPlan>& plans);

}  // namespace eddy::compiler
