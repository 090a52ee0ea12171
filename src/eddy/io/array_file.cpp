// CSV and NPY are parsed here, strictly: Debian packages no NPY reader (cnpy is not in the
// archive), and numeric CSV needs only line splitting plus std::from_chars; see
// docs/dependencies.md.

#include "eddy/io/array_file.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>
#include <sstream>

#include "eddy/core/checked_size.h"
#include "eddy/core/error.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/hdf5.h"
#include "eddy/ops/ops.h"

namespace eddy::io {
namespace {

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// Splits at `separator`, keeping empty parts, and trims each.
std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.push_back(trim(text.substr(start, end == std::string::npos ? std::string::npos : end - start)));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// ---- CSV ----

struct Csv {
  std::vector<std::string> names;
  std::vector<std::vector<double>> columns;
};

Csv parse_csv(const std::string& path) {
  std::istringstream in(read_file(path));
  Csv csv;
  std::string line;
  int64_t number = 0;
  bool header = true;
  while (std::getline(in, line)) {
    ++number;
    // The UTF-8 byte-order mark that Excel and pandas' utf-8-sig write before the header.
    if (number == 1 && line.starts_with("\xEF\xBB\xBF")) line = line.substr(3);
    if (trim(line).empty()) continue;
    if (header) {
      std::string names = trim(line);
      if (names[0] == '#') names = names.substr(1);  // np.savetxt(..., header="x,t,u")
      for (std::string name : split(names, ',')) {
        if (name.size() >= 2 && name.front() == '"' && name.back() == '"') name = name.substr(1, name.size() - 2);
        EDDY_CHECK(name.empty() || std::count(csv.names.begin(), csv.names.end(), name) == 0, path, ":", number,
                   ": the header names column '", name, "' twice");
        csv.names.push_back(name);
      }
      csv.columns.resize(csv.names.size());
      header = false;
      continue;
    }
    if (trim(line)[0] == '#') continue;  // a comment, such as np.savetxt's footer
    const std::vector<std::string> fields = split(line, ',');
    EDDY_CHECK(fields.size() == csv.names.size(), path, ":", number, ": ", fields.size(), " values, but the header names ",
               csv.names.size(), " columns (", joined(csv.names), ")");
    for (size_t c = 0; c < fields.size(); ++c) {
      const std::string& text = fields[c];
      double value = std::numeric_limits<double>::quiet_NaN();  // an empty field is a missing value
      if (!text.empty()) {
        const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
        auto [end, error] = std::from_chars(begin, text.data() + text.size(), value);
        EDDY_CHECK(error == std::errc() && end == text.data() + text.size(), path, ":", number, ": column '",
                   csv.names[c], "' holds '", text, "', which is not a number");
      }
      csv.columns[c].push_back(value);
    }
  }
  EDDY_CHECK(!header, path, ": the file is empty (a CSV file needs a header row naming its columns)");
  EDDY_CHECK(!csv.columns.empty() && !csv.columns[0].empty(), path, ": no rows of values below the header");
  return csv;
}

Tensor read_csv(const std::string& path, const std::string& key) {
  const Csv csv = parse_csv(path);
  const std::vector<std::string> names = split(key, ',');
  std::vector<const std::vector<double>*> selected;
  for (const std::string& name : names) {
    auto it = std::find(csv.names.begin(), csv.names.end(), name);
    EDDY_CHECK(!name.empty() && it != csv.names.end(), path, ": no column '", name, "' (columns: ", joined(csv.names),
               ")");
    selected.push_back(&csv.columns[it - csv.names.begin()]);
  }
  const int64_t rows = static_cast<int64_t>(csv.columns[0].size());
  if (selected.size() == 1) return tensor(*selected[0]);
  std::vector<double> values;
  values.reserve(rows * selected.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (const std::vector<double>* column : selected) values.push_back((*column)[r]);
  }
  return tensor(values, Shape{rows, static_cast<int64_t>(selected.size())});
}

// ---- NPY (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html) ----

// The text after `'key':` in the header dict, blanks skipped; empty when the key is absent.
std::string header_value(const std::string& header, const std::string& key) {
  const size_t at = header.find("'" + key + "':");
  if (at == std::string::npos) return "";
  return trim(header.substr(at + key.size() + 3));
}

DType npy_dtype(const std::string& path, const std::string& descr) {
  if (descr == "<f4") return DType::f32;
  if (descr == "<f8") return DType::f64;
  if (descr == "<i4") return DType::i32;
  if (descr == "<i8") return DType::i64;
  if (descr == "|b1") return DType::b8;
  EDDY_CHECK(descr.empty() || descr[0] != '>', path, ": dtype '", descr,
             "' is big-endian; save the array as little-endian (a.astype(a.dtype.newbyteorder('<')))");
  throw Error(cat(path, ": dtype '", descr,
                  "' is not supported (supported: float32 '<f4', float64 '<f8', int32 '<i4', int64 '<i8', bool '|b1')"));
}

Tensor read_npy_array(const std::string& path) {
  const std::string bytes = read_file(path);
  EDDY_CHECK(bytes.size() >= 10 && bytes.compare(0, 6, "\x93NUMPY") == 0, path,
             ": not an NPY file (it does not start with \\x93NUMPY)");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_length = 0, offset = 0;
  if (major == 1) {
    header_length = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    EDDY_CHECK(bytes.size() >= 12, path, ": truncated NPY header");
    for (int i = 3; i >= 0; --i) header_length = header_length << 8 | static_cast<unsigned char>(bytes[8 + i]);
    offset = 12;
  } else {
    throw Error(cat(path, ": NPY format version ", major, " is not supported (versions 1 to 3 are)"));
  }
  EDDY_CHECK(bytes.size() >= offset + header_length, path, ": truncated NPY header");
  const std::string header = bytes.substr(offset, header_length);
  offset += header_length;

  const std::string descr = header_value(header, "descr");
  EDDY_CHECK(descr.size() >= 2 && descr[0] == '\'', path, ": the NPY header has no plain 'descr' (structured dtypes ",
             "are not supported): ", trim(header));
  const std::string type = descr.substr(1, descr.find('\'', 1) - 1);
  const DType dtype = npy_dtype(path, type);
  const std::string fortran = header_value(header, "fortran_order");
  EDDY_CHECK(fortran.rfind("False", 0) == 0, path, ": ",
             fortran.rfind("True", 0) == 0 ? "Fortran-ordered arrays are not supported; save np.ascontiguousarray(a)"
                                           : "the NPY header has no fortran_order: " + trim(header));
  const std::string shape_text = header_value(header, "shape");
  EDDY_CHECK(!shape_text.empty() && shape_text[0] == '(' && shape_text.find(')') != std::string::npos, path,
             ": the NPY header has no shape: ", trim(header));
  Shape shape;
  for (const std::string& extent : split(shape_text.substr(1, shape_text.find(')') - 1), ',')) {
    if (extent.empty()) continue;  // the trailing comma of (n,)
    int64_t n = -1;
    auto [end, error] = std::from_chars(extent.data(), extent.data() + extent.size(), n);
    EDDY_CHECK(error == std::errc() && end == extent.data() + extent.size() && n >= 0, path,
               ": bad extent '", extent, "' in the NPY shape ", shape_text.substr(0, shape_text.find(')') + 1));
    shape.push_back(n);
  }
  EDDY_CHECK(shape.size() == 1 || shape.size() == 2, path, ": the array is ", shape.size(),
             "-D with shape ", shape, "; only 1-D and 2-D arrays are supported");
  EDDY_CHECK(shape[0] > 0, path, ": no rows of values (the array has shape ", shape, ")");
  const std::optional<int64_t> expected = checked_byte_size(shape, dtype);
  EDDY_CHECK(expected, path, ": the NPY header's shape ", shape, " of '", type,
             "' is too large to address (2^63 bytes or more); the file is corrupt");
  EDDY_CHECK(bytes.size() - offset == static_cast<size_t>(*expected), path, ": holds ", bytes.size() - offset,
             " bytes of data, but shape ", shape, " of '", type, "' needs ", *expected);
  return from_buffer(bytes.data() + offset, shape, dtype);
}

// Columns named by a key such as "2", "0:2" or "0,3"; `single` is set for a lone index.
std::vector<int64_t> npy_columns(const std::string& path, const std::string& key, int64_t count, bool& single) {
  std::vector<int64_t> columns;
  single = key.find_first_of(":,") == std::string::npos;
  auto index = [&](const std::string& text) {
    int64_t i = -1;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), i);
    EDDY_CHECK(!text.empty() && error == std::errc() && end == text.data() + text.size() && i >= 0, path, ": '", key,
               "' does not select columns (write ':' for the whole array, '2' for column 2, '0:2' or '0,3')");
    return i;
  };
  for (const std::string& part : split(key, ',')) {
    const size_t colon = part.find(':');
    const int64_t first = index(part.substr(0, colon));
    const int64_t last = colon == std::string::npos ? first + 1 : index(trim(part.substr(colon + 1)));
    EDDY_CHECK(last > first, path, ": the column range '", part, "' is empty");
    for (int64_t c = first; c < last; ++c) {
      EDDY_CHECK(c < count, path, ": column ", c, " (in '", key, "') is out of range; the array has ", count,
                 count == 1 ? " column" : " columns");
      columns.push_back(c);
    }
  }
  return columns;
}

