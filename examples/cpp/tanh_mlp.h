#pragma once
// A tanh MLP u(x, t) and the PINN derivatives of it, shared by the derivatives example and its
// test. (The model library in src/eddy/nn will supersede the little MLP here.)

#include <cmath>
#include <vector>

#include "eddy/eddy.h"

namespace eddy::examples {

struct TanhMlp {
  std::vector<Tensor> weights;  // weights[l]: [in, out]
  std::vector<Tensor> biases;   // biases[l]: [out]

  // Glorot-uniform weights, zero biases; widths = {2, hidden..., 1}.
  static TanhMlp create(const std::vector<int64_t>& widths, DType dtype, uint64_t seed) {
    Generator generator(seed);
    TanhMlp mlp;
    for (size_t l = 0; l + 1 < widths.size(); ++l) {
      const double limit = std::sqrt(6.0 / static_cast<double>(widths[l] + widths[l + 1]));
      Tensor w = (2.0 * rand({widths[l], widths[l + 1]}, dtype, &generator) - 1.0) * limit;
      mlp.weights.push_back(w.detach().requires_grad_());
      mlp.biases.push_back(zeros({widths[l + 1]}, dtype).requires_grad_());
    }
    return mlp;
  }

  std::vector<Tensor> parameters() const {
    std::vector<Tensor> all = weights;
    all.insert(all.end(), biases.begin(), biases.end());
    return all;
  }

  // inputs: [N, 2] -> u: [N, 1].
  Tensor operator()(const Tensor& inputs) const {
    Tensor h = inputs;
    for (size_t l = 0; l < weights.size(); ++l) {
      h = matmul(h, weights[l]) + biases[l];
      if (l + 1 < weights.size()) h = tanh(h);
    }
    return h;
  }
};

struct PinnDerivatives {
  Tensor u, u_x, u_t, u_xx, u_xxx;
};

// Per-point derivatives by reverse mode: the points are independent, so the gradient of the
// sum over points with respect to x is u_x at every point. create_graph keeps each result
// differentiable, for the next order and for the weight gradient.
inline PinnDerivatives pinn_derivatives(const TanhMlp& mlp, const Tensor& x, const Tensor& t) {
  PinnDerivatives d;
  d.u = mlp(concat({x, t}, 1));
  Tensor ones_n = ones_like(d.u);
  auto first = grad({d.u}, {x, t}, {ones_n}, true);
  d.u_x = first[0];
  d.u_t = first[1];
  d.u_xx = grad({d.u_x}, {x}, {ones_n}, true)[0];
  d.u_xxx = grad({d.u_xx}, {x}, {ones_n}, true)[0];
  return d;
}

// A loss built from every derivative: the residual of a KdV-Burgers equation
// u_t + u u_x - nu u_xx + delta u_xxx = 0, plus a small data term on u.
inline Tensor residual_loss(const PinnDerivatives& d, double nu = 0.01, double delta = 0.005) {
  Tensor residual = d.u_t + d.u * d.u_x - nu * d.u_xx + delta * d.u_xxx;
  return mean(square(residual)) + 0.1 * mean(square(d.u));
}

}  // namespace eddy::examples
