#pragma once
// Numeric arrays from HDF5, CSV or NPY files: one reading path for observations and reference
// solutions, which picks the format from the file's extension.
//
// A key selects what to read, like an HDF5 dataset path does:
//   .h5, .hdf5  the dataset path ("points", "fields/u"), read with its stored shape;
//   .csv        column names from the header row: "u" gives [N], "x,t" gives [N, 2] in that order;
//   .npy        ":" gives the whole (1-D or 2-D) array; "2" gives column 2 of a 2-D array as [N]
//               (and "0" a 1-D array as is); "0:2" (columns 0 and 1) and "0,3" give [N, k].
//
// CSV files hold numbers only: a header row of names (or NumPy's `savetxt(..., header=...)` form,
// whose header line starts with "# "), then one row per point; an empty field is NaN. NPY files
// are little-endian, C-ordered float32/64, int32/64, uint8 or bool arrays (NumPy's defaults).
// A CSV or NPY file with no rows is an error: observations or a reference need at least one.
// Errors name the file, and the column, line or dtype at fault.

#include <string>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy::io {

enum class ArrayFormat { hdf5, csv, npy };

// The format of `path` by its extension; an error names the supported ones.
ArrayFormat array_format(const std::string& path);

// Reads `key` from `path` (see above). CSV values are float64; HDF5 and NPY keep their dtype.
Tensor read_array(const std::string& path, const std::string& key);

}  // namespace eddy::io
