#include "eddy/nn/layers.h"

#include <array>

#include "eddy/core/distribution.h"
#include "eddy/core/tracing.h"
#include "eddy/nn/init.h"
#include "eddy/nn/normalize.h"
#include "eddy/nn/quantized.h"
#include "eddy/ops/ops.h"

namespace eddy::nn {
namespace {
constexpr std::array<std::pair<ActivationKind, std::string_view>, 7> kActivationNames{{
    {ActivationKind::tanh, "tanh"},
    {ActivationKind::sin, "sin"},
    {ActivationKind::gelu, "gelu"},
    {ActivationKind::silu, "silu"},
    {ActivationKind::relu, "relu"},
    {ActivationKind::softplus, "softplus"},
    {ActivationKind::identity, "identity"},
}};
}  // namespace

ActivationKind parse_activation(std::string_view name) {
  std::string valid;
  for (const auto& [kind, known] : kActivationNames) {
    if (known == name) return kind;
    valid += (valid.empty() ? "" : ", ") + std::string(known);
  }
  throw Error(cat("unknown activation \"", name, "\" (valid: ", valid, ")"));
}

std::string_view activation_name(ActivationKind kind) {
  for (const auto& [known, name] : kActivationNames) {
    if (known == kind) return name;
  }
  return "?";
}

Tensor activate(ActivationKind kind, const Tensor& x) {
  switch (kind) {
    case ActivationKind::tanh: return tanh(x);
    case ActivationKind::sin: return sin(x);
    case ActivationKind::gelu: return gelu(x);
    case ActivationKind::silu: return silu(x);
    case ActivationKind::relu: return relu(x);
    case ActivationKind::softplus: return softplus(x);
    case ActivationKind::identity: return x;
  }
  return x;
}

Linear::Linear(int64_t in_features, int64_t out_features, Generator& generator, DType dtype, bool with_bias,
               WeightLayout layout)
    : layout_(layout) {
  EDDY_CHECK(in_features > 0 && out_features > 0, "Linear: features must be positive, got ", in_features,
             " -> ", out_features);
  EDDY_CHECK(dtype == DType::f32 || dtype == DType::f64, "Linear: dtype must be float32 or float64, got ", dtype);
  // Glorot's bound is symmetric in the fans, so both layouts draw the same distribution.
  weight = Tensor::empty(layout == WeightLayout::in_out ? Shape{in_features, out_features}
                                                        : Shape{out_features, in_features},
                         dtype, default_device());
  init::xavier_uniform(weight, generator);
  register_parameter("weight", weight);
  if (with_bias) {
    bias = zeros({out_features}, dtype);
    register_parameter("bias", bias);
  }
}

int64_t Linear::in_features() const { return weight.shape()[layout_ == WeightLayout::in_out ? 0 : 1]; }

Tensor Linear::forward(const Tensor& x) {
  const int64_t in = in_features();
  EDDY_CHECK(x.dim() >= 1 && x.shape().back() == in, "Linear: input has shape ", x.shape(),
             " but the layer expects ", in, " features in the last axis");
  // Leading axes folded into rows make one GEMM; a broadcast batch would make one per row block.
  Tensor rows = x.dim() > 2 ? reshape(x, {-1, in}) : x;
  Tensor y;
  if (quantized_) {
    y = quantized_matmul(rows, *quantized_, bias);
  } else {
    y = matmul(rows, layout_ == WeightLayout::in_out ? weight : transpose(weight));
    if (bias.defined()) y = y + bias;
  }
  if (x.dim() <= 2) return y;
  Shape shape = x.shape();
  shape.back() = y.shape().back();
  return reshape(y, shape);
}

void Linear::use_quantized_weight(std::shared_ptr<const QuantizedMatrix> packed) {
  EDDY_CHECK(packed != nullptr, "Linear::use_quantized_weight: null matrix");
  const int64_t out = weight.shape()[layout_ == WeightLayout::in_out ? 1 : 0];
  EDDY_CHECK(packed->rows == out && packed->columns == in_features(), "Linear::use_quantized_weight: a [",
             packed->rows, ", ", packed->columns, "] matrix cannot replace a layer of ", in_features(), " -> ",
             out, " features");
  quantized_ = std::move(packed);
}

Sequential::Sequential(std::vector<std::shared_ptr<Module>> layers) {
  for (auto& layer : layers) push_back(std::move(layer));
}

void Sequential::push_back(std::shared_ptr<Module> layer) {
  EDDY_CHECK(layer != nullptr, "Sequential: null layer");
  // A cycle made forward and the parameter walk recurse until the stack ran out.
  EDDY_CHECK(!layer->contains(*this), "Sequential: the layer is this Sequential or holds it, which would make it "
             "contain itself");
  layers_.push_back(register_module(std::to_string(layers_.size()), std::move(layer)));
}

const std::shared_ptr<Module>& Sequential::at(int64_t index) const {
  const auto count = static_cast<int64_t>(layers_.size());
  EDDY_CHECK(index >= -count && index < count, "Sequential: index ", index, " is out of range for ", count, " layers");
  return layers_[static_cast<size_t>(index < 0 ? index + count : index)];
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& layer : layers_) h = layer->forward(h);
  return h;
}

