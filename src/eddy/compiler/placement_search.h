#pragma once
// The placement search of auto-parallel compiled steps. The sharding rules place each op on
// distributed tensors as it comes (ops/sharding.h); where a rule has a choice (rows of x beside
// columns of w: gather w and keep the rows, or gather x and keep the columns) it weighs the bytes
// of that op's own reshards, which cannot see what the choice costs later in the step: a
// gathered weight's gradient is reduce-scattered again in the backward pass, a column split
// turns the next product into a partial sum whose all-reduce may be small. The search weighs the
// whole step instead, forward, backward and optimiser as traced, by the bytes its collectives
// send (CollectiveTraits::sent_per_operand_byte).
//
// How: the step is traced once with every rule's own choice, noting the open points
// (dist::PlacementChoices). Then, point by point in the order the step reaches them, each other
// alternative is tried with the choices before it kept and the rule's own after it, by an abstract
// trace (no kernels run, nothing is sent), and kept where the step sends fewer bytes. At most
// EDDY_PLACEMENT_SEARCH_TRACES trial traces (default 64) are made; past that the remaining points
// keep the rule's choice. Every rank searches alike on the same shapes; rank 0's picks are
// broadcast so that all ranks trace the same collectives even so, and the step is traced again
// under them (a function may keep what its latest call made, as a distributed step keeps its
// outputs' layouts). EDDY_COMPILER_DISABLE=placement_search
// turns it off; EDDY_COMPILER_VERBOSE prints what it chose and the bytes before and after.

#include <vector>

#include "eddy/compiler/graph.h"
#include "eddy/compiler/trace.h"

namespace eddy::compiler {

// Bytes one rank sends per call of the step `graph` holds, by its collectives.
double bytes_sent_per_rank(const Graph& graph);

// trace(function, inputs, evaluation), with the placements of its distributed values chosen by
// the search above. A collective call when the step has open points: every rank must compile
// together.
Trace trace_choosing_placements(const TensorFunction& function, const std::vector<Tensor>& inputs,
                                Evaluation evaluation);

}  // namespace eddy::compiler
