#include "eddy/ops/sharding.h"

#include <algorithm>

#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"

namespace eddy::sharding {
namespace {

using Kind = Placement::Kind;

bool sharded_along(const Placement& placement, int64_t axis) { return placement.is_shard() && placement.axis == axis; }

int64_t product(const Shape& shape, size_t begin, size_t end) {
  int64_t result = 1;
  for (size_t i = begin; i < end; ++i) result *= shape[i];
  return result;
}

// Whether some run of `axes` from `first` multiplies out to exactly `size`.
bool run_multiplies_to(const Shape& axes, size_t first, int64_t size) {
  int64_t running = 1;
  for (size_t i = first; i < axes.size() && running < size; ++i) running *= axes[i];
  return running == size;
}

// A size along a split axis as the rank at `coordinate` holds it.
void localize_extent(int64_t& extent, int64_t ranks, int64_t coordinate) {
  extent = shard_range(extent, ranks, coordinate).size();
}

// A target shape (Attrs::shape) split along `axis`.
std::function<void(Attrs&, int64_t, int64_t)> divide_shape(int64_t axis) {
  return [axis](Attrs& local, int64_t ranks, int64_t coordinate) {
    localize_extent(local.shape[static_cast<size_t>(axis)], ranks, coordinate);
  };
}

// The bytes each rank receives to reshard `x` (global shape) from one placement to another on a
// mesh axis of `ranks` ranks: an all-gather or an all-to-all brings in the parts it lacks, a sum
// of partial values (all-reduce, or reduce-scatter into a shard) twice or once the data's share.
double reshard_bytes(const Tensor& x, const Placement& from, const Placement& to, int64_t ranks) {
  if (from == to || from.kind == Kind::replicate) return 0;  // a replicated tensor is sliced in place
  const double whole = static_cast<double>(x.numel()) * static_cast<double>(dtype_size(x.dtype()));
  const double others = static_cast<double>(ranks - 1) / static_cast<double>(std::max<int64_t>(ranks, 1));
  if (from.is_shard()) return to.is_shard() ? whole * others / static_cast<double>(ranks) : whole * others;
  return to.is_shard() ? whole * others : 2 * whole * others;
}

}  // namespace

ShardingDecision replicate_all(Inputs inputs) { return ShardingDecision{std::vector<Placement>(inputs.size()), {}}; }

Rule elementwise(PartialInputs partial_inputs) {
  return [partial_inputs](Inputs in, const Attrs&, std::span<const Placement> from, int64_t ranks) {
    const size_t count = in.size();
    const auto partial = static_cast<size_t>(std::count_if(from.begin(), from.end(), [](const Placement& p) {
      return p.kind == Kind::partial_sum;
    }));
    const auto replicated = static_cast<size_t>(std::count_if(from.begin(), from.end(), [](const Placement& p) {
      return p.kind == Kind::replicate;
    }));
    bool passes = false;
    switch (partial_inputs) {
      case PartialInputs::none: break;
      case PartialInputs::all: passes = partial == count; break;
      case PartialInputs::any_one: passes = partial == 1 && replicated == count - 1; break;
      case PartialInputs::first_only: passes = from[0].kind == Kind::partial_sum && replicated == count - 1; break;
    }
    if (passes) return ShardingDecision{{from.begin(), from.end()}, Placement::partial_sum()};

    Shape out = in[0].shape();
    for (size_t i = 1; i < count; ++i) out = broadcast_shapes(out, in[i].shape(), "sharding");
    const auto rank = static_cast<int64_t>(out.size());
    // The output is split along an axis some input is sharded along and does not broadcast;
    // each input then follows it, or is kept whole where it broadcasts.
    auto decision_for = [&](int64_t sharded) {
      ShardingDecision decision{{}, Placement::shard(sharded)};
      for (size_t i = 0; i < count; ++i) {
        const int64_t axis = sharded - (rank - in[i].dim());
        const bool spans = axis >= 0 && in[i].shape()[axis] == out[sharded];
        decision.inputs.push_back(spans ? Placement::shard(axis) : Placement::replicate());
      }
      return decision;
    };
    // Of those axes, the one whose reshards move the fewest bytes (an input sharded along another
    // axis is exchanged or gathered, a partial one summed); on a tie, the first input's.
    std::optional<ShardingDecision> best;
    double best_bytes = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!from[i].is_shard()) continue;
      const int64_t axis = from[i].axis + rank - in[i].dim();
      if (in[i].shape()[from[i].axis] != out[axis]) continue;
      ShardingDecision candidate = decision_for(axis);
      double bytes = 0;
      for (size_t k = 0; k < count; ++k) bytes += reshard_bytes(in[k], from[k], candidate.inputs[k], ranks);
      if (!best || bytes < best_bytes) {
        best = std::move(candidate);
        best_bytes = bytes;
      }
    }
    return best ? *best : replicate_all(in);
  };
}

