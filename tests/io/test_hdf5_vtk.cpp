// HDF5 round trips (every dtype, groups, attributes, atomic commit), a stored shape too large to
// read, and VTK files read back with VTK's own readers.

#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/resource.h>
#include <unistd.h>
#include <vtkImageData.h>
#include <vtkNew.h>
#include <vtkPointData.h>
#include <vtkPolyData.h>
#include <vtkXMLImageDataReader.h>
#include <vtkXMLPolyDataReader.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "eddy/eddy.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/hdf5.h"
#include "eddy/io/vtk.h"
#include "support/expect_error.h"

namespace eddy::io {
namespace {

namespace fs = std::filesystem;

class Hdf5VtkTest : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("eddy_hdf5_vtk_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

TEST_F(Hdf5VtkTest, Hdf5RoundTripsDtypesGroupsAndCommitsAtomically) {
  const std::string path = file("out.h5");
  {
    Hdf5Writer writer(path);
    writer.write("fields/u", reshape(arange(0, 6, 1, DType::f64), {2, 3}));
    writer.write("fields/v", tensor<float>({1.5f, -2.5f}));
    writer.write("meta/steps", tensor<int64_t>({10, 20}));
    writer.write("meta/mask", tensor<bool>({true, false, true}));
    writer.write("transposed", transpose(reshape(arange(0, 6, 1, DType::f64), {2, 3})));
    writer.write_string("config", "model:\n  width: 20\n");
    writer.set_attribute("/", "relative_l2", 1.5e-3);
    writer.set_attribute("fields/u", "units", "m/s");
    EXPECT_FALSE(fs::exists(path));  // nothing under the real name until commit
    writer.commit();
  }
  EXPECT_TRUE(fs::exists(path));
  EXPECT_EQ(read_hdf5(path, "fields/u").to_vector<double>(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(read_hdf5(path, "fields/u").shape(), (Shape{2, 3}));
  EXPECT_EQ(read_hdf5(path, "fields/v").dtype(), DType::f32);
  EXPECT_EQ(read_hdf5(path, "meta/steps").to_vector<int64_t>(), (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(read_hdf5(path, "meta/mask").to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(read_hdf5(path, "transposed").to_vector<double>(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  auto names = list_hdf5_datasets(path);
  EXPECT_NE(std::find(names.begin(), names.end(), "fields/u"), names.end());
  try {
    read_hdf5(path, "fields/w");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no dataset 'fields/w' (datasets: "), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_hdf5(file("missing.h5"), "x"), Error);
}

// 16-bit floats have no HDF5 type that ParaView and h5py read alike: refused, with the cast to make.
TEST_F(Hdf5VtkTest, HalfPrecisionTensorsAreRefusedWithTheCastToMake) {
  const std::string path = file("half.h5");
  Hdf5Writer writer(path);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    expect_error([&] { writer.write("u", cast(tensor<float>({1.5f}), dtype)); },
                 {path + ": cannot store dtype " + std::string(dtype_name(dtype)) + " in dataset u; cast it to float32 first"});
  }
}

// Complex tensors are written in h5py's layout (members r and i) and read back from it: a
// complex dataset was "not numeric" to the reader, though eddy wrote it.
TEST_F(Hdf5VtkTest, ComplexDatasetsRoundTripInH5pysLayout) {
  const std::string path = file("complex.h5");
  const Tensor single = complex(tensor<float>({1.5f, -2.0f, 0.25f}), tensor<float>({0.5f, 3.0f, -1.0f}));
  const Tensor doubled = reshape(complex(arange(0, 4, 1, DType::f64), arange(4, 8, 1, DType::f64)), {2, 2});
  {
    Hdf5Writer writer(path);
    writer.write("single", single);
    writer.write("double", doubled);
    writer.commit();
  }
  for (const auto& [name, written] : {std::pair{"single", single}, std::pair{"double", doubled}}) {
    const Tensor read = read_hdf5(path, name);
    ASSERT_EQ(read.dtype(), written.dtype()) << name;
    EXPECT_EQ(read.shape(), written.shape()) << name;
    EXPECT_EQ(real(read).to_vector<double>(), real(written).to_vector<double>()) << name;
    EXPECT_EQ(imag(read).to_vector<double>(), imag(written).to_vector<double>()) << name;
  }
  EXPECT_EQ(imag(read_hdf5_rows(path, "double", 1, 2)).to_vector<double>(), (std::vector<double>{6, 7}));
}

TEST_F(Hdf5VtkTest, Hdf5RowsAndShapeWithoutReadingTheWhole) {
  const std::string path = file("rows.h5");
  {
    Hdf5Writer writer(path);
    writer.write("u", reshape(arange(0, 15, 1, DType::f32), {5, 3}));
    writer.commit();
  }
  EXPECT_EQ(hdf5_shape(path, "u"), (Shape{5, 3}));
  const Tensor rows = read_hdf5_rows(path, "u", 1, 4);
  EXPECT_EQ(rows.shape(), (Shape{3, 3}));
  EXPECT_EQ(rows.dtype(), DType::f32);
  EXPECT_EQ(rows.to_vector<double>(), (std::vector<double>{3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(read_hdf5_rows(path, "u", 5, 5).shape(), (Shape{0, 3}));
  try {
    read_hdf5_rows(path, "u", 4, 6);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rows [4, 6) of dataset 'u' [5, 3] are out of range"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(hdf5_shape(path, "v"), Error);
}

// HDF5's conversion clamped unsigned integers the memory type could not hold: a uint32 of 2^32 - 1
// came back 2^31 - 1, a uint64 of 2^63 came back 2^63 - 1, without a word.
TEST_F(Hdf5VtkTest, UnsignedIntegersAreReadWhole) {
  const std::string path = file("unsigned.h5");
  const hid_t out = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(out, 0);
  const hsize_t two = 2;
  const hid_t space = H5Screate_simple(1, &two, nullptr);
  const uint32_t small[] = {1, 4294967295u};
  const uint64_t fitting[] = {1, 9223372036854775807ull}, large[] = {1, 9223372036854775808ull};
  const auto write = [&](const char* name, hid_t type, const void* values) {
    const hid_t set = H5Dcreate2(out, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), 0);
    H5Dclose(set);
  };
  write("u32", H5T_NATIVE_UINT32, small);
  write("u64", H5T_NATIVE_UINT64, fitting);
  write("u64_large", H5T_NATIVE_UINT64, large);
  H5Sclose(space);
  H5Fclose(out);
  const Tensor u32 = read_hdf5(path, "u32");
  EXPECT_EQ(u32.dtype(), DType::i64);
  EXPECT_EQ(u32.to_vector<int64_t>(), (std::vector<int64_t>{1, 4294967295}));
  EXPECT_EQ(read_hdf5(path, "u64").to_vector<int64_t>(), (std::vector<int64_t>{1, 9223372036854775807}));
  expect_error([&] { read_hdf5(path, "u64_large"); },
               {"cannot read dataset 'u64_large'", "unsigned 64-bit integers", "2^63 or more"});
}

// A file HDF5 cannot open is refused with the reason: "cannot open" alone read the same for a
// folder, a text file and a truncated file.
TEST_F(Hdf5VtkTest, AFileThatCannotBeOpenedIsRefusedWithTheReason) {
  const std::string whole = file("whole.h5"), truncated = file("truncated.h5"), text = file("text.h5");
  {
    Hdf5Writer writer(whole);
    writer.write("u", arange(0, 1000, 1, DType::f64));
    writer.commit();
  }
  fs::copy_file(whole, truncated);
  fs::resize_file(truncated, 600);
  std::ofstream(text) << "x,u\n0,1\n";
  for (const auto& [path, reason] : std::vector<std::pair<std::string, std::string>>{
           {file("missing.h5"), "no such file"},
           {dir.string(), "it is a folder"},
           {text, "it is not an HDF5 file"},
           {truncated, "the file is damaged or truncated"}}) {
    expect_error([&] { read_hdf5(path, "u"); }, {cat("cannot open HDF5 file ", path, ": ", reason)});
    expect_error([&] { list_hdf5_datasets(path); }, {cat("cannot open HDF5 file ", path, ": ", reason)});
  }
}

// The operator trainer refuses a test set that reads its training rows, by this identity: a
// comparison of spellings let an HDF5 link inside the file through.
TEST_F(Hdf5VtkTest, OneStoredDatasetIsRecognisedThroughLinksAndSpellings) {
  const std::string path = file("linked.h5"), other = file("other.h5");
  for (const std::string& name : {path, other}) {
    Hdf5Writer writer(name);
    writer.write("train/u", arange(0, 6, 1, DType::f32));
    writer.write("train/v", arange(0, 6, 1, DType::f32));
    writer.commit();
  }
  {
    const hid_t out = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(out, 0);
    const hid_t create_groups = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(create_groups, 1);
    EXPECT_GE(H5Lcreate_soft("/train/u", out, "test/soft", create_groups, H5P_DEFAULT), 0);
    EXPECT_GE(H5Lcreate_hard(out, "train/u", out, "test/hard", create_groups, H5P_DEFAULT), 0);
    EXPECT_GE(H5Lcreate_external(other.c_str(), "train/u", out, "test/external", create_groups, H5P_DEFAULT), 0);
    H5Pclose(create_groups);
    H5Fclose(out);
  }
  fs::create_symlink(path, file("alias.h5"));
  for (const char* spelling : {"train/u", "/train//u", "./train/u", "test/soft", "test/hard"}) {
    EXPECT_TRUE(same_hdf5_dataset(path, "train/u", path, spelling)) << spelling;
    EXPECT_TRUE(same_hdf5_dataset(path, "train/u", file("alias.h5"), spelling)) << spelling;
  }
  EXPECT_TRUE(same_hdf5_dataset(path, "test/external", other, "train/u"));
  EXPECT_FALSE(same_hdf5_dataset(path, "train/u", path, "train/v"));
  EXPECT_FALSE(same_hdf5_dataset(path, "train/u", other, "train/u"));
  EXPECT_FALSE(same_hdf5_dataset(path, "test/external", path, "train/u"));
}

// A chunked dataset with no chunk written is a few bytes for any shape; 2^31 x 2^31 float64 are
// 2^65 bytes, which wrap around to 0 in 64 bits.
TEST_F(Hdf5VtkTest, DatasetShapeWhoseSizeOverflowsIsRefused) {
  const std::string path = file("huge.h5");
  const hsize_t dims[2] = {hsize_t{1} << 31, hsize_t{1} << 31}, chunk[2] = {1024, 1024};
  const hid_t h5 = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t space = H5Screate_simple(2, dims, nullptr);
  const hid_t layout = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(layout, 2, chunk);
  H5Dclose(H5Dcreate2(h5, "u", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, layout, H5P_DEFAULT));
  H5Pclose(layout);
  H5Sclose(space);
  H5Fclose(h5);
  expect_error([&] { read_hdf5(path, "u"); },
               {path + ": dataset 'u' has shape [2147483648, 2147483648], too large to address"});
}

// A 1-byte integer dataset is read as bool; one holding other values (labels, an image) is
// refused, naming the value and where it is, rather than read as all true.
TEST_F(Hdf5VtkTest, ByteDatasetHoldingOtherThanZeroAndOneIsRefused) {
  const std::string path = file("bytes.h5");
  const auto write = [&](const char* name, hid_t type, const std::vector<uint8_t>& values) {
    const hsize_t dims[2] = {values.size() / 2, 2};
    const hid_t h5 = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t set = H5Dcreate2(h5, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Dclose(set);
    H5Sclose(space);
    H5Fclose(h5);
  };
  H5Fclose(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  write("mask", H5T_NATIVE_UINT8, {0, 1, 1, 0});
  write("labels", H5T_NATIVE_UINT8, {0, 1, 1, 0, 250, 1});
  write("signed", H5T_NATIVE_INT8, {0, 1, 0xff, 0});
  const Tensor mask = read_hdf5(path, "mask");
  EXPECT_EQ(mask.dtype(), DType::b8);
  EXPECT_EQ(mask.to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
  expect_error([&] { read_hdf5(path, "labels"); },
               {path + ": dataset 'labels' holds 250 at element 4 (in row-major order); a 1-byte integer dataset "
                       "is read as bool and must hold only 0 and 1"});
  expect_error([&] { read_hdf5_rows(path, "labels", 1, 3); }, {"holds 250 at element 4"});
  EXPECT_EQ(read_hdf5_rows(path, "labels", 0, 2).to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
  expect_error([&] { read_hdf5(path, "signed"); }, {path + ": dataset 'signed' holds -1 at element 2"});
}

TEST_F(Hdf5VtkTest, AbandonedWriterLeavesNothingBehind) {
  {
    Hdf5Writer writer(file("abandoned.h5"));
    writer.write("x", tensor<double>({1.0}));
  }
  EXPECT_TRUE(fs::is_empty(dir));
}

// Files of this process may grow to `bytes` only, as on a nearly full disk: a write past it fails
// with EFBIG (SIGXFSZ, which would end the process, is ignored meanwhile).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &previous_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = previous_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &previous_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit previous_{};
  void (*previous_handler_)(int) = nullptr;
};

// The error named the temporary file (x.h5.tmp-8812) and no cause.
TEST_F(Hdf5VtkTest, AFileInAMissingFolderIsNamedAsGiven) {
  const std::string path = file("no/such/folder/x.h5");
  const std::string message = error_of([&] { Hdf5Writer writer(path); });
  EXPECT_NE(message.find("cannot create HDF5 file " + path + ": the folder " + file("no/such/folder") +
                         " does not exist"), std::string::npos) << message;
  EXPECT_EQ(message.find(".tmp-"), std::string::npos) << message;
  // A file where the folder should be was called a missing folder.
  std::ofstream(file("plain")) << "x";
  const std::string in_a_file = error_of([&] { Hdf5Writer writer(file("plain/x.h5")); });
  EXPECT_NE(in_a_file.find("cannot create HDF5 file " + file("plain/x.h5") + ": " + file("plain") +
                           " is a file, not a folder"), std::string::npos) << in_a_file;
  const std::string deeper = error_of([&] { Hdf5Writer writer(file("plain/sub/x.h5")); });
  EXPECT_NE(deeper.find(": " + file("plain") + " is a file, not a folder"), std::string::npos) << deeper;
}

TEST_F(Hdf5VtkTest, AWriteThatRunsOutOfSpaceFailsAndLeavesNoFile) {
  // VTK reported a full disk only in its error code: the cut-off file was moved into place and the
  // run ended as a success. HDF5's failed close crashed the process at exit.
  const Tensor field = arange(0, 40000, 1, DType::f64);
  {
    FileSizeLimit limit(64 * 1024);
    // eddy's one-line error, without VTK's own report of the failed pipeline request before it.
    ::testing::internal::CaptureStderr();
    expect_error([&] { write_vti(file("grid.vti"), {0, 0}, {1, 1}, {200, 200}, {{"u", field}}); },
                 {"cannot write the VTK image file " + file("grid.vti") + ": "});
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
    const Tensor points = reshape(field, {20000, 2});
    expect_error([&] { write_vtp(file("points.vtp"), points, {{"u", arange(0, 20000, 1, DType::f64)}}); },
                 {"cannot write the VTK point file " + file("points.vtp") + ": "});
    expect_error(
        [&] {
          Hdf5Writer writer(file("out.h5"));
          writer.write("u", field);
          writer.commit();
        },
        {file("out.h5")});
  }
  // A dataset smaller than HDF5's sieve buffer reaches the disk only as it is closed: that
  // failure was ignored, and the file was committed with most of the values zero.
  {
    FileSizeLimit limit(16 * 1024);
    expect_error(
        [&] {
          Hdf5Writer writer(file("small.h5"));
          writer.write("u", arange(0, 3000, 1, DType::f64));
          writer.commit();
        },
        {file("small.h5"), "cannot write dataset u"});
  }
  // A create that fails on a full disk left the empty temporary file behind.
  {
    FileSizeLimit limit(1);
    expect_error([&] { Hdf5Writer writer(file("none.h5")); }, {"cannot create HDF5 file " + file("none.h5")});
  }
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST_F(Hdf5VtkTest, ImageDataReadsBackWithVtk) {
  // u(i, j) = 10 i + j on a 3 x 4 grid in C order.
  std::vector<double> values;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) values.push_back(10 * i + j);
  }
  const std::string path = file("grid.vti");
  write_vti(path, {-1, 0}, {1.0, 0.5}, {3, 4}, {{"u", tensor(values)}});
  vtkNew<vtkXMLImageDataReader> reader;
  reader->SetFileName(path.c_str());
  reader->Update();
  vtkImageData* image = reader->GetOutput();
  int dims[3];
  image->GetDimensions(dims);
  EXPECT_EQ(dims[0], 3);
  EXPECT_EQ(dims[1], 4);
  vtkDataArray* u = image->GetPointData()->GetArray("u");
  ASSERT_NE(u, nullptr);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      const int ijk[3] = {i, j, 0};
      const vtkIdType id = image->ComputePointId(const_cast<int*>(ijk));
      EXPECT_EQ(u->GetTuple1(id), 10 * i + j);
      double p[3];
      image->GetPoint(id, p);
      EXPECT_DOUBLE_EQ(p[0], -1 + i);
      EXPECT_DOUBLE_EQ(p[1], 0.5 * j);
    }
  }
}

TEST_F(Hdf5VtkTest, PointCloudAndCollectionReadBack) {
  Tensor points = tensor<double>({0, 0, 1, 2, -1, 0.5}, {3, 2});
  const std::string path = file("points.vtp");
  write_vtp(path, points, {{"u", tensor<double>({1, 2, 3})}, {"velocity", tensor<double>({1, 0, 0, 1, 1, 1}, {3, 2})}});
  vtkNew<vtkXMLPolyDataReader> reader;
  reader->SetFileName(path.c_str());
  reader->Update();
  vtkPolyData* cloud = reader->GetOutput();
  ASSERT_EQ(cloud->GetNumberOfPoints(), 3);
  EXPECT_EQ(cloud->GetNumberOfVerts(), 3);
  double p[3];
  cloud->GetPoint(2, p);
  EXPECT_EQ(p[0], -1);
  EXPECT_EQ(p[1], 0.5);
  EXPECT_EQ(p[2], 0);
  EXPECT_EQ(cloud->GetPointData()->GetArray("u")->GetTuple1(1), 2);
  EXPECT_EQ(cloud->GetPointData()->GetArray("velocity")->GetNumberOfComponents(), 2);
  EXPECT_THROW(write_vtp(file("bad.vtp"), points, {{"u", tensor<double>({1, 2})}}), Error);

  write_pvd(file("series.pvd"), {{0.0, "step0.vti"}, {0.5, "step1.vti"}});
  const std::string xml = read_file(file("series.pvd"));
  EXPECT_NE(xml.find("timestep=\"0.5\" group=\"\" part=\"0\" file=\"step1.vti\""), std::string::npos);
}

}  // namespace
}  // namespace eddy::io
