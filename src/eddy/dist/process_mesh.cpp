#include "eddy/dist/process_mesh.h"

#include <algorithm>

namespace eddy::dist {

std::shared_ptr<const ProcessMesh> ProcessMesh::create(const Shape& shape, std::vector<std::string> names,
                                                       Communicator& world) {
  EDDY_CHECK(!shape.empty(), "ProcessMesh: needs at least one axis");
  EDDY_CHECK(names.size() == shape.size(), "ProcessMesh: ", names.size(), " names for the ", shape.size(),
             " axes of a mesh of shape ", shape);
  int64_t ranks = 1;
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    EDDY_CHECK(shape[axis] >= 1, "ProcessMesh: axis ", names[axis], " has size ", shape[axis]);
    EDDY_CHECK(!names[axis].empty() && std::count(names.begin(), names.end(), names[axis]) == 1,
               "ProcessMesh: axis names must be distinct and non-empty, got '", names[axis], "'");
    ranks *= shape[axis];
  }
  EDDY_CHECK(ranks == world.size(), "ProcessMesh: a mesh of shape ", shape, " has ", ranks, " ranks, but the job has ",
             world.size(), " (", world.kind(), "); start it with mpirun -np ", ranks);

  std::shared_ptr<ProcessMesh> mesh(new ProcessMesh());
  mesh->shape_ = shape;
  mesh->names_ = std::move(names);
  mesh->world_ = &world;
  int64_t rest = world.rank();
  mesh->coordinates_.resize(shape.size());
  for (size_t axis = shape.size(); axis-- > 0;) {
    mesh->coordinates_[axis] = rest % shape[axis];
    rest /= shape[axis];
  }
  // An axis's group: the ranks whose other coordinates are this rank's, which the linear index
  // with this axis's coordinate zeroed names.
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    int64_t stride = 1;
    for (size_t later = axis + 1; later < shape.size(); ++later) stride *= shape[later];
    const int64_t color = world.rank() - mesh->coordinates_[axis] * stride;
    mesh->axis_communicators_.push_back(
        world.split(static_cast<int>(color), static_cast<int>(mesh->coordinates_[axis])));
  }
  return mesh;
}

int64_t ProcessMesh::axis(std::string_view name) const {
  for (size_t axis = 0; axis < names_.size(); ++axis) {
    if (names_[axis] == name) return static_cast<int64_t>(axis);
  }
  throw Error(cat("ProcessMesh: no axis '", name, "' in ", describe()));
}

std::string ProcessMesh::describe() const {
  std::string text = cat("mesh ", shape_, " (");
  for (size_t axis = 0; axis < names_.size(); ++axis) text += (axis ? ", " : "") + names_[axis];
  return text + ")";
}

}  // namespace eddy::dist