Rule matmul() {
  return [](Inputs in, const Attrs&, std::span<const Placement> from, int64_t) {
    const Tensor &a = in[0], &b = in[1];
    const int64_t a_rank = a.dim(), b_rank = b.dim(), rank = std::max(a_rank, b_rank);
    const Placement &pa = from[0], &pb = from[1];
    const Placement whole = Placement::replicate();
    auto decide = [](Placement for_a, Placement for_b, Placement output) {
      return ShardingDecision{{for_a, for_b}, output};
    };
    // A product is linear in each operand: a partial sum times a whole matrix is a partial sum.
    if (pa.kind == Kind::partial_sum && pb.kind == Kind::replicate) return decide(pa, pb, pa);
    if (pb.kind == Kind::partial_sum && pa.kind == Kind::replicate) return decide(pa, pb, pb);

    const Placement a_inner = Placement::shard(a_rank - 1), b_inner = Placement::shard(b_rank - 2);
    if (pa == a_inner && (pb == b_inner || pb.kind == Kind::replicate)) return decide(pa, b_inner, Placement::partial_sum());
    if (pb == b_inner && pa.kind == Kind::replicate) return decide(a_inner, pb, Placement::partial_sum());
    // Rows of a and columns of b: one operand is gathered whole; gather the smaller one, which
    // sends fewer bytes.
    const bool rows = sharded_along(pa, a_rank - 2), columns = sharded_along(pb, b_rank - 1);
    if (rows && (!columns || a.numel() >= b.numel())) return decide(pa, whole, Placement::shard(rank - 2));
    if (columns) return decide(whole, pb, Placement::shard(rank - 1));

    // A batch axis, split alike in the other operand unless it broadcasts there.
    for (int i = 0; i < 2; ++i) {
      const Tensor &own = in[i], &other = in[1 - i];
      const Placement& placement = from[i];
      if (!placement.is_shard() || placement.axis >= own.dim() - 2) continue;
      const int64_t out_axis = placement.axis + rank - own.dim();
      const int64_t other_axis = out_axis - (rank - other.dim());
      const bool other_spans = other_axis >= 0 && other_axis < other.dim() - 2 &&
                               other.shape()[other_axis] == own.shape()[placement.axis];
      const bool own_spans = other_spans || other_axis < 0 || other.shape()[other_axis] == 1;
      if (!own_spans) continue;
      const Placement for_other = other_spans ? Placement::shard(other_axis) : whole;
      return i == 0 ? decide(placement, for_other, Placement::shard(out_axis))
                    : decide(for_other, placement, Placement::shard(out_axis));
    }
    return replicate_all(in);
  };
}

Rule matmul_add() {
  return [](Inputs in, const Attrs& attrs, std::span<const Placement> from, int64_t ranks) {
    const Tensor& addend = in[2];
    ShardingDecision decision = matmul()(in.first(2), attrs, from.first(2), ranks);
    const Placement& output = decision.output;
    if (output.kind == Kind::partial_sum && from[2].kind != Kind::partial_sum) return replicate_all(in);
    Placement for_addend = output.kind == Kind::partial_sum ? from[2] : Placement::replicate();
    if (output.is_shard()) {
      const int64_t rank = std::max(in[0].dim(), in[1].dim());
      const int64_t axis = output.axis - (rank - addend.dim());
      if (axis >= 0 && addend.shape()[axis] != 1) for_addend = Placement::shard(axis);
    }
    decision.inputs.push_back(for_addend);
    return decision;
  };
}

