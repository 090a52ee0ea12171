// HDF5 files as observations, references and datasets read them (io/hdf5.h): the dataset list,
// each dataset's shape, the whole dataset and a range of its rows, and the array-file path.
//
// A dataset larger than kMaxBytes is not read: HDF5 stores unwritten chunks as fill values, so a
// few hundred bytes can declare a valid dataset of terabytes, and allocating it would only report
// this machine's memory. Its shape is still checked.
#include "eddy/core/checked_size.h"
#include "eddy/io/array_file.h"
#include "eddy/io/hdf5.h"
#include "fuzz_support.h"

namespace {

constexpr int64_t kMaxBytes = int64_t{64} << 20;
constexpr size_t kMaxDatasets = 8;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace eddy;
  const fuzz::TempFile file("input.h5", fuzz::as_text(data, size));
  std::vector<std::string> datasets;
  fuzz::expecting_errors([&] { datasets = io::list_hdf5_datasets(file.path()); });
  if (datasets.size() > kMaxDatasets) datasets.resize(kMaxDatasets);
  datasets.push_back("missing");
  for (const std::string& dataset : datasets) {
    fuzz::expecting_errors([&] {
      const Shape shape = io::hdf5_shape(file.path(), dataset);
      const std::optional<int64_t> bytes = checked_byte_size(shape, DType::f64);
      if (!bytes || *bytes > kMaxBytes) return;
      fuzz::read_every_byte(io::read_hdf5(file.path(), dataset));
      fuzz::read_every_byte(io::read_array(file.path(), dataset));
      if (!shape.empty()) fuzz::read_every_byte(io::read_hdf5_rows(file.path(), dataset, shape[0] / 2, shape[0]));
    });
  }
  return 0;
}
