#include "eddy/nn/pinn_models.h"

#include <cmath>
#include <map>
#include <numbers>
#include <tuple>

#include "eddy/autodiff/tape.h"
#include "eddy/nn/init.h"
#include "eddy/ops/ops.h"

namespace eddy::nn {
namespace {

constexpr double kTwoPi = 2 * std::numbers::pi;

constexpr PinnArchitecture kArchitectures[] = {PinnArchitecture::mlp, PinnArchitecture::modified_mlp,
                                               PinnArchitecture::resnet, PinnArchitecture::pirate_net};

std::string_view architecture_name(PinnArchitecture a) {
  switch (a) {
    case PinnArchitecture::mlp: return "mlp";
    case PinnArchitecture::modified_mlp: return "modified_mlp";
    case PinnArchitecture::resnet: return "resnet";
    case PinnArchitecture::pirate_net: return "pirate_net";
  }
  return "?";
}

// Normalisation, periodic embedding and Fourier features, in that order.
class InputMap : public Module {
 public:
  InputMap(const PinnModelOptions& o, Generator& generator) : inputs_(o.inputs) {
    if (!o.input_lower.empty()) {
      offset_ = tensor(o.input_lower, {o.inputs});
      std::vector<double> inverse_half_range(o.inputs);
      for (int64_t i = 0; i < o.inputs; ++i) inverse_half_range[i] = 2.0 / (o.input_upper[i] - o.input_lower[i]);
      scale_ = tensor(inverse_half_range, {o.inputs});
      offset_ = cast(offset_, o.dtype);
      scale_ = cast(scale_, o.dtype);
      register_buffer("offset", offset_);
      register_buffer("scale", scale_);
    }
    for (size_t i = 0; i < o.periodic_axes.size(); ++i) periods_[o.periodic_axes[i]] = o.periods[i];
    width_ = o.inputs + static_cast<int64_t>(o.periodic_axes.size());
    if (o.fourier_features > 0) {
      fourier_ = randn({width_, o.fourier_features}, o.dtype, &generator) * o.fourier_scale;
      register_buffer("fourier_matrix", fourier_);
      width_ = 2 * o.fourier_features;
    }
  }

  int64_t output_width() const { return width_; }

  // The normalisation as scale * x + shift per input: 1 and 0 without it.
  std::pair<std::vector<double>, std::vector<double>> normalisation() const {
    std::vector<double> scale(static_cast<size_t>(inputs_), 1.0), shift(static_cast<size_t>(inputs_), 0.0);
    if (!offset_.defined()) return {scale, shift};
    const std::vector<double> offset = offset_.to_vector<double>(), factor = scale_.to_vector<double>();
    for (size_t i = 0; i < scale.size(); ++i) {
      scale[i] = factor[i];
      shift[i] = -offset[i] * factor[i] - 1.0;
    }
    return {scale, shift};
  }

  Tensor forward(const Tensor& x) override {
    EDDY_CHECK(x.dim() == 2 && x.shape()[1] == inputs_, "PINN model: input has shape ", x.shape(),
               ", expected [N, ", inputs_, "]");
    Tensor h = offset_.defined() ? (x - offset_) * scale_ - 1.0 : x;
    if (!periods_.empty()) {
      std::vector<Tensor> columns;
      for (int64_t i = 0; i < inputs_; ++i) {
        Tensor column = slice(x, 1, i, i + 1);  // periods refer to the raw coordinate
        auto period = periods_.find(i);
        if (period == periods_.end()) {
          columns.push_back(slice(h, 1, i, i + 1));
        } else {
          Tensor angle = column * (kTwoPi / period->second);
          columns.push_back(cos(angle));
          columns.push_back(sin(angle));
        }
      }
      h = concat(columns, 1);
    }
    if (fourier_.defined()) {
      Tensor projected = matmul(h, fourier_) * kTwoPi;
      h = concat({cos(projected), sin(projected)}, 1);
    }
    return h;
  }