Rule reduction(std::optional<Placement::Kind> partial_kind) {
  return [partial_kind](Inputs in, const Attrs& attrs, std::span<const Placement> from, int64_t ranks) {
    const Placement& placement = from[0];
    if (placement.is_partial()) {
      return partial_kind == placement.kind ? ShardingDecision{{placement}, placement} : replicate_all(in);
    }
    if (!placement.is_shard()) return replicate_all(in);
    const std::vector<int64_t>& axes = attrs.axes;
    if (std::find(axes.begin(), axes.end(), placement.axis) != axes.end()) {
      // A maximum of no elements has no value: an axis shorter than the ranks, which leaves some
      // with none, is gathered first (an empty sum is zero).
      const bool empty_part = in[0].shape()[static_cast<size_t>(placement.axis)] < ranks;
      if (!partial_kind || (*partial_kind == Kind::partial_max && empty_part)) return replicate_all(in);
      return ShardingDecision{{placement}, Placement{*partial_kind, -1}};
    }
    int64_t out_axis = placement.axis;
    if (!attrs.keepdims) {
      out_axis -= std::count_if(axes.begin(), axes.end(), [&](int64_t axis) { return axis < placement.axis; });
    }
    return ShardingDecision{{placement}, Placement::shard(out_axis)};
  };
}

Rule permute() {
  return [](Inputs in, const Attrs& attrs, std::span<const Placement> from, int64_t) {
    const Placement& placement = from[0];
    if (!placement.is_shard()) return placement.is_partial() ? ShardingDecision{{placement}, placement} : replicate_all(in);
    const auto moved_to = std::find(attrs.axes.begin(), attrs.axes.end(), placement.axis) - attrs.axes.begin();
    return ShardingDecision{{placement}, Placement::shard(moved_to)};
  };
}

Rule expand() {
  return [](Inputs in, const Attrs& attrs, std::span<const Placement> from, int64_t) {
    const Placement& placement = from[0];
    if (!placement.is_shard()) return placement.is_partial() ? ShardingDecision{{placement}, placement} : replicate_all(in);
    const int64_t out_axis = placement.axis + static_cast<int64_t>(attrs.shape.size()) - in[0].dim();
    // An axis of one split over several ranks (some holding none of it) is not broadcast in parts.
    if (in[0].shape()[static_cast<size_t>(placement.axis)] != attrs.shape[static_cast<size_t>(out_axis)]) {
      return replicate_all(in);
    }
    return ShardingDecision{{placement}, Placement::shard(out_axis), divide_shape(out_axis)};
  };
}

Rule reshape() {
  return [](Inputs in, const Attrs& attrs, std::span<const Placement> from, int64_t ranks) {
    const Placement& placement = from[0];
    if (!placement.is_shard()) return placement.is_partial() ? ShardingDecision{{placement}, placement} : replicate_all(in);
    const Shape &shape = in[0].shape(), &target = attrs.shape;
    const auto axis = static_cast<size_t>(placement.axis);
    // The target axis that starts where the sharded axis starts in row-major order.
    const int64_t before = product(shape, 0, axis);
    size_t into = 0;
    for (int64_t running = 1; into < target.size() && (running < before || target[into] == 1); ++into) {
      running *= target[into];
    }
    if (into == target.size() || product(target, 0, into) != before) return replicate_all(in);
    const int64_t size = shape[axis], target_size = target[into];
    // Kept, or the leading axis of a merged group, or split with its leading part still whole on
    // each rank: in each case every rank's rows stay one contiguous block of the target axis. A
    // merged group keeps the split of its leading axis only where that is even (an uneven part
    // times the rest of the group is not the target axis's own uneven part).
    const bool kept_or_merged = target_size % size == 0 && run_multiplies_to(shape, axis, target_size) &&
                                (target_size == size || size % ranks == 0);
    const bool split = size % target_size == 0 && target_size % ranks == 0 && run_multiplies_to(target, into, size);
    if (!kept_or_merged && !split) return replicate_all(in);
    return ShardingDecision{{placement}, Placement::shard(static_cast<int64_t>(into)),
                            divide_shape(static_cast<int64_t>(into))};
  };
}

Rule slice() {
  return [](Inputs in, const Attrs& attrs, std::span<const Placement> from, int64_t) {
    const Placement& placement = from[0];
    if (!placement.is_shard()) return placement.is_partial() ? ShardingDecision{{placement}, placement} : replicate_all(in);
    const auto axis = static_cast<size_t>(placement.axis);
    if (attrs.lo[axis] != 0 || attrs.hi[axis] != in[0].shape()[axis] || attrs.step[axis] != 1) return replicate_all(in);
    return ShardingDecision{{placement}, placement, [axis](Attrs& local, int64_t ranks, int64_t coordinate) {
                              localize_extent(local.hi[axis], ranks, coordinate);
                            }};
  };
}

