// Boxes in any dimension (interval, rectangle, box, hypercube) and balls (disk, sphere).

#include <cmath>
#include <numbers>
#include <sstream>

#include "solvers/pinn/primitive.h"

namespace eddy::pinn {

std::string format_point(const std::vector<double>& point) {
  std::ostringstream out;
  out << '[';
  for (size_t k = 0; k < point.size(); ++k) out << (k > 0 ? ", " : "") << point[k];
  out << ']';
  return out.str();
}

void check_finite(const std::vector<double>& values, const std::string& key, const std::string& type,
                  const std::string& field) {
  for (double value : values) {
    EDDY_CHECK(std::isfinite(value), key, ": ", type, " ", field, " ", format_point(values),
               " has a non-finite value");
  }
}

std::vector<std::string> Primitive::face_names() const {
  std::vector<std::string> names;
  for (const Face& face : faces_) names.push_back(face.name);
  return names;
}

double Primitive::candidate_boundary_measure() const {
  double total = 0;
  for (const Face& face : faces_) total += face.measure;
  return total;
}

PointBatch Primitive::boundary_candidates(int64_t count, int64_t extra, const Sampler& sampler,
                                          Generator& generator, const std::vector<int>& faces) const {
  std::vector<int> selected = faces;
  if (selected.empty()) {
    for (int face = 0; face < static_cast<int>(faces_.size()); ++face) selected.push_back(face);
  }
  std::vector<double> measures;
  for (int face : selected) measures.push_back(faces_[face].measure);
  const std::vector<int64_t> parts = split_by_measure(count, measures, generator);

  PointBatch batch{dim(), extra};
  const int64_t columns = face_dim_ + extra;
  std::vector<double> point(dim()), normal(dim());
  for (size_t k = 0; k < selected.size(); ++k) {
    const std::vector<double> unit = sampler.unit_points(parts[k], columns, generator);
    for (int64_t row = 0; row < parts[k]; ++row) {
      const double* u = unit.data() + row * columns;
      map_face(selected[k], u, point.data(), normal.data());
      batch.points.insert(batch.points.end(), point.begin(), point.end());
      batch.normals.insert(batch.normals.end(), normal.begin(), normal.end());
      batch.extras.insert(batch.extras.end(), u + face_dim_, u + columns);
    }
  }
  return batch;
}

namespace {

// An axis-aligned box in any dimension. Face 2k is min_<k> (normal -e_k), face 2k + 1 is
// max_<k> (normal +e_k); a face's points take the unit coordinates on the other axes in order.
class Box final : public Primitive {
 public:
  Box(std::string type, std::vector<double> lower, std::vector<double> upper)
      : Primitive(static_cast<int64_t>(lower.size()), static_cast<int64_t>(lower.size()) - 1),
        type_(std::move(type)),
        lower_(std::move(lower)),
        upper_(std::move(upper)) {
    static const std::vector<std::string> kFriendlyNames{"left", "right", "bottom", "top", "back", "front"};
    std::vector<Face> faces;
    for (int64_t axis = 0; axis < dim(); ++axis) {
      double measure = 1;  // an interval's ends count one each
      for (int64_t other = 0; other < dim(); ++other) {
        if (other != axis) measure *= upper_[other] - lower_[other];
      }
      for (int side = 0; side < 2; ++side) {
        faces.push_back({dim() <= 3 ? kFriendlyNames[2 * axis + side] : axis_face_name(axis, side), measure});
      }
    }
    set_faces(std::move(faces));
  }

  std::string type_name() const override { return type_; }
  BoundingBox bounding_box() const override { return {lower_, upper_}; }

  double signed_distance(const double* point) const override {
    double outside_squared = 0, largest_gap = -INFINITY;
    for (int64_t k = 0; k < dim(); ++k) {
      // Exactly zero on a face, where (x - center) - half_width would round.
      const double gap = std::max(lower_[k] - point[k], point[k] - upper_[k]);
      outside_squared += gap > 0 ? gap * gap : 0;
      largest_gap = std::max(largest_gap, gap);
    }
    return largest_gap > 0 ? std::sqrt(outside_squared) : largest_gap;
  }

  std::optional<double> volume() const override {
    double product = 1;
    for (int64_t k = 0; k < dim(); ++k) product *= upper_[k] - lower_[k];
    return product;
  }

  std::optional<int> find_face(const std::string& name) const override {
    for (int64_t axis = 0; axis < dim(); ++axis) {
      for (int side = 0; side < 2; ++side) {
        if (name == axis_face_name(axis, side)) return static_cast<int>(2 * axis + side);
      }
    }
    return Geometry::find_face(name);
  }

 protected:
  void map_face(int face, const double* unit, double* point, double* normal) const override {
    const int64_t axis = face / 2;
    const bool upper_side = face % 2 == 1;
    for (int64_t k = 0, u = 0; k < dim(); ++k) {
      normal[k] = 0;
      if (k == axis) continue;
      point[k] = lower_[k] + unit[u++] * (upper_[k] - lower_[k]);
    }
    point[axis] = upper_side ? upper_[axis] : lower_[axis];
    normal[axis] = upper_side ? 1 : -1;
  }