 private:
  int64_t inputs_;
  int64_t width_;
  Tensor offset_, scale_, fourier_;
  std::map<int64_t, double> periods_;
};

std::shared_ptr<Module> dense(int64_t in, int64_t out, const PinnModelOptions& o, Generator& g) {
  if (o.weight_factorization) {
    return std::make_shared<FactorizedLinear>(in, out, g, o.dtype, o.factorization_mean, o.factorization_stddev);
  }
  return std::make_shared<Linear>(in, out, g, o.dtype);
}

// The share of vector lanes a row of `width` values leaves empty in the AVX-512 registers that hold
// it.
double empty_lane_fraction(int64_t width, DType dtype) {
  const int64_t lanes = 64 / static_cast<int64_t>(dtype_size(dtype));
  const int64_t held = (width + lanes - 1) / lanes * lanes;
  return static_cast<double>(held - width) / static_cast<double>(held);
}

// A dense layer applied to activations h: [points, in] row-major, [in, points] feature-major
// (W^T h + b).
Tensor apply_dense(Module& layer, const Tensor& h, bool feature_major) {
  if (!feature_major) return layer.forward(h);
  if (auto* linear = dynamic_cast<Linear*>(&layer)) {
    return matmul(transpose(linear->weight), h) + unsqueeze(linear->bias, 1);
  }
  auto& factorized = dynamic_cast<FactorizedLinear&>(layer);
  return matmul(transpose(factorized.weight()), h) + unsqueeze(factorized.bias, 1);
}

std::shared_ptr<Module> activation(const PinnModelOptions& o) {
  if (o.adaptive_activation) return std::make_shared<AdaptiveActivation>(o.activation, 10.0, o.dtype);
  return std::make_shared<Activation>(o.activation);
}

class PinnModel : public Module {
 public:
  PinnModel(const PinnModelOptions& o, Generator& g) : options_(o) {
    input_ = register_module("input", std::make_shared<InputMap>(o, g));
    const int64_t first = input_->output_width();
    switch (o.architecture) {
      case PinnArchitecture::mlp:
        for (int64_t l = 0; l < o.depth; ++l) {
          hidden_.push_back(register_module("hidden." + std::to_string(l), dense(l ? o.width : first, o.width, o, g)));
          activations_.push_back(register_module("activation." + std::to_string(l), activation(o)));
        }
        break;
      case PinnArchitecture::modified_mlp:
        encoder_u_ = register_module("encoder_u", dense(first, o.width, o, g));
        encoder_v_ = register_module("encoder_v", dense(first, o.width, o, g));
        for (int64_t l = 0; l < o.depth; ++l) {
          hidden_.push_back(register_module("hidden." + std::to_string(l), dense(l ? o.width : first, o.width, o, g)));
        }
        for (int64_t l = 0; l < o.depth + 2; ++l) {
          activations_.push_back(register_module("activation." + std::to_string(l), activation(o)));
        }
        break;
      case PinnArchitecture::pirate_net:
        // Each block maps the embedding-wide state through three layers and back to its width.
        encoder_u_ = register_module("encoder_u", dense(first, o.width, o, g));
        encoder_v_ = register_module("encoder_v", dense(first, o.width, o, g));
        skip_weights_.resize(o.depth);  // sized once: the module keeps pointers to its parameters
        for (int64_t b = 0; b < o.depth; ++b) {
          const std::string block = "block." + std::to_string(b) + ".";
          hidden_.push_back(register_module(block + "0", dense(first, o.width, o, g)));
          hidden_.push_back(register_module(block + "1", dense(o.width, o.width, o, g)));
          hidden_.push_back(register_module(block + "2", dense(o.width, first, o, g)));
          skip_weights_[b] = zeros({}, o.dtype);
          register_parameter("skip." + std::to_string(b), skip_weights_[b]);
        }
        for (int64_t l = 0; l < 3 * o.depth + 2; ++l) {
          activations_.push_back(register_module("activation." + std::to_string(l), activation(o)));
        }
        break;
      case PinnArchitecture::resnet:
        lift_ = register_module("lift", dense(first, o.width, o, g));
        activations_.push_back(register_module("activation.lift", activation(o)));
        for (int64_t b = 0; b < o.depth; ++b) {
          for (int k = 0; k < 2; ++k) {
            const std::string name = std::to_string(b) + "." + std::to_string(k);
            hidden_.push_back(register_module("block." + name, dense(o.width, o.width, o, g)));
            activations_.push_back(register_module("activation." + name, activation(o)));
          }
        }
        break;
    }
    const bool embedding_wide = (o.depth == 0 && o.architecture == PinnArchitecture::mlp) ||
                                o.architecture == PinnArchitecture::pirate_net;
    output_width_ = embedding_wide ? first : o.width;
    output_ = register_module("output", dense(output_width_, o.outputs, o, g));
  }

