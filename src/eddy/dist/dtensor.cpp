// Distributed tensors: placing, resharding, and the interpreter that runs an op on them as local
// ops and collectives (dtensor.h).

#include "eddy/dist/dtensor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "eddy/autodiff/forward.h"
#include "eddy/core/autograd.h"
#include "eddy/core/tracing.h"
#include "eddy/dist/collectives.h"
#include "eddy/ops/ops.h"
#include "eddy/ops/sharding.h"

namespace eddy::dist {
namespace {

using Kind = Placement::Kind;

bool sharded_along(const Placement& placement, int64_t axis) { return placement.is_shard() && placement.axis == axis; }

const Distribution& layout_of(const Tensor& tensor, std::string_view op) {
  const Distribution* layout = distribution_of(tensor);
  EDDY_CHECK(layout, op, ": the tensor of shape ", tensor.shape(), " is not distributed (make it so with "
             "dist::shard_tensor or dist::from_local)");
  return *layout;
}

std::shared_ptr<const ProcessMesh> mesh_pointer(const Distribution& layout) {
  return std::static_pointer_cast<const ProcessMesh>(layout.mesh);
}

// Checks `placements` for `global_shape` over `mesh` and gives this rank's local shape.
Shape local_shape(std::string_view op, const Shape& global_shape, const ProcessMesh& mesh,
                  const std::vector<Placement>& placements) {
  EDDY_CHECK(static_cast<int64_t>(placements.size()) == mesh.ndim(), op, ": ", placements.size(),
             " placements for the ", mesh.ndim(), " axes of the ", mesh.describe());
  Shape shape = global_shape;
  std::vector<bool> split(shape.size(), false);
  for (int64_t axis = 0; axis < mesh.ndim(); ++axis) {
    const Placement& placement = placements[static_cast<size_t>(axis)];
    if (!placement.is_shard()) continue;
    const int64_t tensor_axis = placement.axis;
    EDDY_CHECK(tensor_axis >= 0 && tensor_axis < static_cast<int64_t>(shape.size()), op, ": ", to_string(placement),
               " on mesh axis ", mesh.names()[static_cast<size_t>(axis)], " names no axis of a tensor of shape ",
               global_shape);
    EDDY_CHECK(!split[static_cast<size_t>(tensor_axis)], op, ": tensor axis ", tensor_axis, " is sharded on two mesh "
               "axes (", to_string(placements), "); shard it on one");
    split[static_cast<size_t>(tensor_axis)] = true;
    int64_t& extent = shape[static_cast<size_t>(tensor_axis)];
    extent = shard_range(extent, mesh.size(axis), mesh.coordinate(axis)).size();
  }
  return shape;
}

// Shard(-1) and the like, counted from the end of a tensor of `rank` axes.
std::vector<Placement> normalized(std::vector<Placement> placements, int64_t rank) {
  for (Placement& placement : placements) {
    if (placement.is_shard() && placement.axis < 0) placement.axis += rank;
  }
  return placements;
}

bool flag_set(const char* variable) {
  const char* value = std::getenv(variable);
  return value && *value && std::string_view(value) != "0";
}

// The innermost PlacementChoices alive on this thread, or null.
thread_local PlacementChoices* placement_choices = nullptr;

// EDDY_DIST_VERBOSE=1: rank 0 prints each op on distributed tensors, its placements and the
// collectives its inputs went through; EDDY_COMPILER_VERBOSE=1 does while a function is traced
// for compiling, which is when the compiled program's placements are chosen.
bool verbose() {
  static const bool eager = flag_set("EDDY_DIST_VERBOSE"), compiled = flag_set("EDDY_COMPILER_VERBOSE");
  if (placement_choices && placement_choices->quiet()) return false;
  return eager || (compiled && active_trace_recorder());
}

// Whether mesh axis `mesh_axis` can move its shard from one tensor axis to another in place
// (exchange_shards): only while no other mesh axis splits either tensor axis, before or after,
// since the exchange takes each rank's part along those axes for the whole, and where both axes
// of `global_shape` split evenly, the all-to-all's blocks being alike.
bool exchanges_alone(int64_t mesh_axis, const std::vector<Placement>& from, const std::vector<Placement>& to,
                     const Shape& global_shape, const ProcessMesh& mesh) {
  const Placement &current = from[static_cast<size_t>(mesh_axis)], &wanted = to[static_cast<size_t>(mesh_axis)];
  if (!current.is_shard() || !wanted.is_shard()) return false;
  const int64_t parts = mesh.size(mesh_axis);
  for (const int64_t axis : {current.axis, wanted.axis}) {
    if (global_shape[static_cast<size_t>(axis)] % parts != 0) return false;
  }
  for (size_t other = 0; other < from.size(); ++other) {
    if (static_cast<int64_t>(other) == mesh_axis) continue;
    for (const Placement& placement : {from[other], to[other]}) {
      if (sharded_along(placement, current.axis) || sharded_along(placement, wanted.axis)) return false;
    }
  }
  return true;
}

// What reshard_local does to one input on mesh axis `axis`, for the log.
std::string_view collective_for(int64_t axis, const std::vector<Placement>& from_all,
                                const std::vector<Placement>& to_all, const Shape& global_shape,
                                const ProcessMesh& mesh) {
  const Placement &from = from_all[static_cast<size_t>(axis)], &to = to_all[static_cast<size_t>(axis)];
  if (from == to) return "";
  if (to.is_shard()) {
    if (from.kind == Kind::replicate) return "slice";
    if (from.kind == Kind::partial_sum) return "reduce_scatter";
    if (from.is_shard()) {
      return exchanges_alone(axis, from_all, to_all, global_shape, mesh) ? "all_to_all" : "all_gather + slice";
    }
    return "all_reduce(max) + slice";
  }
  if (from.is_shard()) return "all_gather";
  if (from.is_partial()) return from.kind == Kind::partial_sum ? "all_reduce" : "all_reduce(max)";
  return "keep on coordinate 0";
}

void log_call(std::string_view op, const std::vector<std::vector<Placement>>& from,
              const std::vector<std::vector<Placement>>& to, const std::vector<Placement>& output,
              Inputs inputs, const ProcessMesh& mesh) {
  if (mesh.world().rank() != 0) return;
  std::string line = cat("eddy dist: ", op, "(");
  for (size_t i = 0; i < to.size(); ++i) line += (i ? ", " : "") + to_string(to[i]);
  line += ") -> " + to_string(output) + "\n";
  for (size_t i = 0; i < from.size(); ++i) {
    for (size_t axis = 0; axis < from[i].size(); ++axis) {
      const std::string_view collective =
          collective_for(static_cast<int64_t>(axis), from[i], to[i], inputs[i].shape(), mesh);
      if (collective.empty()) continue;
      const Tensor& local = local_part(inputs[i]);
      line += cat("  input ", i, " on ", mesh.names()[axis], ": ", to_string(from[i][axis]), " -> ",
                  to_string(to[i][axis]), ", ", collective, " of ",
                  local.numel() * static_cast<int64_t>(dtype_size(local.dtype())), " bytes\n");
    }
  }
  std::fputs(line.c_str(), stderr);
}

Tensor distributed(const Shape& global_shape, Tensor local, const std::shared_ptr<const ProcessMesh>& mesh,
                   std::vector<Placement> placements) {
  Shape coordinates;
  for (int64_t axis = 0; axis < mesh->ndim(); ++axis) coordinates.push_back(mesh->coordinate(axis));
  return make_distributed(global_shape, Distribution{std::move(local), mesh, mesh->shape(), std::move(coordinates),
                                                     std::move(placements), {}});
}

// Part `index` of `parts` of `x` along `axis` (shard_range).
Tensor block(const Tensor& x, int64_t axis, int64_t index, int64_t parts) {
  const ShardRange range = shard_range(x.shape()[static_cast<size_t>(axis)], parts, index);
  return slice(x, axis, range.first, range.last);
}

// The collectives work along axis 0: other axes are moved there and back.
std::vector<int64_t> axis_first(int64_t axis, int64_t rank) {
  std::vector<int64_t> order{axis};
  for (int64_t a = 0; a < rank; ++a) {
    if (a != axis) order.push_back(a);
  }
  return order;
}
std::vector<int64_t> inverse(const std::vector<int64_t>& order) {
  std::vector<int64_t> back(order.size());
  for (size_t i = 0; i < order.size(); ++i) back[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return back;
}
template <typename Collective>
Tensor along(const Tensor& x, int64_t axis, Collective collective) {
  if (axis == 0) return collective(x);
  const std::vector<int64_t> order = axis_first(axis, x.dim());
  return permute(collective(permute(x, order)), inverse(order));
}

// Shard(from_axis) -> Shard(to_axis) over `comm`: each rank sends block j of its part along
// to_axis to rank j, and lays the blocks it receives side by side along from_axis in rank order,
// which is where their rows lie in the whole. Every element moves at most once, where gathering
// and slicing would send each rank the whole tensor.
Tensor exchange_shards(const Tensor& local, int64_t from_axis, int64_t to_axis, Communicator& comm) {
  const int64_t parts = comm.size(), rank = local.dim();
  const std::vector<int64_t> order = axis_first(to_axis, rank);
  const int64_t from_at = std::find(order.begin(), order.end(), from_axis) - order.begin();
  // [parts, to / parts, rest in `order`]: axis 0 counts the ranks the blocks came from.
  const Tensor received = all_to_all(permute(local, order), comm);
  Shape blocks{parts, received.shape()[0] / parts};
  blocks.insert(blocks.end(), received.shape().begin() + 1, received.shape().end());
  // The rank axis moved next to from_axis, in front of it, and the two merged.
  std::vector<int64_t> rank_beside_from;
  for (int64_t axis = 1; axis <= from_at; ++axis) rank_beside_from.push_back(axis);
  rank_beside_from.push_back(0);
  for (int64_t axis = from_at + 1; axis <= rank; ++axis) rank_beside_from.push_back(axis);
  Shape merged = received.shape();
  merged[0] /= parts;
  merged[static_cast<size_t>(from_at)] *= parts;
  return permute(reshape(permute(reshape(received, blocks), rank_beside_from), merged), inverse(order));
}

// The local part under `to` on one mesh axis, from the local part under `from`, of a tensor of
// `global_shape`.
Tensor reshard_axis(const Tensor& local, const Placement& from, const Placement& to, const Shape& global_shape,
                    const ProcessMesh& mesh, int64_t mesh_axis) {
  // On one rank every placement's local part is the whole value.
  if (from == to || mesh.size(mesh_axis) == 1) return local;
  Communicator& comm = mesh.communicator(mesh_axis);
  const int64_t parts = mesh.size(mesh_axis), index = mesh.coordinate(mesh_axis);
  auto whole = [&]() -> Tensor {
    switch (from.kind) {
      case Kind::replicate: return local;
      case Kind::shard: {
        const int64_t rows = global_shape[static_cast<size_t>(from.axis)];
        return along(local, from.axis, [&](const Tensor& x) { return all_gather(x, comm, rows); });
      }
      case Kind::partial_sum: return all_reduce(local, ReduceOp::sum, comm);
      case Kind::partial_max: return all_reduce(local, ReduceOp::max, comm);
    }
    throw Error("reshard: unknown placement");
  };
  switch (to.kind) {
    case Kind::replicate: return whole();
    case Kind::shard:
      if (from.kind == Kind::partial_sum) {
        return along(local, to.axis, [&](const Tensor& x) { return reduce_scatter(x, comm); });
      }
      if (from.is_shard()) return exchange_shards(local, from.axis, to.axis, comm);
      return block(whole(), to.axis, index, parts);
    case Kind::partial_sum: return index == 0 ? whole() : whole() * 0.0;
    case Kind::partial_max: return whole();
  }
  throw Error("reshard: unknown placement");
}

// Gathers and reductions first, then the splits and exchanges: a split on one mesh axis keeps the
// other axes' parts whole, as a gather along another axis needs.
Tensor reshard_local(Tensor local, std::vector<Placement> from, const std::vector<Placement>& to,
                     const Shape& global_shape, const ProcessMesh& mesh) {
  for (int64_t axis = 0; axis < mesh.ndim(); ++axis) {
    Placement& current = from[static_cast<size_t>(axis)];
    const Placement& wanted = to[static_cast<size_t>(axis)];
    if (current == wanted || (wanted.is_shard() && !current.is_shard()) ||
        exchanges_alone(axis, from, to, global_shape, mesh)) {
      continue;
    }
    const Placement step = wanted.is_shard() ? Placement::replicate() : wanted;
    local = reshard_axis(local, current, step, global_shape, mesh, axis);
    current = step;
  }
  for (int64_t axis = 0; axis < mesh.ndim(); ++axis) {
    local = reshard_axis(local, from[static_cast<size_t>(axis)], to[static_cast<size_t>(axis)], global_shape, mesh,
                         axis);
  }
  return local;
}

// The communicator of the innermost DeferGradientSums alive on this thread, or null.
thread_local Communicator* deferred_gradient_sums = nullptr;

// Where a use must sum its input's gradient over ranks (dtensor.h): an ordinary tensor that
// requires gradients, over the whole mesh; a distributed leaf that does, over its replicated axes;
// either, not over the ranks whose sum a DeferGradientSums leaves to the caller.
Tensor as_used(const Tensor& input, const Tensor& local, const std::vector<Placement>& placements,
               const ProcessMesh& mesh) {
  if (!GradMode::enabled() || !input.requires_grad()) return local;
  const Communicator* deferred = deferred_gradient_sums;
  const bool ordinary = !is_distributed(input);
  if (ordinary && mesh.world().size() == 1) return local;
  if (ordinary && !deferred) return sum_gradient_over_ranks(local, mesh.world());
  if (!ordinary && !input.is_leaf()) return local;
  if (deferred == &mesh.world()) return local;
  // An ordinary tensor is replicated on every mesh axis: summed over each but the deferred one,
  // which together make the job's ranks.
  bool deferred_axis_seen = !deferred;
  Tensor used = local;
  for (int64_t axis = 0; axis < mesh.ndim(); ++axis) {
    Communicator& comm = mesh.communicator(axis);
    if (&comm == deferred) {
      deferred_axis_seen = true;
      continue;
    }
    if ((ordinary || placements[static_cast<size_t>(axis)].kind == Kind::replicate) && mesh.size(axis) > 1) {
      used = sum_gradient_over_ranks(used, comm);
    }
  }
  EDDY_CHECK(deferred_axis_seen, "DeferGradientSums: its communicator is none of the axes of the ", mesh.describe(),
             " that an op here uses (pass the communicator of the mesh axis that splits the batch)");
  return used;
}

// `input`'s part with its partial values reduced, where an op in this autodiff mode and capture
// reduced them before.
const ReducedPart* earlier_reduction(const Tensor& input) {
  const Distribution* layout = distribution_of(input);
  if (!layout || !layout->reduced) return nullptr;
  const ReducedPart& reduced = *layout->reduced;
  return reduced.grad_mode == GradMode::enabled() && reduced.capture == active_capture_id() ? &reduced : nullptr;
}

std::vector<Placement> with_partials_reduced(std::vector<Placement> placements) {
  for (Placement& placement : placements) {
    if (placement.is_partial()) placement = Placement::replicate();
  }
  return placements;
}

// This rank's part of `input` placed `wanted`. A partial value is reduced once, by the first op
// that needs it whole, and later ops reuse the result: Megatron's one all-reduce per residual
// branch, where summing at every reader (three projections and a norm) would send the same
// bytes again, and the backward pass would all-reduce each reader's cotangent apart.
Tensor local_for(const Tensor& input, const std::vector<Placement>& current, const std::vector<Placement>& wanted,
                 const ProcessMesh& mesh) {
  if (const ReducedPart* reduced = earlier_reduction(input)) {
    return reshard_local(reduced->local, reduced->placements, wanted, input.shape(), mesh);
  }
  const Tensor used = as_used(input, local_part(input), current, mesh);
  Tensor local = reshard_local(used, current, wanted, input.shape(), mesh);
  const Distribution* layout = distribution_of(input);
  if (layout && used.same(layout->local) && current != wanted && wanted == with_partials_reduced(current)) {
    layout->reduced =
        std::make_shared<const ReducedPart>(ReducedPart{local, wanted, GradMode::enabled(), active_capture_id()});
  }
  return local;
}

// Whether `decision`, on top of the mesh axes decided before, shards no tensor axis twice.
bool fits(const ShardingDecision& decision, int64_t mesh_axis, const std::vector<std::vector<Placement>>& inputs,
          const std::vector<Placement>& output) {
  auto fits_one = [&](const Placement& placement, const std::vector<Placement>& earlier) {
    if (!placement.is_shard()) return true;
    for (int64_t axis = 0; axis < mesh_axis; ++axis) {
      if (earlier[static_cast<size_t>(axis)] == placement) return false;
    }
    return true;
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!fits_one(decision.inputs[i], inputs[i])) return false;
  }
  return fits_one(decision.output, output);
}

// Notes on which mesh axes every rank holds `local` alike: for a capture, whose compiler needs it
// to drop collectives over such values and a rank's graph cannot show; and on the value itself
// (TensorImpl::alike_across), which the backward pass reads to tell which cotangents are alike,
// so that eagerly too a sum of one over the ranks sends nothing (dist/collectives.h).
void note_replicated(const Tensor& local, const std::vector<Placement>& placements, const ProcessMesh& mesh) {
  TraceRecorder* recorder = active_trace_recorder();
  for (int64_t axis = 0; axis < mesh.ndim(); ++axis) {
    if (placements[static_cast<size_t>(axis)].kind != Kind::replicate || mesh.size(axis) == 1) continue;
    Communicator& comm = mesh.communicator(axis);
    if (recorder) recorder->replicated_over(local, comm);
    mark_alike_across(local, &comm);
    // An axis over every rank of the job: alike across the job's communicator too, over which an
    // ordinary tensor's gradient is summed (as_used).
    if (mesh.size(axis) == mesh.world().size()) mark_alike_across(local, &mesh.world());
  }
}

ShardingDecision rule_decision(const Primitive& primitive, const OpCall& call, std::span<const Placement> from,
                               int64_t ranks) {
  ShardingDecision decision = primitive.sharding ? primitive.sharding(call.inputs, call.attrs, from, ranks)
                                                 : sharding::replicate_all(call.inputs);
  EDDY_CHECK(decision.inputs.size() == call.inputs.size(), "internal: the sharding rule of ", primitive.name,
             " placed ", decision.inputs.size(), " of ", call.inputs.size(), " inputs");
  return decision;
}

std::string describe(const ShardingDecision& decision) {
  return cat(to_string(decision.inputs), " -> ", to_string(decision.output));
}

// The decisions open on one mesh axis (PlacementChoices): the rule's own first, then, while a
// PlacementChoices lives and two or more inputs are split over several ranks, the rule's with
// each split input in turn taken as whole (so gathered), each once. (On an axis of one rank every
// decision moves nothing.) A decision that does not `fit` (splits a tensor axis twice)
// becomes every input whole.
std::vector<ShardingDecision> open_decisions(const Primitive& primitive, const OpCall& call,
                                             const std::vector<Placement>& from, int64_t ranks,
                                             const std::function<bool(const ShardingDecision&)>& fit) {
  std::vector<ShardingDecision> open;
  auto add = [&](ShardingDecision decision) {
    if (!fit(decision)) decision = sharding::replicate_all(call.inputs);
    for (const ShardingDecision& known : open) {
      if (known.inputs == decision.inputs && known.output == decision.output) return;
    }
    open.push_back(std::move(decision));
  };
  add(rule_decision(primitive, call, from, ranks));
  const auto split = std::count_if(from.begin(), from.end(), [](const Placement& p) { return p.is_shard(); });
  if (!placement_choices || split < 2 || ranks == 1) return open;
  for (size_t i = 0; i < from.size(); ++i) {
    if (!from[i].is_shard()) continue;
    std::vector<Placement> gathered = from;
    gathered[i] = Placement::replicate();
    add(rule_decision(primitive, call, gathered, ranks));
  }
  return open;
}

class DistributedInterpreter final : public Interpreter {
 public:
  DistributedInterpreter() { set_distributed_interpreter(this); }

