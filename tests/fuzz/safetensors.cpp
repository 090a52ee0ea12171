// safetensors files (checkpoints, Hugging Face weights): parsed from memory, as
// load_safetensors does after reading the file, then every tensor read whole.
#include "eddy/io/safetensors.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace eddy;
  fuzz::expecting_errors([&] {
    const io::SafetensorsContents contents =
        io::decode_safetensors(std::string(fuzz::as_text(data, size)), "input.safetensors");
    for (const auto& [name, tensor] : contents.tensors) fuzz::read_every_byte(tensor);
  });
  return 0;
}
