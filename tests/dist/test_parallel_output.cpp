// One HDF5 file and one ParaView image written by all ranks together: each rank's block of rows
// through parallel HDF5, and each rank's .vti piece joined by a .pvti. Read back with the serial
// HDF5 reader and VTK's own parallel-image reader, they hold the whole array. Run plainly, under
// `mpirun -np 1` and under `mpirun -np 2`, like the collectives' tests.

#include <gtest/gtest.h>
#include <unistd.h>
#include <vtkDataArray.h>
#include <vtkImageData.h>
#include <vtkNew.h>
#include <vtkPointData.h>
#include <vtkXMLPImageDataReader.h>

#include <filesystem>

#include "eddy/dist/data_parallel.h"
#include "eddy/eddy.h"
#include "eddy/io/hdf5.h"
#include "eddy/io/vtk.h"
#include "support/expect_error.h"
#include "support/job_directory.h"

namespace eddy::dist {
namespace {

namespace fs = std::filesystem;

class ParallelOutput : public ::testing::Test {
 protected:

  // The whole array [rows, 3, 2]: element (i, j, k) = 100 i + 10 j + k.
  static Tensor expected(int64_t rows) {
    std::vector<double> values;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        for (int64_t k = 0; k < 2; ++k) values.push_back(100.0 * i + 10.0 * j + k);
      }
    }
    return tensor(values, {rows, 3, 2});
  }

  JobDirectory job_{"eddy_parallel_output_"};
  const fs::path& dir_ = job_.path();
};

TEST_F(ParallelOutput, RankBlocksOfRowsMakeOneHdf5File) {
  // 7 rows: uneven blocks on 2 ranks; 1 row: an empty block on rank 1.
  for (const int64_t rows : {7, 1}) {
    SCOPED_TRACE(cat(rows, " rows, rank ", world().rank()));
    const std::string path = (dir_ / cat("rows", rows, ".h5")).string();
    const Tensor all = expected(rows);
    const auto [first, last] = shard(0, rows, world().rank(), world().size());
    {
      io::Hdf5Writer out(path, world());
      out.write_rows("fields/f", slice(all, 0, first, last), first, rows);
      out.write_rows("fields/as_float32", cast(slice(all, 0, first, last), DType::f32), first, rows);
      // Shared values: every rank passes the same ones, rank 0's are stored.
      out.write("history/loss", tensor(std::vector<double>{3.0, 2.0, 1.0}));
      out.write_string("config", "rows: " + std::to_string(rows));
      out.set_attribute("/", "description", "parallel");
      out.commit();
    }
    EXPECT_TRUE(fs::exists(path));  // every rank returns from commit() once the file is in place
    EXPECT_EQ(max(abs(io::read_hdf5(path, "fields/f") - all)).item<double>(), 0.0);
    EXPECT_EQ(io::read_hdf5(path, "fields/as_float32").dtype(), DType::f32);
    EXPECT_EQ(max(abs(cast(io::read_hdf5(path, "fields/as_float32"), DType::f64) - all)).item<double>(), 0.0);
    EXPECT_EQ(io::read_hdf5(path, "history/loss").to_vector<double>(), (std::vector<double>{3.0, 2.0, 1.0}));
    world().barrier();  // all have read before the next iteration's rank 0 writes
  }
  // No temporary file is left beside the results.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

TEST_F(ParallelOutput, BlocksThatDoNotFitTheRowsAreErrors) {
  io::Hdf5Writer out((dir_ / cat("bad_rank", world().rank(), ".h5")).string());
  expect_error([&] { out.write_rows("f", zeros({3, 2}), 2, 4); }, {"rows [2, 5)", "f", "4 rows"});
  expect_error([&] { out.write_rows("g", zeros({3, 2}), 1, 4); }, {"single process", "all 4 rows", "g"});
}

TEST_F(ParallelOutput, PiecesJoinIntoTheWholeImage) {
  // A 9 x 4 grid split along x; each piece repeats the next one's first row.
  const int64_t nx = 9, ny = 4;
  std::vector<double> values;
  for (int64_t i = 0; i < nx; ++i) {
    for (int64_t j = 0; j < ny; ++j) values.push_back(10.0 * i + j);
  }
  const Tensor field = tensor(values, {nx * ny});
  const std::vector<double> origin{-1.0, 0.0}, spacing{0.25, 0.5};
  std::vector<io::VtiPiece> pieces;
  for (int r = 0; r < world().size(); ++r) {
    const auto [first, last] = shard(0, nx, r, world().size());
    pieces.push_back({first, std::min(last + 1, nx) - first, cat("piece", r, ".vti")});
  }
  const io::VtiPiece& mine = pieces[static_cast<size_t>(world().rank())];
  io::write_vti_piece((dir_ / mine.file).string(), origin, spacing, mine.first, {mine.rows, ny},
                      {{"u", slice(field, 0, mine.first * ny, (mine.first + mine.rows) * ny)}});
  if (world().rank() == 0) {
    io::write_pvti((dir_ / "whole.pvti").string(), origin, spacing, {nx, ny}, pieces, {{"u", field}});
  }
  world().barrier();

  vtkNew<vtkXMLPImageDataReader> reader;
  reader->SetFileName((dir_ / "whole.pvti").c_str());
  reader->Update();
  vtkImageData* image = reader->GetOutput();
  int dims[3];
  image->GetDimensions(dims);
  ASSERT_EQ(dims[0], nx);
  ASSERT_EQ(dims[1], ny);
  EXPECT_DOUBLE_EQ(image->GetOrigin()[0], -1.0);
  EXPECT_DOUBLE_EQ(image->GetSpacing()[1], 0.5);
  vtkDataArray* u = image->GetPointData()->GetArray("u");
  ASSERT_NE(u, nullptr);
  for (int i = 0; i < nx; ++i) {
    for (int j = 0; j < ny; ++j) {
      int ijk[3] = {i, j, 0};
      EXPECT_EQ(u->GetTuple1(image->ComputePointId(ijk)), 10.0 * i + j) << i << ", " << j;
    }
  }
}

}  // namespace
}  // namespace eddy::dist