Tensor read_npy(const std::string& path, const std::string& key) {
  Tensor array = read_npy_array(path);
  if (trim(key).empty() || trim(key) == ":") return array;
  const int64_t rows = array.shape()[0];
  if (array.dim() == 1) array = reshape(array, {rows, 1});
  bool single = false;
  const std::vector<int64_t> columns = npy_columns(path, trim(key), array.shape()[1], single);
  Tensor selected = index_select(array, 1, tensor(columns));
  return single ? reshape(selected, {rows}) : selected;
}

}  // namespace

ArrayFormat array_format(const std::string& path) {
  std::string extension = std::filesystem::path(path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return std::tolower(c); });
  if (extension == ".h5" || extension == ".hdf5") return ArrayFormat::hdf5;
  if (extension == ".csv") return ArrayFormat::csv;
  if (extension == ".npy") return ArrayFormat::npy;
  throw Error(cat(path, ": unknown file type '", extension, "' (supported: .h5/.hdf5, .csv, .npy)"));
}

Tensor read_array(const std::string& path, const std::string& key) {
  switch (array_format(path)) {
    case ArrayFormat::hdf5:
      return read_hdf5(path, key);
    case ArrayFormat::csv:
      return read_csv(path, key);
    case ArrayFormat::npy:
      return read_npy(path, key);
  }
  throw Error("unreachable");
}

}  // namespace eddy::io
