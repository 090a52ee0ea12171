#pragma once
// ZeRO stage 1 (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models", SC 2020): data parallelism in which each of the N ranks keeps the optimiser
// state of only its 1/N of the parameters, instead of every rank keeping all of it.
//
// The parameters, every rank's whole copy, are flattened and concatenated; rank r owns the
// consecutive elements dist::shard(0, total, r, N) gives it (counts differ by at most one). A step
//   1. reduce-scatters the gradients, so rank r receives the mean over ranks of its elements only
//      (one message, in which each parameter's "defined on some rank" flag rides along);
//   2. runs the wrapped optimiser (Adam, AdamW, SGD) on this rank's slices of the parameters,
//      whose state exists only for those slices;
//   3. all-gathers the updated slices into every rank's whole parameters.
// That sends the bytes of one all-reduce (a reduce-scatter and an all-gather are its two halves)
// and gives the parameters of average_gradients() followed by the unsharded optimiser, bit for
// bit where the reduction adds in the same order (two ranks always do).
//
// state_dict() gathers the whole state, under the unsharded optimiser's keys and shapes, so a
// checkpoint is the one plain data parallelism writes and loads on any number of ranks, sharded
// or not; load_state_dict() takes such a state and keeps this rank's slices.

#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "eddy/dist/communicator.h"
#include "eddy/optim/optimizer.h"

namespace eddy::dist {

// What the ranks' gradients are when the step reads them.
enum class RankGradients {
  // Each rank's own (its share of the batch), averaged over the ranks by the step's
  // reduce-scatter, as average_gradients() would average them.
  to_average,
  // Each rank's part of the whole gradient (DeferGradientSums, dtensor.h), summed over the ranks
  // by the step's reduce-scatter, as sum_gradients() would sum them.
  to_sum,
  // Already the whole gradient on every rank (summed over ranks in the backward pass, as for
  // ordinary parameters used with distributed tensors): each rank takes its slice, sending nothing.
  identical,
};

class ShardedOptimizer final : public optim::Optimizer {
 public:
  // Makes the optimiser that updates this rank's slices: 1-D leaf tensors, one per parameter this
  // rank owns elements of, in parameter order. It must update elementwise (updates_elementwise()).
  using Factory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor> slices)>;

  // `parameters`: tensors of one dtype, the same on every rank of `comm`, with at least as many
  // elements in all as `comm` has ranks. A distributed parameter (tensor parallel) counts by its
  // local part, which must be the same on the ranks of `comm`: pass the communicator of the mesh
  // axis along which it is replicated (the data-parallel one), and its state, sharded over that
  // axis, comes back from state_dict() distributed as the parameter is. Collective only in that
  // every rank must make it alike. Throws eddy::Error naming the optimiser when `make` gives one that cannot be
  // sharded (SOAP).
  ShardedOptimizer(std::vector<Tensor> parameters, const Factory& make,
                   RankGradients gradients = RankGradients::to_average, Communicator& comm = default_communicator());

  // Step 1 alone (collective), for a trainer that needs its step's loss summed over ranks before
  // it decides to step: `sums` ride in the same message and come back summed over ranks
  // (RankGradients::identical sends nothing and leaves them as they are). The parameters'
  // .grad() are left as they were; the reduced gradients go to this rank's slices.
  void reduce_gradients(std::span<double> sums = {});
  // Steps 1 (unless reduce_gradients() ran since the last step), 2 and 3. Collective.
  void step() override;

  // After reduce_gradients(): this rank's share of the squared 2-norm of the whole reduced
  // gradient, such that the shares of every rank of the job add up to it (where ranks outside the
  // optimiser's communicator hold the same part of a parameter, each counts a fraction of it).
  double reduced_gradient_square_share() const;
  // After reduce_gradients(): the reduced gradients times `factor`, before step().
  void scale_reduced_gradients(double factor);

  // The whole state, as the unsharded optimiser's state_dict() has it. Collective.
  nn::StateDict state_dict() const override;
  // Takes a whole state (from state_dict() on any number of ranks, or from the unsharded
  // optimiser) and keeps this rank's slices of it. Throws naming the key, changing nothing, when
  // an entry is missing or its shape or dtype differs.
  void load_state_dict(const nn::StateDict& state) override;

  // This rank's optimiser, over its slices: its state_dict() is the state this rank holds.
  const optim::Optimizer& local() const { return *layout_.local; }
  // The elements [first, last) of the flattened, concatenated parameters that this rank owns.
  std::pair<int64_t, int64_t> owned() const { return layout_.ranges.at(static_cast<size_t>(comm_.rank())); }

 private:
  // Where this rank's slice of parameter `parameter`, its elements [begin, end), sits in its block.
  struct Piece {
    size_t parameter;
    int64_t begin, end, position;
  };
  struct Layout {
    DType dtype;
    std::vector<int64_t> offsets;                     // of each parameter in the flat order
    std::vector<std::pair<int64_t, int64_t>> ranges;  // each rank's owned elements
    int64_t block = 0;                                // the largest range: each rank's share of a message
    std::vector<Piece> pieces;
    std::vector<Tensor> slices;  // the local optimiser's parameters, one per piece
    std::unique_ptr<optim::Optimizer> local;
  };
  static Layout plan(const std::vector<Tensor>& parameters, const Factory& make, Communicator& comm);
  ShardedOptimizer(std::vector<Tensor> parameters, Layout layout, RankGradients gradients, Communicator& comm);

  // Calls visit(rank, at, position, count) for each rank that owns elements of parameter
  // `parameter`: `count` of them, from its element `at`, sit at `position` in that rank's block.
  using OwnerVisit = std::function<void(int64_t rank, int64_t at, int64_t position, int64_t count)>;
  void for_each_owner(size_t parameter, const OwnerVisit& visit) const;
  // `blocks` (one per rank, `width` elements apart) filled from the whole per-parameter values
  // `whole`, and the reverse; undefined values leave zeros.
  void scatter_into_blocks(const std::vector<Tensor>& whole, const Tensor& blocks, int64_t width) const;
  Tensor parameter_from_blocks(size_t parameter, const Tensor& blocks, DType dtype) const;
  // Every rank's `slices` (one per piece) gathered: the ranks' blocks, one after another.
  Tensor gather_blocks(const std::vector<Tensor>& slices, DType dtype) const;

  Layout layout_;
  RankGradients gradients_;
  Communicator& comm_;
  bool reduced_ = false;
};

// Gradient clipping by global norm (optim::clip_grad_norm) of the gradients that `optimizers`
// reduced (reduce_gradients() ran), where the whole gradients exist only as the ranks' slices.
// Collective over the job. Returns the norm before clipping.
double clip_reduced_grad_norm(const std::vector<ShardedOptimizer*>& optimizers, double max_norm);

}  // namespace eddy::dist
