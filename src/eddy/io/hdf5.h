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

namespace eddy::dist {
class Communicator;
}

namespace eddy::io {

class Hdf5Writer {
 public:
  explicit Hdf5Writer(std::string path);
  // One file written by all ranks of `comm` together. Every call is then collective: each rank
  // makes the same calls with the same names, shapes and attribute values. write() and
  // write_string() store rank 0's values; write_rows() stores every rank's block. Several ranks
  // write through HDF5's MPI-IO driver, which needs eddy built with MPI (and so with HDF5's
  // parallel build).
  Hdf5Writer(std::string path, dist::Communicator& comm);
  // Without commit(), the temporary file is removed (left behind by a job of several ranks, whose
  // collective close cannot run while one rank unwinds an error).
  ~Hdf5Writer();
  Hdf5Writer(const Hdf5Writer&) = delete;
  Hdf5Writer& operator=(const Hdf5Writer&) = delete;

  void write(const std::string& dataset, const Tensor& values);
  // A dataset of `total_rows` rows along axis 0, of which this rank holds `block`: the rows
  // [first_row, first_row + block rows). The ranks' blocks must cover the rows exactly once.
  void write_rows(const std::string& dataset, const Tensor& block, int64_t first_row, int64_t total_rows);
  void write_string(const std::string& dataset, const std::string& text);
  // Attributes on an existing dataset or group ("/" for the file).
  void set_attribute(const std::string& object, const std::string& name, double value);
  void set_attribute(const std::string& object, const std::string& name, int64_t value);  // exact, as int64
  void set_attribute(const std::string& object, const std::string& name, const std::string& value);
  // Closes the file and renames it to its final path.
  void commit();

 private:
  int64_t parent_group(const std::string& dataset);
  // The temporary file of one process.
  void create_file_alone();
  // Creates `dataset` of `dims` and HDF5 type `type`; returns its handle.
  int64_t create(const std::string& dataset, int64_t type, const std::vector<uint64_t>& dims);
  bool stores_values() const;  // rank 0, or the only process

  std::string path_, temporary_;
  int64_t file_ = -1;
  dist::Communicator* comm_ = nullptr;  // set when several ranks write the file
};

// Reads a numeric dataset into a tensor of its stored type (float32/64, int32/64, uint8 as bool).
// Errors name the file and the dataset, listing the datasets present when it is missing.
Tensor read_hdf5(const std::string& path, const std::string& dataset);
// Rows [first, last) along axis 0 of a dataset only, for a process that holds a share of it.
Tensor read_hdf5_rows(const std::string& path, const std::string& dataset, int64_t first, int64_t last);
// A scalar string dataset's text (the run's `config`, as write_string stores it, or one of
// h5py's variable-length strings); an error names a dataset of another kind.
std::string read_hdf5_string(const std::string& path, const std::string& dataset);
// Whether a dataset holds a string (read_hdf5_string) rather than numbers.
bool is_hdf5_string(const std::string& path, const std::string& dataset);
// A dataset's shape, without reading it.
Shape hdf5_shape(const std::string& path, const std::string& dataset);
// Whether `path` starts with HDF5's signature: a file that writing over as HDF5 loses nothing that
// was not already results (a config file, a text file at an output path are refused instead).
bool is_hdf5_file(const std::string& path);
// Whether two (file, dataset) pairs name one stored dataset, however the files are spelled or
// linked on disk and however the dataset is reached inside them (soft, hard and external links).
bool same_hdf5_dataset(const std::string& path_a, const std::string& dataset_a, const std::string& path_b,
                       const std::string& dataset_b);
// Whether the object (a group or dataset path, "/" for the file) of the HDF5 file at `path` carries
// the attribute `name`; false for a file that is not HDF5 or lacks the object. Throws, with the
// reason, for an HDF5 file that cannot be opened.
bool hdf5_has_attribute(const std::string& path, const std::string& object, const std::string& name);
// Names of all datasets in a file ("train/a", "x", ...).
std::vector<std::string> list_hdf5_datasets(const std::string& path);

}  // namespace eddy::io
