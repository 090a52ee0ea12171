#include "eddy/nn/quantized.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>

#include "eddy/core/autograd.h"
#include "eddy/core/tracing.h"
#include "eddy/nn/quantized_kernels.h"
#include "eddy/ops/ops.h"

namespace eddy::nn {
namespace {

using quantized_kernels::ceil_div;
using quantized_kernels::kInt4Run;
using quantized_kernels::row_bytes;

constexpr int64_t kBlockRows = 64;  // output rows dequantised at a time for several input rows

void check_options(int bits, int64_t group) {
  EDDY_CHECK(bits == 8 || bits == 4, "quantize: bits must be 8 or 4, got ", bits);
  EDDY_CHECK(bits == 8 || (group >= 32 && group <= 128 && group % kInt4Run == 0),
             "quantize: the int4 group must be 32, 64, 96 or 128 columns, got ", group);
}

}  // namespace

QuantizedMatrix quantize_matrix(const Tensor& weight_out_in, int bits, int64_t group) {
  check_options(bits, group);
  EDDY_CHECK(weight_out_in.dim() == 2 && is_floating(weight_out_in.dtype()),
             "quantize: expected a float matrix [out, in], got ", weight_out_in.dtype(), " ", weight_out_in.shape());
  QuantizedMatrix m;
  m.bits = bits;
  m.rows = weight_out_in.shape()[0];
  m.columns = weight_out_in.shape()[1];
  m.group = bits == 8 ? m.columns : group;
  const int64_t groups = ceil_div(m.columns, m.group), stride = row_bytes(bits, m.columns, m.group);
  const std::vector<float> w = weight_out_in.to_vector<float>();
  std::vector<uint8_t> bytes(static_cast<size_t>(m.rows * stride), 0);
  std::vector<float> scales(static_cast<size_t>(m.rows * groups));
  const int largest = bits == 8 ? 127 : 7;
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t begin = g * m.group, end = std::min(m.columns, begin + m.group);
      float extent = 0;
      for (int64_t c = begin; c < end; ++c) extent = std::max(extent, std::abs(w[r * m.columns + c]));
      const float scale = extent / static_cast<float>(largest);
      scales[r * groups + g] = scale;
      uint8_t* row = bytes.data() + r * stride;
      for (int64_t c = begin; c < end; ++c) {
        const float ratio = scale > 0 ? w[r * m.columns + c] / scale : 0.0f;
        const int q = std::clamp(static_cast<int>(std::lround(ratio)), -largest, largest);
        if (bits == 8) {
          row[c] = static_cast<uint8_t>(static_cast<int8_t>(q));
        } else {
          const int64_t within = c % kInt4Run;
          uint8_t& byte = row[(c / kInt4Run) * 16 + within % 16];
          byte |= static_cast<uint8_t>((q + 8) << (within < 16 ? 0 : 4));
        }
      }
    }
  }
  m.packed = Tensor::empty({m.rows, stride / 4}, DType::i32);
  std::memcpy(m.packed.raw_data(), bytes.data(), bytes.size());
  m.scales = Tensor::empty({m.rows, groups}, DType::f32);
  std::copy(scales.begin(), scales.end(), m.scales.data<float>());
  return m;
}

Tensor dequantize(const QuantizedMatrix& matrix) {
  Tensor out = Tensor::empty({matrix.rows, matrix.columns}, DType::f32);
  quantized_kernels::dequantize_rows(matrix, 0, matrix.rows, out.data<float>());
  return out;
}

