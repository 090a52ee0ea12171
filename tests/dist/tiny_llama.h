#pragma once
// The small Llama the auto-parallel tests train on several ranks (test_auto_parallel.cpp,
// checkpoint_on_ranks.cpp): its options, a fixed batch of windows, and Megatron's placements of
// its projections.

#include <string>
#include <utility>
#include <vector>

#include "eddy/dist/dtensor.h"
#include "eddy/eddy.h"
#include "eddy/nn/transformer.h"

namespace eddy::testing {

// Two layers of width 16, four heads, float64.
inline nn::LlamaOptions tiny_llama_options() {
  nn::LlamaOptions options;
  options.vocab_size = 32;
  options.hidden_size = 16;
  options.intermediate_size = 32;
  options.layers = 2;
  options.heads = 4;
  options.context_length = 16;
  options.dtype = DType::f64;
  options.seed = 3;
  return options;
}

// Four windows of 8 tokens and the next token of each position, the same on every rank.
inline std::pair<Tensor, Tensor> tiny_llama_batch(int64_t vocab_size) {
  const Tensor tokens = Tensor::empty({4, 9}, DType::i64);
  for (int64_t i = 0; i < tokens.numel(); ++i) tokens.data<int64_t>()[i] = (7 * i + i / 9) % vocab_size;
  return {slice(tokens, 1, 0, 8), slice(tokens, 1, 1, 9)};
}

// Megatron's layout: the projections are [out, in], so the column-parallel ones (queries, keys,
// values, gate, up) split their rows and the row-parallel ones (output, down) their columns.
inline dist::ShardingPlan megatron_plan(const std::vector<Placement>& columns, const std::vector<Placement>& rows) {
  dist::ShardingPlan plan;
  for (const char* name : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"}) {
    plan.emplace_back(std::string("model.layers.*.") + name + ".weight", columns);
  }
  plan.emplace_back("model.layers.*.self_attn.o_proj.weight", rows);
  plan.emplace_back("model.layers.*.mlp.down_proj.weight", rows);
  return plan;
}

}  // namespace eddy::testing