  Tensor forward(const Tensor& x) override {
    return transposed_if_feature_major(apply_dense(*output_, hidden(x), feature_major_));
  }

  // The output layer's input at x, row by row: the output is an affine function of it.
  Tensor output_layer_inputs(const Tensor& x) { return transposed_if_feature_major(hidden(x)); }

  // Output `column` becomes features . weights + bias, with weights [features] as given.
  void set_output_column(int64_t column, const Tensor& weights, double bias) {
    NoGradGuard no_grad;
    auto set = [&](const Tensor& parameter, const Tensor& column_values) {
      slice(parameter, parameter.dim() - 1, column, column + 1).copy_(cast(column_values, parameter.dtype()));
    };
    const Tensor as_column = reshape(weights, {-1, 1});
    if (auto* linear = dynamic_cast<Linear*>(output_.get())) {
      set(linear->weight, as_column);
      set(linear->bias, full({1}, bias, linear->bias.dtype(), linear->bias.device()));
      return;
    }
    // W = V diag(exp(s)): the direction's column is the weights over the column's scale.
    auto& factorized = dynamic_cast<FactorizedLinear&>(*output_);
    set(factorized.direction, as_column / exp(cast(slice(factorized.log_scale, 0, column, column + 1), DType::f64)));
    set(factorized.bias, full({1}, bias, factorized.bias.dtype(), factorized.bias.device()));
  }

  const PinnModelOptions& options() const { return options_; }
  int64_t output_layer_width() const { return output_width_; }

  // What the model has besides a plain MLP's layers and the input normalisation; empty if nothing.
  std::string beyond_plain_mlp() const {
    const PinnModelOptions& o = options_;
    if (o.architecture != PinnArchitecture::mlp) return cat("the ", architecture_name(o.architecture), " architecture");
    if (o.adaptive_activation) return "adaptive activations";
    if (!o.periodic_axes.empty()) return "a periodic input embedding";
    if (o.fourier_features > 0) return "Fourier features";
    if (o.weight_factorization) return "weight factorisation";
    return "";
  }

  PlainMlp plain_parts() const {
    PlainMlp mlp;
    auto add = [&](const std::shared_ptr<Module>& layer) {
      const auto& linear = dynamic_cast<const Linear&>(*layer);
      mlp.weights.push_back(linear.weight);
      mlp.biases.push_back(linear.bias);
    };
    for (const std::shared_ptr<Module>& layer : hidden_) add(layer);
    add(output_);
    mlp.activation = options_.activation;
    std::tie(mlp.input_scale, mlp.input_shift) = input_->normalisation();
    return mlp;
  }

 private:
  // From rows of points to the model's layout and back: a transpose, its own inverse.
  Tensor transposed_if_feature_major(const Tensor& t) const { return feature_major_ ? transpose(t) : t; }

