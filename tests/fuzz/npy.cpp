// NPY files as observations and references read them (io/array_file.h): the whole array and
// columns picked by each of the key forms.
#include "eddy/io/array_file.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace eddy;
  const fuzz::TempFile file("input.npy", fuzz::as_text(data, size));
  for (const char* key : {":", "0", "1", "0:2", "1,0"}) {
    fuzz::expecting_errors([&] { fuzz::read_every_byte(io::read_array(file.path(), key)); });
  }
  return 0;
}
