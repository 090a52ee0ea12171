#pragma once
// ParaView files through VTK's own XML writers: .vti for fields on regular grids, .vtp for point
// clouds, and a .pvd collection for time series. Every file is written to a temporary name and
// renamed into place.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy::io {

using PointFields = std::map<std::string, Tensor>;  // name -> [N] or [N, components]

// A regular grid of 1 to 3 dimensions: dims[i] points from origin[i] with spacing[i]. Field
// values are in C order over the grid ([dims[0], dims[1], ...] flattened, last axis fastest),
// which is how eddy lays out meshgrid-sampled fields.
void write_vti(const std::string& path, const std::vector<double>& origin, const std::vector<double>& spacing,
               const std::vector<int64_t>& dims, const PointFields& fields);

// Points [N, d] (d <= 3; missing coordinates are 0) with per-point fields, as vertices.
void write_vtp(const std::string& path, const Tensor& points, const PointFields& fields);

// A ParaView collection: (time, file) pairs, file paths relative to the .pvd's folder.
void write_pvd(const std::string& path, const std::vector<std::pair<double, std::string>>& entries);

}  // namespace eddy::io
