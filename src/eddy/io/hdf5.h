#pragma once
// HDF5 files for results and datasets, through the HDF5 C library.
//
// Hdf5Writer writes to a temporary name and commit() renames it into place, so a killed run never
// leaves a truncated file under the real name. Datasets are named by paths ("fields/u"); groups
// along the path are created as needed. Tensors are written dense in row-major order with their
// dtype (bool as uint8); complex tensors as a compound {r, i} like h5py writes them.

#include <cstdint>
#include <string>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy::io {

class Hdf5Writer {
 public:
  explicit Hdf5Writer(std::string path);
  ~Hdf5Writer();  // without commit(), the temporary file is removed
  Hdf5Writer(const Hdf5Writer&) = delete;
  Hdf5Writer& operator=(const Hdf5Writer&) = delete;

  void write(const std::string& dataset, const Tensor& values);
  void write_string(const std::string& dataset, const std::string& text);
  // Attributes on an existing dataset or group ("/" for the file).
  void set_attribute(const std::string& object, const std::string& name, double value);
  void set_attribute(const std::string& object, const std::string& name, const std::string& value);
  // Closes the file and renames it to its final path.
  void commit();

 private:
  int64_t parent_group(const std::string& dataset);

  std::string path_, temporary_;
  int64_t file_ = -1;
};

// Reads a numeric dataset into a tensor of its stored type (float32/64, int32/64, uint8 as bool).
// Errors name the file and the dataset, listing the datasets present when it is missing.
Tensor read_hdf5(const std::string& path, const std::string& dataset);
// Names of all datasets in a file ("train/a", "x", ...).
std::vector<std::string> list_hdf5_datasets(const std::string& path);

}  // namespace eddy::io
