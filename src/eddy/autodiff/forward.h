#pragma once
// Forward mode. A jvp call opens a level; tensors carry one tangent per open level. An op whose
// inputs carry tangents computes its output tangent from the primitive's JVP rule, innermost
// level first, on primals stripped of that level; so nesting (forward-over-forward) and mixing
// with reverse mode both compose.

#include <cstdint>
#include <functional>
#include <vector>

#include "eddy/core/tensor.h"
#include "eddy/ops/primitive.h"

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

// Closes every open level for its scope; they are open again after it. A capture (compiler/
// trace.cpp) records its function this way on tensors as they are, so that a captured tensor
// keeps its tangents for the compiled call to apply: under an open level, the trace saw it without
// them and its tangent was lost.
class SuspendedForwardLevels {
 public:
  SuspendedForwardLevels();
  ~SuspendedForwardLevels();
  SuspendedForwardLevels(const SuspendedForwardLevels&) = delete;
  SuspendedForwardLevels& operator=(const SuspendedForwardLevels&) = delete;

 private:
  std::vector<int64_t> suspended_;
};

// Whether a forward level is open on this thread (inside a jvp; a capture suspends them).
bool forward_mode_active();
// The innermost open level among the tensor's tangents, or -1.
int64_t innermost_level(const Tensor& tensor);
// The tangent at `level`; undefined (a symbolic zero) when there is none.
Tensor tangent_at(const Tensor& tensor, int64_t level);
// An alias carrying `tangent` at `level` (replacing any there).
Tensor with_tangent(const Tensor& tensor, int64_t level, const Tensor& tangent);
// An alias without a tangent at `level`; the tensor itself when it has none.
Tensor without_tangent(const Tensor& tensor, int64_t level);

// A leaf cut from the reverse-mode history of `tensor` (as detach()), keeping its tangents: what
// a rule that reruns a computation to differentiate it (checkpointing, composed second
// derivatives) starts from, so that forward mode over the rule still sees its inputs move.
Tensor detach_keeping_tangents(const Tensor& tensor);

// The innermost open level among the tangents of any of `inputs`, or -1.
int64_t innermost_level(Inputs inputs);
// primitive(`inputs`) at `level`: `value` of the inputs stripped of their tangents there (the
// primals), with the tangent that the primitive's JVP rules give from the inputs' tangents at
// `level` (none when no input moves). What the autodiff interpreter does to every call; an
// interpreter that computes values its own way (the distributed one, whose local parts carry no
// tangents) calls it too.
Tensor with_output_tangent(const Primitive& primitive, Inputs inputs, const Attrs& attrs, const OutputSpec& spec,
                           int64_t level, const std::function<Tensor(Inputs primals)>& value);

}  // namespace eddy