  // The representation the output layer reads, in the model's layout.
  Tensor hidden(const Tensor& x) {
    Tensor h = transposed_if_feature_major(input_->forward(x));
    auto dense = [&](const std::shared_ptr<Module>& layer, const Tensor& in) {
      return apply_dense(*layer, in, feature_major_);
    };
    switch (options_.architecture) {
      case PinnArchitecture::mlp:
        for (size_t l = 0; l < hidden_.size(); ++l) h = activations_[l]->forward(dense(hidden_[l], h));
        break;
      case PinnArchitecture::modified_mlp: {
        // Gates between two encodings of the input (Wang, Teng & Perdikaris, 2021, eq. 43).
        Tensor u = activations_[0]->forward(dense(encoder_u_, h));
        Tensor v = activations_[1]->forward(dense(encoder_v_, h));
        for (size_t l = 0; l < hidden_.size(); ++l) {
          Tensor z = activations_[l + 2]->forward(dense(hidden_[l], h));
          h = (1.0 - z) * u + z * v;
        }
        break;
      }
      case PinnArchitecture::pirate_net: {
        // Adaptive residual connections (Wang, Li, Chen & Perdikaris, "PirateNets: Physics-informed
        // deep learning with residual adaptive networks", arXiv:2402.00326, 2024):
        // each block's output is skip * H + (1 - skip) * x with a trainable skip, 0 at the start,
        // so the network starts as a linear model of the embedding and grows deeper as it trains.
        const Tensor u = activations_[0]->forward(dense(encoder_u_, h));
        const Tensor v = activations_[1]->forward(dense(encoder_v_, h));
        auto gate = [&](const Tensor& z) { return z * u + (1.0 - z) * v; };
        for (size_t b = 0; b < skip_weights_.size(); ++b) {
          const auto layer = [&](size_t k, const Tensor& in) {
            return activations_[2 + 3 * b + k]->forward(dense(hidden_[3 * b + k], in));
          };
          const Tensor block = layer(2, gate(layer(1, gate(layer(0, h)))));
          h = skip_weights_[b] * block + (1.0 - skip_weights_[b]) * h;
        }
        break;
      }
      case PinnArchitecture::resnet:
        h = activations_[0]->forward(dense(lift_, h));
        for (size_t b = 0; b < hidden_.size(); b += 2) {
          Tensor inner = activations_[b + 1]->forward(dense(hidden_[b], h));
          h = h + activations_[b + 2]->forward(dense(hidden_[b + 1], inner));
        }
        break;
    }
    return h;
  }