Tensor quantized_matmul(const Tensor& x, const QuantizedMatrix& m, const Tensor& bias) {
  EDDY_CHECK(x.dtype() == DType::f32 && x.dim() >= 1 && x.shape().back() == m.columns,
             "quantized_matmul: expected float32 [..., ", m.columns, "], got ", x.dtype(), " ", x.shape());
  EDDY_CHECK(!bias.defined() || (bias.dtype() == DType::f32 && bias.shape() == Shape{m.rows}),
             "quantized_matmul: the bias must be float32 [", m.rows, "], got ", bias.dtype(), " ", bias.shape());
  EDDY_CHECK(active_trace_recorder() == nullptr && !x.is_abstract(),
             "quantized_matmul: a quantised layer cannot be captured (it is for eager inference)");
  EDDY_CHECK(!(GradMode::enabled() && x.requires_grad()),
             "quantized_matmul: a quantised layer has no derivative; run inference under NoGradGuard (in Python, "
             "`with eddy.no_grad():`)");
  const Tensor input = contiguous(x);
  const int64_t n = input.numel() / m.columns;
  Shape shape = x.shape();
  shape.back() = m.rows;
  Tensor y = Tensor::empty(shape, DType::f32);
  const float* in = input.data<float>();
  float* out = y.data<float>();
  if (n == 1) {
    quantized_kernels::matrix_vector(m, in, out);
  } else {
    const Tensor rows_of_x = Tensor::empty({n, m.columns}, DType::f32);
    float* rounded = rows_of_x.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      quantized_kernels::round_activations(in + i * m.columns, m.columns, rounded + i * m.columns);
    }
    const int64_t blocks = ceil_div(m.rows, kBlockRows);
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t first = b * kBlockRows, end = std::min(m.rows, first + kBlockRows);
      Tensor block = Tensor::empty({end - first, m.columns}, DType::f32);
      quantized_kernels::dequantize_rows(m, first, end, block.data<float>());
      const Tensor part = contiguous(matmul(rows_of_x, transpose(block)));
      const float* from = part.data<float>();
      for (int64_t i = 0; i < n; ++i) std::copy_n(from + i * (end - first), end - first, out + i * m.rows + first);
    }
  }
  // Added here rather than as an op after: in decoding, an eager add costs more than this loop.
  if (bias.defined()) {
    const Tensor dense_bias = contiguous(bias);
    const float* b = dense_bias.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t r = 0; r < m.rows; ++r) out[i * m.rows + r] += b[r];
    }
  }
  return y;
}

std::vector<std::pair<std::string, std::shared_ptr<Linear>>> block_projections(CausalLanguageModel& model) {
  std::vector<std::pair<std::string, std::shared_ptr<Linear>>> found;
  if (auto* gpt2 = dynamic_cast<Gpt2Model*>(&model)) {
    for (size_t i = 0; i < gpt2->h.size(); ++i) {
      const std::string prefix = "transformer.h." + std::to_string(i) + ".";
      const Gpt2Block& block = *gpt2->h[i];
      found.emplace_back(prefix + "attn.c_attn", block.attn->c_attn);
      found.emplace_back(prefix + "attn.c_proj", block.attn->c_proj);
      found.emplace_back(prefix + "mlp.c_fc", block.mlp->c_fc);
      found.emplace_back(prefix + "mlp.c_proj", block.mlp->c_proj);
    }
  } else if (auto* llama = dynamic_cast<LlamaModel*>(&model)) {
    for (size_t i = 0; i < llama->layers.size(); ++i) {
      const std::string prefix = "model.layers." + std::to_string(i) + ".";
      const LlamaBlock& block = *llama->layers[i];
      found.emplace_back(prefix + "self_attn.q_proj", block.self_attn->q_proj);
      found.emplace_back(prefix + "self_attn.k_proj", block.self_attn->k_proj);
      found.emplace_back(prefix + "self_attn.v_proj", block.self_attn->v_proj);
      found.emplace_back(prefix + "self_attn.o_proj", block.self_attn->o_proj);
      found.emplace_back(prefix + "mlp.gate_proj", block.mlp->gate_proj);
      found.emplace_back(prefix + "mlp.up_proj", block.mlp->up_proj);
      found.emplace_back(prefix + "mlp.down_proj", block.mlp->down_proj);
    }
  } else {
    throw Error("quantize: only GPT-2 and Llama models can be quantised");
  }
  return found;
}

