#include "eddy/dist/sharded_optimizer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <set>
#include <string>

#include "eddy/autodiff/tape.h"
#include "eddy/core/distribution.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/dist/dtensor.h"
#include "eddy/ops/ops.h"
#include "eddy/optim/clip.h"

namespace eddy::dist {
namespace {

constexpr const char* kWho = "ShardedOptimizer (ZeRO stage 1)";

// The buffers live where the parameters do, written through the device's copies (the
// communicator takes them from there; MPI stages device memory through the host).
void copy_elements(const Tensor& to, int64_t to_offset, const Tensor& from, int64_t from_offset, int64_t count) {
  slice(to, 0, to_offset, to_offset + count).copy_(slice(from, 0, from_offset, from_offset + count));
}

Device device_of(const std::vector<Tensor>& parameters) {
  return parameters.empty() ? cpu() : local_part(parameters.front()).device();
}

Tensor dense_flat(const Tensor& t) { return contiguous(flatten(t)); }

// A state tensor of `parameter`'s local shape, laid out as the parameter is (a distributed one's
// state is distributed alike, as the unsharded optimiser's would be). The optimiser shards the
// parameters' local parts (local_part), which are alike on the ranks of its communicator.
Tensor placed_like(const Tensor& local, const Tensor& parameter) {
  return is_distributed(parameter) ? with_local(parameter, local) : local;
}

// "<optimiser>.<what>.<index>" -> (what, index); a key without a trailing index (the step count)
// gives index -1.
std::pair<std::string, int64_t> split_key(const std::string& key, const std::string& optimiser) {
  const size_t dot = key.rfind('.');
  const std::string tail = key.substr(dot + 1);
  const bool indexed = dot > optimiser.size() && !tail.empty() &&
                       std::all_of(tail.begin(), tail.end(), [](unsigned char c) { return std::isdigit(c); });
  if (!indexed) return {key, -1};
  return {key.substr(optimiser.size() + 1, dot - optimiser.size() - 1), std::stoll(tail)};
}

// The kinds of per-element state ("m", "v", "momentum") of an optimiser's state dict, in a fixed
// order, the same on every rank (each owns a slice 0); the rest is shared state such as the step.
std::set<std::string> per_element_state(const nn::StateDict& state, const std::string& optimiser) {
  std::set<std::string> kinds;
  for (const auto& [key, value] : state) {
    const auto [what, index] = split_key(key, optimiser);
    if (index == 0) kinds.insert(what);
  }
  return kinds;
}

}  // namespace

namespace {

// The shares below assume every rank lists parameters of the same shapes (a model built alike);
// otherwise the collectives fail in MPI (sizes) or sum unrelated elements (shapes).
void check_same_parameters(const std::vector<Tensor>& parameters, int64_t total, Communicator& comm) {
  if (comm.size() == 1) return;
  std::string shapes;
  for (const Tensor& p : parameters) shapes += to_string(local_part(p).shape());
  const std::vector<int64_t> mine{static_cast<int64_t>(parameters.size()), total,
                                  static_cast<int64_t>(std::hash<std::string>{}(shapes) >> 1)};
  Tensor all = zeros({comm.size() * 3}, DType::i64);
  comm.allgather(tensor(mine), all);
  const std::vector<int64_t> listed = all.to_vector<int64_t>();
  for (int r = 0; r < comm.size(); ++r) {
    const int64_t* theirs = listed.data() + 3 * r;
    EDDY_CHECK(theirs[0] == mine[0] && theirs[1] == mine[1] && theirs[2] == mine[2], kWho, ": rank ", r, " has ",
               theirs[0], " parameters of ", theirs[1], " elements and rank ", comm.rank(), " ", mine[0], " of ", mine[1],
               theirs[0] == mine[0] && theirs[1] == mine[1] ? " (in other shapes)" : "",
               "; every rank must pass the same parameters, in the same order and shapes");
  }
}

}  // namespace

ShardedOptimizer::Layout ShardedOptimizer::plan(const std::vector<Tensor>& parameters, const Factory& make,
                                                Communicator& comm) {
  optim::check_parameters(parameters, kWho);
  Layout layout{parameters.front().dtype(), {}, {}, 0, {}, {}, nullptr};
  int64_t total = 0;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Tensor p = local_part(parameters[i]);
    EDDY_CHECK(p.dtype() == layout.dtype, kWho, ": parameter ", i, " is ", p.dtype(), " but parameter 0 is ",
               layout.dtype, "; make one ShardedOptimizer per dtype");
    layout.offsets.push_back(total);
    total += p.numel();
  }
  check_same_parameters(parameters, total, comm);
  const int size = comm.size();
  EDDY_CHECK(total >= size, kWho, ": ", total, " parameter elements cannot be shared out over ", size,
             " ranks (each must own at least one); keep the whole optimiser state on every rank instead");
  for (int r = 0; r < size; ++r) {
    layout.ranges.push_back(shard(0, total, r, size));
    layout.block = std::max(layout.block, layout.ranges.back().second - layout.ranges.back().first);
  }

