#include "eddy/io/vtk.h"

#include <unistd.h>
#include <vtkCellArray.h>
#include <vtkDoubleArray.h>
#include <vtkErrorCode.h>
#include <vtkImageData.h>
#include <vtkNew.h>
#include <vtkObject.h>
#include <vtkPointData.h>
#include <vtkPoints.h>
#include <vtkPolyData.h>
#include <vtkXMLImageDataWriter.h>
#include <vtkXMLPolyDataWriter.h>

#include <cstdio>
#include <sstream>

#include "eddy/io/atomic_file.h"
#include "eddy/ops/ops.h"

namespace eddy::io {
namespace {

// Writes `writer`'s input to a temporary file beside `path` and moves it into place. VTK reports
// a failed write, a full disk among them, in its error code and not in Write()'s result, which
// stayed 1 while the file was cut short and then moved into place; a failure removes the
// temporary file instead.
// VTK's own report of a failed write (a dozen lines from the pipeline's executive, another object
// than the writer) is kept off the terminal while writing: the error below says it in one line.
class QuietVtk {
 public:
  QuietVtk() : previous_(vtkObject::GetGlobalWarningDisplay()) { vtkObject::GlobalWarningDisplayOff(); }
  ~QuietVtk() { vtkObject::SetGlobalWarningDisplay(previous_); }
  QuietVtk(const QuietVtk&) = delete;
  QuietVtk& operator=(const QuietVtk&) = delete;