Rule pad() {
  return [](Inputs in, const Attrs& attrs, std::span<const Placement> from, int64_t) {
    const Placement& placement = from[0];
    if (!placement.is_shard()) return placement.is_partial() ? ShardingDecision{{placement}, placement} : replicate_all(in);
    const auto axis = static_cast<size_t>(placement.axis);
    if (attrs.lo[axis] != 0 || attrs.hi[axis] != 0) return replicate_all(in);
    return ShardingDecision{{placement}, placement};
  };
}

Rule concat() {
  return [](Inputs in, const Attrs& attrs, std::span<const Placement> from, int64_t) {
    // Linear in its inputs together: partial sums pass through, and a whole input joins them as a
    // partial sum held by one rank (no communication), as the zeros between an FNO's kept modes do.
    const bool partial =
        std::any_of(from.begin(), from.end(), [](const Placement& p) { return p.kind == Kind::partial_sum; });
    const bool partial_or_whole = std::all_of(from.begin(), from.end(), [](const Placement& p) {
      return p.kind == Kind::partial_sum || p.kind == Kind::replicate;
    });
    if (partial && partial_or_whole) {
      return ShardingDecision{std::vector<Placement>(in.size(), Placement::partial_sum()), Placement::partial_sum()};
    }
    for (const Placement& placement : from) {
      if (placement.is_shard() && placement.axis != attrs.axis) {
        return ShardingDecision{std::vector<Placement>(in.size(), placement), placement};
      }
    }
    return replicate_all(in);
  };
}

namespace {

bool splits_evenly(const Tensor& x, int64_t axis, int64_t ranks) {
  return x.shape()[static_cast<size_t>(axis)] % ranks == 0;
}

// The lookup `look_up(block, local indices)` of the indices that fall in this rank's block of
// `axis` (rank `coordinate`'s rows of the whole, the blocks being alike), with zeros where an
// index lies in another rank's block: summed over the ranks, the lookup in the whole table.
// `mask_shape` lays the index mask along the output's axes.
Tensor lookup_in_block(const Tensor& block, int64_t axis, const Tensor& index, int64_t coordinate,
                       const std::function<Shape(const Tensor& mask)>& mask_shape,
                       const std::function<Tensor(const Tensor& block, const Tensor& local_index)>& look_up) {
  const int64_t rows = block.shape()[static_cast<size_t>(axis)];
  const Tensor local_index = index - scalar(static_cast<double>(coordinate * rows), index.dtype(), index.device());
  const Tensor at_or_after_first = ge(local_index, zeros_like(local_index));
  // Both comparisons hold: the second where the first does (a logical and of bool tensors).
  const Tensor held =
      where(at_or_after_first, lt(local_index, full_like(local_index, static_cast<double>(rows))), at_or_after_first);
  const Tensor found = look_up(block, where(held, local_index, zeros_like(local_index)));
  return where(reshape(held, mask_shape(held)), found, zeros_like(found));
}

}  // namespace

Rule index_select() {
  return [](Inputs in, const Attrs& attrs, std::span<const Placement> from, int64_t ranks) {
    const Placement &table = from[0], &index = from[1];
    const bool table_split_elsewhere = table.is_shard() && table.axis != attrs.axis;
    if (index.kind == Kind::replicate && (table.kind == Kind::partial_sum || table_split_elsewhere)) {
      return ShardingDecision{{table, index}, table};
    }
    if (index.is_shard() && !table.is_shard()) {
      return ShardingDecision{{Placement::replicate(), index}, Placement::shard(attrs.axis)};
    }
    // A table split along the looked-up axis (a vocabulary-parallel embedding): each rank looks
    // up the indices in its rows, and the output is their partial sum.
    if (sharded_along(table, attrs.axis) && index.kind == Kind::replicate && splits_evenly(in[0], attrs.axis, ranks)) {
      const int64_t axis = attrs.axis, rank = in[0].dim();
      return ShardingDecision{{table, index}, Placement::partial_sum(), nullptr,
                              [axis, rank](Inputs locals, const Attrs&, int64_t coordinate) {
                                return lookup_in_block(
                                    locals[0], axis, locals[1], coordinate,
                                    [&](const Tensor& mask) {
                                      Shape shape(static_cast<size_t>(rank), 1);
                                      shape[static_cast<size_t>(axis)] = mask.numel();
                                      return shape;
                                    },
                                    [axis](const Tensor& block, const Tensor& local) {
                                      return eddy::index_select(block, axis, local);
                                    });
                              }};
    }
    return replicate_all(in);
  };
}

