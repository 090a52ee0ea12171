#pragma once
// NPY files written byte by byte, for tests of the reader with headers NumPy would never write.

#include <fstream>
#include <string>

namespace eddy {

// A version 1.0 NPY file: `descr` ("<f8") and `shape` as the header spells them ("(3, 2)"), then
// `data` as the array's bytes, whatever the header says.
inline void write_npy(const std::string& path, const std::string& descr, const std::string& shape,
                      const std::string& data = "") {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');  // NumPy aligns the data to 64 bytes
  header += '\n';
  const std::string magic("\x93NUMPY\x01\x00", 8);
  const char length[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  std::ofstream out(path, std::ios::binary);
  out << magic;
  out.write(length, 2);
  out << header << data;
}

}  // namespace eddy
