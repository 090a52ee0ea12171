// Simple polygons in 2-D, given by their vertices in either orientation.

#include <algorithm>
#include <cmath>

#include "solvers/pinn/primitive.h"

namespace eddy::pinn {
namespace {

using Vertex = std::array<double, 2>;

double cross(const Vertex& origin, const Vertex& a, const Vertex& b) {
  return (a[0] - origin[0]) * (b[1] - origin[1]) - (a[1] - origin[1]) * (b[0] - origin[0]);
}

int orientation(const Vertex& a, const Vertex& b, const Vertex& c) {
  const double turn = cross(a, b, c);
  return (turn > 0) - (turn < 0);
}

// c lies on segment ab, given that the three are collinear.
bool within_segment(const Vertex& a, const Vertex& b, const Vertex& c) {
  return std::min(a[0], b[0]) <= c[0] && c[0] <= std::max(a[0], b[0]) && std::min(a[1], b[1]) <= c[1] &&
         c[1] <= std::max(a[1], b[1]);
}

// Closed segments pq and rs share at least one point.
bool segments_meet(const Vertex& p, const Vertex& q, const Vertex& r, const Vertex& s) {
  const int o1 = orientation(p, q, r), o2 = orientation(p, q, s);
  const int o3 = orientation(r, s, p), o4 = orientation(r, s, q);
  if (o1 * o2 < 0 && o3 * o4 < 0) return true;
  return (o1 == 0 && within_segment(p, q, r)) || (o2 == 0 && within_segment(p, q, s)) ||
         (o3 == 0 && within_segment(r, s, p)) || (o4 == 0 && within_segment(r, s, q));
}

double squared_segment_distance(const Vertex& a, const Vertex& b, const double* point) {
  const double dx = b[0] - a[0], dy = b[1] - a[1];
  const double along = ((point[0] - a[0]) * dx + (point[1] - a[1]) * dy) / (dx * dx + dy * dy);
  const double t = std::clamp(along, 0.0, 1.0);
  const double ex = point[0] - (a[0] + t * dx), ey = point[1] - (a[1] + t * dy);
  return ex * ex + ey * ey;
}

double signed_area(const std::vector<Vertex>& vertices) {
  double twice_area = 0;
  for (size_t i = 0; i < vertices.size(); ++i) {
    const Vertex& a = vertices[i];
    const Vertex& b = vertices[(i + 1) % vertices.size()];
    twice_area += a[0] * b[1] - b[0] * a[1];
  }
  return twice_area / 2;
}

std::string edge_text(const std::vector<Vertex>& vertices, size_t edge) {
  const Vertex& a = vertices[edge];
  const Vertex& b = vertices[(edge + 1) % vertices.size()];
  return cat("edge ", edge, " from ", format_point({a[0], a[1]}), " to ", format_point({b[0], b[1]}));
}

class Polygon final : public Primitive {
 public:
  Polygon(std::vector<Vertex> vertices, double area)
      : Primitive(2, 1),
        vertices_(std::move(vertices)),
        area_(std::abs(area)),
        outward_sign_(area > 0 ? 1 : -1) {
    std::vector<Face> faces;
    for (size_t i = 0; i < vertices_.size(); ++i) {
      const Vertex& a = vertices_[i];
      const Vertex& b = vertices_[(i + 1) % vertices_.size()];
      faces.push_back({"edge_" + std::to_string(i), std::hypot(b[0] - a[0], b[1] - a[1])});
    }
    set_faces(std::move(faces));
  }

  std::string type_name() const override { return "polygon"; }

  BoundingBox bounding_box() const override {
    BoundingBox box{{INFINITY, INFINITY}, {-INFINITY, -INFINITY}};
    for (const Vertex& v : vertices_) {
      for (int k = 0; k < 2; ++k) {
        box.lower[k] = std::min(box.lower[k], v[k]);
        box.upper[k] = std::max(box.upper[k], v[k]);
      }
    }
    return box;
  }

  double signed_distance(const double* point) const override {
    double squared_distance = INFINITY;
    bool inside = false;  // even-odd rule: a ray to +x crosses the boundary an odd number of times
    for (size_t i = 0, j = vertices_.size() - 1; i < vertices_.size(); j = i++) {
      const Vertex& a = vertices_[j];
      const Vertex& b = vertices_[i];
      squared_distance = std::min(squared_distance, squared_segment_distance(a, b, point));
      if ((a[1] > point[1]) != (b[1] > point[1]) &&
          point[0] < a[0] + (point[1] - a[1]) * (b[0] - a[0]) / (b[1] - a[1])) {
        inside = !inside;
      }
    }
    const double distance = std::sqrt(squared_distance);
    return inside ? -distance : distance;
  }

  std::optional<double> volume() const override { return area_; }

 protected:
  void map_face(int face, const double* unit, double* point, double* normal) const override {
    const Vertex& a = vertices_[face];
    const Vertex& b = vertices_[(face + 1) % vertices_.size()];
    const double dx = b[0] - a[0], dy = b[1] - a[1], length = std::hypot(dx, dy);
    point[0] = a[0] + unit[0] * dx;
    point[1] = a[1] + unit[0] * dy;
    // (dy, -dx) is to the right of the edge, which is outside for a counter-clockwise polygon.
    normal[0] = outward_sign_ * dy / length;
    normal[1] = -outward_sign_ * dx / length;
  }

 private:
  std::vector<Vertex> vertices_;
  double area_;
  double outward_sign_;
};

}  // namespace

GeometryPtr make_polygon(const std::vector<Vertex>& vertices, const std::string& path) {
  const std::string key = path + ".vertices";
  const size_t n = vertices.size();
  EDDY_CHECK(n >= 3, key, ": polygon needs at least 3 vertices, got ", n);
  for (size_t i = 0; i < n; ++i) {
    check_finite({vertices[i][0], vertices[i][1]}, key, "polygon", "vertex " + std::to_string(i));
    const Vertex& next = vertices[(i + 1) % n];
    EDDY_CHECK(vertices[i] != next, key, ": polygon vertices ", i, " and ", (i + 1) % n, " coincide at ",
               format_point({next[0], next[1]}));
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const bool adjacent = j == i + 1 || (i == 0 && j == n - 1);
      if (adjacent) {
        // Neighbours share a vertex; they overlap only if the boundary doubles back on itself.
        const Vertex& shared = j == i + 1 ? vertices[j] : vertices[0];
        const Vertex& from_i = j == i + 1 ? vertices[i] : vertices[1];
        const Vertex& from_j = j == i + 1 ? vertices[(j + 1) % n] : vertices[n - 1];
        const double dot = (from_i[0] - shared[0]) * (from_j[0] - shared[0]) +
                           (from_i[1] - shared[1]) * (from_j[1] - shared[1]);
        EDDY_CHECK(cross(shared, from_i, from_j) != 0 || dot <= 0, key,
                   ": polygon is not simple: ", edge_text(vertices, i), " doubles back over ",
                   edge_text(vertices, j));
      } else {
        EDDY_CHECK(!segments_meet(vertices[i], vertices[(i + 1) % n], vertices[j], vertices[(j + 1) % n]),
                   key, ": polygon is not simple: ", edge_text(vertices, i), " meets ",
                   edge_text(vertices, j));
      }
    }
  }
  const double area = signed_area(vertices);
  EDDY_CHECK(area != 0, key, ": polygon has zero area");
  return std::make_shared<Polygon>(vertices, area);
}

}  // namespace eddy::pinn
