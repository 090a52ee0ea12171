#pragma once
// Autocast: inside an AutocastScope, matrix products of float32 operands run in a 16-bit dtype
// (their inputs cast to it, float32 accumulation as every 16-bit kernel has, the product in the
// 16-bit dtype), and every other op runs in the dtypes it is given, as PyTorch's autocast does for
// its lower-precision list. The casts are ordinary differentiable ops, so gradients flow back to
// the float32 parameters. The scope is the calling thread's; scopes nest, the innermost wins.

#include <optional>

#include "eddy/core/dtype.h"

namespace eddy {

class AutocastScope {
 public:
  // `dtype` must be bfloat16 or float16; std::nullopt turns autocast off in the scope, for code
  // whose precision is its own (a solver's problem dtype).
  explicit AutocastScope(std::optional<DType> dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  std::optional<DType> outer_;
};

// The 16-bit dtype of the innermost open scope, if any.
std::optional<DType> autocast_dtype();

}  // namespace eddy
