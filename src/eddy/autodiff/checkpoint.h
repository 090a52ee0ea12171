#pragma once
// Gradient checkpointing: trade compute for memory in reverse mode. A checkpointed segment runs
// without recording its graph and leaves one node on its outputs; the backward pass recomputes
// the segment with recording on and pulls the cotangents through that fresh graph. Backpropagation
// through n time steps checkpointed every K steps then holds n / K saved states plus one
// segment's graph at a time, instead of every step's graph.

#include <vector>

#include "eddy/autodiff/functional.h"

namespace eddy {

// segment(inputs), recorded as one reverse-mode node. The segment must be a pure function of its
// inputs: it runs twice (forward, then again in backward) and must give the same values. Tensors it
// captures instead of taking as inputs are constants to the node's first derivatives: no gradient
// flows to them through it. Higher derivatives (the recomputed graph reads them) and forward mode
// (the segment runs plainly) do reach them, so the derivatives of a function whose segments
// capture a tensor with derivatives disagree between modes (d/dp of dL/dx is not dL/dp's d/dx);
// pass every such tensor as an input. Its outputs must share one dtype (they travel as one flat
// tensor, the node's single output).
//
// Inside a compiled function the segment's node is run by the program, later: a tensor its
// closure holds that the compiled function made would have no values then, and is refused while
// the function is captured. Pass such tensors as inputs (detached where no derivative should
// reach them).
//
// Higher derivatives work: with create_graph, the backward recomputes on the original inputs, so
// the gradient is an ordinary differentiable graph. In forward mode (under a jvp) there is nothing
// to save, and the segment simply runs.
std::vector<Tensor> checkpoint(const MultiFunction& segment, const std::vector<Tensor>& inputs);

}  // namespace eddy