namespace {
// A weight between [out, in] and `layout`, either way: a transpose is its own inverse.
Tensor between_out_in_and(WeightLayout layout, const Tensor& weight) {
  return layout == WeightLayout::in_out ? transpose(weight) : weight;
}

// Sets a float weight to the values `matrix` stands for, in the weight's own layout.
void write_dequantized(Tensor& weight, const QuantizedMatrix& matrix, WeightLayout layout) {
  EDDY_CHECK(weight.dtype() == DType::f32, "quantize: the model must be float32, got ", weight.dtype());
  const Tensor values = dequantize(matrix);
  NoGradGuard no_grad;
  weight.copy_(between_out_in_and(layout, values));
}

Tensor out_in_weight(const Linear& layer) { return contiguous(between_out_in_and(layer.layout(), layer.weight)); }

// The [vocab, hidden] parameter the logits multiply.
Tensor output_head(const CausalLanguageModel& model) {
  const std::string name = model.output_head_name();
  for (const auto& [key, parameter] : model.named_parameters()) {
    if (key == name) return parameter;
  }
  throw Error(cat("quantize: the model has no parameter \"", name, "\" for its output head"));
}

// Takes "<weight_name>.packed" and "<weight_name>.scales" for a [rows, columns] matrix out of
// `state` and puts the float values they stand for under `weight_name`, in `layout`.
QuantizedMatrix take_quantized(StateDict& state, const std::string& weight_name, int64_t rows, int64_t columns,
                               WeightLayout layout, const QuantizationOptions& options) {
  QuantizedMatrix m;
  m.bits = options.bits;
  m.rows = rows;
  m.columns = columns;
  m.group = options.bits == 8 ? m.columns : options.group;
  const Shape packed_shape{m.rows, row_bytes(m.bits, m.columns, m.group) / 4};
  const Shape scales_shape{m.rows, ceil_div(m.columns, m.group)};
  for (const auto& [suffix, shape, dtype] : {std::tuple{".packed", packed_shape, DType::i32},
                                             std::tuple{".scales", scales_shape, DType::f32}}) {
    const std::string key = weight_name + suffix;
    const auto found = state.find(key);
    EDDY_CHECK(found != state.end(), "load_quantized_state_dict: missing key \"", key, "\"");
    EDDY_CHECK(found->second.shape() == shape && found->second.dtype() == dtype, "load_quantized_state_dict: \"",
               key, "\" is ", found->second.dtype(), " ", found->second.shape(), " but int", options.bits,
               " weights of this model need ", dtype, " ", shape);
    (std::string(suffix) == ".packed" ? m.packed : m.scales) = contiguous(found->second);
    state.erase(found);
  }
  state.emplace(weight_name, between_out_in_and(layout, dequantize(m)));
  return m;
}
}  // namespace

void quantize_model(CausalLanguageModel& model, const QuantizationOptions& options) {
  check_options(options.bits, options.group);
  // Its float weights are the dequantised ones by now: quantising them again compounds the
  // rounding and would be labelled with only the last step's bits.
  EDDY_CHECK(!model.quantized_head(), "quantize: the model is quantised already; quantise the float model "
             "(load it again) instead");
  for (auto& [name, layer] : block_projections(model)) {
    QuantizedMatrix matrix = quantize_matrix(out_in_weight(*layer).detach(), options.bits, options.group);
    write_dequantized(layer->weight, matrix, layer->layout());
    layer->use_quantized_weight(std::make_shared<const QuantizedMatrix>(std::move(matrix)));
  }
  Tensor head = output_head(model);
  QuantizedMatrix matrix = quantize_matrix(head.detach(), options.bits, options.group);
  write_dequantized(head, matrix, WeightLayout::out_in);
  model.use_quantized_head(std::make_shared<const QuantizedMatrix>(std::move(matrix)));
}

StateDict quantized_state_dict(CausalLanguageModel& model) {
  StateDict state = model.state_dict();
  const auto replace = [&](const std::string& weight_name, const QuantizedMatrix* matrix) {
    EDDY_CHECK(matrix != nullptr, "quantized_state_dict: \"", weight_name, "\" is not quantised (call quantize_model)");
    state.erase(weight_name);
    state.emplace(weight_name + ".packed", matrix->packed);
    state.emplace(weight_name + ".scales", matrix->scales);
  };
  for (auto& [name, layer] : block_projections(model)) replace(name + ".weight", layer->quantized_weight());
  replace(model.output_head_name(), model.quantized_head());
  return state;
}

void load_quantized_state_dict(CausalLanguageModel& model, const StateDict& state, const QuantizationOptions& options) {
  check_options(options.bits, options.group);
  StateDict floats = state;
  std::vector<std::pair<Linear*, QuantizedMatrix>> matrices;
  for (auto& [name, layer] : block_projections(model)) {
    const int64_t rows = layer->weight.shape()[layer->layout() == WeightLayout::in_out ? 1 : 0];
    matrices.emplace_back(layer.get(), take_quantized(floats, name + ".weight", rows, layer->in_features(),
                                                      layer->layout(), options));
  }
  // Files written before the head was quantised hold it in float32, and it stays so.
  const std::string head_name = model.output_head_name();
  std::optional<QuantizedMatrix> head;
  if (floats.contains(head_name + ".packed")) {
    head = take_quantized(floats, head_name, model.vocab_size(), output_head(model).shape()[1], WeightLayout::out_in,
                          options);
  }
  model.load_state_dict(floats);
  for (auto& [layer, m] : matrices) layer->use_quantized_weight(std::make_shared<const QuantizedMatrix>(std::move(m)));
  if (head) model.use_quantized_head(std::make_shared<const QuantizedMatrix>(std::move(*head)));
}

}  // namespace eddy::nn
