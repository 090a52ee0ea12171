#pragma once
// Collectives as differentiable ops. Each is an eddy primitive with JVP and VJP rules written in
// these same collectives, so derivatives of any order, in both modes, flow between ranks.
//
// The convention is SPMD: every rank runs the same program on its own data, and the quantity
// being differentiated is the sum over ranks of each rank's scalar (the global loss). Under it
// every collective here is linear and its transpose is another collective:
//   all_reduce (sum)  <->  all_reduce (sum)
//   all_gather        <->  reduce_scatter
//   broadcast(root)   <->  reduce(root)
//   all_to_all        <->  all_to_all
// A backward pass through a collective is therefore itself collective: every rank must run it.
//
// The communicator defaults to the process-wide one and must outlive the graphs that use it.

#include "eddy/dist/communicator.h"

namespace eddy {
struct Attrs;
}

namespace eddy::dist {

// The communicator a collective primitive's Attrs carry, not owned, in Attrs::payload: every
// collective-class primitive keeps it there (these, the distributed FFT's), and the compiler reads
// it back to tell which ranks a collective spans.
Communicator& communicator_of(const Attrs& attrs);

// op over ranks of x, elementwise, on every rank. max splits the derivative evenly among the
// ranks (and elements) that hold the maximum, like eddy::max.
Tensor all_reduce(const Tensor& x, ReduceOp op = ReduceOp::sum, Communicator& comm = default_communicator());
// all_reduce(x) of an x that every rank of comm holds alike: x times the number of ranks, with no
// communication. The compiler puts it in place of an all_reduce whose operand it proved
// replicated (compiler/passes.h). Only the values are alike: a perturbation of one rank's x is
// that rank's own, so the derivatives are all_reduce's, collectives included.
Tensor all_reduce_of_replicated(const Tensor& x, Communicator& comm = default_communicator());
// Every rank's x concatenated in rank order along axis 0: `rows` rows on every rank, of which
// rank r holds shard_range(rows, size, r) (core/distribution.h); -1: size * x's rows (every part
// alike, which shard_range gives where size divides rows).
Tensor all_gather(const Tensor& x, Communicator& comm = default_communicator(), int64_t rows = -1);
// Rank r's rows shard_range(rows, size, r) of the sum over ranks of x [rows, ...]: [rows / size,
// ...] each where size divides rows, and parts a row apart otherwise.
Tensor reduce_scatter(const Tensor& x, Communicator& comm = default_communicator());
// x [size * n, ...] in blocks of n rows: block j goes to rank j, and the result's block j is
// the block rank j sent here. How a tensor split along one axis comes to be split along another.
Tensor all_to_all(const Tensor& x, Communicator& comm = default_communicator());
// Rank `root`'s x on every rank.
Tensor broadcast(const Tensor& x, int root = 0, Communicator& comm = default_communicator());
// The sum over ranks of x on rank `root`, zeros on the others.
Tensor reduce(const Tensor& x, int root = 0, Communicator& comm = default_communicator());

// x itself, whose transpose sums the cotangent over the ranks: how a value every rank holds whole
// enters a computation whose derivative is the sum over ranks (Megatron's "f" operator). A
// parameter used through it gets its whole gradient on every rank; distributed tensors insert
// it for replicated leaves (dtensor.h).
Tensor sum_gradient_over_ranks(const Tensor& x, Communicator& comm = default_communicator());

// Point to point, outside autodiff (the values only): a blocking send of x, and a receive of a
// tensor of the given shape and dtype.
void send(const Tensor& x, int dest, int tag = 0, Communicator& comm = default_communicator());
Tensor recv(const Shape& shape, DType dtype, int source, int tag = 0, Communicator& comm = default_communicator());

}  // namespace eddy::dist
