#pragma once
// Forward mode. A jvp call opens a level; tensors carry one tangent per open level. An op whose
// inputs carry tangents computes its output tangent from the primitive's JVP rule, innermost
// level first, on primals stripped of that level; so nesting (forward-over-forward) and mixing
// with reverse mode both compose.

#include <cstdint>

#include "eddy/core/tensor.h"

namespace eddy {

class ForwardLevel {
 public:
  ForwardLevel();
  ~ForwardLevel();
  ForwardLevel(const ForwardLevel&) = delete;
  ForwardLevel& operator=(const ForwardLevel&) = delete;
  int64_t id() const { return id_; }

 private:
  int64_t id_;
};

// The innermost open level among the tensor's tangents, or -1.
int64_t innermost_level(const Tensor& tensor);
// The tangent at `level`; undefined (a symbolic zero) when there is none.
Tensor tangent_at(const Tensor& tensor, int64_t level);
// An alias carrying `tangent` at `level` (replacing any there).
Tensor with_tangent(const Tensor& tensor, int64_t level, const Tensor& tangent);
// An alias without a tangent at `level`; the tensor itself when it has none.
Tensor without_tangent(const Tensor& tensor, int64_t level);

}  // namespace eddy
