#pragma once
// The PINN model family, built from one options struct (which the YAML config maps onto):
//   architecture  mlp | modified_mlp (Wang, Teng & Perdikaris, 2021) | resnet |
//                 pirate_net (Wang, Li, Chen & Perdikaris, 2024);
//   input maps    normalisation of the domain to [-1, 1], periodic embedding, random Fourier
//                 features (Tancik et al., 2020), applied in that order;
//   layers        plain or randomly weight-factorised (Wang et al., 2022) dense layers, with
//                 fixed or layer-wise adaptive activations (Jagtap et al., 2020).

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eddy/nn/layers.h"

namespace eddy::nn {

enum class PinnArchitecture { mlp, modified_mlp, resnet, pirate_net };
PinnArchitecture parse_architecture(std::string_view name);

struct PinnModelOptions {
  PinnArchitecture architecture = PinnArchitecture::mlp;
  int64_t inputs = 2;
  int64_t outputs = 1;
  int64_t width = 50;
  int64_t depth = 4;  // hidden layers (mlp, modified_mlp) or residual blocks (resnet, pirate_net)
  ActivationKind activation = ActivationKind::tanh;
  bool adaptive_activation = false;

  // Maps input i from [lower[i], upper[i]] to [-1, 1]; empty: inputs are used as they are.
  std::vector<double> input_lower, input_upper;
  // Input i with a period P (listed in periodic_axes/periods) becomes cos(2 pi x / P), sin(...).
  std::vector<int64_t> periodic_axes;
  std::vector<double> periods;
  // fourier_features > 0: x -> [cos(2 pi x B), sin(2 pi x B)], B ~ N(0, fourier_scale^2) fixed.
  int64_t fourier_features = 0;
  double fourier_scale = 1.0;
  // W = V diag(exp(s)), s ~ N(factorization_mean, factorization_stddev^2), trained as (V, s).
  bool weight_factorization = false;
  double factorization_mean = 1.0;
  double factorization_stddev = 0.1;

  DType dtype = DType::f32;
  uint64_t seed = 0;
};

// Checks the options (clear errors naming the field) and builds the model: [N, inputs] ->
// [N, outputs].
std::shared_ptr<Module> make_pinn_model(const PinnModelOptions& options);

// The input of a PINN model's output layer at points x [N, inputs]: [N, features], of which each
// output is an affine function (for pirate_net at its start, when every skip is 0, the Fourier
// embedding of x). Throws eddy::Error for a model make_pinn_model did not build.
Tensor output_layer_inputs(Module& model, const Tensor& x);
// Sets output `column` of the output layer to features . weights + bias (weights [features]),
// leaving the other outputs as they are: how a least-squares fit of the output layer (the
// PirateNets paper's physics-informed initialisation) is installed.
void set_output_layer_column(Module& model, int64_t column, const Tensor& weights, double bias);

// A plain `mlp` (make_pinn_model's mlp architecture, Linear layers, a fixed activation, at most
// the input normalisation as input map), as code that runs its layers itself reads it (the PINN
// solver's fused training pass): x' = input_scale * x + input_shift per input, then h =
// activation(h W + b) per hidden layer, then the output h W + b. The tensors are the model's
// parameters themselves, so gradients for them are gradients for the model.
struct PlainMlp {
  std::vector<Tensor> weights;  // per layer, the output layer last: [in, out]
  std::vector<Tensor> biases;   // [out]
  ActivationKind activation = ActivationKind::tanh;
  std::vector<double> input_scale, input_shift;  // one per input: 1 and 0 without normalisation
};
// The model as a PlainMlp, or nullopt with `why_not` naming what it has besides.
std::optional<PlainMlp> plain_mlp(Module& model, std::string& why_not);

// A dense layer with W = V diag(exp(s)): same function class as Linear, better conditioned
// training (Wang et al., 2022, "Random weight factorization improves the training of continuous
// neural representations").
class FactorizedLinear : public Module {
 public:
  FactorizedLinear(int64_t in_features, int64_t out_features, Generator& generator, DType dtype, double mean,
                   double stddev);
  Tensor forward(const Tensor& x) override;
  Tensor weight() const;  // W = V diag(exp(s)): [in, out]

  Tensor direction;  // V: [in, out]
  Tensor log_scale;  // s: [out]
  Tensor bias;       // [out]
};

}  // namespace eddy::nn
