#pragma once
// Data parallelism: every rank holds the whole model, works on its share of each batch, and the
// ranks agree on the parameters by starting from rank 0's and averaging gradients before every
// optimiser step. These helpers work on values, outside autodiff.

#include <span>
#include <utility>
#include <vector>

#include "eddy/dist/communicator.h"

namespace eddy::dist {

// Overwrites every rank's `tensors` with rank `root`'s, in one message per dtype. Distributed
// tensors (dtensor.h) are left as they are: their parts differ by rank by design.
void broadcast_tensors(const std::vector<Tensor>& tensors, Communicator& comm = default_communicator(),
                       int root = 0);

// Replaces each parameter's .grad() by its mean over ranks, with one allreduce of a flat buffer
// per dtype (one in all for a model of one dtype) rather than one per tensor. A gradient that is
// undefined on a rank counts as zeros there, and stays undefined only if it is on every rank.
// `sums` ride in the same message and come back summed over ranks (a step's loss, say), so a
// training step costs one collective. Nothing is sent on a single rank.
void average_gradients(const std::vector<Tensor>& parameters, Communicator& comm = default_communicator(),
                       std::span<double> sums = {});

// The same with the sum over ranks instead of the mean: for gradients that are each rank's part of
// the whole (DeferGradientSums, dtensor.h). A distributed parameter's local part is summed, the
// same part on every rank of `comm` (the data-parallel mesh axis's).
void sum_gradients(const std::vector<Tensor>& parameters, Communicator& comm = default_communicator(),
                   std::span<double> sums = {});

// Whether every rank holds the same `tensors`, bit for bit (collective; true on one rank): a check
// that data-parallel steps stayed in step.
bool same_on_every_rank(const std::vector<Tensor>& tensors, Communicator& comm = default_communicator());

// How many ranks of `comm` pass `flag` as true (collective; `flag` itself on one rank): for checks
// that every rank must fail together, so that none is left waiting in a collective.
int64_t ranks_where(bool flag, Communicator& comm = default_communicator());

// The rows [first, last) of the global rows [start, stop) that `rank` of `size` takes:
// consecutive, in rank order, with sizes that differ by at most one.
std::pair<int64_t, int64_t> shard(int64_t start, int64_t stop, int rank, int size);

}  // namespace eddy::dist
