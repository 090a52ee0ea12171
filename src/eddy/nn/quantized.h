#pragma once
// Quantisation of a trained language model's weights for inference: the matrices of the
// attention and MLP projections and the output head become int8 (one scale per output row) or
// int4 (one scale per group of columns of a row), symmetric around zero, while norms, biases and
// position embeddings stay float32 (a token embedding tied to the head holds the head's
// dequantised values). Decoding one token is a matrix-vector product per layer and one for the
// head, bound by the bytes of weights read, so reading 1 or 1/2 byte per weight instead of 4 is
// the speed-up. The kernels read the packed bytes directly and never build a float copy of a
// whole matrix.
//
// Activations stay float32 between layers. A quantised product multiplies them rounded to int8,
// each run of 32 columns of a row of x to a multiple of its own max |x| / 127 (round to nearest,
// ties to even), so that with AVX-512 VNNI it is an integer dot product; the rounding is the same
// on every CPU and for one row of x as for many.
//
// Packed layout (one row of `columns` values per output feature, stored in int32 words because
// eddy has no 8-bit dtype; AutoGPTQ stores its int4 weights in int32 words too):
//   int8: the values as two's-complement bytes in column order, the row padded with zeros to a
//         whole word; scale = max |w| / 127 over the row.
//   int4: groups of `group` columns (a multiple of 32), the last one padded with zeros; each run
//         of 32 values is 16 bytes, byte j holding value j in its low nibble and value j + 16 in
//         its high nibble, as q + 8 for q in [-7, 7]; scale = max |w| / 7 over the group.
// Words are little-endian, so the bytes lie in memory (and in a safetensors file) in that order.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "eddy/nn/transformer.h"

namespace eddy::nn {

struct QuantizedMatrix {
  int bits = 8;         // 8 or 4
  int64_t rows = 0;     // output features
  int64_t columns = 0;  // input features
  int64_t group = 0;    // columns per scale: the whole row for int8
  Tensor packed;        // int32 [rows, words per row], laid out as above
  Tensor scales;        // float32 [rows, groups]
};

// Quantises a float weight [out, in] (PyTorch's layout). bits is 8 or 4; group (int4 only) is a
// multiple of 32 from 32 to 128. Errors name the bad value.
QuantizedMatrix quantize_matrix(const Tensor& weight_out_in, int bits, int64_t group = 64);
// The float32 [rows, columns] matrix the packed one stands for: the reference the kernels are
// tested against, and what quantize_model writes back into the float weights.
Tensor dequantize(const QuantizedMatrix& matrix);
// x [..., columns] float32 -> x W^T + bias [..., rows], from the packed weights (x rounded as
// above); the bias (float32 [rows]) is optional. One row of x (decoding) is a vectorised
// matrix-vector product over output rows in parallel; more rows dequantise 64 output rows at a
// time into a small block and multiply it with GEMM. Refused while recording a graph or a
// capture: it has no derivative.
Tensor quantized_matmul(const Tensor& x, const QuantizedMatrix& matrix, const Tensor& bias = {});

struct QuantizationOptions {
  int bits = 4;
  int64_t group = 64;  // int4 only
};

// The Linear layers quantize_model replaces, by state-dict prefix ("transformer.h.0.attn.c_attn",
// "model.layers.0.mlp.gate_proj", ...): every projection of every block of a Gpt2Model or
// LlamaModel. Another model is an error.
std::vector<std::pair<std::string, std::shared_ptr<Linear>>> block_projections(CausalLanguageModel& model);

// Quantises each of block_projections in place (Linear::use_quantized_weight) and the output head
// (CausalLanguageModel::use_quantized_head), and sets their float weights to the dequantised
// values. The model must be float32 and not quantised already.
void quantize_model(CausalLanguageModel& model, const QuantizationOptions& options);

// A quantised model as tensors: the float state dict without the quantised weights, and for each
// of them "<name>.packed" (int32) and "<name>.scales" (float32): "<prefix>.weight.packed" for a
// projection, "transformer.wte.weight.packed" (or the untied "lm_head.weight.packed") for the head.
StateDict quantized_state_dict(CausalLanguageModel& model);
// The inverse, into a float32 model of the same shape: loads the float tensors and attaches the
// packed matrices with `options` (the file's bits and group). Every key must be present and
// known, with the shapes the model and options imply; a file whose head is float32 (written before
// heads were quantised) keeps a float head.
void load_quantized_state_dict(CausalLanguageModel& model, const StateDict& state, const QuantizationOptions& options);

}  // namespace eddy::nn
