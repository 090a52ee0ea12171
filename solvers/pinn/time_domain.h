#pragma once
// Space x time domains: a spatial geometry times [t0, t1], for initial-boundary value problems.
// Points are [N, space dim + 1] with time in the last column.

#include <string>

#include "solvers/pinn/geometry.h"

namespace eddy::pinn {

struct TimeDomain {
  double t0, t1;

  // Checks t0 < t1, both finite; `path` is the config key named in errors.
  TimeDomain(double t0, double t1, const std::string& path = "time");
};

class SpaceTimeDomain {
 public:
  SpaceTimeDomain(GeometryPtr space, TimeDomain time);

  const Geometry& space() const { return *space_; }
  const TimeDomain& time() const { return time_; }
  int64_t dim() const { return space_->dim() + 1; }

  // bool [N]: the spatial part is in the geometry and t0 <= t <= t1.
  Tensor contains(const Tensor& points) const;
  // Uniform in the interior of space x [t0, t1); space and time coordinates come from one
  // sampler point, so Latin hypercube and low-discrepancy structure covers them jointly.
  Tensor sample_interior(int64_t count, Generator& generator, const SampleOptions& options = {}) const;
  // Uniform on (spatial boundary, or its named faces) x [t0, t1), for boundary conditions.
  // Normals are the spatial outward normals, [N, space dim].
  BoundarySample sample_boundary(int64_t count, Generator& generator,
                                 const SampleOptions& options = {}) const;
  // Uniform in the spatial interior at t = t0, for initial conditions.
  Tensor sample_initial(int64_t count, Generator& generator, const SampleOptions& options = {}) const;

 private:
  // Appends the time column t0 + u (t1 - t0) for the unit coordinate u carried by each row.
  std::vector<double> with_time(const PointBatch& batch) const;

  GeometryPtr space_;
  TimeDomain time_;
};

}  // namespace eddy::pinn
