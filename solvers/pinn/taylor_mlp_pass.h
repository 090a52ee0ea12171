#pragma once
// One pass per block of points through a PINN's plain MLP in Taylor mode, forward and back: the
// training step of an interior condition without storing anything per point outside the block.
//
// The compiled step (training_step.h) runs each layer as whole-array products and elementwise
// loops, so every layer's Taylor streams (the value, first derivatives, pure second derivatives)
// go to memory in the forward pass and come back in the backward pass: for 8 layers of width 20
// at 10,000 points, 28 arrays of 800 KB. Here a chunk of points goes forward through every
// layer, through the condition's loss (the caller's `ChunkHead`), and back, while its
// activations stay in the L2 cache; the products are register tiles over the chunk, and the
// weight gradients are summed chunk by chunk (docs/benchmarks.md, "One pass per layer").
//
// Streams of the network's outputs: stream 0 is the value, stream 1 + i the first derivative in
// input i (every input), stream 1 + D + k the second derivative in input `second[k]` (D inputs).
// Deterministic: chunks are summed in groups fixed by the point count alone, and the groups in
// order, so a result does not depend on the thread count.
//
// The one place outside ops/ that spells out derivatives: the activations' first to third
// derivatives (tanh's from its value, sin's, GELU's and SiLU's) and the Taylor rules through them
// are written here for the register tiles, where the rest of eddy takes them from the primitives'
// declarations (DESIGN.md, "Every primitive is defined once"). tests/pinn/test_fused_interior.cpp
// holds the pass, for every activation it takes, to the compiled step that the primitives' rules
// build; an activation added to the pass needs its formulas here and a case there.

#include <functional>
#include <vector>

#include "eddy/nn/pinn_models.h"

namespace eddy::pinn {

// What the loss's per-point part sees of one chunk, and writes. Arrays hold `capacity` values of
// the network's dtype; points from `count` on are padding (copies of the chunk's first point).
struct HeadChunk {
  int64_t first = 0;     // the chunk's first point: chunks start at multiples of `capacity`
  int64_t count = 0;
  int64_t capacity = 0;
  std::vector<const void*> coordinates;  // per input: the points' raw coordinates
  std::vector<const void*> streams;      // stream s of output c at [s * outputs + c]
  std::vector<void*> cotangents;         // d(loss)/d(stream), indexed as streams: the head writes
                                         // every value, 0 for the padding
};

// Returns the chunk's loss (its valid points' contributions summed) and fills its cotangents.
using ChunkHead = std::function<double(const HeadChunk&)>;

struct TaylorMlpResult {
  double loss = 0;               // the heads' sums
  std::vector<Tensor> weights;   // d(loss)/d(weight), per layer as PlainMlp lists them
  std::vector<Tensor> biases;
};

// The loss over `points` [N, inputs] (float32 or float64, the model's dtype, on the CPU) and its
// gradient with respect to the MLP's weights and biases. `head` may be called from several
// threads at once.
TaylorMlpResult taylor_mlp_pass(const nn::PlainMlp& mlp, const Tensor& points, const std::vector<int>& second,
                                const ChunkHead& head);

// The activations the pass has Taylor rules for: tanh, sin, gelu (its tanh form) and silu.
bool taylor_mlp_supports(nn::ActivationKind activation);

// How many streams the pass carries for `mlp` with these second derivatives (1 + inputs +
// seconds), and how many points each chunk the head sees holds (HeadChunk::capacity).
int64_t taylor_mlp_streams(const nn::PlainMlp& mlp, const std::vector<int>& second);
int64_t taylor_mlp_chunk(const nn::PlainMlp& mlp, const std::vector<int>& second);

}  // namespace eddy::pinn