 private:
  int previous_;
};

void write_in_place(vtkXMLWriter& writer, const std::string& path, const char* what) {
  const std::string temporary = temporary_for(path, ::getpid());
  writer.SetFileName(temporary.c_str());
  writer.SetDataModeToAppended();
  writer.EncodeAppendedDataOff();
  bool written = false;
  {
    QuietVtk quiet;
    written = writer.Write() == 1;
  }
  const unsigned long code = writer.GetErrorCode();
  if (!written || code != vtkErrorCode::NoError) {
    std::remove(temporary.c_str());
    const std::string reason = code == vtkErrorCode::OutOfDiskSpaceError ? "the disk is full"
                               : code != vtkErrorCode::NoError          ? vtkErrorCode::GetStringFromErrorCode(code)
                                                                        : "the VTK writer failed";
    throw Error(cat("cannot write the VTK ", what, " ", path, ": ", reason));
  }
  move_into_place(temporary, path);
}

// A field as a VTK array; VTK stores x fastest, so grid fields are transposed from C order.
vtkNew<vtkDoubleArray> to_vtk_array(const std::string& name, const Tensor& values, int64_t count,
                                     const std::vector<int64_t>& grid_dims) {
  EDDY_CHECK(values.dim() >= 1 && values.shape()[0] == count && values.dim() <= 2, "vtk: field '", name,
             "' has shape ", values.shape(), ", expected [", count, "] or [", count, ", components]");
  const int64_t components = values.dim() == 2 ? values.shape()[1] : 1;
  std::vector<double> data = values.detach().to_vector<double>();
  vtkNew<vtkDoubleArray> array;
  array->SetName(name.c_str());
  array->SetNumberOfComponents(static_cast<int>(components));
  array->SetNumberOfTuples(count);
  // C-order multi-index (i0, i1, i2) of the VTK point index (x fastest).
  const int64_t d0 = grid_dims.size() > 0 ? grid_dims[0] : count;
  const int64_t d1 = grid_dims.size() > 1 ? grid_dims[1] : 1;
  const int64_t d2 = grid_dims.size() > 2 ? grid_dims[2] : 1;
  for (int64_t vtk_index = 0; vtk_index < count; ++vtk_index) {
    int64_t source = vtk_index;
    if (!grid_dims.empty()) {
      const int64_t i0 = vtk_index % d0, i1 = (vtk_index / d0) % d1, i2 = vtk_index / (d0 * d1);
      source = (i0 * d1 + i1) * d2 + i2;
    }
    for (int64_t c = 0; c < components; ++c) array->SetComponent(vtk_index, static_cast<int>(c), data[source * components + c]);
  }
  return array;
}

}  // namespace

void write_vti(const std::string& path, const std::vector<double>& origin, const std::vector<double>& spacing,
               const std::vector<int64_t>& dims, const PointFields& fields) {
  write_vti_piece(path, origin, spacing, 0, dims, fields);
}

void write_vti_piece(const std::string& path, const std::vector<double>& origin, const std::vector<double>& spacing,
                     int64_t first, const std::vector<int64_t>& dims, const PointFields& fields) {
  EDDY_CHECK(!dims.empty() && dims.size() <= 3 && origin.size() == dims.size() && spacing.size() == dims.size(),
             "write_vti: need 1 to 3 grid dimensions with matching origin and spacing, got ", dims.size(), ", ",
             origin.size(), " and ", spacing.size());
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  vtkNew<vtkImageData> image;
  int extent[6] = {0, 0, 0, 0, 0, 0};
  double o[3] = {0, 0, 0}, s[3] = {1, 1, 1};
  for (size_t i = 0; i < dims.size(); ++i) {
    extent[2 * i] = static_cast<int>(i == 0 ? first : 0);
    extent[2 * i + 1] = extent[2 * i] + static_cast<int>(dims[i]) - 1;
    o[i] = origin[i];
    s[i] = spacing[i];
  }
  image->SetExtent(extent);
  image->SetOrigin(o);
  image->SetSpacing(s);
  for (const auto& [name, values] : fields) image->GetPointData()->AddArray(to_vtk_array(name, values, count, dims));
  vtkNew<vtkXMLImageDataWriter> writer;
  writer->SetInputData(image);
  write_in_place(*writer, path, "image file");
}

void write_vtp(const std::string& path, const Tensor& points, const PointFields& fields) {
  EDDY_CHECK(points.dim() == 2 && points.shape()[1] >= 1 && points.shape()[1] <= 3, "write_vtp: points have shape ",
             points.shape(), ", expected [N, 1..3]");
  const int64_t count = points.shape()[0], d = points.shape()[1];
  std::vector<double> xyz = points.detach().to_vector<double>();
  vtkNew<vtkPoints> vtk_points;
  vtk_points->SetDataTypeToDouble();
  vtk_points->SetNumberOfPoints(count);
  vtkNew<vtkCellArray> vertices;
  for (int64_t i = 0; i < count; ++i) {
    double p[3] = {0, 0, 0};
    for (int64_t c = 0; c < d; ++c) p[c] = xyz[i * d + c];
    vtk_points->SetPoint(i, p);
    vtkIdType id = i;
    vertices->InsertNextCell(1, &id);
  }
  vtkNew<vtkPolyData> cloud;
  cloud->SetPoints(vtk_points);
  cloud->SetVerts(vertices);
  for (const auto& [name, values] : fields) cloud->GetPointData()->AddArray(to_vtk_array(name, values, count, {}));
  vtkNew<vtkXMLPolyDataWriter> writer;
  writer->SetInputData(cloud);
  write_in_place(*writer, path, "point file");
}

void write_pvti(const std::string& path, const std::vector<double>& origin, const std::vector<double>& spacing,
                const std::vector<int64_t>& dims, const std::vector<VtiPiece>& pieces, const PointFields& fields) {
  EDDY_CHECK(!dims.empty() && dims.size() <= 3 && origin.size() == dims.size() && spacing.size() == dims.size(),
             "write_pvti: need 1 to 3 grid dimensions with matching origin and spacing, got ", dims.size(), ", ",
             origin.size(), " and ", spacing.size());
  auto extent = [&](int64_t first, int64_t rows) {
    std::ostringstream text;
    for (size_t i = 0; i < 3; ++i) {
      const int64_t begin = i == 0 ? first : 0;
      const int64_t size = i == 0 ? rows : i < dims.size() ? dims[i] : 1;
      text << (i ? " " : "") << begin << " " << begin + size - 1;
    }
    return text.str();
  };
  auto triple = [](const std::vector<double>& values, double missing) {
    std::ostringstream text;
    text.precision(17);
    for (size_t i = 0; i < 3; ++i) text << (i ? " " : "") << (i < values.size() ? values[i] : missing);
    return text.str();
  };
  std::ostringstream xml;
  xml << "<?xml version=\"1.0\"?>\n"
      << "<VTKFile type=\"PImageData\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n"
      << "  <PImageData WholeExtent=\"" << extent(0, dims[0]) << "\" GhostLevel=\"0\" Origin=\"" << triple(origin, 0)
      << "\" Spacing=\"" << triple(spacing, 1) << "\">\n    <PPointData>\n";
  for (const auto& [name, values] : fields) {
    xml << "      <PDataArray type=\"Float64\" Name=\"" << name << "\" NumberOfComponents=\""
        << (values.dim() == 2 ? values.shape()[1] : 1) << "\"/>\n";
  }
  xml << "    </PPointData>\n";
  for (const VtiPiece& piece : pieces) {
    xml << "    <Piece Extent=\"" << extent(piece.first, piece.rows) << "\" Source=\"" << piece.file << "\"/>\n";
  }
  xml << "  </PImageData>\n</VTKFile>\n";
  write_file_atomically(path, xml.str());
}

void write_pvd(const std::string& path, const std::vector<std::pair<double, std::string>>& entries) {
  std::ostringstream xml;
  xml << "<?xml version=\"1.0\"?>\n"
      << "<VTKFile type=\"Collection\" version=\"0.1\" byte_order=\"LittleEndian\">\n  <Collection>\n";
  xml.precision(17);
  for (const auto& [time, file] : entries) {
    xml << "    <DataSet timestep=\"" << time << "\" group=\"\" part=\"0\" file=\"" << file << "\"/>\n";
  }
  xml << "  </Collection>\n</VTKFile>\n";
  write_file_atomically(path, xml.str());
}

}  // namespace eddy::io
