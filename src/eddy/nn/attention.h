#pragma once
// Causal scaled dot-product attention (Vaswani et al. 2017) with grouped-query heads (Ainslie et
// al. 2023), composed of primitives and as one fused primitive.
//
// queries [batch, heads, T, head_dim] are the last T of the S positions that keys and values
// [batch, kv_heads, S, head_dim] cover (S = T without a cache); query t sees the keys up to its
// own position. Query head h reads key/value head h / (heads / kv_heads), so kv_heads must divide
// heads; kv_heads = heads is multi-head attention. Scores are scaled by 1 / sqrt(head_dim).

#include "eddy/core/tensor.h"

namespace eddy::nn {

// softmax(q k^T / sqrt(head_dim)) over the visible keys: [batch, heads, T, S].
Tensor causal_attention_weights(const Tensor& queries, const Tensor& keys);
// weights [batch, heads, T, S] applied to values [batch, kv_heads, S, head_dim], grouped as in
// causal_attention_weights: [batch, heads, T, head_dim].
Tensor attend(const Tensor& weights, const Tensor& values);

// attend(causal_attention_weights(q, k), v): [batch, heads, T, head_dim]. On the CPU this is the
// fused primitive `causal_attention` (backends/cpu/attention.cpp: blocked, with the softmax taken
// online, no [T, S] matrix stored, forward and backward), which bench/lm/attention.py measured
// 0.95x to 1.8x the speed of the composed form for T from 128 to 2048 (docs/benchmarks.md). The
// composed form serves devices without a fused kernel (all but the CPU yet), distributed tensors
// (whose sharding rules it has) and eager forward mode. Both differentiate to any order: the
// fused primitive's first reverse derivative is its own backward kernel, and the higher ones come
// from the composed form.
Tensor causal_attention(const Tensor& queries, const Tensor& keys, const Tensor& values);
// The composed form alone: two products and a masked softmax.
Tensor composed_causal_attention(const Tensor& queries, const Tensor& keys, const Tensor& values);

}  // namespace eddy::nn
