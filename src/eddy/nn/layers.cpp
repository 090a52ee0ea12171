#include "eddy/nn/layers.h"

#include <array>

#include "eddy/nn/init.h"
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

Linear::Linear(int64_t in_features, int64_t out_features, Generator& generator, DType dtype, bool with_bias) {
  EDDY_CHECK(in_features > 0 && out_features > 0, "Linear: features must be positive, got ", in_features,
             " -> ", out_features);
  weight = Tensor::empty({in_features, out_features}, dtype);
  init::xavier_uniform(weight, generator);
  register_parameter("weight", weight);
  if (with_bias) {
    bias = zeros({out_features}, dtype);
    register_parameter("bias", bias);
  }
}

Tensor Linear::forward(const Tensor& x) {
  EDDY_CHECK(x.dim() >= 1 && x.shape().back() == weight.shape()[0], "Linear: input has shape ", x.shape(),
             " but the layer expects ", weight.shape()[0], " features in the last axis");
  Tensor y = matmul(x, weight);
  return bias.defined() ? y + bias : y;
}

Sequential::Sequential(std::vector<std::shared_ptr<Module>> layers) {
  for (auto& layer : layers) push_back(std::move(layer));
}

void Sequential::push_back(std::shared_ptr<Module> layer) {
  EDDY_CHECK(layer != nullptr, "Sequential: null layer");
  layers_.push_back(register_module(std::to_string(layers_.size()), std::move(layer)));
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
  weight = randn({count, dim}, dtype, &generator);
  register_parameter("weight", weight);
}

Tensor Embedding::forward(const Tensor& indices) {
  Shape shape = indices.shape();
  shape.push_back(weight.shape()[1]);
  return reshape(index_select(weight, 0, flatten(indices)), shape);
}

LayerNorm::LayerNorm(int64_t dim, double eps, DType dtype) : eps_(eps) {
  EDDY_CHECK(dim > 0, "LayerNorm: dim must be positive, got ", dim);
  gamma = ones({dim}, dtype);
  beta = zeros({dim}, dtype);
  register_parameter("gamma", gamma);
  register_parameter("beta", beta);
}

Tensor LayerNorm::forward(const Tensor& x) {
  EDDY_CHECK(x.dim() >= 1 && x.shape().back() == gamma.shape()[0], "LayerNorm: input has shape ", x.shape(),
             " but the layer normalises ", gamma.shape()[0], " features");
  Tensor centred = x - mean(x, {-1}, true);
  Tensor variance = mean(square(centred), {-1}, true);
  return centred / sqrt(variance + eps_) * gamma + beta;
}

Dropout::Dropout(double p, uint64_t seed) : p_(p), generator_(seed) {
  EDDY_CHECK(p >= 0 && p < 1, "Dropout: p must be in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0) return x;
  Tensor keep = ge(rand(x.shape(), real_dtype(x.dtype()), &generator_), scalar(p_, real_dtype(x.dtype())));
  return x * cast(keep, x.dtype()) / (1 - p_);
}

}  // namespace eddy::nn
