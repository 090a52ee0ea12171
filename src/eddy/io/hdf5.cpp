#include "eddy/io/hdf5.h"

#include <hdf5.h>
#include <unistd.h>

#include <cstdio>

#include "eddy/core/error.h"
#include "eddy/ops/ops.h"

namespace eddy::io {
namespace {

// HDF5 prints its own error stack to stderr by default; eddy reports errors itself.
void silence_hdf5() {
  static bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

hid_t memory_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return H5T_NATIVE_FLOAT;
    case DType::f64: return H5T_NATIVE_DOUBLE;
    case DType::i32: return H5T_NATIVE_INT32;
    case DType::i64: return H5T_NATIVE_INT64;
    case DType::b8: return H5T_NATIVE_UINT8;
    default: return -1;
  }
}

// h5py's layout for complex numbers: a compound of two reals named r and i.
hid_t complex_type(DType dtype) {
  const hid_t part = dtype == DType::c64 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
  const size_t size = H5Tget_size(part);
  hid_t type = H5Tcreate(H5T_COMPOUND, 2 * size);
  H5Tinsert(type, "r", 0, part);
  H5Tinsert(type, "i", size, part);
  return type;
}

class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

}  // namespace

Hdf5Writer::Hdf5Writer(std::string path) : path_(std::move(path)) {
  silence_hdf5();
  temporary_ = path_ + ".tmp-" + std::to_string(::getpid());
  file_ = H5Fcreate(temporary_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  EDDY_CHECK(file_ >= 0, "cannot create HDF5 file ", temporary_);
}

Hdf5Writer::~Hdf5Writer() {
  if (file_ >= 0) {
    H5Fclose(file_);
    std::remove(temporary_.c_str());
  }
}

int64_t Hdf5Writer::parent_group(const std::string& dataset) {
  // Creates every group along the path; returns the file itself for top-level names.
  size_t slash = dataset.find('/', dataset[0] == '/' ? 1 : 0);
  while (slash != std::string::npos) {
    const std::string group = dataset.substr(0, slash);
    if (H5Lexists(file_, group.c_str(), H5P_DEFAULT) <= 0) {
      hid_t created = H5Gcreate2(file_, group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      EDDY_CHECK(created >= 0, path_, ": cannot create group ", group);
      H5Gclose(created);
    }
    slash = dataset.find('/', slash + 1);
  }
  return file_;
}

void Hdf5Writer::write(const std::string& dataset, const Tensor& values) {
  EDDY_CHECK(file_ >= 0, path_, ": write after commit");
  Tensor dense = contiguous(values.detach());
  const bool complex_values = is_complex(dense.dtype());
  Handle type(complex_values ? complex_type(dense.dtype()) : H5Tcopy(memory_type(dense.dtype())), H5Tclose);
  EDDY_CHECK(type.valid(), path_, ": cannot store dtype ", dense.dtype(), " in dataset ", dataset);
  std::vector<hsize_t> dims(dense.shape().begin(), dense.shape().end());
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  parent_group(dataset);
  Handle set(H5Dcreate2(file_, dataset.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
             H5Dclose);
  EDDY_CHECK(set.valid(), path_, ": cannot create dataset ", dataset, " (does it exist already?)");
  if (dense.numel() > 0) {
    EDDY_CHECK(H5Dwrite(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, dense.raw_data()) >= 0, path_,
               ": cannot write dataset ", dataset);
  }
}

void Hdf5Writer::write_string(const std::string& dataset, const std::string& text) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), std::max<size_t>(text.size(), 1));
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  parent_group(dataset);
  Handle set(H5Dcreate2(file_, dataset.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
             H5Dclose);
  EDDY_CHECK(set.valid(), path_, ": cannot create dataset ", dataset);
  std::string padded = text.empty() ? std::string(1, '\0') : text;
  EDDY_CHECK(H5Dwrite(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, padded.data()) >= 0, path_,
             ": cannot write dataset ", dataset);
}

void Hdf5Writer::set_attribute(const std::string& object, const std::string& name, double value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attribute(H5Acreate_by_name(file_, object.c_str(), name.c_str(), H5T_NATIVE_DOUBLE, space.get(),
                                     H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                   H5Aclose);
  EDDY_CHECK(attribute.valid(), path_, ": cannot set attribute ", name, " on ", object);
  H5Awrite(attribute.get(), H5T_NATIVE_DOUBLE, &value);
}

void Hdf5Writer::set_attribute(const std::string& object, const std::string& name, const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), std::max<size_t>(value.size(), 1));
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attribute(H5Acreate_by_name(file_, object.c_str(), name.c_str(), type.get(), space.get(), H5P_DEFAULT,
                                     H5P_DEFAULT, H5P_DEFAULT),
                   H5Aclose);
  EDDY_CHECK(attribute.valid(), path_, ": cannot set attribute ", name, " on ", object);
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  H5Awrite(attribute.get(), type.get(), padded.data());
}

void Hdf5Writer::commit() {
  EDDY_CHECK(file_ >= 0, path_, ": committed twice");
  const bool closed = H5Fclose(file_) >= 0;
  file_ = -1;
  EDDY_CHECK(closed && std::rename(temporary_.c_str(), path_.c_str()) == 0, "cannot move ", temporary_, " to ", path_);
}

namespace {
herr_t collect_dataset(hid_t, const char* name, const H5O_info_t* info, void* names) {
  if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(names)->push_back(name);
  return 0;
}
}  // namespace

std::vector<std::string> list_hdf5_datasets(const std::string& path) {
  silence_hdf5();
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  EDDY_CHECK(file.valid(), "cannot open HDF5 file ", path);
  std::vector<std::string> names;
  H5Ovisit2(file.get(), H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &names, H5O_INFO_BASIC);
  return names;
}

Tensor read_hdf5(const std::string& path, const std::string& dataset) {
  silence_hdf5();
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  EDDY_CHECK(file.valid(), "cannot open HDF5 file ", path);
  if (H5Lexists(file.get(), dataset.c_str(), H5P_DEFAULT) <= 0) {
    std::string present;
    for (const std::string& name : list_hdf5_datasets(path)) present += (present.empty() ? "" : ", ") + name;
    throw Error(cat(path, ": no dataset '", dataset, "' (datasets: ", present, ")"));
  }
  Handle set(H5Dopen2(file.get(), dataset.c_str(), H5P_DEFAULT), H5Dclose);
  EDDY_CHECK(set.valid(), path, ": '", dataset, "' is not a dataset");
  Handle stored(H5Dget_type(set.get()), H5Tclose);
  DType dtype;
  const H5T_class_t kind = H5Tget_class(stored.get());
  const size_t size = H5Tget_size(stored.get());
  if (kind == H5T_FLOAT) {
    dtype = size == 4 ? DType::f32 : DType::f64;
  } else if (kind == H5T_INTEGER) {
    dtype = size == 1 ? DType::b8 : size <= 4 ? DType::i32 : DType::i64;
  } else {
    throw Error(cat(path, ": dataset '", dataset, "' is not numeric"));
  }
  Handle space(H5Dget_space(set.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  Tensor out = Tensor::empty(Shape(dims.begin(), dims.end()), dtype);
  if (out.numel() > 0) {
    EDDY_CHECK(H5Dread(set.get(), memory_type(dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.raw_data()) >= 0, path,
               ": cannot read dataset '", dataset, "'");
  }
  return out;
}

}  // namespace eddy::io
