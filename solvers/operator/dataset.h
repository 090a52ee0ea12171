#pragma once
// The samples of an operator-learning run, loaded from HDF5 and shaped for the model:
//   FNO:      input [N, C_in, n_1..n_d], output [N, C_out, n_1..n_d] on the same grid;
//   DeepONet: input [N, sensors], output [N, P] at the points [P, d].
// Errors name the split's config location, the file, the dataset and the shapes.

#include <string>
#include <vector>

#include "eddy/nn/module.h"
#include "solvers/operator/problem.h"

namespace eddy::operator_learning {

struct Split {
  std::string name;
  Tensor input, output;
  Tensor points;  // DeepONet only
  int64_t size() const { return input.shape()[0]; }
};

struct Dataset {
  Split train;
  std::vector<Split> tests;
};

Dataset load_data(const OperatorProblem& problem);

// Per-channel standardisation, with the statistics as buffers so checkpoints carry them.
class Normalizer : public nn::Module {
 public:
  // Statistics over every axis but the channel axis (axis 1 of grid data; none for DeepONet's
  // [N, m] arrays). `enabled` false: the identity, with mean 0 and deviation 1 stored.
  Normalizer(const Tensor& samples, bool channel_axis, bool enabled);
  Tensor encode(const Tensor& x) const;
  Tensor decode(const Tensor& x) const;
  Tensor forward(const Tensor& x) override { return encode(x); }

 private:
  Tensor mean_, stddev_;
};

}  // namespace eddy::operator_learning
