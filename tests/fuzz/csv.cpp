// CSV files as observations and references read them (io/array_file.h): one column, and several
// in a chosen order.
#include "eddy/io/array_file.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace eddy;
  const fuzz::TempFile file("input.csv", fuzz::as_text(data, size));
  for (const char* key : {"x", "u", "t,x", "x,t,u"}) {
    fuzz::expecting_errors([&] { fuzz::read_every_byte(io::read_array(file.path(), key)); });
  }
  return 0;
}
