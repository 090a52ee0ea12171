#include "eddy/nn/neural_operators.h"

#include <cmath>

#include "eddy/fft/spectral.h"
#include "eddy/nn/init.h"
#include "eddy/nn/pinn_models.h"
#include "eddy/ops/ops.h"

namespace eddy::nn {
namespace {

// A real tensor [..., 2] read as complex [...].
Tensor as_complex(const Tensor& pairs) {
  return complex(squeeze(slice(pairs, -1, 0, 1), -1), squeeze(slice(pairs, -1, 1, 2), -1));
}

// Complex N(0, stddev^2) values stored as [..., 2] pairs, each part carrying half the variance.
Tensor complex_normal(Shape shape, double stddev, Generator& generator, DType dtype) {
  shape.push_back(2);
  return randn(shape, dtype, &generator) * (stddev / std::sqrt(2.0));
}

// Contracts axis `axis` of `t` (length r) with factor [n, r]: the result has n there.
Tensor mode_product(const Tensor& t, const Tensor& factor, int64_t axis) {
  std::vector<int64_t> to_last(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) to_last[i] = i;
  to_last.erase(to_last.begin() + axis);
  to_last.push_back(axis);
  Tensor product = matmul(permute(t, to_last), transpose(factor));
  std::vector<int64_t> back(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) back[to_last[i]] = i;
  return permute(product, back);
}

}  // namespace

PointwiseLinear::PointwiseLinear(int64_t in_channels, int64_t out_channels, Generator& generator, DType dtype) {
  EDDY_CHECK(in_channels > 0 && out_channels > 0, "PointwiseLinear: channels must be positive, got ", in_channels,
             " -> ", out_channels);
  weight = Tensor::empty({out_channels, in_channels}, dtype, default_device());
  init::xavier_uniform(weight, generator);
  bias = zeros({out_channels, 1}, dtype);
  register_parameter("weight", weight);
  register_parameter("bias", bias);
}

Tensor PointwiseLinear::forward(const Tensor& x) {
  EDDY_CHECK(x.dim() >= 2 && x.shape()[1] == weight.shape()[1], "PointwiseLinear: input has shape ", x.shape(),
             ", expected [batch, ", weight.shape()[1], ", ...]");
  Shape out_shape = x.shape();
  out_shape[1] = weight.shape()[0];
  // The points counted, not -1: an empty batch leaves -1 undetermined.
  Tensor flat = reshape(x, {x.shape()[0], x.shape()[1], numel(Shape(x.shape().begin() + 2, x.shape().end()))});
  return reshape(matmul(weight, flat) + bias, out_shape);
}

SpectralFactorization parse_factorization(std::string_view name) {
  if (name == "dense") return SpectralFactorization::dense;
  if (name == "tucker") return SpectralFactorization::tucker;
  throw Error(cat("unknown spectral factorization \"", name, "\" (valid: dense, tucker)"));
}

SpectralConv::SpectralConv(int64_t in_channels, int64_t out_channels, std::vector<int64_t> modes,
                           Generator& generator, DType dtype, SpectralFactorization factorization, double rank)
    : modes_(std::move(modes)) {
  EDDY_CHECK(!modes_.empty() && modes_.size() <= 3, "SpectralConv: 1 to 3 spatial axes are supported, got ",
             modes_.size(), " mode counts");
  for (int64_t k : modes_) EDDY_CHECK(k >= 1, "SpectralConv: mode counts must be >= 1, got ", to_string(modes_));
  EDDY_CHECK(in_channels > 0 && out_channels > 0, "SpectralConv: channels must be positive, got ", in_channels,
             " -> ", out_channels);
  EDDY_CHECK(dtype == DType::f32 || dtype == DType::f64, "SpectralConv: dtype must be float32 or float64");
  // Variance 2 / (in + out), as neuraloperator's default: activations keep their scale through the
  // channel mixing.
  const double stddev = std::sqrt(2.0 / static_cast<double>(in_channels + out_channels));
  const Shape shape = fft::spectral_weight_shape(in_channels, out_channels, modes_);
  if (factorization == SpectralFactorization::dense) {
    weight_ = complex_normal(shape, stddev, generator, dtype);
    register_parameter("weight", weight_);
    return;
  }
  EDDY_CHECK(rank > 0 && rank <= 1, "SpectralConv: Tucker rank must be in (0, 1], got ", rank);
  Shape core_shape;
  for (int64_t n : shape) core_shape.push_back(std::max<int64_t>(1, std::lround(rank * static_cast<double>(n))));
  // Factors with variance 1 / r keep the reconstructed weights at the core's variance.
  core_ = complex_normal(core_shape, stddev, generator, dtype);
  register_parameter("core", core_);
  factors_.resize(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    factors_[i] = complex_normal({shape[i], core_shape[i]}, 1 / std::sqrt(static_cast<double>(core_shape[i])),
                                 generator, dtype);
    register_parameter("factor" + std::to_string(i), factors_[i]);
  }
}

Tensor SpectralConv::complex_weights() const {
  if (weight_.defined()) return as_complex(weight_);
  Tensor weights = as_complex(core_);
  for (size_t i = 0; i < factors_.size(); ++i) {
    weights = mode_product(weights, as_complex(factors_[i]), static_cast<int64_t>(i));
  }
  return weights;
}

Tensor SpectralConv::forward(const Tensor& x) { return fft::spectral_conv(x, complex_weights(), modes_); }

Tensor grid_coordinates(const Shape& spatial, DType dtype, Device device) {
  const int64_t d = static_cast<int64_t>(spatial.size());
  Shape full{1, 1};
  full.insert(full.end(), spatial.begin(), spatial.end());
  std::vector<Tensor> channels;
  for (int64_t axis = 0; axis < d; ++axis) {
    Shape along(d + 2, 1);
    along[2 + axis] = spatial[axis];
    Tensor values = arange(0, static_cast<double>(spatial[axis]), 1, dtype, device) / static_cast<double>(spatial[axis]);
    channels.push_back(expand(reshape(values, along), full));
  }
  return concat(channels, 1);
}

Fno::Fno(const FnoOptions& o) : options_(o) {
  const int64_t d = static_cast<int64_t>(o.modes.size());
  EDDY_CHECK(d >= 1 && d <= 3, "FNO: modes must give 1 to 3 spatial axes, got ", to_string(o.modes));
  EDDY_CHECK(o.in_channels > 0 && o.out_channels > 0 && o.width > 0 && o.projection_width > 0,
             "FNO: in_channels, out_channels, width and projection_width must be positive");
  EDDY_CHECK(o.layers >= 1, "FNO: layers must be >= 1, got ", o.layers);
  EDDY_CHECK(o.padding >= 0, "FNO: padding must be >= 0, got ", o.padding);
  EDDY_CHECK(o.dtype == DType::f32 || o.dtype == DType::f64, "FNO: dtype must be float32 or float64, got ", o.dtype);
  EDDY_CHECK(o.padding_grid.empty() || static_cast<int64_t>(o.padding_grid.size()) == d, "FNO: padding_grid ",
             to_string(o.padding_grid), " must give one size per spatial axis (", d, ")");
  for (int64_t size : o.padding_grid) EDDY_CHECK(size > 0, "FNO: padding_grid sizes must be positive");
  Generator generator(o.seed);
  const int64_t lifted = o.in_channels + (o.grid_coordinates ? d : 0);
  lift_ = register_module("lift", std::make_shared<PointwiseLinear>(lifted, o.width, generator, o.dtype));
  for (int64_t l = 0; l < o.layers; ++l) {
    spectral_.push_back(register_module(
        "spectral" + std::to_string(l),
        std::make_shared<SpectralConv>(o.width, o.width, o.modes, generator, o.dtype, o.factorization, o.rank)));
    skip_.push_back(register_module("skip" + std::to_string(l),
                                    std::make_shared<PointwiseLinear>(o.width, o.width, generator, o.dtype)));
  }
  project_hidden_ = register_module("project_hidden",
                                    std::make_shared<PointwiseLinear>(o.width, o.projection_width, generator, o.dtype));
  project_out_ = register_module("project_out",
                                 std::make_shared<PointwiseLinear>(o.projection_width, o.out_channels, generator, o.dtype));
}

Tensor Fno::forward(const Tensor& x) {
  const int64_t d = static_cast<int64_t>(options_.modes.size());
  EDDY_CHECK(x.dim() == d + 2 && x.shape()[1] == options_.in_channels, "FNO: input has shape ", x.shape(),
             ", expected [batch, ", options_.in_channels, ", ", d, " spatial axes]");
  const Shape spatial(x.shape().begin() + 2, x.shape().end());
  Tensor h = x;
  if (options_.grid_coordinates) {
    Shape grid_shape = x.shape();
    grid_shape[1] = d;
    h = concat({h, expand(grid_coordinates(spatial, x.dtype(), x.device()), grid_shape)}, 1);
  }
  h = lift_->forward(h);
  // A fixed count of points at another resolution would pad another fraction of the domain: a
  // Burgers FNO trained on 16 points with 8 padded gave 9.1e-3 there and 0.26 on 32.
  const std::vector<int64_t> none(d + 2, 0);
  std::vector<int64_t> padding(d + 2, 0);
  for (int64_t axis = 0; axis < d; ++axis) {
    padding[2 + axis] = options_.padding_grid.empty()
                            ? options_.padding
                            : static_cast<int64_t>(std::llround(static_cast<double>(options_.padding * spatial[axis]) /
                                                                static_cast<double>(options_.padding_grid[axis])));
  }
  if (options_.padding > 0) h = pad(h, none, padding);
  for (int64_t l = 0; l < options_.layers; ++l) {
    h = spectral_[l]->forward(h) + skip_[l]->forward(h);
    if (l + 1 < options_.layers) h = activate(options_.activation, h);
  }
  for (int64_t axis = 0; axis < d && options_.padding > 0; ++axis) h = slice(h, 2 + axis, 0, spatial[axis]);
  return project_out_->forward(activate(options_.activation, project_hidden_->forward(h)));
}

DeepOnet::DeepOnet(const DeepOnetOptions& o) : options_(o) {
  EDDY_CHECK(o.sensors > 0 && o.coordinates > 0 && o.latent > 0, "DeepONet: sensors, coordinates and latent must be "
             "positive, got ", o.sensors, ", ", o.coordinates, ", ", o.latent);
  PinnModelOptions net;
  net.width = o.width;
  net.depth = o.depth;
  net.activation = o.activation;
  net.dtype = o.dtype;
  net.outputs = o.latent;
  net.inputs = o.sensors;
  net.seed = o.seed;
  branch_ = register_module("branch", make_pinn_model(net));
  net.inputs = o.coordinates;
  net.seed = o.seed + 1;
  trunk_ = register_module("trunk", make_pinn_model(net));
  bias_ = zeros({1}, o.dtype);
  register_parameter("bias", bias_);
}

Tensor DeepOnet::evaluate(const Tensor& u, const Tensor& points) {
  EDDY_CHECK(u.dim() == 2 && u.shape()[1] == options_.sensors, "DeepONet: branch input has shape ", u.shape(),
             ", expected [batch, ", options_.sensors, "]");
  EDDY_CHECK(points.dim() == 2 && points.shape()[1] == options_.coordinates, "DeepONet: trunk points have shape ",
             points.shape(), ", expected [P, ", options_.coordinates, "]");
  // The trunk's last layer is activated too (Lu et al.): its outputs are the basis functions.
  Tensor basis = activate(options_.activation, trunk_->forward(points));
  return matmul(branch_->forward(u), transpose(basis)) + bias_;
}

void DeepOnet::set_points(const Tensor& points) { points_ = points; }

Tensor DeepOnet::forward(const Tensor& u) {
  EDDY_CHECK(points_.defined(), "DeepONet: forward(u) needs set_points(points) first");
  return evaluate(u, points_);
}

}  // namespace eddy::nn
