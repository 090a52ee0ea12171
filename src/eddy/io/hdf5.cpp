#include "eddy/io/hdf5.h"

#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "eddy/core/backend.h"
#include "eddy/core/checked_size.h"
#include "eddy/core/error.h"
#include "eddy/dist/communicator.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/io/atomic_file.h"
#include "eddy/ops/ops.h"

namespace eddy::io {
namespace {

// HDF5 closes at exit whatever is still open, and a file whose close failed (a full disk) stays
// in its table: that cleanup then crashed in H5F__close_cb (a segfault after eddy had reported
// the error). eddy closes every file it opens itself, so HDF5's exit handler is not registered;
// H5dont_atexit must come before the library's first call, hence a static initialiser.
const bool kNoHdf5ExitHandler = [] {
  H5dont_atexit();
  return true;
}();

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

// The complex dtype of a dataset stored in h5py's layout (members r and i, both floats of one
// size), or nullopt.
std::optional<DType> h5py_complex(hid_t stored) {
  if (H5Tget_class(stored) != H5T_COMPOUND || H5Tget_nmembers(stored) != 2) return std::nullopt;
  size_t part_size = 0;
  for (unsigned member = 0; member < 2; ++member) {
    char* name = H5Tget_member_name(stored, member);
    const bool named = name != nullptr && std::string(name) == (member == 0 ? "r" : "i");
    H5free_memory(name);
    const hid_t part = H5Tget_member_type(stored, member);
    const bool floating = H5Tget_class(part) == H5T_FLOAT;
    const size_t size = H5Tget_size(part);
    H5Tclose(part);
    if (!named || !floating || (size != 4 && size != 8) || (member == 1 && size != part_size)) return std::nullopt;
    part_size = size;
  }
  return part_size == 4 ? DType::c64 : DType::c128;
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
  // Closes now, for the status: a dataset's data can first reach the disk here (HDF5 keeps a
  // small dataset in its sieve buffer until then), so a full disk shows only in this result.
  bool close() {
    const herr_t status = close_(id_);
    id_ = -1;
    return status >= 0;
  }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// The type a tensor's values are stored as.
hid_t stored_type(const Tensor& dense, const std::string& path, const std::string& dataset) {
  // Checked before H5Tcopy, which would print HDF5's own error stack for an invalid type.
  EDDY_CHECK(is_complex(dense.dtype()) || memory_type(dense.dtype()) >= 0, path, ": cannot store dtype ",
             dense.dtype(), " in dataset ", dataset, is_half(dense.dtype()) ? "; cast it to float32 first" : "");
  const hid_t type = is_complex(dense.dtype()) ? complex_type(dense.dtype()) : H5Tcopy(memory_type(dense.dtype()));
  EDDY_CHECK(type >= 0, path, ": HDF5 could not make the type of dtype ", dense.dtype(), " for dataset ", dataset);
  return type;
}

// Whether the folder `path` names a file in is not there (a bare file name is in the working one).
bool folder_is_missing(const std::string& path) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code ignored;
  return !folder.empty() && !std::filesystem::is_directory(folder, ignored);
}

// Why H5Fopen refused to read `path`, as the end of "cannot open HDF5 file PATH".
std::string unreadable_reason(const std::string& path) {
  std::error_code ignored;
  if (!std::filesystem::exists(path, ignored)) return ": no such file";
  if (std::filesystem::is_directory(path, ignored)) return ": it is a folder";
  if (!std::ifstream(path, std::ios::binary)) return ": it cannot be read (permissions)";
  if (!is_hdf5_file(path)) return ": it is not an HDF5 file (it does not begin with HDF5's signature)";
  // HDF5 locks a file it writes, and refuses to open it elsewhere meanwhile (h5py's 'a' mode).
  return ": the file is damaged or truncated, or another program has it open for writing";
}

// The system's reason for a failed write (a full disk), where it gave one: HDF5's own error
// stack is silenced, and says only that the write failed. errno is cleared before each write.
std::string system_cause() { return errno != 0 ? cat(": ", std::strerror(errno)) : std::string(); }

// Closes a dataset the writer wrote, which is where its data may first meet a full disk.
void close_dataset(Handle& set, const std::string& path, const std::string& dataset) {
  errno = 0;
  const bool closed = set.close();
  EDDY_CHECK(closed, path, ": cannot write dataset ", dataset, system_cause());
}

}  // namespace

Hdf5Writer::Hdf5Writer(std::string path) : path_(std::move(path)) { create_file_alone(); }

void Hdf5Writer::create_file_alone() {
  silence_hdf5();
  temporary_ = temporary_for(path_, ::getpid());
  errno = 0;
  file_ = H5Fcreate(temporary_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file_ >= 0) return;
  // Named as the user gave it, with the cause where the system says it (a missing folder, say),
  // rather than as the temporary file the write goes through first.
  const std::string cause = errno != 0 ? cat(" (", std::strerror(errno), ")") : std::string();
  std::remove(temporary_.c_str());  // on a full disk the file exists, empty
  if (folder_is_missing(path_)) {
    const std::string folder = std::filesystem::path(path_).parent_path().string();
    const std::string file = file_in_the_way(folder);
    throw Error(cat("cannot create HDF5 file ", path_, ": ",
                    file.empty() ? cat("the folder ", folder, " does not exist") : cat(file, " is a file, not a folder")));
  }
  throw Error(cat("cannot create HDF5 file ", path_, cause));
}

Hdf5Writer::Hdf5Writer(std::string path, dist::Communicator& comm) : path_(std::move(path)) {
  if (comm.size() == 1) {
    create_file_alone();
    return;
  }
#ifdef H5_HAVE_PARALLEL
  EDDY_CHECK(comm.kind() == "mpi", path_, ": several ranks write one HDF5 file through MPI, not a ", comm.kind(),
             " communicator");
  silence_hdf5();
  // The ranks create the file together, and MPI-IO waits for ever for a rank whose create
  // failed: each learns first whether every rank sees the folder.
  const bool missing = folder_is_missing(path_);
  EDDY_CHECK(dist::ranks_where(missing, comm) == 0, "cannot create HDF5 file ", path_, ": the folder ",
             std::filesystem::path(path_).parent_path().string(), " is not there ",
             missing ? cat("on rank ", comm.rank()) : std::string("on another rank"),
             "; give a path on a file system every rank shares (not a node's local disk)");
  // One file that every rank opens together, under a name they agree on.
  Tensor id = tensor(std::vector<int64_t>{::getpid()});
  comm.broadcast(id, 0);
  temporary_ = temporary_for(path_, static_cast<long>(id.item<int64_t>()));
  Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fapl_mpio(access.get(), MPI_COMM_WORLD, MPI_INFO_NULL);
  file_ = H5Fcreate(temporary_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get());
  EDDY_CHECK(file_ >= 0, "cannot create HDF5 file ", temporary_, " on rank ", comm.rank());
  comm_ = &comm;
#else
  throw Error(cat(path_, ": ", comm.size(), " ranks cannot write one HDF5 file: this eddy was built without "
                  "MPI and HDF5's parallel build"));
#endif
}

Hdf5Writer::~Hdf5Writer() {
  if (file_ < 0 || comm_) return;  // several ranks: see the header
  H5Fclose(file_);
  std::remove(temporary_.c_str());
}

bool Hdf5Writer::stores_values() const { return !comm_ || comm_->rank() == 0; }

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

int64_t Hdf5Writer::create(const std::string& dataset, int64_t type, const std::vector<uint64_t>& dims) {
  EDDY_CHECK(file_ >= 0, path_, ": write after commit");
  std::vector<hsize_t> extent(dims.begin(), dims.end());
  Handle space(H5Screate_simple(static_cast<int>(extent.size()), extent.data(), nullptr), H5Sclose);
  parent_group(dataset);
  const hid_t set = H5Dcreate2(file_, dataset.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  EDDY_CHECK(set >= 0, path_, ": cannot create dataset ", dataset, " (does it exist already?)");
  return set;
}

void Hdf5Writer::write(const std::string& dataset, const Tensor& values) {
  Tensor dense = host_copy(values);
  Handle type(stored_type(dense, path_, dataset), H5Tclose);
  Handle set(create(dataset, type.get(), std::vector<uint64_t>(dense.shape().begin(), dense.shape().end())),
             H5Dclose);
  if (dense.numel() > 0 && stores_values()) {
    errno = 0;
    EDDY_CHECK(H5Dwrite(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, dense.raw_data()) >= 0, path_,
               ": cannot write dataset ", dataset, system_cause());
  }
  close_dataset(set, path_, dataset);
}

void Hdf5Writer::write_rows(const std::string& dataset, const Tensor& block, int64_t first_row, int64_t total_rows) {
  Tensor dense = host_copy(block);
  const int64_t rows = dense.dim() >= 1 ? dense.shape()[0] : 0;
  EDDY_CHECK(dense.dim() >= 1 && first_row >= 0 && first_row + rows <= total_rows, path_, ": rows [", first_row,
             ", ", first_row + rows, ") of dataset ", dataset, " (block shape ", dense.shape(), ") are not within its ",
             total_rows, " rows");
  EDDY_CHECK(comm_ || (first_row == 0 && rows == total_rows), path_, ": a single process writes all ", total_rows,
             " rows of dataset ", dataset, ", got ", rows, " from row ", first_row);
  Handle type(stored_type(dense, path_, dataset), H5Tclose);
  std::vector<uint64_t> dims(dense.shape().begin(), dense.shape().end());
  dims[0] = static_cast<uint64_t>(total_rows);
  Handle set(create(dataset, type.get(), dims), H5Dclose);

  Handle file_space(H5Dget_space(set.get()), H5Sclose);
  std::vector<hsize_t> start(dims.size(), 0), count(dims.begin(), dims.end());
  start[0] = static_cast<hsize_t>(first_row);
  count[0] = static_cast<hsize_t>(rows);
  Handle memory(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
  if (rows > 0) {
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  } else {
    H5Sselect_none(file_space.get());
    H5Sselect_none(memory.get());
  }
  Handle transfer(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
#ifdef H5_HAVE_PARALLEL
  if (comm_) H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_COLLECTIVE);
#endif
  const char nothing = 0;  // a rank without rows still joins the collective write
  const void* data = rows > 0 ? dense.raw_data() : &nothing;
  errno = 0;
  EDDY_CHECK(H5Dwrite(set.get(), type.get(), memory.get(), file_space.get(), transfer.get(), data) >= 0, path_,
             ": cannot write rows of dataset ", dataset, system_cause());
  close_dataset(set, path_, dataset);
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
  if (stores_values()) {
    errno = 0;
    EDDY_CHECK(H5Dwrite(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, padded.data()) >= 0, path_,
               ": cannot write dataset ", dataset, system_cause());
  }
  close_dataset(set, path_, dataset);
}

namespace {

void write_number_attribute(int64_t file, const std::string& path, const std::string& object, const std::string& name,
                            hid_t type, const void* value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attribute(H5Acreate_by_name(file, object.c_str(), name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                                     H5P_DEFAULT),
                   H5Aclose);
  EDDY_CHECK(attribute.valid(), path, ": cannot set attribute ", name, " on ", object);
  EDDY_CHECK(H5Awrite(attribute.get(), type, value) >= 0, path, ": cannot set attribute ", name, " on ", object);
}

}  // namespace

void Hdf5Writer::set_attribute(const std::string& object, const std::string& name, double value) {
  write_number_attribute(file_, path_, object, name, H5T_NATIVE_DOUBLE, &value);
}

void Hdf5Writer::set_attribute(const std::string& object, const std::string& name, int64_t value) {
  write_number_attribute(file_, path_, object, name, H5T_NATIVE_INT64, &value);
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
  EDDY_CHECK(H5Awrite(attribute.get(), type.get(), padded.data()) >= 0, path_, ": cannot set attribute ", name,
             " on ", object);
}

void Hdf5Writer::commit() {
  EDDY_CHECK(file_ >= 0, path_, ": committed twice");
  errno = 0;
  const bool closed = H5Fclose(file_) >= 0;
  const int close_error = errno;  // of the write that failed as the file was flushed
  file_ = -1;
  std::string failure = closed ? "" : cat("cannot close ", temporary_, close_error ? ": " : "",
                                          close_error ? std::strerror(close_error) : "");
  if (!closed) std::remove(temporary_.c_str());
  if (stores_values() && closed) {
    try {
      move_into_place(temporary_, path_);
    } catch (const Error& e) {
      failure = e.what();
    }
  }
  if (comm_) {  // every rank learns whether rank 0 moved the file, and returns once it has
    Tensor flag = tensor(std::vector<int64_t>{failure.empty() ? 1 : 0});
    comm_->broadcast(flag, 0);
    if (flag.item<int64_t>() == 0 && failure.empty()) failure = cat("cannot write ", path_, " (on rank 0)");
  }
  EDDY_CHECK(failure.empty(), failure);
}

namespace {

// A damaged file can nest groups, or link them in a loop, without end, which libhdf5 1.10 walks
// for minutes (a fuzzed file: tests/fuzz/corpus/hdf5/regression-timeout-nested-groups). No file
// eddy reads nests anywhere near this deep.
constexpr int64_t kMaxGroupDepth = 64;

struct DatasetVisit {
  std::vector<std::string> names;
  std::string too_deep;  // where the visit stopped, if it did
};

herr_t collect_dataset(hid_t, const char* name, const H5O_info_t* info, void* data) {
  DatasetVisit& visit = *static_cast<DatasetVisit*>(data);
  if (std::count(name, name + std::strlen(name), '/') >= kMaxGroupDepth) {
    visit.too_deep = name;
    return 1;  // stops the visit
  }
  if (info->type == H5O_TYPE_DATASET) visit.names.push_back(name);
  return 0;
}

}  // namespace

std::vector<std::string> list_hdf5_datasets(const std::string& path) {
  silence_hdf5();
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  EDDY_CHECK(file.valid(), "cannot open HDF5 file ", path, unreadable_reason(path));
  DatasetVisit visit;
  const herr_t visited = H5Ovisit2(file.get(), H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &visit, H5O_INFO_BASIC);
  EDDY_CHECK(visit.too_deep.empty(), path, ": groups nested ", kMaxGroupDepth, " deep (at '",
             visit.too_deep.substr(0, 120), "...'); the file is damaged or its links form a loop");
  // A partial list would pass for the file's contents (and name too few datasets in errors).
  EDDY_CHECK(visited >= 0, path, ": cannot list its datasets, the file is damaged",
             visit.names.empty() ? std::string() : cat(" (after '", visit.names.back().substr(0, 120), "')"));
  return visit.names;
}

namespace {

// A bool tensor's bytes must be 0 or 1 (the kernels load them as C++ bool). A 1-byte integer
// dataset is read as bool, and one holding another value is refused rather than read as true:
// its values are more likely integers (labels, an image) than truth values, and all of them
// would turn into 1 without a word.
void check_bools(const Tensor& values, const std::string& path, const std::string& dataset, int64_t first_row,
                 bool is_signed) {
  const uint8_t* bytes = static_cast<const uint8_t*>(values.raw_data());
  for (int64_t i = 0; i < values.numel(); ++i) {
    if (bytes[i] <= 1) continue;
    const int64_t row_size = values.dim() > 0 && values.shape()[0] > 0 ? values.numel() / values.shape()[0] : 1;
    const int value = is_signed ? static_cast<int8_t>(bytes[i]) : bytes[i];
    throw Error(cat(path, ": dataset '", dataset, "' holds ", value, " at element ", first_row * row_size + i,
                    " (in row-major order); a 1-byte integer dataset is read as bool and must hold only 0 "
                    "and 1 (store other integers as int32 or int64)"));
  }
}

// h5py stores NumPy bools as a 1-byte enum with the members FALSE = 0 and TRUE = 1.
bool is_h5py_bool(hid_t type) {
  if (H5Tget_size(type) != 1 || H5Tget_nmembers(type) != 2) return false;
  for (const auto& [value, name] : {std::pair<int8_t, std::string_view>{0, "FALSE"}, {1, "TRUE"}}) {
    char member[8] = {};
    if (H5Tenum_nameof(type, &value, member, sizeof member) < 0 || name != member) return false;
  }
  return true;
}

// Stops a conversion that would clamp a value the memory type cannot hold.
H5T_conv_ret_t abort_out_of_range(H5T_conv_except_t exception, hid_t, hid_t, void*, void*, void*) {
  const bool out_of_range = exception == H5T_CONV_EXCEPT_RANGE_HI || exception == H5T_CONV_EXCEPT_RANGE_LOW;
  return out_of_range ? H5T_CONV_ABORT : H5T_CONV_UNHANDLED;
}

hid_t open_file(const std::string& path) {
  silence_hdf5();
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EDDY_CHECK(file >= 0, "cannot open HDF5 file ", path, unreadable_reason(path));
  return file;
}

hid_t open_set(hid_t file, const std::string& path, const std::string& dataset) {
  if (H5Lexists(file, dataset.c_str(), H5P_DEFAULT) <= 0) {
    std::string present;
    for (const std::string& name : list_hdf5_datasets(path)) present += (present.empty() ? "" : ", ") + name;
    throw Error(cat(path, ": no dataset '", dataset, "' (datasets: ", present, ")"));
  }
  const hid_t set = H5Dopen2(file, dataset.c_str(), H5P_DEFAULT);
  EDDY_CHECK(set >= 0, path, ": '", dataset, "' is not a dataset");
  return set;
}

// An open dataset; errors name the file, and list the datasets present when it is missing.
struct OpenDataset {
  OpenDataset(const std::string& path, const std::string& dataset)
      : file(open_file(path), H5Fclose), set(open_set(file.get(), path, dataset), H5Dclose) {}

  Shape shape() const {
    Handle space(H5Dget_space(set.get()), H5Sclose);
    std::vector<hsize_t> dims(static_cast<size_t>(H5Sget_simple_extent_ndims(space.get())));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    return Shape(dims.begin(), dims.end());
  }

  Handle file;
  Handle set;
};

}  // namespace

Shape hdf5_shape(const std::string& path, const std::string& dataset) { return OpenDataset(path, dataset).shape(); }

bool hdf5_has_attribute(const std::string& path, const std::string& object, const std::string& name) {
  if (!is_hdf5_file(path)) return false;
  const Handle file(open_file(path), H5Fclose);
  return H5Aexists_by_name(file.get(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

bool same_hdf5_dataset(const std::string& path_a, const std::string& dataset_a, const std::string& path_b,
                       const std::string& dataset_b) {
  // Both stay open together: the library then shares one open file between them, so an object's
  // file number and address identify it across the two.
  const OpenDataset a(path_a, dataset_a), b(path_b, dataset_b);
  H5O_info_t info_a, info_b;
  EDDY_CHECK(H5Oget_info2(a.set.get(), &info_a, H5O_INFO_BASIC) >= 0 &&
                 H5Oget_info2(b.set.get(), &info_b, H5O_INFO_BASIC) >= 0,
             "cannot read the object headers of ", path_a, ": '", dataset_a, "' and ", path_b, ": '", dataset_b, "'");
  return info_a.fileno == info_b.fileno && info_a.addr == info_b.addr;
}

bool is_hdf5_string(const std::string& path, const std::string& dataset) {
  const OpenDataset opened(path, dataset);
  const Handle stored(H5Dget_type(opened.set.get()), H5Tclose);
  return H5Tget_class(stored.get()) == H5T_STRING;
}

std::string read_hdf5_string(const std::string& path, const std::string& dataset) {
  const OpenDataset opened(path, dataset);
  const Handle stored(H5Dget_type(opened.set.get()), H5Tclose);
  EDDY_CHECK(H5Tget_class(stored.get()) == H5T_STRING && opened.shape().empty(), path, ": dataset '", dataset,
             "' is not a single string");
  if (H5Tis_variable_str(stored.get()) > 0) {
    char* text = nullptr;
    EDDY_CHECK(H5Dread(opened.set.get(), stored.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &text) >= 0, path,
               ": cannot read dataset '", dataset, "'");
    std::string result = text != nullptr ? text : "";
    H5free_memory(text);
    return result;
  }
  std::string text(H5Tget_size(stored.get()), '\0');
  EDDY_CHECK(H5Dread(opened.set.get(), stored.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()) >= 0, path,
             ": cannot read dataset '", dataset, "'");
  text.resize(std::strlen(text.c_str()));  // fixed-length strings are padded with NULs
  return text;
}

bool is_hdf5_file(const std::string& path) {
  char signature[8] = {};
  std::ifstream(path, std::ios::binary).read(signature, sizeof signature);
  return std::string(signature, sizeof signature) == std::string("\x89HDF\r\n\x1a\n", 8);
}

Tensor read_hdf5(const std::string& path, const std::string& dataset) {
  return read_hdf5_rows(path, dataset, 0, -1);
}

Tensor read_hdf5_rows(const std::string& path, const std::string& dataset, int64_t first, int64_t last) {
  const OpenDataset opened(path, dataset);
  Handle stored(H5Dget_type(opened.set.get()), H5Tclose);
  DType dtype;
  const H5T_class_t kind = H5Tget_class(stored.get());
  const size_t size = H5Tget_size(stored.get());
  if (kind == H5T_FLOAT) {
    dtype = size == 4 ? DType::f32 : DType::f64;
  } else if (kind == H5T_INTEGER) {
    // An unsigned 4-byte value past int32 needs int64 (HDF5's conversion clamped it silently).
    const bool fits_int32 = size < 4 || (size == 4 && H5Tget_sign(stored.get()) == H5T_SGN_2);
    dtype = size == 1 ? DType::b8 : fits_int32 ? DType::i32 : DType::i64;
  } else if (kind == H5T_ENUM) {
    EDDY_CHECK(is_h5py_bool(stored.get()), path, ": dataset '", dataset, "' is an enumeration other than h5py's "
               "bool (FALSE = 0, TRUE = 1); store its values as integers");
    dtype = DType::b8;
  } else if (const std::optional<DType> complex = h5py_complex(stored.get())) {
    dtype = *complex;
  } else {
    throw Error(cat(path, ": dataset '", dataset, "' is not numeric (eddy reads integers, floats, h5py's bools and ",
                    "h5py's complex numbers)"));
  }
  Shape shape = opened.shape();
  const bool all_rows = first == 0 && last < 0;
  if (!all_rows) {
    EDDY_CHECK(!shape.empty() && first >= 0 && first <= last && last <= shape[0], path, ": rows [", first, ", ", last,
               ") of dataset '", dataset, "' ", shape, " are out of range");
    shape[0] = last - first;
  }
  // A stored extent of 2^63 or more converts to a negative one, refused with the rest.
  EDDY_CHECK(checked_byte_size(shape, dtype), path, ": dataset '", dataset, "' has shape ", shape,
             ", too large to address (2^63 bytes or more); the file is corrupt");
  Tensor out = Tensor::empty(shape, dtype);
  if (out.numel() == 0) return device_copy(out, default_device());
  Handle file_space(H5Dget_space(opened.set.get()), H5Sclose);
  std::vector<hsize_t> start(shape.size(), 0), count(shape.begin(), shape.end());
  if (!all_rows) {
    start[0] = static_cast<hsize_t>(first);
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  }
  Handle memory(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
  // A 1-byte integer is read in its own signedness, so that a negative int8 is not clipped to 0;
  // an enum as itself (HDF5 converts enums only to enums), its bytes being the member values.
  const bool enumerated = kind == H5T_ENUM;
  const bool signed_byte = dtype == DType::b8 && !enumerated && H5Tget_sign(stored.get()) == H5T_SGN_2;
  const Handle complex_memory(is_complex(dtype) ? complex_type(dtype) : -1, H5Tclose);
  const hid_t memory_kind = enumerated    ? stored.get()
                            : signed_byte ? H5T_NATIVE_INT8
                            : is_complex(dtype) ? complex_memory.get()
                                                : memory_type(dtype);
  // An unsigned 8-byte value of 2^63 or more has no int64: refused, where HDF5 clamped it.
  const Handle transfer(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  H5Pset_type_conv_cb(transfer.get(), abort_out_of_range, nullptr);
  EDDY_CHECK(H5Dread(opened.set.get(), memory_kind, memory.get(), file_space.get(), transfer.get(), out.raw_data()) >= 0,
             path, ": cannot read dataset '", dataset, "'",
             kind == H5T_INTEGER && H5Tget_sign(stored.get()) == H5T_SGN_NONE && size == 8
                 ? " (it holds unsigned 64-bit integers; eddy reads them as int64, which cannot hold 2^63 or more)"
                 : "");
  if (dtype == DType::b8) check_bools(out, path, dataset, first, signed_byte);
  return device_copy(out, default_device());
}

}  // namespace eddy::io