  Tensor interpret(const OpCall& call) override {
    // Tangents ride on the distributed tensors, not on their local parts: forward mode applies
    // the primitive's tangent rule here, to the distributed primals and tangents (whose ops are
    // placed by the same rules), around the value of the primals.
    if (const int64_t level = innermost_level(call.inputs); level >= 0) {
      return with_output_tangent(call.primitive, call.inputs, call.attrs, call.spec, level,
                                 [&](Inputs primals) { return dispatch(call.primitive, primals, call.attrs); });
    }
    const Primitive& primitive = call.primitive;
    std::shared_ptr<const ProcessMesh> mesh;
    for (const Tensor& input : call.inputs) {
      const Distribution* layout = distribution_of(input);
      if (!layout) continue;
      EDDY_CHECK(!mesh || layout->mesh == mesh, primitive.name, ": its distributed inputs lie on different process "
                 "meshes; reshard them onto one");
      mesh = mesh_pointer(*layout);
    }
    const size_t count = call.inputs.size();
    const auto axes = static_cast<size_t>(mesh->ndim());
    std::vector<std::vector<Placement>> current(count), wanted(count, std::vector<Placement>(axes));
    for (size_t i = 0; i < count; ++i) {
      const Distribution* layout = distribution_of(call.inputs[i]);
      current[i] = layout ? layout->placements : std::vector<Placement>(axes);
      if (const ReducedPart* reduced = earlier_reduction(call.inputs[i])) current[i] = reduced->placements;
    }

    std::vector<Placement> output(axes);
    Attrs attrs = call.attrs;
    // The one mesh axis whose rule computes the local part its own way, and that way.
    std::function<Tensor(Inputs, const Attrs&, int64_t)> run_locally;
    int64_t run_locally_axis = -1;
    for (size_t axis = 0; axis < axes; ++axis) {
      std::vector<Placement> from;
      for (size_t i = 0; i < count; ++i) from.push_back(current[i][axis]);
      std::vector<ShardingDecision> open =
          open_decisions(primitive, call, from, mesh->size(static_cast<int64_t>(axis)), [&](const ShardingDecision& d) {
            return fits(d, static_cast<int64_t>(axis), wanted, output);
          });
      size_t chosen = 0;
      if (open.size() > 1) {
        std::vector<std::string> alternatives;
        for (const ShardingDecision& d : open) alternatives.push_back(describe(d));
        chosen = placement_choices->pick(cat(primitive.name, " on ", mesh->names()[axis]), std::move(alternatives),
                                         mesh->world());
      }
      ShardingDecision decision = std::move(open[chosen]);
      for (size_t i = 0; i < count; ++i) wanted[i][axis] = decision.inputs[i];
      output[axis] = decision.output;
      if (decision.localize) {
        decision.localize(attrs, mesh->size(static_cast<int64_t>(axis)), mesh->coordinate(static_cast<int64_t>(axis)));
      }
      if (decision.run_locally) {
        EDDY_CHECK(!run_locally, "internal: the sharding rules of ", primitive.name, " on two mesh axes each compute "
                   "the local part their own way");
        run_locally = std::move(decision.run_locally);
        run_locally_axis = static_cast<int64_t>(axis);
      }
    }

    if (verbose()) log_call(primitive.name, current, wanted, output, call.inputs, *mesh);
    std::vector<Tensor> locals;
    for (size_t i = 0; i < count; ++i) {
      locals.push_back(local_for(call.inputs[i], current[i], wanted[i], *mesh));
      // An ordinary input counts as replicated; what note_replicated marks is an alias of it, so
      // that the caller's own tensor, which other code may use as each rank's, stays unmarked.
      if (locals[i].same(call.inputs[i])) locals[i] = shallow_alias(locals[i]);
    }
    const Shape expected = local_shape(primitive.name, call.spec.shape, *mesh, output);
    Tensor local = run_locally ? run_locally(locals, attrs, mesh->coordinate(run_locally_axis))
                               : dispatch(primitive, locals, attrs);
    EDDY_CHECK(local.shape() == expected, "internal: ", primitive.name, " placed ", to_string(output), " gave a local ",
               "part of shape ", local.shape(), ", not ", expected);
    for (size_t i = 0; i < count; ++i) note_replicated(locals[i], wanted[i], *mesh);
    note_replicated(local, output, *mesh);
    return distributed(call.spec.shape, std::move(local), mesh, std::move(output));
  }
};

DistributedInterpreter distributed_interpreter;

// This rank's part of `whole` under `placements` (normalised in place), as a fresh dense tensor:
// copy_ of the whole into a distributed tensor keeps each rank's block (core/tensor.cpp).
Tensor part_of(std::string_view op, const Tensor& whole, const std::shared_ptr<const ProcessMesh>& mesh,
               std::vector<Placement>& placements) {
  EDDY_CHECK(!is_distributed(whole), op, ": the tensor is already distributed; use dist::reshard");
  placements = normalized(std::move(placements), whole.dim());
  const Shape shape = local_shape(op, whole.shape(), *mesh, placements);
  for (int64_t axis = 0; axis < mesh->ndim(); ++axis) {
    const Placement& placement = placements[static_cast<size_t>(axis)];
    EDDY_CHECK(!placement.is_partial(), op, ": ", to_string(placement), " on mesh axis ",
               mesh->names()[static_cast<size_t>(axis)], " would count the whole tensor once per rank; place it "
               "Replicate or Shard (or make a partial one with dist::from_local)");
  }
  Tensor part = Tensor::empty(shape, whole.dtype(), whole.device());
  distributed(whole.shape(), part, mesh, placements).copy_(whole.detach());
  return part;
}

// Whether `name` matches `pattern`, where `*` stands for any run of characters other than a dot.
bool matches(std::string_view pattern, std::string_view name) {
  if (pattern.empty()) return name.empty();
  if (pattern.front() == '*') {
    for (size_t skip = 0;; ++skip) {
      if (matches(pattern.substr(1), name.substr(skip))) return true;
      if (skip == name.size() || name[skip] == '.') return false;
    }
  }
  return !name.empty() && pattern.front() == name.front() && matches(pattern.substr(1), name.substr(1));
}

}  // namespace

Tensor shard_tensor(const Tensor& whole, std::shared_ptr<const ProcessMesh> mesh, std::vector<Placement> placements) {
  EDDY_CHECK(mesh, "shard_tensor: no process mesh");
  Tensor part = part_of("shard_tensor", whole, mesh, placements);
  if (whole.requires_grad()) part.requires_grad_();
  return distributed(whole.shape(), std::move(part), mesh, std::move(placements));
}

void shard_in_place(const Tensor& tensor, std::shared_ptr<const ProcessMesh> mesh, std::vector<Placement> placements) {
  EDDY_CHECK(mesh, "shard_in_place: no process mesh");
  EDDY_CHECK(tensor.is_leaf(), "shard_in_place: the tensor is the output of a recorded op; place a leaf");
  Tensor part = part_of("shard_in_place", tensor, mesh, placements);
  TensorImpl& impl = *tensor.impl();
  if (impl.autograd) impl.autograd->grad = Tensor();
  part.impl()->autograd = impl.autograd;
  const Tensor layout = distributed(tensor.shape(), std::move(part), mesh, std::move(placements));
  impl.storage = layout.storage();
  impl.offset = 0;
  impl.strides = layout.strides();
  impl.autograd = layout.impl()->autograd;
  impl.distribution = layout.impl()->distribution;
}

int64_t shard_module(nn::Module& module, std::shared_ptr<const ProcessMesh> mesh, const ShardingPlan& plan) {
  const auto parameters = module.named_parameters();
  std::vector<bool> used(plan.size(), false);
  int64_t placed = 0;
  for (const auto& [name, parameter] : parameters) {
    for (size_t i = 0; i < plan.size(); ++i) {
      if (!matches(plan[i].first, name)) continue;
      EDDY_CHECK(!is_distributed(parameter), "shard_module: parameter ", name, " is already distributed");
      shard_in_place(parameter, mesh, plan[i].second);
      used[i] = true;
      ++placed;
      break;
    }
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    if (used[i]) continue;
    std::string names;
    for (const auto& [name, parameter] : parameters) names += (names.empty() ? "" : ", ") + name;
    throw Error(cat("shard_module: '", plan[i].first, "' matches no parameter (or only ones an earlier pattern "
                    "placed); the parameters are: ", names));
  }
  return placed;
}

namespace {

// The global shape follows from a part's shape only when every rank's part has it: with uneven
// parts each rank would take another global shape, and the first collective would fail in MPI.
void check_parts_alike(const Tensor& local, Communicator& world) {
  if (world.size() == 1) return;
  const auto gathered = [&](const std::vector<int64_t>& values) {
    Tensor all = zeros({world.size() * static_cast<int64_t>(values.size())}, DType::i64);
    world.allgather(tensor(values), all);
    return all.to_vector<int64_t>();
  };
  const std::vector<int64_t> ranks = gathered({local.dim()});
  bool alike = std::all_of(ranks.begin(), ranks.end(), [&](int64_t rank) { return rank == local.dim(); });
  std::string parts;
  if (alike) {
    const std::vector<int64_t> shapes = gathered(std::vector<int64_t>(local.shape().begin(), local.shape().end()));
    for (int r = 0; r < world.size(); ++r) {
      const Shape shape(shapes.begin() + r * local.dim(), shapes.begin() + (r + 1) * local.dim());
      alike = alike && shape == local.shape();
      parts += cat(r ? ", " : "", "rank ", r, " ", shape);
    }
  }
  EDDY_CHECK(alike, "from_local: the ranks' parts differ in shape",
             parts.empty() ? std::string(" (even in their number of axes)") : cat(" (", parts, ")"),
             "; pass the global shape (shape=...) for parts of uneven size");
}

}  // namespace

Tensor from_local(const Tensor& local, std::shared_ptr<const ProcessMesh> mesh, std::vector<Placement> placements,
                  Shape global_shape) {
  EDDY_CHECK(mesh, "from_local: no process mesh");
  EDDY_CHECK(!is_distributed(local), "from_local: the tensor is already distributed");
  placements = normalized(std::move(placements), local.dim());
  EDDY_CHECK(static_cast<int64_t>(placements.size()) == mesh->ndim(), "from_local: ", placements.size(),
             " placements for the ", mesh->ndim(), " axes of the ", mesh->describe());
  for (const Placement& placement : placements) {
    EDDY_CHECK(!placement.is_shard() || (placement.axis >= 0 && placement.axis < local.dim()), "from_local: ",
               to_string(placement), " names no axis of a local part of shape ", local.shape());
  }
  if (global_shape.empty()) {
    check_parts_alike(local, mesh->world());
    global_shape = local.shape();
    for (int64_t axis = 0; axis < mesh->ndim(); ++axis) {
      const Placement& placement = placements[static_cast<size_t>(axis)];
      if (placement.is_shard()) global_shape[static_cast<size_t>(placement.axis)] *= mesh->size(axis);
    }
  }
  EDDY_CHECK(global_shape.size() == local.shape().size(), "from_local: a global shape ", global_shape, " for a local "
             "part of shape ", local.shape());
  const Shape expected = local_shape("from_local", global_shape, *mesh, placements);
  EDDY_CHECK(local.shape() == expected, "from_local: rank ", mesh->world().rank(), "'s part has shape ", local.shape(),
             ", but its part of a tensor of shape ", global_shape, " placed ", to_string(placements), " has shape ",
             expected);
  return distributed(global_shape, local, mesh, std::move(placements));
}

Tensor shard_like(const Tensor& whole, const Tensor& like) {
  const Distribution& layout = layout_of(like, "shard_like");
  EDDY_CHECK(whole.shape() == like.shape(), "shard_like: a tensor of shape ", whole.shape(), " cannot be laid out as one "
             "of shape ", like.shape());
  std::vector<Placement> splits = layout.placements;
  for (Placement& placement : splits) {
    if (placement.is_partial()) placement = Placement::replicate();
  }
  return reshard(shard_tensor(whole, mesh_pointer(layout), std::move(splits)), layout.placements);
}

Tensor to_local(const Tensor& tensor) { return layout_of(tensor, "to_local").local; }

Tensor reshard(const Tensor& tensor, std::vector<Placement> placements) {
  const Distribution& layout = layout_of(tensor, "reshard");
  const std::shared_ptr<const ProcessMesh> mesh = mesh_pointer(layout);
  placements = normalized(std::move(placements), tensor.dim());
  local_shape("reshard", tensor.shape(), *mesh, placements);
  if (placements == layout.placements) return tensor;
  const Tensor used = as_used(tensor, layout.local, layout.placements, *mesh);
  Tensor local = reshard_local(used, layout.placements, placements, tensor.shape(), *mesh);
  return distributed(tensor.shape(), std::move(local), mesh, std::move(placements));
}

Tensor full_tensor(const Tensor& tensor) {
  const Distribution* layout = distribution_of(tensor);
  if (!layout) return tensor;
  return to_local(reshard(tensor, std::vector<Placement>(layout->placements.size())));
}

nn::StateDict full_state(const nn::StateDict& state) {
  nn::StateDict whole;
  for (const auto& [key, tensor] : state) whole.emplace(key, full_tensor(tensor));
  return whole;
}

const ProcessMesh& mesh_of(const Tensor& tensor) { return *mesh_pointer(layout_of(tensor, "mesh_of")); }

const std::vector<Placement>& placements_of(const Tensor& tensor) {
  return layout_of(tensor, "placements_of").placements;
}

PlacementChoices::PlacementChoices(std::vector<size_t> picks, bool quiet)
    : picks_(std::move(picks)), quiet_(quiet), previous_(placement_choices) {
  placement_choices = this;
}

PlacementChoices::~PlacementChoices() { placement_choices = previous_; }

size_t PlacementChoices::pick(std::string op, std::vector<std::string> alternatives, Communicator& world) {
  if (!world_) world_ = &world;
  const size_t index = points_.size();
  const size_t picked = index < picks_.size() && picks_[index] < alternatives.size() ? picks_[index] : 0;
  points_.push_back(Point{std::move(op), std::move(alternatives), picked});
  return picked;
}

DeferGradientSums::DeferGradientSums(Communicator& comm) : previous_(deferred_gradient_sums) {
  deferred_gradient_sums = &comm;
}

DeferGradientSums::~DeferGradientSums() { deferred_gradient_sums = previous_; }

}  // namespace eddy::dist
