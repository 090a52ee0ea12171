// Greedy decode speed of GPT-2 models in float32 against the same weights quantised to int8 and
// int4 (nn/quantized.h): tokens per second through generate() with the KV cache, best of kRuns
// (a decode of a third of a second moves by a fifth or more between runs on a shared machine).
// `lm_quantized_decode [THREADS]`; a 16-token prompt, then as many tokens as fill the context.
// OpenMP threads wait as `eddy lm generate`'s do (GOMP_SPINCOUNT=1000, src/cli/thread_waits.h).
// The weights are freshly initialised, whose nearly equal logits make greedy tokens a poor
// measure of agreement: the perplexity of a trained run (eddy lm quantize) is the one to read.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "eddy/eddy.h"
#include "eddy/nn/generation.h"
#include "eddy/nn/quantized.h"
#include "thread_waits.h"

namespace {
using namespace eddy;

constexpr int kRuns = 7;

double tokens_per_second(nn::CausalLanguageModel& model) {
  model.eval();
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 16; ++i) prompt.push_back((i * 37) % int32_t(model.vocab_size()));
  nn::GenerationOptions options;
  options.temperature = 0;
  options.max_new_tokens = model.context_length() - 16;
  double best = 0;
  for (int run = 0; run < kRuns; ++run) {
    const auto start = std::chrono::steady_clock::now();
    const size_t tokens = nn::generate(model, prompt, options).size();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, double(tokens) / seconds);
  }
  return best;
}

void measure(const char* name, const nn::Gpt2Options& options) {
  nn::Gpt2Model reference(options);
  const double float32 = tokens_per_second(reference);
  std::printf("| %s | float32 | %.1f | 1.00 |\n", name, float32);
  for (int bits : {8, 4}) {
    nn::Gpt2Model model(options);
    nn::quantize_model(model, {bits, 64});
    const double quantized = tokens_per_second(model);
    std::printf("| %s | int%d%s | %.1f | %.2f |\n", name, bits, bits == 4 ? " (groups of 64)" : "", quantized,
                quantized / float32);
  }
}

nn::Gpt2Options gpt2(int64_t layers, int64_t hidden, int64_t heads, int64_t vocab, int64_t context) {
  nn::Gpt2Options options;
  options.layers = layers;
  options.hidden_size = hidden;
  options.heads = heads;
  options.vocab_size = vocab;
  options.context_length = context;
  options.embedding_dropout = options.attention_dropout = options.residual_dropout = 0;
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  eddy::cli::use_short_thread_waits(argv);
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  set_num_threads(threads);
  std::printf("greedy decoding after a 16-token prompt to the context, %d thread(s), best of %d\n\n", threads, kRuns);
  std::printf("| model | weights | tokens/s | vs float32 |\n");
  std::printf("|---|---|---|---|\n");
  measure("GPT-2 6x320, 5 heads, vocabulary 4096, context 128", gpt2(6, 320, 5, 4096, 128));
  measure("GPT-2 12x768, 12 heads, vocabulary 8192, context 256", gpt2(12, 768, 12, 8192, 256));
}