  NoGradGuard no_grad;
  const auto [first, last] = layout.ranges[static_cast<size_t>(comm.rank())];
  for (size_t i = 0; i < parameters.size(); ++i) {
    const int64_t start = std::max(first, layout.offsets[i]);
    const int64_t stop = std::min(last, layout.offsets[i] + local_part(parameters[i]).numel());
    if (start >= stop) continue;
    const Piece piece{i, start - layout.offsets[i], stop - layout.offsets[i], start - first};
    Tensor slice_of_parameter =
        Tensor::empty({piece.end - piece.begin}, layout.dtype, local_part(parameters[i]).device());
    slice_of_parameter.copy_(slice(flatten(local_part(parameters[i])), 0, piece.begin, piece.end));
    slice_of_parameter.requires_grad_();
    layout.pieces.push_back(piece);
    layout.slices.push_back(slice_of_parameter);
  }
  layout.local = make(layout.slices);
  EDDY_CHECK(layout.local != nullptr, kWho, ": the factory made no optimiser");
  EDDY_CHECK(layout.local->updates_elementwise(), kWho, ": ", layout.local->name(), " cannot have its state sharded: "
             "its update of an element depends on other elements, so it cannot run on a slice of the parameters; "
             "ZeRO stage 1 works with adam, adamw and sgd");
  return layout;
}

ShardedOptimizer::ShardedOptimizer(std::vector<Tensor> parameters, const Factory& make, RankGradients gradients,
                                   Communicator& comm)
    : ShardedOptimizer(parameters, plan(parameters, make, comm), gradients, comm) {}

ShardedOptimizer::ShardedOptimizer(std::vector<Tensor> parameters, Layout layout, RankGradients gradients,
                                   Communicator& comm)
    : Optimizer(std::move(parameters), layout.local->learning_rate(), layout.local->name()),
      layout_(std::move(layout)),
      gradients_(gradients),
      comm_(comm) {}

void ShardedOptimizer::for_each_owner(size_t parameter, const OwnerVisit& visit) const {
  const int64_t offset = layout_.offsets[parameter], count = local_part(parameters()[parameter]).numel();
  for (size_t r = 0; r < layout_.ranges.size(); ++r) {
    const auto [first, last] = layout_.ranges[r];
    const int64_t start = std::max(first, offset), stop = std::min(last, offset + count);
    if (start < stop) visit(static_cast<int64_t>(r), start - offset, start - first, stop - start);
  }
}

void ShardedOptimizer::scatter_into_blocks(const std::vector<Tensor>& whole, const Tensor& blocks,
                                           int64_t width) const {
  for (size_t i = 0; i < whole.size(); ++i) {
    if (!whole[i].defined()) continue;
    const Tensor flat = dense_flat(whole[i]);
    for_each_owner(i, [&](int64_t rank, int64_t at, int64_t position, int64_t count) {
      copy_elements(blocks, rank * width + position, flat, at, count);
    });
  }
}

Tensor ShardedOptimizer::parameter_from_blocks(size_t parameter, const Tensor& blocks, DType dtype) const {
  const Tensor p = local_part(parameters()[parameter]);
  Tensor flat = Tensor::empty({p.numel()}, dtype, p.device());
  for_each_owner(parameter, [&](int64_t rank, int64_t at, int64_t position, int64_t count) {
    copy_elements(flat, at, blocks, rank * layout_.block + position, count);
  });
  return reshape(flat, p.shape());
}

