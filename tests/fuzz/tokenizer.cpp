// tokenizer.json files (Hugging Face's byte-level BPE format, as `eddy lm` reads them): parsed
// from memory as BpeTokenizer::load does after reading the file. A tokenizer that loads must then
// encode any text and decode it back unchanged, and refuse ids it does not have with an
// eddy::Error; a round trip that loses text is a finding.
#include <stdexcept>

#include "eddy/io/tokenizer.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace eddy;
  fuzz::expecting_errors([&] {
    const io::BpeTokenizer tokenizer = io::BpeTokenizer::from_json(std::string(fuzz::as_text(data, size)), "tokenizer.json");
    const std::string text = "Hello, world! caf\xc3\xa9 \xe2\x82\xac 42\n\t<|endoftext|> \xff\xfe";
    if (tokenizer.decode(tokenizer.encode(text)) != text) throw std::logic_error("decode(encode(text)) != text");
    tokenizer.decode({-1});
  });
  return 0;
}
