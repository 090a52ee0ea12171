#pragma once
// The basic layers: Linear, Sequential, Embedding, LayerNorm, Dropout and the activations.
// Weights use the [in, out] layout: Linear computes x @ W + b.

#include <memory>
#include <string_view>
#include <vector>

#include "eddy/core/rng.h"
#include "eddy/nn/module.h"

namespace eddy::nn {

enum class ActivationKind { tanh, sin, gelu, silu, relu, softplus, identity };

// "tanh", "sin", "gelu", "silu", "relu", "softplus", "identity"; anything else is an error that
// lists the valid names.
ActivationKind parse_activation(std::string_view name);
std::string_view activation_name(ActivationKind kind);
Tensor activate(ActivationKind kind, const Tensor& x);

// How a Linear stores its weight: eddy's [in, out] (x @ W), or PyTorch's [out, in] (x @ W^T),
// which models exchanged with PyTorch checkpoints use so that tensors load without transposes.
enum class WeightLayout { in_out, out_in };

struct QuantizedMatrix;  // quantized.h

class Linear : public Module {
 public:
  // Glorot-uniform weight, zero bias.
  Linear(int64_t in_features, int64_t out_features, Generator& generator, DType dtype = DType::f32,
         bool bias = true, WeightLayout layout = WeightLayout::in_out);
  // x [..., in] -> [..., out]
  Tensor forward(const Tensor& x) override;
  int64_t in_features() const;
  WeightLayout layout() const { return layout_; }

  // From now on, forward multiplies by `packed` (int8 or int4 weights, quantized.h) instead of
  // `weight`, which then records no graph: quantised layers are for inference only. `weight`
  // stays a parameter; quantize_model sets it to the dequantised values, so the state dict
  // describes what the layer computes.
  void use_quantized_weight(std::shared_ptr<const QuantizedMatrix> packed);
  const QuantizedMatrix* quantized_weight() const { return quantized_.get(); }

  Tensor weight;  // [in, out], or [out, in] with WeightLayout::out_in
  Tensor bias;    // [out], undefined without bias

 private:
  WeightLayout layout_;
  std::shared_ptr<const QuantizedMatrix> quantized_;
};

class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> layers);
  void push_back(std::shared_ptr<Module> layer);
  Tensor forward(const Tensor& x) override;
  size_t size() const { return layers_.size(); }
  // Layer `index`, counted from the end where negative (as Python indexes a list).
  const std::shared_ptr<Module>& at(int64_t index) const;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

class Activation : public Module {
 public:
  explicit Activation(ActivationKind kind) : kind_(kind) {}
  Tensor forward(const Tensor& x) override { return activate(kind_, x); }

 private:
  ActivationKind kind_;
};

// Layer-wise locally adaptive activation (Jagtap, Kawaguchi & Karniadakis, 2020):
// sigma(n * a * x) with a trainable slope a, initialised so that n * a = 1.
class AdaptiveActivation : public Module {
 public:
  AdaptiveActivation(ActivationKind kind, double scale = 10.0, DType dtype = DType::f32);
  Tensor forward(const Tensor& x) override;

  Tensor slope;  // a, a 1-element parameter

 private:
  ActivationKind kind_;
  double scale_;
};

// Rows of a [count, dim] table, looked up by an int32/int64 index tensor of any shape.
class Embedding : public Module {
 public:
  Embedding(int64_t count, int64_t dim, Generator& generator, DType dtype = DType::f32);
  Tensor forward(const Tensor& indices) override;

  Tensor weight;  // [count, dim], N(0, 1) initialised
};

// Normalises over the last axis (Ba, Kiros & Hinton 2016): (x - mean) / sqrt(var + eps) *
// weight + bias, with the biased variance, as PyTorch's LayerNorm.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = DType::f32, bool bias = true);
  Tensor forward(const Tensor& x) override;

  Tensor weight;  // [dim], ones
  Tensor bias;    // [dim], zeros; undefined without bias

 private:
  double eps_;
};

// Zeroes each element with probability p while training and scales the rest by 1 / (1 - p);
// the identity in eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p, uint64_t seed = 0);
  Tensor forward(const Tensor& x) override { return forward(x, nullptr); }
  // With a key (random_key), draws from it and advances its offset past the draw, so the next
  // site of the same pass draws fresh numbers: a compiled function given the key as an input
  // gets a new mask on every call. Without one, draws from the module's own seeded generator,
  // which a capture refuses (it would replay the draw). Nothing is drawn in eval mode or at p = 0.
  Tensor forward(const Tensor& x, Tensor* key);
  double p() const { return p_; }

 private:
  double p_;
  Generator generator_;
};

}  // namespace eddy::nn
