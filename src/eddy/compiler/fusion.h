#pragma once
// Elementwise fusion: chains of elementwise primitives become one loop that reads each outside
// input once and writes only the values read outside it, instead of one pass over memory (and
// one buffer) per op. A sum of such a chain can end the loop (a reduction epilogue), so the
// chain's result is summed as it is computed and never stored.

#include <vector>

#include "eddy/compiler/graph.h"

namespace eddy::compiler {

// How a fused group's root turns its elementwise domain into the stored result.
enum class Epilogue {
  none,          // the root is elementwise: every element of the domain is stored
  sum_all,       // a sum to one element (over every axis, or over the one axis longer than 1)
  sum_leading,   // a [..., C] domain summed over every axis but the last to C elements: the
                 // bias-gradient pattern
  sum_trailing,  // a [..., C] domain summed over its last axis, one sum per row
};

struct FusionGroup {
  std::vector<size_t> nodes;     // indices into graph.nodes, in graph order; the last is the root
  std::vector<ValueId> inputs;   // values read from outside the group, in first-use order
  ValueId output;                // the root's output, stored
  std::vector<ValueId> side_outputs;  // other members' values that are read outside the group, stored too
  Epilogue epilogue = Epilogue::none;
};

struct FusionOptions {
  bool reduction_epilogues = true;  // off with EDDY_COMPILER_DISABLE=reduction_epilogue
  bool multi_output = true;         // off with EDDY_COMPILER_DISABLE=multi_output
  bool rematerialize = true;        // off with EDDY_COMPILER_DISABLE=rematerialize
  // Off for a GPU: the generated CUDA has no complex type yet, so complex values are not fused.
  bool complex_values = true;
};

// Whether code generation can render `node` inside a fused loop: an elementwise primitive with a
// spelling for its operands' kind, real or complex (Lowering::form_for), of float32, float64,
// complex (where `complex_values`) or bool values. 16-bit floats are never fused: their kernels
// compute in float32 (core/dtype.h).
bool fusable(const Graph& graph, const GraphNode& node, bool complex_values = true);

// The epilogue `node` can end a fused loop as, or Epilogue::none: only float32 and float64 sums
// of the shapes Epilogue lists, over axis 0 of rows of at least 8 elements and over axis 1 of rows
// of at least 64. Other reductions (shorter rows, several axes of a 3-D value, max, prod) stay
// primitive calls.
Epilogue reduction_epilogue(const Graph& graph, const GraphNode& node);

// Groups of two or more fusable nodes. A producer joins its consumer's group when every use of
// its value lies in that group and it has the group's shape; a cheap producer (no transcendental
// function) used by a few groups is recomputed in each. With reduction epilogues, a sum
// reduction_epilogue accepts is the root of a group of its input's shape, which the chain that
// computes its input joins by the same rule: a value that is also used elsewhere stays stored.
//
// With multi_output, a group (or a single fusable node) that reads a value another group stores
// is then merged into that group when both have the same shape, neither ends in a sum, and no
// path between them leaves the two (a value of the first feeding a matmul whose result the second
// reads): one loop reads the inputs once and stores every value read outside it. That is Taylor
// mode's layer, whose value, tangents and second-order terms all feed the next layer's GEMMs.
// Merged groups are not ordered by their roots: a program runs its steps in a topological order
// (Program sorts them).
//
// With rematerialize, a group that reads a value another group's loop computes, by a chain of at
// most 8 cheap ops of its own loop shape over values it reads anyway (or scalar inputs and
// constants), computes that chain itself instead: tanh'(z) = 1 - y*y in a backward loop that
// reads y. The other group stores the value only if someone else still reads it.
std::vector<FusionGroup> plan_fusion(const Graph& graph, FusionOptions options = {});

}  // namespace eddy::compiler
