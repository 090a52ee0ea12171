#pragma once
// A process mesh: the ranks of a job arranged as an array with named axes, such as [2, 2] named
// (dp, mp). Distributed tensors (dtensor.h) place themselves over one; each mesh axis has its own
// communicator, over the ranks that differ only in their coordinate along it, on which the
// collectives of that axis run.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "eddy/dist/communicator.h"

namespace eddy::dist {

class ProcessMesh {
 public:
  // The ranks of `world` in row-major order over `shape` (rank = linear index), one name per axis.
  // Collective over `world`, whose size must be the product of `shape`; `world` must outlive
  // the mesh, and the mesh the graphs recorded on its tensors.
  static std::shared_ptr<const ProcessMesh> create(const Shape& shape, std::vector<std::string> names,
                                                   Communicator& world = default_communicator());

  const Shape& shape() const { return shape_; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  const std::vector<std::string>& names() const { return names_; }
  // The axis called `name`; throws naming the mesh's axes.
  int64_t axis(std::string_view name) const;
  int64_t size(int64_t axis) const { return shape_.at(static_cast<size_t>(axis)); }
  // This rank's coordinate along `axis`.
  int64_t coordinate(int64_t axis) const { return coordinates_.at(static_cast<size_t>(axis)); }
  // The ranks that share this rank's coordinates on every other axis, ranked by `axis`'s coordinate.
  Communicator& communicator(int64_t axis) const { return *axis_communicators_.at(static_cast<size_t>(axis)); }
  Communicator& world() const { return *world_; }
  // "mesh [2, 2] (dp, mp)".
  std::string describe() const;

 private:
  ProcessMesh() = default;

  Shape shape_;
  std::vector<std::string> names_;
  std::vector<int64_t> coordinates_;
  std::vector<std::unique_ptr<Communicator>> axis_communicators_;
  Communicator* world_ = nullptr;
};

}  // namespace eddy::dist