 private:
  static std::string axis_face_name(int64_t axis, int side) {
    return (side == 0 ? "min_" : "max_") + std::to_string(axis);
  }

  std::string type_;
  std::vector<double> lower_, upper_;
};

// A disk (2-D) or solid sphere (3-D).
class Ball final : public Primitive {
 public:
  Ball(std::vector<double> center, double radius)
      : Primitive(static_cast<int64_t>(center.size()), static_cast<int64_t>(center.size()) - 1),
        center_(std::move(center)),
        radius_(radius) {
    const double measure =
        dim() == 2 ? 2 * std::numbers::pi * radius_ : 4 * std::numbers::pi * radius_ * radius_;
    set_faces({{dim() == 2 ? "boundary" : "surface", measure}});
  }

  std::string type_name() const override { return dim() == 2 ? "disk" : "sphere"; }

  BoundingBox bounding_box() const override {
    BoundingBox box{center_, center_};
    for (int64_t k = 0; k < dim(); ++k) {
      box.lower[k] -= radius_;
      box.upper[k] += radius_;
    }
    return box;
  }

  double signed_distance(const double* point) const override {
    double squared = 0;
    for (int64_t k = 0; k < dim(); ++k) squared += (point[k] - center_[k]) * (point[k] - center_[k]);
    return std::sqrt(squared) - radius_;
  }

  std::optional<double> volume() const override {
    return dim() == 2 ? std::numbers::pi * radius_ * radius_
                      : 4.0 / 3.0 * std::numbers::pi * std::pow(radius_, 3);
  }

 protected:
  void map_face(int, const double* unit, double* point, double* normal) const override {
    if (dim() == 2) {
      const double angle = 2 * std::numbers::pi * unit[0];
      normal[0] = std::cos(angle);
      normal[1] = std::sin(angle);
    } else {
      // Archimedes: z uniform in [-1, 1] is uniform in area on the sphere.
      const double z = 1 - 2 * unit[0];
      const double ring = std::sqrt(std::max(0.0, 1 - z * z));
      const double azimuth = 2 * std::numbers::pi * unit[1];
      normal[0] = ring * std::cos(azimuth);
      normal[1] = ring * std::sin(azimuth);
      normal[2] = z;
    }
    for (int64_t k = 0; k < dim(); ++k) point[k] = center_[k] + radius_ * normal[k];
  }

 private:
  std::vector<double> center_;
  double radius_;
};

GeometryPtr make_box_shape(const std::string& type, const std::vector<double>& lower,
                           const std::vector<double>& upper, const std::string& path) {
  EDDY_CHECK(!lower.empty(), path, ".min: ", type, " needs at least one coordinate");
  EDDY_CHECK(upper.size() == lower.size(), path, ".max: ", type, " max ", format_point(upper), " has ",
             upper.size(), " coordinates but min ", format_point(lower), " has ", lower.size());
  check_finite(lower, path + ".min", type, "min");
  check_finite(upper, path + ".max", type, "max");
  for (size_t axis = 0; axis < lower.size(); ++axis) {
    EDDY_CHECK(lower[axis] < upper[axis], path, ".min: ", type, " min ", format_point(lower),
               " is not below max ", format_point(upper), " on axis ", axis);
  }
  return std::make_shared<Box>(type, lower, upper);
}

GeometryPtr make_ball(const std::vector<double>& center, double radius, const std::string& path) {
  const std::string type = center.size() == 2 ? "disk" : "sphere";
  check_finite(center, path + ".center", type, "center");
  EDDY_CHECK(std::isfinite(radius) && radius > 0, path, ".radius: ", type,
             " radius must be positive and finite, got ", radius);
  return std::make_shared<Ball>(center, radius);
}

}  // namespace

GeometryPtr make_interval(double lower, double upper, const std::string& path) {
  return make_box_shape("interval", {lower}, {upper}, path);
}

GeometryPtr make_rectangle(const std::array<double, 2>& lower, const std::array<double, 2>& upper,
                           const std::string& path) {
  return make_box_shape("rectangle", {lower.begin(), lower.end()}, {upper.begin(), upper.end()}, path);
}

GeometryPtr make_box(const std::array<double, 3>& lower, const std::array<double, 3>& upper,
                     const std::string& path) {
  return make_box_shape("box", {lower.begin(), lower.end()}, {upper.begin(), upper.end()}, path);
}

GeometryPtr make_hypercube(const std::vector<double>& lower, const std::vector<double>& upper,
                           const std::string& path) {
  return make_box_shape("hypercube", lower, upper, path);
}

GeometryPtr make_disk(const std::array<double, 2>& center, double radius, const std::string& path) {
  return make_ball({center.begin(), center.end()}, radius, path);
}

GeometryPtr make_sphere(const std::array<double, 3>& center, double radius, const std::string& path) {
  return make_ball({center.begin(), center.end()}, radius, path);
}

}  // namespace eddy::pinn
