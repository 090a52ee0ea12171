// Constructive solid geometry: union, intersection and difference of two shapes.
//
// Boundary sampling draws candidates from both operands' boundaries, spread by measure, and keeps
// a point p with outward normal n when p is on the result's boundary. That is decided by probing
// the other operand at p + eps n (just outside the operand p came from) and p - eps n (just
// inside), which needs no exact on-boundary test and handles faces the operands share:
//
//               from a (n outward of a)        from b (n outward of b)
//   union        b excludes p + eps n          a excludes p + eps n and p - eps n
//   intersection b holds p - eps n             a holds p + eps n and p - eps n
//   difference   b excludes p - eps n          a holds p + eps n and p - eps n; normal -n
//
// Where a and b share a face, the points drawn from a decide and those from b are dropped (the
// stricter test on b), so shared faces are drawn once, not twice; where they touch back to back
// (union of neighbouring squares), both tests drop the interface.

#include <algorithm>
#include <cmath>

#include "solvers/pinn/geometry.h"

namespace eddy::pinn {
namespace {

enum class CsgOperation { union_of, intersection_of, difference_of };

// The probe step as a fraction of the bounding box diagonal: far above float64 rounding of the
// coordinates, and far below any feature size a PDE domain has.
constexpr double kProbeFraction = 1e-8;

class Csg final : public Geometry {
 public:
  Csg(CsgOperation operation, GeometryPtr a, GeometryPtr b)
      : Geometry(a->dim()), operation_(operation), a_(std::move(a)), b_(std::move(b)) {
    const BoundingBox hull = hull_of_operands();
    double squared = 0;
    for (int64_t k = 0; k < dim(); ++k) squared += std::pow(hull.upper[k] - hull.lower[k], 2);
    probe_step_ = kProbeFraction * std::sqrt(squared);
  }

  std::string type_name() const override {
    switch (operation_) {
      case CsgOperation::union_of:
        return "union";
      case CsgOperation::intersection_of:
        return "intersection";
      case CsgOperation::difference_of:
        return "difference";
    }
    return "csg";
  }

  BoundingBox bounding_box() const override {
    if (operation_ == CsgOperation::union_of) return hull_of_operands();
    if (operation_ == CsgOperation::difference_of) return a_->bounding_box();
    BoundingBox box = a_->bounding_box();
    const BoundingBox other = b_->bounding_box();
    for (int64_t k = 0; k < dim(); ++k) {
      box.lower[k] = std::max(box.lower[k], other.lower[k]);
      box.upper[k] = std::min(box.upper[k], other.upper[k]);
    }
    return box;
  }

  double signed_distance(const double* point) const override {
    const double from_a = a_->signed_distance(point), from_b = b_->signed_distance(point);
    switch (operation_) {
      case CsgOperation::union_of:
        return std::min(from_a, from_b);
      case CsgOperation::intersection_of:
        return std::max(from_a, from_b);
      case CsgOperation::difference_of:
        return std::max(from_a, -from_b);
    }
    return from_a;
  }

  // The closure of a union is the union of the closures, but an intersection's or difference's
  // can be smaller than what the min/max distance says: the faces of a removed square that lie
  // on the outer boundary have distance zero, yet no point of the difference is near them. So a
  // point on both operands' boundaries is held only when the shape's interior comes within a
  // probe step of it.
  bool holds(const double* point, double tolerance) const override {
    switch (operation_) {
      case CsgOperation::union_of:
        return a_->holds(point, tolerance) || b_->holds(point, tolerance);
      case CsgOperation::intersection_of:
        if (!a_->holds(point, tolerance) || !b_->holds(point, tolerance)) return false;
        if (a_->signed_distance(point) < -tolerance || b_->signed_distance(point) < -tolerance) return true;
        return interior_within_probe_step(point, tolerance);
      case CsgOperation::difference_of: {
        if (!a_->holds(point, tolerance)) return false;
        const double from_b = b_->signed_distance(point);
        if (from_b > tolerance) return true;
        if (from_b < -tolerance) return false;
        if (a_->signed_distance(point) < -tolerance) return true;
        return interior_within_probe_step(point, tolerance);
      }
    }
    return false;
  }

  double candidate_boundary_measure() const override {
    return a_->candidate_boundary_measure() + b_->candidate_boundary_measure();
  }

  PointBatch boundary_candidates(int64_t count, int64_t extra, const Sampler& sampler, Generator& generator,
                                 const std::vector<int>&) const override {
    const std::vector<int64_t> parts = split_by_measure(
        count, {a_->candidate_boundary_measure(), b_->candidate_boundary_measure()}, generator);
    const PointBatch from_a = a_->boundary_candidates(parts[0], extra, sampler, generator, {});
    const PointBatch from_b = b_->boundary_candidates(parts[1], extra, sampler, generator, {});
    PointBatch kept{dim(), extra};
    for (int64_t row = 0; row < from_a.size(); ++row) {
      if (keeps_point_of_a(from_a, row)) kept.append_row(from_a, row);
    }
    for (int64_t row = 0; row < from_b.size(); ++row) {
      if (!keeps_point_of_b(from_b, row)) continue;
      kept.append_row(from_b, row);
      if (operation_ == CsgOperation::difference_of) {
        for (auto it = kept.normals.end() - dim(); it != kept.normals.end(); ++it) *it = -*it;
      }
    }
    return kept;
  }

