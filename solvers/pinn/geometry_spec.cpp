#include "solvers/pinn/geometry_spec.h"

#include <algorithm>
#include <functional>

namespace eddy::pinn {
namespace {

struct TypeRule {
  std::string type;
  std::vector<std::string> fields;  // every key the type takes
  int64_t dim = 0;                  // the required vector length of min/max/center; 0: any
};

const std::vector<TypeRule>& type_rules() {
  static const std::vector<TypeRule> rules{
      {"interval", {"min", "max"}, 1},   {"rectangle", {"min", "max"}, 2},
      {"box", {"min", "max"}, 3},        {"hypercube", {"min", "max"}, 0},
      {"disk", {"center", "radius"}, 2}, {"sphere", {"center", "radius"}, 3},
      {"ball", {"center", "radius"}, 3}, {"polygon", {"vertices"}, 2},
      {"union", {"children"}, 0},        {"intersection", {"children"}, 0},
      {"difference", {"children"}, 0},
  };
  return rules;
}

std::string join(const std::vector<std::string>& names) {
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : ", ") + name;
  return joined;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

// "; did you mean 'radius'?" when a candidate is a plausible typo of `name`, else "".
std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string* nearest = nullptr;
  size_t best = std::max<size_t>(2, name.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(name, candidate);
    if (distance < best) {
      best = distance;
      nearest = &candidate;
    }
  }
  return nearest ? "; did you mean '" + *nearest + "'?" : "";
}

// The numbers of a required field, of length `length` unless it is 0.
std::vector<double> numbers(const GeometrySpec& spec, const std::string& path, const std::string& field,
                            int64_t length) {
  const auto found = spec.parameters.find(field);
  EDDY_CHECK(found != spec.parameters.end(), path, ".", field, ": ", spec.type, " needs '", field, "'");
  const std::vector<double>& values = found->second;
  EDDY_CHECK(length == 0 || static_cast<int64_t>(values.size()) == length, path, ".", field, ": ", spec.type,
             " ", field, " needs ", length, length == 1 ? " number" : " numbers", ", got ", values.size());
  return values;
}

template <size_t N>
std::array<double, N> fixed(const std::vector<double>& values) {
  std::array<double, N> result{};
  std::copy_n(values.begin(), N, result.begin());
  return result;
}

GeometryPtr make_csg_chain(const GeometrySpec& spec, const std::string& path) {
  EDDY_CHECK(spec.children.size() >= 2, path, ".children: ", spec.type, " needs at least 2 children, got ",
             spec.children.size());
  const std::function<GeometryPtr(GeometryPtr, GeometryPtr, const std::string&)> combine =
      spec.type == "union"          ? make_union
      : spec.type == "intersection" ? make_intersection
                                    : make_difference;
  GeometryPtr result = make_geometry(spec.children[0], path + ".children[0]");
  for (size_t i = 1; i < spec.children.size(); ++i) {
    const std::string child_path = cat(path, ".children[", i, "]");
    GeometryPtr child = make_geometry(spec.children[i], child_path);
    EDDY_CHECK(child->dim() == result->dim(), child_path, ": a ", child->dim(), "-D ", child->type_name(),
               " cannot join the ", result->dim(), "-D children before it in a ", spec.type);
    result = combine(std::move(result), std::move(child), path);
  }
  return result;
}

}  // namespace

const std::vector<std::string>& geometry_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> names;
    for (const TypeRule& rule : type_rules()) names.push_back(rule.type);
    return names;
  }();
  return types;
}

GeometryPtr make_geometry(const GeometrySpec& spec, const std::string& path) {
  const auto rule = std::find_if(type_rules().begin(), type_rules().end(),
                                 [&](const TypeRule& r) { return r.type == spec.type; });
  if (rule == type_rules().end()) {
    throw Error(cat(path, ".type: unknown geometry type '", spec.type, "'",
                    did_you_mean(spec.type, geometry_types()), "; valid types are ", join(geometry_types())));
  }
  const auto takes = [&](const std::string& field) {
    return std::find(rule->fields.begin(), rule->fields.end(), field) != rule->fields.end();
  };
  for (const auto& [field, values] : spec.parameters) {
    if (takes(field)) continue;
    throw Error(cat(path, ".", field, ": ", spec.type, " has no field '", field, "'",
                    did_you_mean(field, rule->fields), "; its fields are ", join(rule->fields)));
  }
  EDDY_CHECK(spec.vertices.empty() || takes("vertices"), path, ".vertices: ", spec.type,
             " has no field 'vertices'; only a polygon does");
  EDDY_CHECK(spec.children.empty() || takes("children"), path, ".children: ", spec.type,
             " has no field 'children'; only union, intersection and difference do");

  if (takes("children")) return make_csg_chain(spec, path);
  if (spec.type == "polygon") {
    std::vector<std::array<double, 2>> vertices;
    for (size_t i = 0; i < spec.vertices.size(); ++i) {
      EDDY_CHECK(spec.vertices[i].size() == 2, path, ".vertices[", i,
                 "]: a polygon vertex needs 2 numbers, got ", spec.vertices[i].size());
      vertices.push_back(fixed<2>(spec.vertices[i]));
    }
    return make_polygon(vertices, path);
  }
  if (takes("radius")) {
    const std::vector<double> center = numbers(spec, path, "center", rule->dim);
    const double radius = numbers(spec, path, "radius", 1)[0];
    return rule->dim == 2 ? make_disk(fixed<2>(center), radius, path)
                          : make_sphere(fixed<3>(center), radius, path);
  }
  const std::vector<double> lower = numbers(spec, path, "min", rule->dim);
  const std::vector<double> upper = numbers(spec, path, "max", rule->dim);
  if (spec.type == "interval") return make_interval(lower[0], upper[0], path);
  if (spec.type == "rectangle") return make_rectangle(fixed<2>(lower), fixed<2>(upper), path);
  if (spec.type == "box") return make_box(fixed<3>(lower), fixed<3>(upper), path);
  return make_hypercube(lower, upper, path);
}

}  // namespace eddy::pinn