  PinnModelOptions options_;
  // Activations are [points, features], except where a row of the hidden width leaves more than
  // a quarter of its AVX-512 registers' lanes empty (20 floats fill one register and a quarter
  // of the next: 37.5% empty): then they are feature-major between the input map and the output,
  // [features, points], each layer a [width x width] @ [width x points] product vectorised along
  // the points. Measured with eddy solve on 2026-12-05, one thread, 8-layer Burgers in float32:
  // feature-major 1.08x faster at width 20, level at 24 (25% empty), row-major 1.06x faster at 28
  // and 1.16x at 16; row-major 1.18x to 1.35x faster on the float32 examples of width 32 and 64,
  // and 1.10x on float64 Burgers at width 20 (17% empty), whose feature-major products OpenBLAS's
  // dgemm ran at half its rate from memory (docs/benchmarks.md, "PINN layer layouts by dtype,
  // and float64 against the peers").
  bool feature_major_ = empty_lane_fraction(options_.width, options_.dtype) > 0.25;
  int64_t output_width_ = 0;  // the output layer's input features
  std::shared_ptr<InputMap> input_;
  std::shared_ptr<Module> encoder_u_, encoder_v_, lift_, output_;
  std::vector<std::shared_ptr<Module>> hidden_, activations_;
  std::vector<Tensor> skip_weights_;  // pirate_net: one trainable alpha per block
};

void check_options(const PinnModelOptions& o) {
  EDDY_CHECK(o.inputs > 0, "model.inputs must be positive, got ", o.inputs);
  EDDY_CHECK(o.outputs > 0, "model.outputs must be positive, got ", o.outputs);
  EDDY_CHECK(o.width > 0, "model.width must be positive, got ", o.width);
  EDDY_CHECK(o.depth >= 0, "model.depth must be non-negative, got ", o.depth);
  EDDY_CHECK(o.architecture == PinnArchitecture::mlp || o.depth >= 1, "model.depth must be at least 1 for ",
             architecture_name(o.architecture), ", got ", o.depth);
  // The blocks hand the embedding on and the output layer reads it: the raw coordinates would
  // make the output layer a linear map of a handful of numbers.
  EDDY_CHECK(o.architecture != PinnArchitecture::pirate_net || o.fourier_features > 0,
             "model.architecture pirate_net needs model.fourier_features > 0: its blocks and output layer work on "
             "the Fourier embedding of the inputs, as in the PirateNets paper");
  EDDY_CHECK(is_floating(o.dtype), "model.dtype must be float32 or float64, got ", o.dtype);
  EDDY_CHECK(o.input_lower.size() == o.input_upper.size() &&
                 (o.input_lower.empty() || static_cast<int64_t>(o.input_lower.size()) == o.inputs),
             "model input normalisation needs ", o.inputs, " lower and upper bounds, got ", o.input_lower.size(),
             " and ", o.input_upper.size());
  for (size_t i = 0; i < o.input_lower.size(); ++i) {
    EDDY_CHECK(o.input_upper[i] > o.input_lower[i], "model input normalisation: upper bound ", o.input_upper[i],
               " of input ", i, " is not above the lower bound ", o.input_lower[i]);
  }
  EDDY_CHECK(o.periodic_axes.size() == o.periods.size(), "model.periodic: ", o.periodic_axes.size(),
             " axes but ", o.periods.size(), " periods");
  for (size_t i = 0; i < o.periodic_axes.size(); ++i) {
    EDDY_CHECK(o.periodic_axes[i] >= 0 && o.periodic_axes[i] < o.inputs, "model.periodic: axis ",
               o.periodic_axes[i], " is not an input axis (0..", o.inputs - 1, ")");
    EDDY_CHECK(o.periods[i] > 0, "model.periodic: period of axis ", o.periodic_axes[i], " must be positive, got ",
               o.periods[i]);
  }
  EDDY_CHECK(o.fourier_features >= 0, "model.fourier_features must be non-negative, got ", o.fourier_features);
  EDDY_CHECK(o.fourier_scale > 0, "model.fourier_scale must be positive, got ", o.fourier_scale);
  EDDY_CHECK(o.factorization_stddev >= 0, "model.factorization_stddev must be non-negative, got ",
             o.factorization_stddev);
}

PinnModel& pinn_model(Module& model) {
  auto* pinn = dynamic_cast<PinnModel*>(&model);
  EDDY_CHECK(pinn, "expected a model made by make_pinn_model");
  return *pinn;
}

}  // namespace

PinnArchitecture parse_architecture(std::string_view name) {
  for (PinnArchitecture a : kArchitectures) {
    if (name == architecture_name(a)) return a;
  }
  throw Error(cat("unknown model architecture \"", name, "\" (valid: mlp, modified_mlp, resnet, pirate_net)"));
}

std::shared_ptr<Module> make_pinn_model(const PinnModelOptions& options) {
  check_options(options);
  Generator generator(options.seed);
  return std::make_shared<PinnModel>(options, generator);
}

Tensor output_layer_inputs(Module& model, const Tensor& x) { return pinn_model(model).output_layer_inputs(x); }

std::optional<PlainMlp> plain_mlp(Module& model, std::string& why_not) {
  auto* pinn = dynamic_cast<PinnModel*>(&model);
  why_not = pinn ? pinn->beyond_plain_mlp() : "a model make_pinn_model did not build";
  if (!why_not.empty()) return std::nullopt;
  return pinn->plain_parts();
}

void set_output_layer_column(Module& model, int64_t column, const Tensor& weights, double bias) {
  PinnModel& pinn = pinn_model(model);
  const int64_t outputs = pinn.options().outputs, width = pinn.output_layer_width();
  EDDY_CHECK(column >= 0 && column < outputs, "set_output_layer_column: column ", column, " of a model with ", outputs,
             " outputs");
  EDDY_CHECK(weights.dim() == 1 && weights.size(0) == width, "set_output_layer_column: the output layer reads ", width,
             " features, got weights of shape ", weights.shape());
  pinn.set_output_column(column, weights, bias);
}

FactorizedLinear::FactorizedLinear(int64_t in, int64_t out, Generator& g, DType dtype, double mean, double stddev) {
  EDDY_CHECK(in > 0 && out > 0, "FactorizedLinear: features must be positive, got ", in, " -> ", out);
  Tensor w = Tensor::empty({in, out}, dtype, default_device());
  init::xavier_uniform(w, g);
  {
    NoGradGuard no_grad;
    log_scale = (randn({out}, dtype, &g) * stddev + mean).detach();
    direction = (w / exp(log_scale)).detach();
  }
  bias = zeros({out}, dtype);
  register_parameter("direction", direction);
  register_parameter("log_scale", log_scale);
  register_parameter("bias", bias);
}

Tensor FactorizedLinear::forward(const Tensor& x) {
  EDDY_CHECK(x.dim() >= 1 && x.shape().back() == direction.shape()[0], "FactorizedLinear: input has shape ",
             x.shape(), " but the layer expects ", direction.shape()[0], " features");
  return matmul(x, weight()) + bias;
}

Tensor FactorizedLinear::weight() const { return direction * exp(log_scale); }

}  // namespace eddy::nn
