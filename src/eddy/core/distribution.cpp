#include "eddy/core/distribution.h"

#include <algorithm>

#include "eddy/core/autograd.h"

namespace eddy {

std::string to_string(const Placement& placement) {
  switch (placement.kind) {
    case Placement::Kind::replicate: return "Replicate()";
    case Placement::Kind::shard: return "Shard(" + std::to_string(placement.axis) + ")";
    case Placement::Kind::partial_sum: return "Partial(sum)";
    case Placement::Kind::partial_max: return "Partial(max)";
  }
  return "?";
}

std::string to_string(const std::vector<Placement>& placements) {
  std::string text = "[";
  for (size_t i = 0; i < placements.size(); ++i) text += (i ? ", " : "") + to_string(placements[i]);
  return text + "]";
}

Tensor make_distributed(const Shape& global_shape, Distribution layout) {
  EDDY_CHECK(layout.local.defined() && !is_distributed(layout.local),
             "internal: a distributed tensor's local part must be an ordinary tensor");
  EDDY_CHECK(layout.placements.size() == layout.mesh_shape.size(), "internal: ", layout.placements.size(),
             " placements for a mesh of ", layout.mesh_shape.size(), " axes");
  Tensor global = Tensor::abstract(global_shape, layout.local.dtype(), layout.local.device());
  auto& meta = layout.local.impl()->autograd;
  if (!meta) meta = std::make_shared<AutogradMeta>();
  global.impl()->autograd = meta;
  global.impl()->distribution = std::make_shared<const Distribution>(std::move(layout));
  return global;
}

Tensor with_local(const Tensor& distributed, Tensor local) {
  const Distribution& layout = *distribution_of(distributed);
  EDDY_CHECK(local.shape() == layout.local.shape(), "internal: local part ", local.shape(), " for a distributed ",
             "tensor whose local shape is ", layout.local.shape());
  return make_distributed(distributed.shape(), layout.over(std::move(local)));
}

bool whole_on_every_rank(const Distribution& layout) {
  return std::all_of(layout.placements.begin(), layout.placements.end(),
                     [](const Placement& p) { return p.kind == Placement::Kind::replicate; });
}

bool held_alike_across(const Tensor& tensor, const void* communicator) {
  if (!tensor.defined()) return false;
  const std::vector<const void*>& alike = tensor.impl()->alike_across;
  return std::find(alike.begin(), alike.end(), communicator) != alike.end();
}

void mark_alike_across(const Tensor& tensor, const void* communicator) {
  if (!held_alike_across(tensor, communicator)) tensor.impl()->alike_across.push_back(communicator);
}

int64_t replication_factor(const Distribution& layout) {
  int64_t factor = 1;
  for (size_t axis = 0; axis < layout.placements.size(); ++axis) {
    if (layout.placements[axis].kind == Placement::Kind::replicate) factor *= layout.mesh_shape[axis];
  }
  return factor;
}

}  // namespace eddy
