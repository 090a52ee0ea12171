// A small command-line bridge for tests/python/test_tokenizer_hf.py:
//   tokenizer_tool train CORPUS VOCAB_SIZE OUTPUT [SPECIAL...]
//       trains on the file CORPUS (min_frequency 2) and saves OUTPUT as tokenizer.json;
//   tokenizer_tool encode TOKENIZER TEXTS
//       loads TOKENIZER, encodes each string of the JSON array in the file TEXTS and prints
//       {"ids": [[...], ...], "decoded": ["...", ...]}.

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "eddy/core/error.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/tokenizer.h"

using namespace eddy;

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "train" && argc >= 5) {
      io::BpeTrainingOptions options;
      options.vocab_size = std::stoi(argv[3]);
      options.min_frequency = 2;
      options.special_tokens.assign(argv + 5, argv + argc);
      io::BpeTokenizer::train_from_file(argv[2], options).save(argv[4]);
      return 0;
    }
    if (command == "encode" && argc == 4) {
      const io::BpeTokenizer tokenizer = io::BpeTokenizer::load(argv[2]);
      nlohmann::json out{{"ids", nlohmann::json::array()}, {"decoded", nlohmann::json::array()}};
      for (const nlohmann::json& text : nlohmann::json::parse(io::read_file(argv[3]))) {
        const std::vector<int32_t> ids = tokenizer.encode(text.get<std::string>());
        out["ids"].push_back(ids);
        out["decoded"].push_back(tokenizer.decode(ids));
      }
      std::cout << out.dump() << "\n";
      return 0;
    }
    std::cerr << "usage: tokenizer_tool train CORPUS VOCAB_SIZE OUTPUT [SPECIAL...]\n"
                 "       tokenizer_tool encode TOKENIZER TEXTS\n";
    return 2;
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
