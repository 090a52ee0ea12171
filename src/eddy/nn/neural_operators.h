#pragma once
// Neural operators: models that learn maps between functions sampled on grids.
//   SpectralConv  the Fourier layer's global convolution (keep the lowest modes, mix channels);
//   Fno           Fourier neural operator in 1D, 2D or 3D (Li et al., ICLR 2021), optionally with
//                 Tucker-factorised spectral weights (TFNO, Kossaifi et al., 2023);
//   DeepOnet      branch and trunk networks (Lu et al., Nature Machine Intelligence 2021).
// Grid models use the channels-first layout [batch, channels, n_1, ..., n_d], and their weights
// do not depend on the n_i, so a model trained at one resolution evaluates at any other.

#include <memory>
#include <vector>

#include "eddy/nn/layers.h"

namespace eddy::nn {

// A 1x1 convolution: the same [in, out] linear map at every grid point, channels-first.
class PointwiseLinear : public Module {
 public:
  PointwiseLinear(int64_t in_channels, int64_t out_channels, Generator& generator, DType dtype);
  Tensor forward(const Tensor& x) override;

  Tensor weight;  // [out, in], so that weight @ x[b] maps the channel axis
  Tensor bias;    // [out, 1]
};

// How the spectral weights of a Fourier layer are stored.
//   dense:  one complex weight per (in, out, mode), as in the FNO paper;
//   tucker: a Tucker decomposition core x_0 U_in x_1 U_out x_2 U_modes..., whose rank is a
//           fraction of each axis; fewer parameters, and a regulariser on small data sets.
enum class SpectralFactorization { dense, tucker };
SpectralFactorization parse_factorization(std::string_view name);

class SpectralConv : public Module {
 public:
  // modes[i]: frequencies kept on spatial axis i (both signs on all axes but the last, which is
  // the half spectrum). `rank` is the Tucker rank as a fraction of each axis (tucker only).
  SpectralConv(int64_t in_channels, int64_t out_channels, std::vector<int64_t> modes, Generator& generator,
               DType dtype, SpectralFactorization factorization = SpectralFactorization::dense, double rank = 0.5);
  // [batch, in, n_1..n_d] -> [batch, out, n_1..n_d]
  Tensor forward(const Tensor& x) override;
  // The complex weights [in, out, 2 k_1, ..., k_d] that forward applies.
  Tensor complex_weights() const;

 private:
  std::vector<int64_t> modes_;
  // Parameters are real (complex values as a trailing axis of 2): optimisers update real tensors.
  Tensor weight_;              // dense: [in, out, 2 k_1, ..., k_d, 2]
  Tensor core_;                // tucker: [r_0, ..., r_{d+1}, 2]
  std::vector<Tensor> factors_;  // tucker: one [axis length, r_i, 2] per axis of the weights
};

struct FnoOptions {
  int64_t in_channels = 1;
  int64_t out_channels = 1;
  std::vector<int64_t> modes;  // one entry per spatial axis: the model's dimension
  int64_t width = 32;          // channels of the Fourier layers
  int64_t layers = 4;
  int64_t projection_width = 128;
  ActivationKind activation = ActivationKind::gelu;
  // Appends each point's coordinates in [0, 1) as extra input channels.
  bool grid_coordinates = true;
  // Zero points appended to every spatial axis before the Fourier layers and cut off after;
  // this lets non-periodic solutions avoid the wrap-around the FFT implies.
  int64_t padding = 0;
  // The grid `padding` is counted on (the training grid), one size per spatial axis: on another
  // grid the padding covers the same fraction of the domain (scaled and rounded), so that the
  // model is the same operator at every resolution. Empty: `padding` points on every grid.
  std::vector<int64_t> padding_grid;
  SpectralFactorization factorization = SpectralFactorization::dense;
  double rank = 0.5;
  DType dtype = DType::f32;
  uint64_t seed = 0;
};

// Lifting P, Fourier layers h <- act(K h + W h) (no activation after the last), projection Q.
class Fno : public Module {
 public:
  explicit Fno(const FnoOptions& options);
  // [batch, in_channels, n_1..n_d] -> [batch, out_channels, n_1..n_d]
  Tensor forward(const Tensor& x) override;
  const FnoOptions& options() const { return options_; }

 private:
  FnoOptions options_;
  std::shared_ptr<PointwiseLinear> lift_, project_hidden_, project_out_;
  std::vector<std::shared_ptr<SpectralConv>> spectral_;
  std::vector<std::shared_ptr<PointwiseLinear>> skip_;
};

// The coordinates i_k / n_k of every point of a grid, channels-first: [1, d, n_1, ..., n_d].
Tensor grid_coordinates(const Shape& spatial, DType dtype, Device device);

struct DeepOnetOptions {
  int64_t sensors = 100;      // branch input: the input function at fixed sensor points
  int64_t coordinates = 1;    // trunk input: the dimension of the output's domain
  int64_t latent = 40;        // p, the number of basis functions
  int64_t width = 40;
  int64_t depth = 2;          // hidden layers of each net
  ActivationKind activation = ActivationKind::relu;
  DType dtype = DType::f32;
  uint64_t seed = 0;
};

// G(u)(y) = sum_k b_k(u) t_k(y) + b_0.
class DeepOnet : public Module {
 public:
  explicit DeepOnet(const DeepOnetOptions& options);
  // u: [batch, sensors], points: [P, coordinates] -> [batch, P].
  Tensor evaluate(const Tensor& u, const Tensor& points);
  // Module's single-input form: the points given to set_points.
  Tensor forward(const Tensor& u) override;
  void set_points(const Tensor& points);
  const DeepOnetOptions& options() const { return options_; }

 private:
  DeepOnetOptions options_;
  std::shared_ptr<Module> branch_, trunk_;
  Tensor bias_;
  Tensor points_;
};

}  // namespace eddy::nn
