// Greedy decode speed of a small GPT-2 and Llama (float32): tokens per second when generate()
// runs each new token alone against the KV cache, and when each token reruns the full forward
// over the whole sequence, which is what generation costs without a cache. Both must choose the
// same tokens. `lm_decode [NEW_TOKENS] [THREADS]`; the prompt is 16 tokens; best of 3 runs.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "eddy/eddy.h"
#include "eddy/nn/generation.h"
#include "thread_waits.h"

namespace {
using namespace eddy;

double best_seconds_of_three(const std::function<void()>& run) {
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

std::vector<int32_t> greedy_without_cache(nn::CausalLanguageModel& model, std::vector<int32_t> sequence,
                                          int64_t new_tokens) {
  NoGradGuard no_graph;
  std::vector<int32_t> generated;
  for (int64_t i = 0; i < new_tokens; ++i) {
    const Tensor logits = model(tensor(sequence, {1, int64_t(sequence.size())}));
    const std::vector<float> last = slice(logits, 1, -1, int64_t(sequence.size())).to_vector<float>();
    const auto token = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    generated.push_back(token);
    sequence.push_back(token);
  }
  return generated;
}

void measure(const char* name, nn::CausalLanguageModel& model, int64_t new_tokens) {
  model.eval();
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 16; ++i) prompt.push_back((i * 37) % int32_t(model.vocab_size()));
  nn::GenerationOptions options;
  options.temperature = 0;
  options.max_new_tokens = new_tokens;
  std::vector<int32_t> cached_tokens, uncached_tokens;
  const double cached = best_seconds_of_three([&] { cached_tokens = nn::generate(model, prompt, options); });
  const double uncached = best_seconds_of_three([&] {
    uncached_tokens = greedy_without_cache(model, prompt, new_tokens);
  });
  std::printf("| %s | %lld | %.1f | %.1f | %.2f | %s |\n", name, static_cast<long long>(model.parameter_count()),
              double(new_tokens) / cached, double(new_tokens) / uncached, uncached / cached,
              cached_tokens == uncached_tokens ? "yes" : "NO");
}

}  // namespace

int main(int argc, char** argv) {
  eddy::cli::use_short_thread_waits(argv);
  const int64_t new_tokens = argc > 1 ? std::atoll(argv[1]) : 240;
  set_num_threads(argc > 2 ? std::atoi(argv[2]) : 1);

  nn::Gpt2Options gpt2;
  gpt2.vocab_size = 8192;
  gpt2.context_length = 256;
  gpt2.hidden_size = 256;
  gpt2.layers = 6;
  gpt2.heads = 8;
  nn::Gpt2Model gpt2_model(gpt2);

  nn::LlamaOptions llama;
  llama.vocab_size = 8192;
  llama.context_length = 256;
  llama.hidden_size = 256;
  llama.intermediate_size = 688;
  llama.layers = 6;
  llama.heads = 8;
  llama.kv_heads = 2;
  nn::LlamaModel llama_model(llama);

  std::printf("%lld new tokens after a 16-token prompt, greedy, float32\n\n", static_cast<long long>(new_tokens));
  std::printf("| model | parameters | cached tokens/s | uncached tokens/s | speed-up | same tokens |\n");
  std::printf("|---|---|---|---|---|---|\n");
  measure("GPT-2 6x256, 8 heads", gpt2_model, new_tokens);
  measure("Llama 6x256, 8 heads, 2 kv heads", llama_model, new_tokens);
}
