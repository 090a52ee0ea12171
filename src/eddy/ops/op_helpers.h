#pragma once
// Internal helpers for the op-family files: output allocation, kernel-facing broadcast views,
// input checks that produce the standard error messages, and dtype promotion.

#include <functional>
#include <string_view>
#include <utility>

#include "eddy/backends/backend.h"
#include "eddy/ops/primitive.h"

namespace eddy::detail {

inline Tensor new_output(const OutputSpec& spec, const Tensor& like) {
  return Tensor::empty(spec.shape, spec.dtype, like.device());
}

inline Backend& backend_of(const Tensor& t) { return backend_for(t.device()); }

// broadcast_view(t, shape), the kernel-facing zero-stride view, is core's (core/tensor.h).
// `t` itself when dense, else a dense copy made by the backend (not an op: evals use it).
Tensor dense(const Tensor& t);

// Throws "<op>: ... got <dtype>" unless the predicate accepts the dtype.
void check_dtype(std::string_view op, const Tensor& t, bool accepted, std::string_view wanted);
inline void require_inexact(std::string_view op, const Tensor& t) {
  check_dtype(op, t, is_inexact(t.dtype()), "a floating or complex tensor");
}
inline void require_floating(std::string_view op, const Tensor& t) {
  check_dtype(op, t, is_floating(t.dtype()), "a floating-point (not complex) tensor");
}
inline void require_real(std::string_view op, const Tensor& t) {
  check_dtype(op, t, !is_complex(t.dtype()), "a real (non-complex) tensor");
}
inline void require_same_dtype(std::string_view op, const Tensor& a, const Tensor& b) {
  EDDY_CHECK(a.dtype() == b.dtype(), op, ": operands have dtypes ", a.dtype(), " and ", b.dtype());
}

// For 16-bit floating `x`, f(x) computed in float32 and rounded once to x's dtype, as every kernel
// computes: a composite of several ops rounded each step to 16 bits (a float16 mean over 70,000
// elements was 0, its sum past 65504 and its count infinite; sigmoid(-9) was 0). Else f(x).
Tensor in_float32(const Tensor& x, const std::function<Tensor(const Tensor&)>& f);
// x cast to float32 when it is a 16-bit float, else x: an operand of a computation several 16-bit
// tensors share (in_float32 serves one).
Tensor widened_if_half(const Tensor& x);

// Casts both operands to their promoted dtype.
std::pair<Tensor, Tensor> promote_pair(const Tensor& a, const Tensor& b);

}  // namespace eddy::detail