Tensor ShardedOptimizer::gather_blocks(const std::vector<Tensor>& slices, DType dtype) const {
  Tensor mine = zeros({layout_.block}, dtype, device_of(parameters()));
  for (size_t j = 0; j < layout_.pieces.size(); ++j) {
    const Tensor dense = contiguous(slices[j]);
    copy_elements(mine, layout_.pieces[j].position, dense, 0, dense.numel());
  }
  const Tensor everyone = Tensor::empty({layout_.block * comm_.size()}, dtype, mine.device());
  comm_.allgather(mine, everyone);
  return everyone;
}

void ShardedOptimizer::reduce_gradients(std::span<double> sums) {
  NoGradGuard no_grad;
  const std::vector<Tensor>& params = parameters();
  std::vector<Tensor> grads(layout_.slices.size());
  for (const Tensor& s : layout_.slices) Tensor(s).zero_grad();
  if (gradients_ == RankGradients::identical) {
    for (size_t j = 0; j < grads.size(); ++j) {
      const Piece& piece = layout_.pieces[j];
      const Tensor g = local_part(params[piece.parameter].grad());
      if (g.defined()) grads[j] = slice(dense_flat(g), 0, piece.begin, piece.end);
    }
  } else {
    // Each rank's block: its elements (zero-padded to the largest range), then one flag per
    // parameter (1 where this rank has its gradient), then `sums`; every rank writes its flags and
    // sums into every block, so each receives their totals.
    const int64_t flags = layout_.block, extras = flags + static_cast<int64_t>(params.size());
    const int64_t width = extras + static_cast<int64_t>(sums.size());
    std::vector<Tensor> whole;
    std::vector<double> tail(params.size(), 0.0);
    for (size_t i = 0; i < params.size(); ++i) {
      whole.push_back(local_part(params[i].grad()));
      tail[i] = whole.back().defined() ? 1 : 0;
    }
    tail.insert(tail.end(), sums.begin(), sums.end());
    const Device device = device_of(params);
    const Tensor packed_tail = cast(tensor(tail, {static_cast<int64_t>(tail.size())}, device), layout_.dtype);
    const Tensor blocks = zeros({width * comm_.size()}, layout_.dtype, device);
    scatter_into_blocks(whole, blocks, width);
    for (int r = 0; r < comm_.size(); ++r) copy_elements(blocks, r * width + flags, packed_tail, 0, packed_tail.numel());
    const Tensor mine = Tensor::empty({width}, layout_.dtype, device);
    comm_.reduce_scatter(blocks, mine);

    const std::vector<c128> summed_tail = slice(mine, 0, flags, width).to_vector<c128>();
    for (size_t k = 0; k < sums.size(); ++k) sums[k] = summed_tail[params.size() + k].real();
    Tensor reduced = slice(mine, 0, 0, flags);
    if (gradients_ == RankGradients::to_average) reduced = reduced / static_cast<double>(comm_.size());
    for (size_t j = 0; j < grads.size(); ++j) {
      const Piece& piece = layout_.pieces[j];
      if (summed_tail[piece.parameter].real() == 0) continue;  // undefined on every rank: the step skips it
      grads[j] = slice(reduced, 0, piece.position, piece.position + piece.end - piece.begin);
    }
  }
  optim::set_grads(layout_.slices, grads);
  reduced_ = true;
}

double ShardedOptimizer::reduced_gradient_square_share() const {
  EDDY_CHECK(reduced_, kWho, ": reduced_gradient_square_share() before reduce_gradients()");
  NoGradGuard no_grad;
  const int64_t job = default_communicator().size();
  double share = 0;
  for (size_t j = 0; j < layout_.pieces.size(); ++j) {
    const Tensor g = layout_.slices[j].grad();
    if (!g.defined()) continue;
    // The ranks holding a copy of the parameter's part (every rank of the job for an ordinary
    // tensor), of which comm_'s hold one copy between them, each its slice.
    const Distribution* layout = distribution_of(parameters()[layout_.pieces[j].parameter]);
    const int64_t holders = layout ? replication_factor(*layout) : job;
    const double copies = static_cast<double>(holders / comm_.size());
    share += sum(square(cast(abs(g), DType::f64))).item<double>() / copies;
  }
  return share;
}

void ShardedOptimizer::scale_reduced_gradients(double factor) {
  EDDY_CHECK(reduced_, kWho, ": scale_reduced_gradients() before reduce_gradients()");
  NoGradGuard no_grad;
  std::vector<Tensor> scaled(layout_.slices.size());
  for (size_t j = 0; j < scaled.size(); ++j) {
    if (layout_.slices[j].grad().defined()) scaled[j] = layout_.slices[j].grad() * factor;
  }
  optim::set_grads(layout_.slices, scaled);
}

