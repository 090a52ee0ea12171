#pragma once
// Elementwise fusion: chains of elementwise primitives become one loop that reads each outside
// input once and writes one result, instead of one pass over memory (and one buffer) per op.

#include <vector>

#include "eddy/compiler/graph.h"

namespace eddy::compiler {

struct FusionGroup {
  std::vector<size_t> nodes;     // indices into graph.nodes, in graph order; the last is the root
  std::vector<ValueId> inputs;   // values read from outside the group, in first-use order
  ValueId output;                // the root's output: the only value that leaves the group
};

// Whether code generation can render `node` inside a fused loop.
bool fusable(const Graph& graph, const GraphNode& node);

// Groups of two or more fusable nodes. A producer joins its consumer's group when every use of
// its value lies in that group and it has the group's shape; a cheap producer (no transcendental
// function) used by a few groups is recomputed in each. Only a group's root is stored, and groups
// cannot form cycles: every member is an ancestor of its root.
std::vector<FusionGroup> plan_fusion(const Graph& graph);

}  // namespace eddy::compiler
