// eddy.BpeTokenizer: the byte-level BPE tokenizer of eddy/io/tokenizer.h, whose tokenizer.json
// files load in Hugging Face's `tokenizers` and back (docs/lm.md). Training and encoding run with
// the GIL released.

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <filesystem>

#include "bindings.h"
#include "eddy/io/tokenizer.h"

namespace eddy::python {

py::str decoded_text(const std::string& utf8) {
  return py::reinterpret_steal<py::str>(
      PyUnicode_DecodeUTF8(utf8.data(), static_cast<py::ssize_t>(utf8.size()), "replace"));
}

void bind_tokenizer(py::module_& m) {
  using io::BpeTokenizer;
  py::class_<BpeTokenizer>(m, "BpeTokenizer",
                           "Byte-level BPE (GPT-2's scheme) stored as Hugging Face's tokenizer.json.")
      .def_static("train",
                  [](const std::vector<std::string>& texts, int32_t vocab_size, int64_t min_frequency,
                     const std::vector<std::string>& special_tokens) {
                    io::BpeTrainingOptions options;
                    options.vocab_size = vocab_size;
                    options.min_frequency = min_frequency;
                    options.special_tokens = special_tokens;
                    GilRelease release;
                    return BpeTokenizer::train(texts, options);
                  },
                  py::arg("texts"), py::arg("vocab_size"), py::kw_only(), py::arg("min_frequency") = 2,
                  py::arg("special_tokens") = std::vector<std::string>{},
                  "Learns merges from the texts: special tokens get ids 0, 1, ..., then the 256 bytes, then "
                  "one token per merge until vocab_size, or until no pair occurs min_frequency times.")
      .def_static("load", [](const std::filesystem::path& path) { return BpeTokenizer::load(path.string()); },
                  py::arg("path"), "Reads a tokenizer.json; eddy.Error names the key it cannot read.")
      .def("save", [](const BpeTokenizer& self, const std::filesystem::path& path) { self.save(path.string()); },
           py::arg("path"), "Writes tokenizer.json atomically.")
      .def("encode", &BpeTokenizer::encode, py::arg("text"), py::call_guard<GilRelease>(),
           "The ids of the text (a list of int); special tokens in it are matched whole.")
      .def("decode",
           [](const BpeTokenizer& self, const std::vector<int32_t>& ids) { return decoded_text(self.decode(ids)); },
           py::arg("ids"), "The text of the ids, special tokens included.")
      .def_property_readonly("vocab_size", &BpeTokenizer::vocab_size)
      .def("token_to_id", &BpeTokenizer::token_to_id, py::arg("token"), "The token's id, or None.")
      .def("id_to_token", &BpeTokenizer::id_to_token, py::arg("id"))
      .def_property_readonly("special_tokens", &BpeTokenizer::special_tokens)
      .def_static("split_words", &BpeTokenizer::split_words, py::arg("text"),
                  "GPT-2's split of text into the words that BPE merges within.");
}

}  // namespace eddy::python
