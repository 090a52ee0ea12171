#pragma once
// ParaView files through VTK's own XML writers: .vti for fields on regular grids (whole, or in
// pieces joined by a .pvti), .vtp for point clouds, and a .pvd collection for time series. Every file is written to a temporary name and
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

// One piece of a grid split along its first axis, for a .pvti: the points [first, first +
// dims[0]) along axis 0 of the whole grid (origin and spacing are the whole grid's) and all of
// the other axes. Pieces that share their boundary rows join without a gap in ParaView.
void write_vti_piece(const std::string& path, const std::vector<double>& origin, const std::vector<double>& spacing,
                     int64_t first, const std::vector<int64_t>& dims, const PointFields& fields);

struct VtiPiece {
  int64_t first = 0, rows = 0;  // along the grid's first axis
  std::string file;             // relative to the .pvti's folder
};
// The parallel image file that joins pieces written by write_vti_piece into the grid of `dims`;
// `fields` gives the names and component counts of the pieces' fields (their values are unused).
void write_pvti(const std::string& path, const std::vector<double>& origin, const std::vector<double>& spacing,
                const std::vector<int64_t>& dims, const std::vector<VtiPiece>& pieces, const PointFields& fields);

// Points [N, d] (d <= 3; missing coordinates are 0) with per-point fields, as vertices.
void write_vtp(const std::string& path, const Tensor& points, const PointFields& fields);

// A ParaView collection: (time, file) pairs, file paths relative to the .pvd's folder.
void write_pvd(const std::string& path, const std::vector<std::pair<double, std::string>>& entries);

}  // namespace eddy::io
