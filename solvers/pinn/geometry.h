#pragma once
// Geometry for PINN collocation points: primitives (interval, rectangle, box, hypercube, disk,
// sphere, polygon), CSG (union, difference, intersection), membership, and interior and
// boundary sampling with outward unit normals.
//
// Points are [N, dim] tensors. Computation is in float64 on the host; results are cast to the
// requested float32 or float64 at the end.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eddy/core/rng.h"
#include "eddy/core/tensor.h"
#include "solvers/pinn/sampler.h"

namespace eddy::pinn {

struct BoundingBox {
  std::vector<double> lower, upper;
};

struct SampleOptions {
  Sampler sampler{};
  DType dtype = DType::f32;
  // Boundary sampling only: the named faces to sample (empty: the whole boundary).
  std::vector<std::string> faces{};
};

struct BoundarySample {
  Tensor points;   // [N, dim]
  Tensor normals;  // [N, dim], outward unit normals
};

// Points in the working form: row-major float64 rows, the outward normals of boundary points,
// and `extra` unit-cube coordinates per row drawn jointly with them, which product domains
// (space x time) map onto their other factors.
struct PointBatch {
  int64_t dim = 0;
  int64_t extra = 0;
  std::vector<double> points{}, normals{}, extras{};

  int64_t size() const { return dim > 0 ? static_cast<int64_t>(points.size()) / dim : 0; }
  void append_row(const PointBatch& from, int64_t row);
};

class Geometry {
 public:
  virtual ~Geometry() = default;

  int64_t dim() const { return dim_; }
  // The type name used in messages: "rectangle", "disk", "difference", ...
  virtual std::string type_name() const = 0;
  virtual BoundingBox bounding_box() const = 0;
  // Negative inside, zero on the boundary, positive outside. Exact for primitives; for CSG the
  // usual min/max combination, whose sign is exact and whose magnitude is a bound.
  virtual double signed_distance(const double* point) const = 0;
  // The names sample_boundary accepts in SampleOptions::faces; empty for CSG shapes.
  virtual std::vector<std::string> face_names() const { return {}; }

  // Whether the closed shape holds `point`, up to `tolerance` in signed distance. For primitives
  // that is the sign of the distance; CSG shapes refine it where their distance is zero at
  // points outside the closure (a removed part's faces that lie on the outer boundary).
  virtual bool holds(const double* point, double tolerance) const { return signed_distance(point) <= tolerance; }
  // bool [N] for points [N, dim]: inside or on the boundary, up to contains_tolerance().
  Tensor contains(const Tensor& points) const;
  // `count` points, uniform in the interior: sampler points mapped onto the bounding box, with
  // rejection for shapes that do not fill it. Throws when almost nothing is accepted (an empty
  // or degenerate shape).
  Tensor sample_interior(int64_t count, Generator& generator, const SampleOptions& options = {}) const;
  // `count` points, uniform in boundary measure (length, area; each end of an interval counts
  // as one) over the whole boundary or the named faces, with outward unit normals.
  BoundarySample sample_boundary(int64_t count, Generator& generator,
                                 const SampleOptions& options = {}) const;

  // ---- building blocks for CSG and product domains ----
  // The interior and boundary samplers in working form, with `extra` joint unit coordinates.
  PointBatch interior_points(int64_t count, int64_t extra, const Sampler& sampler,
                             Generator& generator) const;
  PointBatch boundary_points(int64_t count, int64_t extra, const Sampler& sampler, Generator& generator,
                             const std::vector<std::string>& faces) const;
  // Candidates for boundary points: `count` draws spread by measure over the boundaries of the
  // primitives this shape is built from, of which those on this shape's boundary come back
  // (all of them for a primitive). `faces` are indices into face_names(); empty means all.
  virtual PointBatch boundary_candidates(int64_t count, int64_t extra, const Sampler& sampler,
                                         Generator& generator, const std::vector<int>& faces) const = 0;
  // The total measure boundary_candidates draws from.
  virtual double candidate_boundary_measure() const = 0;
  // Volume (area, length) when known in closed form; it sizes the first rejection batch.
  virtual std::optional<double> volume() const { return std::nullopt; }
  // Index into face_names() of a face name or one of its aliases.
  virtual std::optional<int> find_face(const std::string& name) const;
  // How far outside (in signed distance) a point may lie and still count as contained.
  double contains_tolerance() const;

 protected:
  explicit Geometry(int64_t dim) : dim_(dim) {}

 private:
  int64_t dim_;
};

using GeometryPtr = std::shared_ptr<const Geometry>;

// Row-major float64 values as a [rows, columns] tensor of `dtype` (float32 or float64).
Tensor rows_to_tensor(const std::vector<double>& rows, int64_t columns, DType dtype);

// ---- primitives; `path` is the config key named in errors ----
// Boxes: faces min_<k> / max_<k> on axis k, with the friendlier names
//   interval: left (min x), right (max x);
//   rectangle: left, right (x), bottom, top (y);
//   box: left, right (x), bottom, top (y), back (min z), front (max z).
GeometryPtr make_interval(double lower, double upper, const std::string& path = "geometry");
GeometryPtr make_rectangle(const std::array<double, 2>& lower, const std::array<double, 2>& upper,
                           const std::string& path = "geometry");
GeometryPtr make_box(const std::array<double, 3>& lower, const std::array<double, 3>& upper,
                     const std::string& path = "geometry");
GeometryPtr make_hypercube(const std::vector<double>& lower, const std::vector<double>& upper,
                           const std::string& path = "geometry");
// Disk (face "boundary") and solid sphere (face "surface").
GeometryPtr make_disk(const std::array<double, 2>& center, double radius,
                      const std::string& path = "geometry");
GeometryPtr make_sphere(const std::array<double, 3>& center, double radius,
                        const std::string& path = "geometry");
// A simple polygon, vertices in either orientation; face edge_<i> runs from vertex i to i + 1.
GeometryPtr make_polygon(const std::vector<std::array<double, 2>>& vertices,
                         const std::string& path = "geometry");

// ---- CSG ----
// Boundary points of the result are those of each operand's boundary that lie on the result's
// boundary, judged by probing just inside and outside along the normal; on faces the operands
// share, each point is drawn once. Difference flips the normals taken from b.
GeometryPtr make_union(GeometryPtr a, GeometryPtr b, const std::string& path = "geometry");
GeometryPtr make_intersection(GeometryPtr a, GeometryPtr b, const std::string& path = "geometry");
GeometryPtr make_difference(GeometryPtr a, GeometryPtr b, const std::string& path = "geometry");

}  // namespace eddy::pinn
