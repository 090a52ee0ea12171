#pragma once
// Geometry described by data, the form a YAML config maps onto:
//
//   {type: rectangle, min: [0, 0], max: [2, 1]}
//   {type: difference, children: [{type: rectangle, min: [-1, -1], max: [1, 1]},
//                                 {type: rectangle, min: [0, 0], max: [1, 1]}]}
//
// Types and their fields:
//   interval    min, max (one number each)       rectangle  min, max (2 numbers each)
//   box         min, max (3 numbers each)        hypercube  min, max (any equal length)
//   disk        center (2 numbers), radius        sphere     center (3 numbers), radius (alias ball)
//   polygon     vertices ([x, y] each, at least 3)
//   union, intersection, difference: children (at least 2, folded from the left: a - b - c)

#include <map>
#include <string>
#include <vector>

#include "solvers/pinn/geometry.h"

namespace eddy::pinn {

struct GeometrySpec {
  std::string type;
  // Named numbers; a single number (radius) is a one-element list.
  std::map<std::string, std::vector<double>> parameters{};
  std::vector<std::vector<double>> vertices{};
  std::vector<GeometrySpec> children{};
};

// Builds the geometry. Errors name the offending field under `path`, the spec's config key:
// "geometry.children[1].radius: disk radius must be positive and finite, got 0".
GeometryPtr make_geometry(const GeometrySpec& spec, const std::string& path = "geometry");
// The type names make_geometry accepts.
const std::vector<std::string>& geometry_types();

}  // namespace eddy::pinn
