#include "solvers/pinn/geometry.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "eddy/ops/ops.h"

namespace eddy::pinn {
namespace {

// Below this acceptance rate, over at least kVerdictDraws candidates, a shape counts as empty
// or degenerate (zero area, or a sliver of its bounding box) rather than merely slow.
constexpr double kMinAcceptance = 1e-4;
constexpr int64_t kVerdictDraws = 100000;
constexpr int64_t kMaxBatch = int64_t{1} << 20;

// Keeps `keep` of the `from.size()` rows of `from`, each subset equally likely, in order
// (selection sampling, Knuth's Algorithm S). A prefix would be biased: CSG candidates come
// grouped by the operand they were drawn from.
void append_random_subset(PointBatch& to, const PointBatch& from, int64_t keep, Generator& generator) {
  for (int64_t row : random_subset(from.size(), keep, generator)) to.append_row(from, row);
}

// Draws candidate batches until `count` points are accepted. `expected_rate` (the accepted
// fraction, when known) sizes the first batch; later batches use the observed rate.
PointBatch collect(int64_t count, int64_t dim, int64_t extra, double expected_rate, Generator& generator,
                   const std::function<PointBatch(int64_t)>& draw, const std::string& what) {
  EDDY_CHECK(count >= 0, what, ": count must be non-negative, got ", count);
  PointBatch result{dim, extra};
  int64_t drawn = 0, accepted = 0;
  double rate = expected_rate;
  while (result.size() < count) {
    const int64_t missing = count - result.size();
    // A shape that (nearly) fills what it is drawn from needs no oversampling, which keeps a
    // Latin hypercube over a box exactly one batch of `count`.
    const int64_t batch =
        rate > 0.9999
            ? missing
            : std::min(kMaxBatch,
                       static_cast<int64_t>(std::ceil(1.1 * static_cast<double>(missing) / rate)) + 16);
    PointBatch candidates = draw(batch);
    drawn += batch;
    accepted += candidates.size();
    EDDY_CHECK(
        drawn < kVerdictDraws || static_cast<double>(accepted) >= kMinAcceptance * static_cast<double>(drawn),
        what, ": accepted only ", accepted, " of ", drawn,
        " candidates; the shape is empty or degenerate (zero measure, or a sliver of its bounding box)");
    if (result.size() == 0 && candidates.size() <= missing) {
      result = std::move(candidates);
    } else if (candidates.size() <= missing) {
      for (int64_t row = 0; row < candidates.size(); ++row) result.append_row(candidates, row);
    } else {
      append_random_subset(result, candidates, missing, generator);
    }
    rate = accepted > 0 ? static_cast<double>(accepted) / static_cast<double>(drawn) : rate / 16;
    rate = std::max(rate, kMinAcceptance);
  }
  return result;
}

void check_float_dtype(DType dtype, const std::string& what) {
  EDDY_CHECK(is_floating(dtype), what, ": dtype must be float32 or float64, got ", dtype);
}

}  // namespace

void PointBatch::append_row(const PointBatch& from, int64_t row) {
  points.insert(points.end(), from.points.begin() + row * dim, from.points.begin() + (row + 1) * dim);
  if (!from.normals.empty()) {
    normals.insert(normals.end(), from.normals.begin() + row * dim, from.normals.begin() + (row + 1) * dim);
  }
  extras.insert(extras.end(), from.extras.begin() + row * extra, from.extras.begin() + (row + 1) * extra);
}

Tensor rows_to_tensor(const std::vector<double>& rows, int64_t columns, DType dtype) {
  const auto count = columns > 0 ? static_cast<int64_t>(rows.size()) / columns : 0;
  Tensor result = tensor(rows, Shape{count, columns});
  return dtype == DType::f64 ? result : cast(result, dtype);
}

double Geometry::contains_tolerance() const {
  const BoundingBox box = bounding_box();
  double squared = 0;
  for (int64_t k = 0; k < dim(); ++k) squared += std::pow(box.upper[k] - box.lower[k], 2);
  return 1e-12 * std::sqrt(squared);
}

std::optional<int> Geometry::find_face(const std::string& name) const {
  const std::vector<std::string> names = face_names();
  const auto found = std::find(names.begin(), names.end(), name);
  if (found == names.end()) return std::nullopt;
  return static_cast<int>(found - names.begin());
}

Tensor Geometry::contains(const Tensor& points) const {
  EDDY_CHECK(points.dim() == 2 && points.size(1) == dim(), type_name(), ".contains: expected points [N, ",
             dim(), "], got ", points.shape());
  check_float_dtype(points.dtype(), type_name() + ".contains");
  const std::vector<double> rows = points.to_vector<double>();
  const double tolerance = contains_tolerance();
  std::vector<bool> inside(points.size(0));
  for (int64_t row = 0; row < points.size(0); ++row) {
    inside[row] = holds(rows.data() + row * dim(), tolerance);
  }
  return tensor(inside);
}

PointBatch Geometry::interior_points(int64_t count, int64_t extra, const Sampler& sampler,
                                     Generator& generator) const {
  const BoundingBox box = bounding_box();
  double box_volume = 1;
  for (int64_t k = 0; k < dim(); ++k) box_volume *= box.upper[k] - box.lower[k];
  const std::optional<double> shape_volume = volume();
  const double expected_rate = shape_volume ? *shape_volume / box_volume : 1.0;
  const double tolerance = contains_tolerance();
  const int64_t columns = dim() + extra;
  auto draw = [&](int64_t candidates) {
    const std::vector<double> unit = sampler.unit_points(candidates, columns, generator);
    PointBatch accepted{dim(), extra};
    std::vector<double> point(dim());
    for (int64_t row = 0; row < candidates; ++row) {
      const double* u = unit.data() + row * columns;
      for (int64_t k = 0; k < dim(); ++k) point[k] = box.lower[k] + u[k] * (box.upper[k] - box.lower[k]);
      if (signed_distance(point.data()) > tolerance) continue;
      accepted.points.insert(accepted.points.end(), point.begin(), point.end());
      accepted.extras.insert(accepted.extras.end(), u + dim(), u + columns);
    }
    return accepted;
  };
  return collect(count, dim(), extra, expected_rate, generator, draw, type_name() + ".sample_interior");
}

PointBatch Geometry::boundary_points(int64_t count, int64_t extra, const Sampler& sampler,
                                     Generator& generator, const std::vector<std::string>& faces) const {
  const std::vector<std::string> names = face_names();
  std::vector<int> face_indices;
  for (const std::string& face : faces) {
    EDDY_CHECK(!names.empty(), type_name(), ".sample_boundary: a ", type_name(),
               " has no named faces, so it cannot select face '", face, "'");
    const std::optional<int> index = find_face(face);
    if (!index) {
      std::string valid;
      for (const std::string& name : names) valid += (valid.empty() ? "" : ", ") + name;
      throw Error(cat(type_name(), ".sample_boundary: unknown face '", face, "'; valid faces are ", valid));
    }
    if (std::find(face_indices.begin(), face_indices.end(), *index) == face_indices.end()) {
      face_indices.push_back(*index);
    }
  }
  auto draw = [&](int64_t candidates) {
    return boundary_candidates(candidates, extra, sampler, generator, face_indices);
  };
  return collect(count, dim(), extra, 1.0, generator, draw, type_name() + ".sample_boundary");
}

Tensor Geometry::sample_interior(int64_t count, Generator& generator, const SampleOptions& options) const {
  check_float_dtype(options.dtype, type_name() + ".sample_interior");
  EDDY_CHECK(options.faces.empty(), type_name(), ".sample_interior: faces apply to boundary sampling only");
  return rows_to_tensor(interior_points(count, 0, options.sampler, generator).points, dim(), options.dtype);
}

BoundarySample Geometry::sample_boundary(int64_t count, Generator& generator,
                                         const SampleOptions& options) const {
  check_float_dtype(options.dtype, type_name() + ".sample_boundary");
  const PointBatch batch = boundary_points(count, 0, options.sampler, generator, options.faces);
  return {rows_to_tensor(batch.points, dim(), options.dtype),
          rows_to_tensor(batch.normals, dim(), options.dtype)};
}

}  // namespace eddy::pinn