Rule gather() {
  return [](Inputs in, const Attrs& attrs, std::span<const Placement> from, int64_t ranks) {
    const Placement &x = from[0], &index = from[1];
    // x split along the gathered axis and the indices whole (Megatron's vocabulary-parallel
    // cross-entropy picks each row's target logit so): each rank gathers the indices in its
    // block, and the output is their partial sum.
    if (sharded_along(x, attrs.axis) && index.kind == Kind::replicate && splits_evenly(in[0], attrs.axis, ranks)) {
      const int64_t axis = attrs.axis;
      return ShardingDecision{{x, index}, Placement::partial_sum(), nullptr,
                              [axis](Inputs locals, const Attrs&, int64_t coordinate) {
                                return lookup_in_block(
                                    locals[0], axis, locals[1], coordinate,
                                    [](const Tensor& mask) { return mask.shape(); },
                                    [axis](const Tensor& block, const Tensor& local) {
                                      return eddy::gather(block, axis, local);
                                    });
                              }};
    }
    for (const Placement& placement : from) {
      if (!placement.is_shard() || placement.axis == attrs.axis) continue;
      const auto axis = static_cast<size_t>(placement.axis);
      if (in[0].shape()[axis] != in[1].shape()[axis]) break;
      return ShardingDecision{{placement, placement}, placement};
    }
    return replicate_all(in);
  };
}

Rule transform() {
  return [](Inputs in, const Attrs& attrs, std::span<const Placement> from, int64_t ranks) {
    const Placement& placement = from[0];
    if (placement.kind == Kind::partial_sum) return ShardingDecision{{placement}, placement};
    if (!placement.is_shard()) return replicate_all(in);
    auto transformed = [&](int64_t axis) {
      return std::find(attrs.axes.begin(), attrs.axes.end(), axis) != attrs.axes.end();
    };
    int64_t kept = placement.axis;
    if (transformed(kept)) {
      // A transform axis must be whole on each rank: the shard moves to the last axis that is not
      // transformed and splits evenly (an all-to-all, the slab transpose of a distributed FFT).
      kept = in[0].dim() - 1;
      while (kept >= 0 && (transformed(kept) || in[0].shape()[static_cast<size_t>(kept)] % ranks != 0)) --kept;
      if (kept < 0) return replicate_all(in);
    }
    // fft_c2r names its output shape; the others none.
    return ShardingDecision{{Placement::shard(kept)}, Placement::shard(kept),
                            attrs.shape.empty() ? nullptr : divide_shape(kept)};
  };
}

Rule alike_along(std::vector<int64_t> axes) {
  return [axes = std::move(axes)](Inputs in, const Attrs&, std::span<const Placement> from, int64_t ranks) {
    const auto first_split = std::find_if(from.begin(), from.end(), [](const Placement& p) { return p.is_shard(); });
    if (first_split == from.end() || std::find(axes.begin(), axes.end(), first_split->axis) == axes.end()) {
      return replicate_all(in);
    }
    // Inputs of different extents along the axis (query and key/value heads) split into
    // matching groups only where every extent splits evenly.
    const int64_t axis = first_split->axis;
    const int64_t extent = in[0].shape()[static_cast<size_t>(axis)];
    const bool alike = std::all_of(in.begin(), in.end(),
                                   [&](const Tensor& x) { return x.shape()[static_cast<size_t>(axis)] == extent; });
    const bool even = std::all_of(in.begin(), in.end(), [&](const Tensor& x) { return splits_evenly(x, axis, ranks); });
    if (!alike && !even) return replicate_all(in);
    return ShardingDecision{std::vector<Placement>(in.size(), *first_split), *first_split};
  };
}

}  // namespace eddy::sharding
