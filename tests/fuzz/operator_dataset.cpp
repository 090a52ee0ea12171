// The operator-learning dataset reader (solvers/operator/dataset.h) on HDF5 files of any layout:
// the input describes a run's data section and the datasets of one file, which the harness writes
// with HDF5's C API; then load_data reads every split as `eddy train` does, and the training
// set's normalisers are computed. Raw HDF5 bytes are the hdf5 harness's; this one reaches the
// shape and dtype checks of the reader with files HDF5 itself accepts.
//
// Layout of the input (all bytes optional; missing ones read as 0):
//   flags: bit 0 DeepONet (else FNO), 1 input_channels, 2 output_channels, 3 normalize,
//          4 a test split, 5 data.points given
//   samples (0: the key is left out), strides (train: low 2 bits + 1, test: next 2 bits + 1),
//   FNO axes (1 + byte % 3)
//   then per dataset (train/a, train/u, test/a, test/u, y): a byte k (255: no such dataset;
//   rank k % 5, dtype (k / 5) % 5 of float32, float64, int32, int64, uint8), one byte per extent
//   (byte % 12), and the values from the remaining bytes, repeated (zeros when none are left).
#include <hdf5.h>

#include <array>

#include "eddy/io/config.h"
#include "fuzz_support.h"
#include "solvers/operator/dataset.h"
#include "solvers/operator/problem.h"

namespace {

using namespace eddy;

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t next() { return at_ < size_ ? data_[at_++] : 0; }
  // Fills `out` with the unread bytes, repeated; zeros when there are none.
  void fill(std::vector<uint8_t>& out) const {
    for (size_t i = 0; i < out.size(); ++i) out[i] = at_ < size_ ? data_[at_ + i % (size_ - at_)] : 0;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

void write_dataset(hid_t file, const std::string& name, Bytes& bytes) {
  const uint8_t kind = bytes.next();
  if (kind == 255) return;
  const int rank = kind % 5;
  const std::array<hid_t, 5> types = {H5T_NATIVE_FLOAT, H5T_NATIVE_DOUBLE, H5T_NATIVE_INT32, H5T_NATIVE_INT64,
                                      H5T_NATIVE_UINT8};
  const hid_t type = types[(kind / 5) % 5];
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  size_t count = 1;
  for (hsize_t& extent : dims) {
    extent = bytes.next() % 12;
    count *= extent;
  }
  const hid_t space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims.data(), nullptr);
  const hid_t links = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(links, 1);
  const hid_t dataset = H5Dcreate2(file, name.c_str(), type, space, links, H5P_DEFAULT, H5P_DEFAULT);
  std::vector<uint8_t> values(count * H5Tget_size(type));
  bytes.fill(values);
  if (!values.empty()) H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(dataset);
  H5Pclose(links);
  H5Sclose(space);
}

std::string config_text(const std::string& file, Bytes& bytes) {
  const uint8_t flags = bytes.next(), samples = bytes.next(), strides = bytes.next(), axes = bytes.next();
  const auto flag = [&](int bit) { return (flags >> bit) & 1 ? "true" : "false"; };
  std::string text = cat("data:\n  file: ", file, "\n  input_channels: ", flag(1), "\n  output_channels: ", flag(2),
                         "\n  normalize: ", flag(3), "\n");
  if (flags & 32) text += "  points: y\n";
  text += cat("  train: {input: train/a, output: train/u, stride: ", 1 + strides % 4);
  if (samples) text += cat(", samples: ", static_cast<int>(samples));
  text += "}\n";
  if (flags & 16) text += cat("  test:\n    - {name: t, input: test/a, output: test/u, stride: ", 1 + (strides >> 2) % 4, "}\n");
  if (flags & 1) {
    text += "model: {type: deeponet, latent: 4, width: 4, depth: 1}\n";
  } else {
    text += "model: {type: fno, width: 4, layers: 1, modes: [2";
    for (int axis = 1; axis < 1 + axes % 3; ++axis) text += ", 2";
    text += "]}\n";
  }
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes bytes(data, size);
  const std::string file = (fuzz::scratch_dir() / "data.h5").string();
  const std::string text = config_text(file, bytes);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t h5 = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  for (const char* name : {"train/a", "train/u", "test/a", "test/u", "y"}) write_dataset(h5, name, bytes);
  H5Fclose(h5);
  fuzz::expecting_errors([&] {
    auto config = io::Config::parse(text, "run.yaml");
    const operator_learning::OperatorProblem problem = operator_learning::read_operator_problem(*config);
    const operator_learning::Dataset dataset = operator_learning::load_data(problem);
    for (const operator_learning::Split* split : {&dataset.train, dataset.tests.empty() ? nullptr : &dataset.tests[0]}) {
      if (!split) continue;
      for (const Tensor* tensor : {&split->input, &split->output, &split->points}) fuzz::read_every_byte(*tensor);
    }
    const bool grid = problem.model.type == operator_learning::ModelType::fno;
    operator_learning::Normalizer inputs(dataset.train.input, grid, problem.data.normalize);
    operator_learning::Normalizer outputs(dataset.train.output, grid, problem.data.normalize);
    fuzz::read_every_byte(inputs.encode(dataset.train.input));
    operator_learning::training_layout(problem);
  });
  std::filesystem::remove(file);
  return 0;
}