double clip_reduced_grad_norm(const std::vector<ShardedOptimizer*>& optimizers, double max_norm) {
  NoGradGuard no_grad;
  double share = 0;
  for (const ShardedOptimizer* optimizer : optimizers) share += optimizer->reduced_gradient_square_share();
  const Tensor total = tensor(std::vector<double>{share});
  default_communicator().allreduce(total, total, ReduceOp::sum);
  const double norm = std::sqrt(total.to_vector<double>()[0]);
  const double factor = optim::clip_factor(norm, max_norm);
  if (factor != 1) {
    for (ShardedOptimizer* optimizer : optimizers) optimizer->scale_reduced_gradients(factor);
  }
  return norm;
}

void ShardedOptimizer::step() {
  if (!reduced_) reduce_gradients();
  reduced_ = false;
  NoGradGuard no_grad;
  count_step();
  // The slices start from the whole parameters, which a checkpoint load or a broadcast may have
  // changed since the last step.
  for (size_t j = 0; j < layout_.pieces.size(); ++j) {
    const Piece& piece = layout_.pieces[j];
    const Tensor parameter = local_part(parameters()[piece.parameter]);
    Tensor(layout_.slices[j]).copy_(slice(flatten(parameter), 0, piece.begin, piece.end));
  }
  layout_.local->set_learning_rate(learning_rate());
  layout_.local->step();
  // One parameter at a time, so that the step holds one whole copy of the parameters (the gathered
  // blocks) rather than two.
  const Tensor everyone = gather_blocks(layout_.slices, layout_.dtype);
  for (size_t i = 0; i < parameters().size(); ++i) {
    Tensor(local_part(parameters()[i])).copy_(parameter_from_blocks(i, everyone, layout_.dtype));
  }
}

nn::StateDict ShardedOptimizer::state_dict() const {
  NoGradGuard no_grad;
  const nn::StateDict local = layout_.local->state_dict();
  nn::StateDict state;
  for (const auto& [key, value] : local) {
    if (split_key(key, name()).second < 0) state[key] = value;
  }
  for (const std::string& what : per_element_state(local, name())) {
    std::vector<Tensor> slices;
    for (size_t j = 0; j < layout_.pieces.size(); ++j) {
      const Tensor& part = local.at(cat(name(), ".", what, ".", j));
      EDDY_CHECK(part.shape() == layout_.slices[j].shape(), kWho, ": ", name(), "'s state \"", what, "\" has shape ",
                 part.shape(), " for a slice of ", layout_.slices[j].numel(), " elements; it is not per element");
      slices.push_back(part);
    }
    const Tensor everyone = gather_blocks(slices, slices.front().dtype());
    for (size_t i = 0; i < parameters().size(); ++i) {
      state[key(what, i)] = placed_like(parameter_from_blocks(i, everyone, slices.front().dtype()), parameters()[i]);
    }
  }
  return state;
}

void ShardedOptimizer::load_state_dict(const nn::StateDict& state) {
  NoGradGuard no_grad;
  const nn::StateDict current = layout_.local->state_dict();
  nn::StateDict mine;
  for (const auto& [key, value] : current) {
    if (split_key(key, name()).second < 0) mine[key] = optim::state_entry(state, key, value.shape(), value.dtype());
  }
  for (const std::string& what : per_element_state(current, name())) {
    const DType dtype = current.at(cat(name(), ".", what, ".0")).dtype();
    std::vector<Tensor> whole;
    for (size_t i = 0; i < parameters().size(); ++i) {
      const Tensor& parameter = parameters()[i];
      const Tensor entry = optim::state_entry(state, key(what, i), parameter.shape(), dtype);
      // A whole state (a checkpoint's) of a distributed parameter: this rank's part of it.
      const bool whole_of_distributed = is_distributed(parameter) && !is_distributed(entry);
      whole.push_back(dense_flat(local_part(whole_of_distributed ? shard_like(entry, parameter) : entry)));
    }
    for (size_t j = 0; j < layout_.pieces.size(); ++j) {
      const Piece& piece = layout_.pieces[j];
      mine[cat(name(), ".", what, ".", j)] = slice(whole[piece.parameter], 0, piece.begin, piece.end);
    }
  }
  layout_.local->load_state_dict(mine);
  load_steps(state);
}

}  // namespace eddy::dist
