#pragma once
// The samples of an operator-learning run, loaded from HDF5 and shaped for the model:
//   FNO:      input [N, C_in, n_1..n_d], output [N, C_out, n_1..n_d] on the same grid;
//   DeepONet: input [N, sensors], output [N, P] at the points [P, d].
// Errors name the split's config location, the file, the dataset and the shapes.

#include <span>
#include <string>
#include <vector>

#include "eddy/dist/communicator.h"
#include "eddy/nn/module.h"
#include "solvers/operator/problem.h"

namespace eddy::operator_learning {

// The samples [first, first + held) of a split of `size` samples, as this process holds them.
struct Split {
  std::string name;
  Tensor input, output;  // the held samples
  Tensor points;         // DeepONet only
  int64_t size = 0;
  int64_t first = 0;
  int64_t held() const { return input.shape()[0]; }
};

struct Dataset {
  Split train;
  std::vector<Split> tests;
};

// Every rank of `comm` reads its consecutive share of the training samples only (so a training
// set may be larger than one node's memory) and every test set whole; all check every split's
// file and shapes alike.
Dataset load_data(const OperatorProblem& problem, dist::Communicator& comm = dist::default_communicator());

// This rank's balanced share of a global batch of training samples (`batch`: their indices in
// the split): batch positions dist::shard(0, batch size, rank, ranks), in batch order, as
// {input, output}, fetched from the ranks that hold them (load_data's consecutive shares) by one
// all-to-all per array. Shares differ by at most one sample, so every step runs programs of the
// same shapes. Collective over `comm`, which must be load_data's.
std::pair<Tensor, Tensor> batch_share(const Split& train, std::span<const int64_t> batch,
                                      dist::Communicator& comm = dist::default_communicator());

// Grid rows as a file holds them, [N, n...] or with `has_channels` [N, C, n...], in the FNO's
// layout [N, C, n...] (C = 1 without a channel axis), at every `stride`-th point of each spatial
// axis: what load_data does to a split's grids.
Tensor to_grid_layout(Tensor rows, bool has_channels, int64_t stride);

// The training split's layout without its samples (zero rows, and DeepONet's query points): what
// rebuilding a trained model needs, read without loading the data.
Split training_layout(const OperatorProblem& problem);
// Every split's layout, the test sets' files and datasets opened and their shapes checked against
// the training set's as load_data checks them, without loading samples (what `eddy check` does).
Dataset data_layout(const OperatorProblem& problem);

// Per-channel standardisation, with the statistics as buffers so checkpoints carry them.
class Normalizer : public nn::Module {
 public:
  // Statistics over every axis but the channel axis (axis 1 of grid data; none for DeepONet's
  // [N, m] arrays), over all ranks' `samples`. `enabled` false: the identity, with mean 0 and
  // deviation 1 stored.
  Normalizer(const Tensor& samples, bool channel_axis, bool enabled,
             dist::Communicator& comm = dist::default_communicator());
  Tensor encode(const Tensor& x) const;
  Tensor decode(const Tensor& x) const;
  // x divided by the deviation, without the mean: for differences of physical values.
  Tensor in_deviations(const Tensor& x) const;
  Tensor forward(const Tensor& x) override { return encode(x); }

 private:
  Tensor mean_, stddev_;
};

}  // namespace eddy::operator_learning
