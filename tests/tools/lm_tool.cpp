// A small command-line bridge for tests/python/test_hf_interop.py:
//   lm_tool logits FOLDER TEXT OUTPUT
//       loads FOLDER as `eddy lm generate` does (an `eddy lm train` run, or a Hugging Face
//       folder), encodes TEXT with its tokenizer, runs the model on those tokens and saves OUTPUT
//       as safetensors: "ids" (int64 [1, T]) and "logits" ([1, T, vocab], the model's dtype).

#include <iostream>
#include <string>

#include "eddy/eddy.h"
#include "eddy/io/safetensors.h"
#include "solvers/lm/run.h"

using namespace eddy;

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "logits" && argc == 5) {
      lm::TrainedModel trained = lm::load_trained_model(argv[2]);
      const std::vector<int32_t> ids = trained.tokenizer->encode(argv[3]);
      const Tensor tokens = tensor<int64_t>(std::vector<int64_t>(ids.begin(), ids.end()),
                                            {1, static_cast<int64_t>(ids.size())});
      trained.model->eval();
      io::save_safetensors(argv[4], {{"ids", tokens}, {"logits", trained.model->forward(tokens)}});
      return 0;
    }
    std::cerr << "usage: lm_tool logits FOLDER TEXT OUTPUT\n";
    return 2;
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