AdaptiveActivation::AdaptiveActivation(ActivationKind kind, double scale, DType dtype)
    : kind_(kind), scale_(scale) {
  EDDY_CHECK(scale > 0, "AdaptiveActivation: scale must be positive, got ", scale);
  slope = full({1}, 1.0 / scale, dtype);
  register_parameter("slope", slope);
}

Tensor AdaptiveActivation::forward(const Tensor& x) { return activate(kind_, (scale_ * slope) * x); }

Embedding::Embedding(int64_t count, int64_t dim, Generator& generator, DType dtype) {
  EDDY_CHECK(count > 0 && dim > 0, "Embedding: count and dim must be positive, got ", count, " and ", dim);
  weight = Tensor::empty({count, dim}, dtype, default_device());
  init::normal(weight, generator, 1.0);
  register_parameter("weight", weight);
}

Tensor Embedding::forward(const Tensor& indices) {
  // index_select reads -1 as the last row, as Python indexes (and refuses ids past the end); an
  // embedding refuses negative ids, as PyTorch's does, or a batch padded with -100
  // (cross_entropy's ignore_index) reads row count - 100. Checked where the ids are known: not
  // while a step is traced, nor on a distributed batch, of which no rank holds all.
  const int64_t rows = weight.shape()[0];
  Tensor ids = flatten(indices);
  if (!active_trace_recorder() && !is_distributed(indices) && indices.numel() > 0) {
    const int64_t lowest = min(indices).item<int64_t>(), highest = max(indices).item<int64_t>();
    EDDY_CHECK(lowest >= 0 && highest < rows, "Embedding: ids must be in [0, ", rows, "), got ",
               lowest < 0 ? lowest : highest, " in ids of shape ", indices.shape());
  } else {
    // Unchecked here: a negative id goes one past the end, which index_select refuses once the
    // values are known, instead of reading a row from the end.
    ids = where(lt(ids, zeros_like(ids)), full_like(ids, static_cast<double>(rows)), ids);
  }
  Shape shape = indices.shape();
  shape.push_back(weight.shape()[1]);
  return reshape(index_select(weight, 0, ids), shape);
}

LayerNorm::LayerNorm(int64_t dim, double eps, DType dtype, bool with_bias) : eps_(eps) {
  EDDY_CHECK(dim > 0, "LayerNorm: dim must be positive, got ", dim);
  EDDY_CHECK(eps >= 0, "LayerNorm: eps must be non-negative, got ", eps);
  weight = ones({dim}, dtype);
  register_parameter("weight", weight);
  if (with_bias) {
    bias = zeros({dim}, dtype);
    register_parameter("bias", bias);
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  EDDY_CHECK(x.dim() >= 1 && x.shape().back() == weight.shape()[0], "LayerNorm: input has shape ", x.shape(),
             " but the layer normalises ", weight.shape()[0], " features");
  const Tensor scaled = layer_normalize(x, eps_) * weight;
  return bias.defined() ? scaled + bias : scaled;
}

Dropout::Dropout(double p, uint64_t seed) : p_(p), generator_(seed) {
  EDDY_CHECK(p >= 0 && p < 1, "Dropout: p must be in [0, 1), got ", p);
}

namespace {
// Keeps x where the uniform draw is at least p: probability 1 - p.
Tensor drop(const Tensor& x, const Tensor& uniform_draw, double p) {
  Tensor keep = ge(uniform_draw, scalar(p, uniform_draw.dtype(), uniform_draw.device()));
  return x * cast(keep, x.dtype()) / (1 - p);
}
}  // namespace

Tensor Dropout::forward(const Tensor& x, Tensor* key) {
  if (!is_training() || p_ == 0) return x;
  // A 16-bit x draws in float32: bfloat16's draws are multiples of 1/256, so p = 0.001 dropped
  // 1/256 of the entries.
  const DType dtype = is_half(x.dtype()) ? DType::f32 : real_dtype(x.dtype());
  if (!key) return drop(x, rand(x.shape(), dtype, &generator_), p_);
  Tensor draw = uniform(*key, x.shape(), dtype);
  *key = *key + tensor<int64_t>({0, x.numel()}, {2}, key->device());
  return drop(x, draw, p_);
}

}  // namespace eddy::nn
