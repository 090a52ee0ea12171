#pragma once
// The two constants of GELU's tanh approximation x (1 + tanh(c (x + a x^3))) / 2, for the
// primitive's rules (ops/elementwise.cpp) and the CPU kernel. The compiler's scalar code
// (ops/math_functions.def) and the CUDA kernel (backends/cuda/kernel_source.cpp) are source text
// and spell them out.

namespace eddy {

inline constexpr double kGeluScale = 0.7978845608028654;  // c = sqrt(2 / pi)
inline constexpr double kGeluCubic = 0.044715;            // a

}  // namespace eddy
