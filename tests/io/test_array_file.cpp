// NPY headers NumPy would never write, and files with no rows: refused naming the file and the
// fault, never read past the data (a size computed from a header's shape is checked for overflow).

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "eddy/eddy.h"
#include "eddy/io/array_file.h"
#include "support/expect_error.h"
#include "support/npy_file.h"

namespace eddy::io {
namespace {

namespace fs = std::filesystem;

class ArrayFileTest : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("eddy_array_file_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

// The files below differ from this one in their header only.
TEST_F(ArrayFileTest, HandWrittenNpyReads) {
  const std::string path = file("small.npy");
  const double values[] = {1, 2, 3, 4, 5, 6};
  write_npy(path, "<f8", "(2, 3)", std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  EXPECT_EQ(read_array(path, ":").shape(), (Shape{2, 3}));
  EXPECT_EQ(read_array(path, "1").to_vector<double>(), (std::vector<double>{2, 5}));
}

// 2^62 x 4 float64 are 2^67 bytes and 2^61 float64 are 2^64 bytes: both wrap around to 0 in 64
// bits, the size of the data that follows the header.
TEST_F(ArrayFileTest, NpyShapeWhoseSizeOverflowsIsRefused) {
  const std::string path = file("huge.npy");
  write_npy(path, "<f8", "(4611686018427387904, 4)");
  expect_error([&] { read_array(path, ":"); },
               {path + ": the NPY header's shape [4611686018427387904, 4] of '<f8' is too large to address"});
  write_npy(path, "<f8", "(2305843009213693952,)");
  expect_error([&] { read_array(path, "0"); }, {path, "shape [2305843009213693952]", "too large to address"});
}

// As a CSV file with a header and no rows is: observations with none would give a loss of 0.
TEST_F(ArrayFileTest, NpyWithNoRowsIsRefusedAsCsvIs) {
  const std::string npy = file("empty.npy"), csv = file("empty.csv");
  write_npy(npy, "<f8", "(0, 3)");
  expect_error([&] { read_array(npy, "0:2"); }, {npy + ": no rows of values (the array has shape [0, 3])"});
  write_npy(npy, "<f4", "(0,)");
  expect_error([&] { read_array(npy, ":"); }, {npy + ": no rows of values (the array has shape [0])"});
  std::ofstream(csv) << "x,t,u\n";
  expect_error([&] { read_array(csv, "x,t"); }, {csv + ": no rows of values below the header"});
}

// Excel and pandas' utf-8-sig put a byte-order mark before the header: its first column was
// named "\xEF\xBB\xBFx", so no column 'x' was found.
TEST_F(ArrayFileTest, CsvAfterAByteOrderMarkReadsItsFirstColumn) {
  const std::string csv = file("bom.csv");
  std::ofstream(csv) << "\xEF\xBB\xBFx,t,u\n0,0.5,1\n";
  EXPECT_EQ(read_array(csv, "x,u").to_vector<double>(), (std::vector<double>{0, 1}));
}

// NumPy reads any nonzero byte of a bool array as true (astype(np.uint8) gives 1); eddy's kernels
// load bool bytes as C++ bool, where a byte other than 0 or 1 is undefined behaviour.
TEST_F(ArrayFileTest, NpyBoolBytesOtherThanZeroAndOneReadAsTrue) {
  const std::string path = file("mask.npy");
  write_npy(path, "|b1", "(4,)", std::string("\x00\x01\x02\xfa", 4));
  const Tensor mask = read_array(path, ":");
  ASSERT_EQ(mask.dtype(), DType::b8);
  const uint8_t* bytes = static_cast<const uint8_t*>(mask.raw_data());
  EXPECT_EQ(std::vector<uint8_t>(bytes, bytes + 4), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(cast(mask, DType::f32).to_vector<float>(), (std::vector<float>{0, 1, 1, 1}));
}

}  // namespace
}  // namespace eddy::io
