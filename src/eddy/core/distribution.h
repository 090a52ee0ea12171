#pragma once
// The layout a distributed tensor carries (auto-parallel, eddy/dist/dtensor.h). Core holds it so
// that a distributed tensor is an ordinary Tensor: user code written for one process passes it
// to the same ops, modules and optimisers. Such a tensor has the global shape and no values of
// its own (abstract storage); its values are `local` on each rank, placed over a process mesh as
// `placements` says, one placement per mesh axis. Ops on it go to the distributed interpreter
// (ops/primitive.h), which core cannot name; what core's own members do with it is here.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy {

// How one mesh axis places a tensor: whole on every rank, split along `axis` in mesh order (as
// shard_range says), or partial values whose sum (or max) over the mesh axis is the whole.
struct Placement {
  enum class Kind { replicate, shard, partial_sum, partial_max };
  Kind kind = Kind::replicate;
  int64_t axis = -1;  // shard only

  static Placement replicate() { return {}; }
  static Placement shard(int64_t axis) { return {Kind::shard, axis}; }
  static Placement partial_sum() { return {Kind::partial_sum, -1}; }
  static Placement partial_max() { return {Kind::partial_max, -1}; }
  bool is_shard() const { return kind == Kind::shard; }
  bool is_partial() const { return kind == Kind::partial_sum || kind == Kind::partial_max; }
  bool operator==(const Placement&) const = default;
};

// The indices [first, last) of an axis of `length` that part `index` of `parts` holds under
// Shard: consecutive, in order, with sizes that differ by at most one (the later parts the
// larger), so that an axis `parts` divides splits evenly and any other still splits, as a batch
// of any size must (PyTorch's DTensor splits unevenly too, larger parts first).
struct ShardRange {
  int64_t first = 0, last = 0;
  int64_t size() const { return last - first; }
};
inline ShardRange shard_range(int64_t length, int64_t parts, int64_t index) {
  return {length * index / parts, length * (index + 1) / parts};
}

// "Replicate()", "Shard(1)", "Partial(sum)", "Partial(max)".
std::string to_string(const Placement& placement);
std::string to_string(const std::vector<Placement>& placements);

// A distributed tensor's part with its partial values reduced (each Partial(sum) or Partial(max)
// mesh axis made Replicate), which the distributed interpreter keeps once an op needed it, so that
// a value many ops read is reduced once (dist/dtensor.cpp). It holds in the autodiff mode and
// capture it was made in.
struct ReducedPart {
  Tensor local;
  std::vector<Placement> placements;
  bool grad_mode;
  uint64_t capture;  // active_capture_id() then
};

struct Distribution {
  Tensor local;                       // this rank's part of the values
  std::shared_ptr<const void> mesh;   // the dist::ProcessMesh (kept alive by its tensors)
  Shape mesh_shape;                   // ranks along each mesh axis
  Shape coordinates;                  // this rank's coordinate along each mesh axis
  std::vector<Placement> placements;  // one per mesh axis
  // Not part of the layout: a cache of what `local` reduces to, dropped when the values change.
  mutable std::shared_ptr<const ReducedPart> reduced;

  // The same layout over another local part of the same shape.
  Distribution over(Tensor other_local) const {
    Distribution layout = *this;
    layout.local = std::move(other_local);
    layout.reduced.reset();
    return layout;
  }
};

// The layout of `tensor`, null for an ordinary one.
inline const Distribution* distribution_of(const Tensor& tensor) {
  return tensor.defined() ? tensor.impl()->distribution.get() : nullptr;
}
inline bool is_distributed(const Tensor& tensor) { return distribution_of(tensor) != nullptr; }

// This rank's values of `tensor`: a distributed tensor's local part (sharing its storage), an
// ordinary tensor itself.
inline const Tensor& local_part(const Tensor& tensor) {
  const Distribution* layout = distribution_of(tensor);
  return layout ? layout->local : tensor;
}

// The distributed tensor of `global_shape` laid out as `layout`. It shares its autodiff state
// with layout.local, so requires_grad_, is_leaf and grad() on either handle agree: autodiff only
// ever sees the local tensors, and the tape is the local program's.
Tensor make_distributed(const Shape& global_shape, Distribution layout);

// `distributed`'s mesh and placements over another local tensor of the same local shape (a
// gradient, optimiser state).
Tensor with_local(const Tensor& distributed, Tensor local);

// Whether every rank of `communicator` (a dist::Communicator, opaque here) holds `tensor` alike,
// as TensorImpl::alike_across records it; and recording that it does.
bool held_alike_across(const Tensor& tensor, const void* communicator);
void mark_alike_across(const Tensor& tensor, const void* communicator);

// Whether every rank holds the whole value (replicated on every mesh axis): then its local part
// is the value, and reading it needs no communication.
bool whole_on_every_rank(const Distribution& layout);

// How many ranks hold a copy of each element: the product of the sizes of the mesh axes on which
// `layout` is replicated. Under SPMD reverse mode (dist/collectives.h: the differentiated
// quantity is the sum over ranks) a replicated loss seeds 1 / this on each rank.
int64_t replication_factor(const Distribution& layout);

}  // namespace eddy