 private:
  BoundingBox hull_of_operands() const {
    BoundingBox box = a_->bounding_box();
    const BoundingBox other = b_->bounding_box();
    for (int64_t k = 0; k < dim(); ++k) {
      box.lower[k] = std::min(box.lower[k], other.lower[k]);
      box.upper[k] = std::max(box.upper[k], other.upper[k]);
    }
    return box;
  }

  // Whether `shape` holds the point of `batch` at `row` moved by `direction` probe steps along
  // its normal.
  bool holds_probe(const Geometry& shape, const PointBatch& batch, int64_t row, double direction) const {
    std::vector<double> probe(dim());
    for (int64_t k = 0; k < dim(); ++k) {
      probe[k] = batch.points[row * dim() + k] + direction * probe_step_ * batch.normals[row * dim() + k];
    }
    return shape.signed_distance(probe.data()) <= 0;
  }

  // Whether a point a probe step from `point`, along an axis or a diagonal of the axes (every
  // direction in {-1, 0, 1}^dim but zero, so that a box's corner finds its inside), lies inside
  // this shape by more than `tolerance`; the step is ten tolerances where that is longer (a
  // problem's slack for coordinates read from files is 1e-6 of the diagonal).
  bool interior_within_probe_step(const double* point, double tolerance) const {
    const double step = std::max(probe_step_, 10 * tolerance);
    std::vector<int> direction(dim(), -1);
    std::vector<double> probe(dim());
    while (true) {
      double squared_length = 0;
      for (int component : direction) squared_length += component * component;
      if (squared_length > 0) {
        const double scale = step / std::sqrt(squared_length);
        for (int64_t k = 0; k < dim(); ++k) probe[k] = point[k] + scale * direction[k];
        if (signed_distance(probe.data()) < -tolerance) return true;
      }
      int64_t k = 0;  // the next direction, counting in base 3
      while (k < dim() && direction[k] == 1) direction[k++] = -1;
      if (k == dim()) return false;
      ++direction[k];
    }
  }

  bool keeps_point_of_a(const PointBatch& batch, int64_t row) const {
    switch (operation_) {
      case CsgOperation::union_of:
        return !holds_probe(*b_, batch, row, +1);
      case CsgOperation::intersection_of:
        return holds_probe(*b_, batch, row, -1);
      case CsgOperation::difference_of:
        return !holds_probe(*b_, batch, row, -1);
    }
    return false;
  }

  bool keeps_point_of_b(const PointBatch& batch, int64_t row) const {
    const bool outside_side = holds_probe(*a_, batch, row, +1),
               inside_side = holds_probe(*a_, batch, row, -1);
    if (operation_ == CsgOperation::union_of) return !outside_side && !inside_side;
    return outside_side && inside_side;
  }

  CsgOperation operation_;
  GeometryPtr a_, b_;
  double probe_step_ = 0;
};

GeometryPtr make_csg(CsgOperation operation, const std::string& name, GeometryPtr a, GeometryPtr b,
                     const std::string& path) {
  EDDY_CHECK(a && b, path, ": ", name, " needs two shapes, got a null one");
  EDDY_CHECK(a->dim() == b->dim(), path, ": ", name, " of a ", a->dim(), "-D ", a->type_name(), " and a ",
             b->dim(), "-D ", b->type_name());
  if (operation == CsgOperation::intersection_of) {
    const BoundingBox box_a = a->bounding_box(), box_b = b->bounding_box();
    for (int64_t k = 0; k < a->dim(); ++k) {
      EDDY_CHECK(std::max(box_a.lower[k], box_b.lower[k]) < std::min(box_a.upper[k], box_b.upper[k]), path,
                 ": intersection of ", a->type_name(), " and ", b->type_name(),
                 " is empty: their bounding boxes do not overlap on axis ", k);
    }
  }
  return std::make_shared<Csg>(operation, std::move(a), std::move(b));
}

}  // namespace

GeometryPtr make_union(GeometryPtr a, GeometryPtr b, const std::string& path) {
  return make_csg(CsgOperation::union_of, "union", std::move(a), std::move(b), path);
}

GeometryPtr make_intersection(GeometryPtr a, GeometryPtr b, const std::string& path) {
  return make_csg(CsgOperation::intersection_of, "intersection", std::move(a), std::move(b), path);
}

GeometryPtr make_difference(GeometryPtr a, GeometryPtr b, const std::string& path) {
  return make_csg(CsgOperation::difference_of, "difference", std::move(a), std::move(b), path);
}

}  // namespace eddy::pinn
