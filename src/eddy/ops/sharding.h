#pragma once
// Sharding rules (auto-parallel): for one mesh axis, how the placements of a primitive's inputs
// give its output's, and which placements the inputs must be resharded to first. A primitive
// declares its rule with its other rules (Primitive::sharding); the distributed interpreter
// (dist/dtensor.cpp) applies it on every mesh axis. A rule only ever chooses placements under
// which running the primitive on each rank's local parts gives that rank's part of the output,
// so its derivatives, written in the same ops, are sharded by the same rules. Splits may be uneven
// (shard_range, core/distribution.h: parts a row apart): a rule keeps such a split only where each
// rank's parts of its inputs and output still line up, and gathers it otherwise.

#include <optional>

#include "eddy/ops/primitive.h"

namespace eddy::sharding {

using Rule = std::function<ShardingDecision(Inputs, const Attrs&, std::span<const Placement>, int64_t ranks)>;

// Every input whole, the output whole: what a primitive without a rule gets.
ShardingDecision replicate_all(Inputs inputs);

// Which partial-sum inputs an elementwise op passes through without summing them first.
enum class PartialInputs {
  none,       // a nonlinear op: sum first
  all,        // linear in all inputs together (add, sub, neg): the output is partial when every input is
  any_one,    // linear in each input (mul): partial when one input is and the others are replicated
  first_only  // linear in the first input (div): partial when it is and the others are replicated
};

// Elementwise ops with broadcasting: the output is sharded where an input is sharded along an
// axis it does not broadcast; the other inputs are split alike, or kept whole where they broadcast.
// Where inputs are sharded along different axes, the axis whose reshards move the fewest bytes
// wins (a [1, n] row split by columns beside an [m, n] matrix split by rows is gathered, rather
// than the matrix exchanged), the first input's on a tie.
Rule elementwise(PartialInputs partial_inputs = PartialInputs::none);
// a [..., m, k] @ b [..., k, n]: rows of a, columns of b, batch axes, or the contraction axis
// on both (the output a partial sum, Megatron's row-parallel layer). With a split by rows and b
// by columns, the smaller operand is gathered.
Rule matmul();
// a @ b + c: the product as matmul decides, c split alike where it spans the output's split axis
// and whole where it broadcasts along it; a partial product takes c partial, or else is gathered.
Rule matmul_add();
// Reductions over Attrs::axes: an input sharded along a reduced axis gives a partial output of
// `partial_kind`; without one (prod, min), such an input is gathered first. Partial inputs of the
// same kind pass through.
Rule reduction(std::optional<Placement::Kind> partial_kind);
// Movement: the shard follows its axis through the permutation, the broadcast (of an axis it
// does not broadcast) or the reshape (where the reshape keeps the sharded axis as the leading axis
// of a group it merges, an uneven split only with unit axes, or splits into, evenly); partial
// inputs pass through, these being linear.
Rule permute();
Rule expand();
Rule reshape();
// slice and pad keep a shard along an axis they leave whole; concat along another axis keeps
// its inputs' common shard. Partial inputs pass through (all three are linear); concat takes
// whole inputs beside partial ones as partial sums held by one rank.
Rule slice();
Rule pad();
Rule concat();
// index_select(x, axis, index): x split along another axis, or the (1-D) index split, which
// splits the output along `axis` (an embedding lookup of sharded tokens). gather(x, axis,
// index): x and index split alike along another axis. Either from a table split evenly along the
// looked-up axis: each rank's lookups in its rows, a partial sum.
Rule index_select();
Rule gather();
// FFTs over Attrs::axes: a shard along another axis (the batch, the channels) is kept and partial
// sums pass through, the transforms being linear. A sharded transform axis is exchanged first for
// the last axis that is not transformed and splits evenly (gathered where there is none), as a
// slab-decomposed FFT transposes: transforming a field split along axis -2 along axis -2 leaves
// it split along axis -1.
Rule transform();
// Ops that treat some axes as independent problems (attention's batch and heads): inputs split
// alike along one of `axes`, which every input and the output share, give the output split the
// same; the first split input's axis decides, the others are split to match (or gathered where
// it is not one of `axes`). Attention's key and value heads split with their query heads as long
// as each rank gets whole groups, which an even split of both head counts ensures (inputs of
// different extents along the axis are gathered where it is uneven).
Rule alike_along(std::vector<int64_t> axes);

}  // namespace eddy::sharding
