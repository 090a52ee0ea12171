#include "solvers/pinn/time_domain.h"

#include <cmath>

#include "eddy/ops/ops.h"

namespace eddy::pinn {

TimeDomain::TimeDomain(double t0, double t1, const std::string& path) : t0(t0), t1(t1) {
  EDDY_CHECK(std::isfinite(t0), path, ".t0: start time must be finite, got ", t0);
  EDDY_CHECK(std::isfinite(t1), path, ".t1: end time must be finite, got ", t1);
  EDDY_CHECK(t0 < t1, path, ".t1: end time ", t1, " is not after start time t0 = ", t0);
}

SpaceTimeDomain::SpaceTimeDomain(GeometryPtr space, TimeDomain time) : space_(std::move(space)), time_(time) {
  EDDY_CHECK(space_ != nullptr, "SpaceTimeDomain: the spatial geometry is null");
}

Tensor SpaceTimeDomain::contains(const Tensor& points) const {
  EDDY_CHECK(points.dim() == 2 && points.size(1) == dim(), "SpaceTimeDomain.contains: expected points [N, ",
             dim(), "], got ", points.shape());
  const int64_t space_dim = space_->dim();
  const std::vector<bool> in_space = space_->contains(points.slice(1, 0, space_dim)).to_vector<bool>();
  const std::vector<double> times = points.slice(1, space_dim, dim()).to_vector<double>();
  std::vector<bool> inside(in_space.size());
  for (size_t row = 0; row < inside.size(); ++row) {
    inside[row] = in_space[row] && time_.t0 <= times[row] && times[row] <= time_.t1;
  }
  return tensor(inside);
}

std::vector<double> SpaceTimeDomain::with_time(const PointBatch& batch) const {
  std::vector<double> rows;
  rows.reserve(static_cast<size_t>(batch.size() * dim()));
  for (int64_t row = 0; row < batch.size(); ++row) {
    rows.insert(rows.end(), batch.points.begin() + row * batch.dim,
                batch.points.begin() + (row + 1) * batch.dim);
    rows.push_back(time_.t0 + batch.extras[row] * (time_.t1 - time_.t0));
  }
  return rows;
}

Tensor SpaceTimeDomain::sample_interior(int64_t count, Generator& generator,
                                        const SampleOptions& options) const {
  EDDY_CHECK(is_floating(options.dtype),
             "SpaceTimeDomain.sample_interior: dtype must be float32 or float64, got ", options.dtype);
  return rows_to_tensor(with_time(space_->interior_points(count, 1, options.sampler, generator)), dim(),
                        options.dtype);
}

BoundarySample SpaceTimeDomain::sample_boundary(int64_t count, Generator& generator,
                                                const SampleOptions& options) const {
  EDDY_CHECK(is_floating(options.dtype),
             "SpaceTimeDomain.sample_boundary: dtype must be float32 or float64, got ", options.dtype);
  const PointBatch batch = space_->boundary_points(count, 1, options.sampler, generator, options.faces);
  return {rows_to_tensor(with_time(batch), dim(), options.dtype),
          rows_to_tensor(batch.normals, space_->dim(), options.dtype)};
}

Tensor SpaceTimeDomain::sample_initial(int64_t count, Generator& generator,
                                       const SampleOptions& options) const {
  EDDY_CHECK(is_floating(options.dtype),
             "SpaceTimeDomain.sample_initial: dtype must be float32 or float64, got ", options.dtype);
  PointBatch batch = space_->interior_points(count, 0, options.sampler, generator);
  batch.extra = 1;
  batch.extras.assign(static_cast<size_t>(batch.size()), 0.0);
  return rows_to_tensor(with_time(batch), dim(), options.dtype);
}

}  // namespace eddy::pinn
