#pragma once
// Distributed tensors (auto-parallel). A distributed tensor is an ordinary eddy::Tensor with the
// global shape whose values lie on the ranks of a process mesh, one placement per mesh axis:
//   Placement::replicate()   every rank of the axis holds the whole;
//   Placement::shard(a)      axis a of the tensor is split over the mesh axis, in order, in parts
//                            that differ by at most one (shard_range, core/distribution.h);
//   Placement::partial_sum() each rank holds a part, and the value is their sum (partial_max: max).
// A few of them, made with shard_tensor, are all a single-process program needs: every op on a
// distributed input runs through its primitive's sharding rule (ops/sharding.h), which picks
// the placements of its inputs and output; the inputs are resharded with the differentiable
// collectives (collectives.h) and the primitive runs on each rank's local parts. Autodiff only
// sees that local program, so gradients are sharded the same way, to any order. An ordinary
// tensor meeting a distributed one is taken as replicated.
//
// Gradients follow the SPMD convention of collectives.h: reverse mode from a distributed loss
// differentiates the global value (a replicated loss is seeded 1 / copies on each rank, a partial
// one 1). A leaf that requires gradients and is replicated on a mesh axis (or an ordinary tensor
// that requires them, such as a model parameter used with sharded data) is used through an
// identity whose transpose sums over those ranks: its .grad() is the whole gradient on every
// rank, which is data parallelism with no further code.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "eddy/core/distribution.h"
#include "eddy/dist/process_mesh.h"
#include "eddy/nn/module.h"

namespace eddy::dist {

// `whole` (the same values on every rank) placed over `mesh`: each rank keeps its part, with no
// communication. The result is a new leaf, requiring gradients when `whole` does; its gradients
// go to it, not to `whole`.
Tensor shard_tensor(const Tensor& whole, std::shared_ptr<const ProcessMesh> mesh, std::vector<Placement> placements);

// The distributed tensor whose local part on this rank is `local`. Its global shape is
// `global_shape`, each rank's part being its shard_range of each split axis (core/distribution.h),
// or, when empty, `local`'s with each split axis times its mesh axis's ranks (every part alike).
// Differentiable: `local`'s graph continues through it.
Tensor from_local(const Tensor& local, std::shared_ptr<const ProcessMesh> mesh, std::vector<Placement> placements,
                  Shape global_shape = {});

// `whole` (the same values on every rank) laid out as `like` is: its mesh and placements (a
// partial placement keeps the whole value on the axis's first rank and zeros elsewhere).
Tensor shard_like(const Tensor& whole, const Tensor& like);

// This rank's part of `distributed` (an ordinary tensor; differentiable).
Tensor to_local(const Tensor& distributed);

// `distributed` placed as `placements` says, through the collectives each mesh axis needs
// (differentiable).
Tensor reshard(const Tensor& distributed, std::vector<Placement> placements);

// The whole value on every rank, as an ordinary tensor (an ordinary `tensor` is returned as is).
Tensor full_tensor(const Tensor& tensor);

// Places `tensor` itself, every handle to it, as shard_tensor would: each rank keeps its part, and
// the tensor keeps its autodiff state (a parameter stays a leaf that requires gradients, its
// accumulated gradient cleared). For tensors that a module and an optimiser already hold.
void shard_in_place(const Tensor& tensor, std::shared_ptr<const ProcessMesh> mesh, std::vector<Placement> placements);

// A module's parameters placed by name: the first pattern of `plan` that matches a parameter's
// dotted name (named_parameters(); `*` stands for any characters other than a dot) places it,
// in place. Parameters that no pattern matches stay ordinary tensors, replicated, with their
// gradients summed over the ranks. Throws when a pattern matches no parameter, listing them.
// Returns how many parameters were placed.
using ShardingPlan = std::vector<std::pair<std::string, std::vector<Placement>>>;
int64_t shard_module(nn::Module& module, std::shared_ptr<const ProcessMesh> mesh, const ShardingPlan& plan);

// While one is alive on this thread, the gradient sums over `comm`'s ranks that the uses above
// make are left to the caller: a parameter used with tensors split over those ranks (a
// data-parallel batch) gets, on each rank, that rank's part of its gradient, and the caller sums
// the parts once per optimiser step (data_parallel.h's sum_gradients, or a ShardedOptimizer with
// RankGradients::to_sum, whose reduce-scatter is half the bytes of an all-reduce). A step that
// accumulates k micro-batches then sends one bucketed message instead of one per parameter per
// micro-batch. `comm`: the communicator of the mesh axis that splits the batch, or the job's
// (every axis deferred). The parts are gradients of each rank's share of the loss: their
// derivatives (create_graph) are parts too. Sums over the other mesh axes (tensor parallelism's)
// are made as before.
class DeferGradientSums {
 public:
  explicit DeferGradientSums(Communicator& comm);
  ~DeferGradientSums();
  DeferGradientSums(const DeferGradientSums&) = delete;
  DeferGradientSums& operator=(const DeferGradientSums&) = delete;

 private:
  Communicator* previous_;
};

// Where a sharding rule leaves a choice on a mesh axis (two or more inputs split, along axes
// that need not agree: rows of x beside columns of w), the open decisions are the rule's own and
// the ones it takes with each split input in turn gathered instead. Eagerly the rule's own is
// always taken. While a PlacementChoices lives on this thread, the distributed interpreter notes
// each open point in the order ops reach it and takes the alternative `picks` names there (the
// rule's own past the end of `picks`, or where the index is out of range): the compiler's placement
// search (compiler/placement_search.h) traces a step under several and keeps the picks whose
// collectives send the fewest bytes over the whole step.
class PlacementChoices {
 public:
  struct Point {
    std::string op;                         // the primitive and the mesh axis, "matmul on mp"
    std::vector<std::string> alternatives;  // each as its placements, "[Shard(0), Replicate()] -> Shard(0)"
    size_t picked = 0;
  };

  // `quiet`: EDDY_COMPILER_VERBOSE says nothing of the ops placed meanwhile (a search's trial traces).
  explicit PlacementChoices(std::vector<size_t> picks, bool quiet = false);
  ~PlacementChoices();
  PlacementChoices(const PlacementChoices&) = delete;
  PlacementChoices& operator=(const PlacementChoices&) = delete;

  const std::vector<Point>& points() const { return points_; }
  // The job's communicator of the mesh the first point lies on; null before it.
  Communicator* world() const { return world_; }
  bool quiet() const { return quiet_; }

  // The distributed interpreter's call at an open point: which alternative to take.
  size_t pick(std::string op, std::vector<std::string> alternatives, Communicator& world);

 private:
  std::vector<size_t> picks_;
  bool quiet_;
  std::vector<Point> points_;
  Communicator* world_ = nullptr;
  PlacementChoices* previous_;
};

// Every tensor of `state` whole, as an ordinary tensor: collective when some are distributed.
// What a checkpoint of one process holds, so that it loads on any number of ranks.
nn::StateDict full_state(const nn::StateDict& state);

const ProcessMesh& mesh_of(const Tensor& distributed);
const std::vector<Placement>& placements_of(const Tensor& distributed);

}  // namespace eddy::dist
