// The reverse-mode engine: a topological walk from the outputs that calls each node's VJP rule,
// un-broadcasts and accumulates cotangents, and skips everything no target depends on.

#include <algorithm>
#include <deque>
#include <new>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "eddy/autodiff/forward.h"
#include "eddy/autodiff/tape.h"
#include "eddy/core/distribution.h"
#include "eddy/core/storage.h"
#include "eddy/core/tracing.h"
#include "eddy/ops/ops.h"

namespace eddy {
namespace {

// Autodiff does not record writes in place, so a value a rule reads that was written since the
// node was recorded (a buffer reused for the next batch, a parameter stepped before this backward
// pass) would be differentiated at its new values, silently; refused, as PyTorch's version
// counters refuse it. Only values the rules read count, as only PyTorch's saved tensors do: a
// linear op's rules read none of its differentiable inputs (a forcing term refilled in u + f, a
// ghost cell in a concat), a bilinear op's rule for one input reads the others, and the
// constant inputs (indices, conditions) are always read. `output` is defined when a rule reads it.
void refuse_values_written_since(const Node& node, const Tensor& output, const std::vector<bool>& wanted) {
  const Primitive& primitive = *node.primitive;
  const auto refuse = [&](const Tensor& value, const std::string& which) {
    throw Error(cat("backward: ", which, " of ", primitive.name, " (shape ", value.shape(), ", ", value.dtype(),
                    ") was written in place (copy_, fill_, an assignment or an optimiser step) after ",
                    primitive.name, " used it, so its derivative would be taken at the new values; write into "
                    "a new tensor instead, or run the backward pass before the write"));
  };
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (memory_version(node.inputs[i]) == node.input_versions[i]) continue;
    bool read = true;
    if (primitive.differentiable_input(static_cast<int>(i)) && primitive.linear) {
      read = false;
    } else if (primitive.differentiable_input(static_cast<int>(i)) && primitive.bilinear) {
      read = false;
      for (size_t j = 0; j < wanted.size(); ++j) read = read || (j != i && wanted[j]);
    }
    if (read) refuse(node.inputs[i], cat("input ", i));
  }
  if (output.defined() && memory_version(output) != node.output_version) refuse(output, "the output");
}

// Identity of a value in the graph: its node for op outputs, its meta for leaves.
const void* key_of(const Tensor& t) {
  const auto& meta = t.impl()->autograd;
  if (!meta) return nullptr;
  if (meta->grad_fn) return meta->grad_fn.get();
  return meta->requires_grad ? meta.get() : nullptr;
}

Node* node_of(const Tensor& t) {
  const auto& meta = t.impl()->autograd;
  return meta ? meta->grad_fn.get() : nullptr;
}

// Communicators, as TensorImpl::alike_across holds them.
using Communicators = std::vector<const void*>;

Communicators common(const Communicators& a, const Communicators& b) {
  Communicators both;
  for (const void* comm : a) {
    if (std::find(b.begin(), b.end(), comm) != b.end()) both.push_back(comm);
  }
  return both;
}

// The communicators across which every input of `node` was alike: a derivative rule is a function
// of its node's inputs, attributes and cotangent, so given an alike cotangent there it gives alike
// cotangents (the SPMD program runs the same rule with the same attributes on every rank).
Communicators alike_inputs(const Node& node, Communicators alike) {
  for (const Tensor& input : node.inputs) {
    std::erase_if(alike, [&input](const void* communicator) { return !held_alike_across(input, communicator); });
  }
  return alike;
}

// Marks `cotangent` alike across `alike` while a derivative rule runs, for the sums over ranks in
// it (dist::all_reduce); the mark is the backward pass's knowledge and goes with the rule's end.
class AlikeWhileRuleRuns {
 public:
  AlikeWhileRuleRuns(const Tensor& cotangent, Communicators alike) : impl_(cotangent.impl()) {
    std::swap(impl_->alike_across, alike);
    before_ = std::move(alike);
  }
  ~AlikeWhileRuleRuns() { impl_->alike_across = std::move(before_); }
  AlikeWhileRuleRuns(const AlikeWhileRuleRuns&) = delete;
  AlikeWhileRuleRuns& operator=(const AlikeWhileRuleRuns&) = delete;

 private:
  TensorImpl* impl_;
  Communicators before_;
};

// Seeds, and for each the communicators across which it is alike: a distributed output's local
// part as its layout says, when seeded with ones (each rank's 1 / copies) or with a distributed
// seed alike there too.
struct Seeds {
  std::vector<Tensor> cotangents;
  std::vector<Communicators> alike;
};

class BackwardPass {
 public:
  // `targets` are the keys whose cotangents are wanted; with `all_leaves` every leaf is one.
  BackwardPass(const std::vector<Tensor>& outputs, std::unordered_set<const void*> targets,
               bool all_leaves)
      : targets_(std::move(targets)), all_leaves_(all_leaves) {
    order_nodes(outputs);
    for (Node* node : needed_) {
      if (const void* group = group_of(*node)) ++groups_[group].members_left;
    }
  }

  std::unordered_map<const void*, Tensor> run(const std::vector<Tensor>& outputs, const Seeds& seeds) {
    std::unordered_map<const void*, Tensor> cotangents;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (const void* key = key_of(outputs[i])) accumulate(cotangents, key, seeds.cotangents[i], seeds.alike[i]);
    }
    // Consumers before producers: reverse post-order. A group's members share their inputs, whose
    // producers therefore come after every member: the group's rule runs at its last member, when
    // every member's cotangent is whole.
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      Node* node = *it;
      if (!needed_.count(node)) continue;
      std::optional<Reached> reached = take_cotangent(node, cotangents);
      const void* group = group_of(*node);
      if (!group) {
        if (reached) propagate({std::move(*reached)}, cotangents);
        continue;
      }
      PendingGroup& pending = groups_.at(group);
      if (reached) pending.reached.push_back(std::move(*reached));
      if (--pending.members_left > 0) continue;
      std::vector<Reached> members = std::move(pending.reached);
      groups_.erase(group);
      if (!members.empty()) propagate(members, cotangents);
    }
    return cotangents;
  }

  // Leaf tensors reached, by key (for backward()'s accumulation into .grad).
  const std::unordered_map<const void*, Tensor>& leaves() const { return leaves_; }

 private:
  // A node whose cotangent is whole, with the communicators across which it is alike.
  struct Reached {
    Node* node;
    Tensor cotangent;
    Communicators alike;
  };
  // The members of a group (Primitive::vjp_group) still to come in the walk, and the cotangents
  // of those passed.
  struct PendingGroup {
    size_t members_left = 0;
    std::vector<Reached> reached;
  };

  static const void* group_of(const Node& node) {
    return node.primitive->vjp_group ? node.attrs.payload.get() : nullptr;
  }

  bool is_target(const void* key) const {
    return targets_.count(key) || (all_leaves_ && leaf_keys_.count(key));
  }

  // The node's cotangent, if the walk reached it; kept in `cotangents` only for a target.
  std::optional<Reached> take_cotangent(Node* node, std::unordered_map<const void*, Tensor>& cotangents) {
    auto found = cotangents.find(node);
    if (found == cotangents.end()) return std::nullopt;
    Reached reached{node, found->second, {}};
    const auto alike_found = alike_.find(node);
    if (alike_found != alike_.end()) reached.alike = alike_found->second;
    if (!is_target(node)) {
      cotangents.erase(found);
      if (alike_found != alike_.end()) alike_.erase(alike_found);
    }
    return reached;
  }

  // Runs the reverse rule of `members`, one node or the reached members of a group, which share
  // their inputs, and accumulates the inputs' cotangents.
  void propagate(const std::vector<Reached>& members, std::unordered_map<const void*, Tensor>& cotangents) {
    const Node& node = *members.front().node;
    const Primitive& primitive = *node.primitive;
    // A rule's result is alike where every cotangent it reads and every input are.
    Communicators inputs_alike = alike_inputs(node, members.front().alike);
    std::deque<AlikeWhileRuleRuns> marks;
    std::unordered_set<const TensorImpl*> marked;
    for (const Reached& member : members) {
      inputs_alike = common(inputs_alike, alike_inputs(*member.node, member.alike));
      if (marked.insert(member.cotangent.impl()).second) marks.emplace_back(member.cotangent, member.alike);
    }
    std::vector<bool> wanted(node.inputs.size(), false);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const void* key = key_of(node.inputs[i]);
      if (!key || !primitive.differentiable_input(static_cast<int>(i))) continue;
      Node* producer = node_of(node.inputs[i]);
      wanted[i] = producer ? needed_.count(producer) > 0 : is_target(key);
    }
    // A target reached for its own cotangent, whose inputs lead to none: its rule would compute
    // nothing, and its checks of the inputs would refuse what eager autodiff, which never runs it,
    // takes (a tensor the call read, written since).
    if (std::none_of(wanted.begin(), wanted.end(), [](bool w) { return w; })) return;
    std::vector<Tensor> input_cotangents;
    if (primitive.vjp_group) {
      std::vector<OutputCotangent> outputs;
      for (const Reached& member : members) {
        refuse_values_written_since(*member.node, Tensor(), wanted);
        outputs.push_back({&member.node->attrs, member.cotangent});
      }
      input_cotangents = primitive.vjp_group(node.inputs, outputs, wanted);
    } else {
      std::shared_ptr<TensorImpl> output =
          primitive.vjp_from_output || primitive.vjp_all ? node.output.lock() : nullptr;
      refuse_values_written_since(node, output ? Tensor(output) : Tensor(), wanted);
      input_cotangents = primitive.input_cotangents(node.inputs, node.attrs, output ? Tensor(output) : Tensor(),
                                                    members.front().cotangent, wanted);
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const Tensor& input = node.inputs[i];
      Tensor& g = input_cotangents[i];
      if (!wanted[i] || !g.defined()) continue;
      const void* key = key_of(input);
      if (g.shape() != input.shape()) g = sum_to_shape(g, input.shape());
      EDDY_CHECK(g.dtype() == input.dtype(), "internal: vjp rule of ", primitive.name,
                 " returned ", g.dtype(), " for a ", input.dtype(), " input");
      accumulate(cotangents, key, g, inputs_alike);
      if (!node_of(input)) leaves_.emplace(key, input);
    }
  }

  void accumulate(std::unordered_map<const void*, Tensor>& cotangents, const void* key, const Tensor& g,
                  const Communicators& alike) {
    auto [it, inserted] = cotangents.try_emplace(key, g);
    if (inserted) {
      if (!alike.empty()) alike_[key] = alike;
      return;
    }
    it->second = add(it->second, g);
    const auto known = alike_.find(key);
    if (known == alike_.end()) return;
    known->second = common(known->second, alike);
    if (known->second.empty()) alike_.erase(known);
  }

  // Iterative DFS post-order over nodes; marks the nodes from which a target is reachable.
  void order_nodes(const std::vector<Tensor>& outputs) {
    struct Frame {
      Node* node;
      size_t next_input;
    };
    std::unordered_set<Node*> visited;
    std::vector<Frame> stack;
    for (const Tensor& output : outputs) {
      Node* root = node_of(output);
      if (!root || !visited.insert(root).second) continue;
      stack.push_back({root, 0});
      while (!stack.empty()) {
        Frame& frame = stack.back();
        if (frame.next_input < frame.node->inputs.size()) {
          const Tensor& input = frame.node->inputs[frame.next_input++];
          Node* child = node_of(input);
          if (child && visited.insert(child).second) stack.push_back({child, 0});
          continue;
        }
        Node* done = frame.node;
        stack.pop_back();
        order_.push_back(done);
        bool needed = targets_.count(done) > 0;
        for (const Tensor& input : done->inputs) {
          Node* child = node_of(input);
          if (child) {
            needed = needed || needed_.count(child);
          } else if (const void* key = key_of(input)) {
            if (all_leaves_) leaf_keys_.insert(key);
            needed = needed || is_target(key);
          }
        }
        if (needed) needed_.insert(done);
      }
    }
  }

  std::unordered_set<const void*> targets_;
  bool all_leaves_;
  std::unordered_set<const void*> leaf_keys_;
  std::vector<Node*> order_;
  std::unordered_set<Node*> needed_;
  std::unordered_map<const void*, Tensor> leaves_;
  std::unordered_map<const void*, PendingGroup> groups_;
  // The communicators across which a cotangent is alike (alike_inputs), for those alike somewhere:
  // a single-process backward pass never touches it.
  std::unordered_map<const void*, Communicators> alike_;
};

// A distributed output (core/distribution.h) is seeded through its local part: the backward pass
// is the local program's. Under the SPMD convention (dist/collectives.h) the differentiated
// quantity is the sum over ranks, so a seed every rank holds whole counts once per copy and is
// divided by the number of copies; a partial sum's parts add up to the value and are seeded as
// they are.
Tensor local_seed(const Tensor& output, const Tensor& seed, size_t i) {
  const Distribution* layout = distribution_of(output);
  if (!layout) return seed;
  for (const Placement& placement : layout->placements) {
    EDDY_CHECK(placement.kind != Placement::Kind::partial_max, "grad: output ", i, " is placed ",
               to_string(layout->placements), "; a partial max has no derivative until dist::reshard makes it whole");
  }
  Tensor local = seed;
  if (const Distribution* given = distribution_of(seed)) {
    EDDY_CHECK(given->local.shape() == layout->local.shape(), "grad: grad_outputs[", i, "] is placed ",
               to_string(given->placements), " but output ", i, " is placed ", to_string(layout->placements),
               "; dist::reshard it alike");
    local = given->local;
  } else {
    for (const Placement& placement : layout->placements) {
      EDDY_CHECK(!placement.is_shard(), "grad: output ", i, " is sharded (", to_string(layout->placements),
                 ") but grad_outputs[", i, "] is an ordinary tensor; pass one placed alike (dist::shard_tensor)");
    }
  }
  const int64_t copies = replication_factor(*layout);
  return copies == 1 ? local : local / static_cast<double>(copies);
}

// Across which communicators the seed of a distributed `output` is alike: its local part's, when
// the seed is ones (`given` undefined) or a distributed tensor alike there too.
Communicators alike_seed(const Tensor& output, const Tensor& given) {
  const Distribution* layout = distribution_of(output);
  if (!layout) return {};
  const Communicators& alike = layout->local.impl()->alike_across;
  if (!given.defined()) return alike;
  const Distribution* given_layout = distribution_of(given);
  return given_layout ? common(alike, given_layout->local.impl()->alike_across) : Communicators{};
}

// `caller` names the function the user called in errors: grad (its outputs[i] and
// grad_outputs[i]) or backward (the tensor and the gradient given, which C++ calls grad_output
// and Python gradient).
Seeds seed_cotangents(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                      std::string_view caller) {
  const bool from_backward = caller == "backward";
  auto given_name = [&](size_t i) {
    return from_backward ? std::string("the gradient given") : cat("grad_outputs[", i, "]");
  };
  auto output_name = [&](size_t i) { return from_backward ? std::string("the tensor") : cat("output ", i); };
  EDDY_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), caller, ": got ",
             grad_outputs.size(), " grad_outputs for ", outputs.size(), " outputs");
  Seeds seeds;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    EDDY_CHECK(out.defined(), caller, ": ", output_name(i), " is undefined");
    // The pass runs on the ranks' local parts, which carry no tangents (dist/dtensor.cpp): the
    // gradients would come back without theirs, and a jvp over them would read zeros.
    EDDY_CHECK(!is_distributed(out) || innermost_level(out) < 0, caller, ": ", output_name(i), " of shape ", out.shape(),
               " is a distributed tensor moving with a forward-mode tangent (a jvp around this gradient, as in "
               "jvp(grad(f))), and a backward pass over distributed tensors does not carry tangents; take the "
               "second derivative in reverse mode (grad of a gradient; eddy::hvp and eddy::hessian do so for a "
               "distributed input)");
    const Tensor given = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (given.defined()) {
      EDDY_CHECK(given.shape() == out.shape(), caller, ": ", given_name(i), " has shape ", given.shape(), " but ",
                 output_name(i), " has shape ", out.shape());
      seeds.cotangents.push_back(local_seed(out, direction_for(out, given, cat(caller, ": ", given_name(i))), i));
    } else {
      EDDY_CHECK(out.numel() == 1, caller, ": ", output_name(i), " has shape ", out.shape(), "; pass ",
                 from_backward ? "a gradient" : "grad_outputs", " for outputs with more than one element");
      // Its gradient would be zeros, silently: a loss made boolean or integer by mistake (sum(x > 0))
      // trained nothing. JAX refuses it too. (Given a cotangent, as vjp gives every output one, an
      // integer output contributes nothing.)
      EDDY_CHECK(is_inexact(out.dtype()), caller, ": ", output_name(i), " is ", out.dtype(), ", which has no "
                 "derivative; differentiate a floating-point function");
      // A seed of 1 on a complex output gives conj(df/dz), which is no gradient of anything;
      // PyTorch and JAX refuse it too.
      EDDY_CHECK(!is_complex(out.dtype()), caller, ": ", output_name(i), " is ", out.dtype(),
                 "; an implicit seed of 1 needs a real output: differentiate a real function of it (abs, real, ",
                 "imag) or pass ", from_backward ? "a gradient" : "grad_outputs");
      seeds.cotangents.push_back(local_seed(out, ones_like(out), i));
    }
    seeds.alike.push_back(alike_seed(out, given));
  }
  // Seeded explicitly, a loss made integer by mistake would give zeros too.
  EDDY_CHECK(outputs.empty() || std::any_of(outputs.begin(), outputs.end(), [](const Tensor& out) {
               return is_inexact(out.dtype());
             }), caller, ": no output is floating-point (", output_name(0), " is ", outputs[0].dtype(),
             "), so there is no derivative; differentiate a floating-point function");
  return seeds;
}

// The cotangent of a distributed input, laid out as the input. On the mesh axes where the input
// is replicated each rank has its part of the sum, except for a leaf that requires gradients,
// whose every use sums it over the ranks (dist/dtensor.cpp).
Tensor distributed_cotangent(const Tensor& input, Tensor local) {
  Distribution layout = distribution_of(input)->over(std::move(local));
  if (!(input.is_leaf() && input.requires_grad())) {
    for (Placement& placement : layout.placements) {
      if (placement.kind == Placement::Kind::replicate) placement = Placement::partial_sum();
    }
  }
  return make_distributed(input.shape(), std::move(layout));
}

}  // namespace

Node::~Node() {
  std::vector<Tensor> pending = std::move(inputs);
  // Growing `pending` can fail when memory is exhausted, which is when large graphs are freed (an
  // out-of-memory error unwinding); a destructor must not throw, so that tensor is then released
  // where it is, recursively, and its memory makes room for the rest.
  auto defer = [&pending](Tensor& tensor) noexcept {
    try {
      pending.push_back(std::move(tensor));
    } catch (const std::bad_alloc&) {
      Tensor released = std::move(tensor);
    }
  };
  while (!pending.empty()) {
    Tensor tensor = std::move(pending.back());
    pending.pop_back();
    // Only a tensor nobody else holds dies here; take over what it would free recursively.
    if (!tensor.defined() || tensor.impl_ptr().use_count() != 1) continue;
    TensorImpl& impl = *tensor.impl();
    for (auto& entry : impl.tangents) defer(entry.second);
    impl.tangents.clear();
    const auto& meta = impl.autograd;
    if (meta && meta.use_count() == 1 && meta->grad_fn && meta->grad_fn.use_count() == 1) {
      for (Tensor& input : meta->grad_fn->inputs) defer(input);
      meta->grad_fn->inputs.clear();
    }
  }
}

uint64_t memory_version(const Tensor& tensor) {
  return tensor.defined() && tensor.storage() ? tensor.storage()->version() : 0;
}

RecordedGraphSize recorded_graph_size(const Tensor& output) {
  RecordedGraphSize size;
  std::unordered_set<const Node*> visited;
  std::unordered_set<const Storage*> storages;
  std::vector<const Node*> pending;
  if (const Node* root = node_of(output)) pending.push_back(root);
  while (!pending.empty()) {
    const Node* node = pending.back();
    pending.pop_back();
    if (!visited.insert(node).second) continue;
    ++size.nodes;
    for (const Tensor& input : node->inputs) {
      const Storage* storage = input.defined() ? input.impl()->storage.get() : nullptr;
      if (storage && storages.insert(storage).second) size.bytes += static_cast<int64_t>(storage->bytes());
      if (const Node* producer = node_of(input)) pending.push_back(producer);
    }
  }
  return size;
}

bool depends_on_leaves_other_than(const std::vector<Tensor>& outputs, const std::vector<Tensor>& leaves) {
  std::unordered_set<const void*> known;
  for (const Tensor& leaf : leaves) {
    if (!leaf.defined()) continue;
    if (const void* key = key_of(leaf)) known.insert(key);
    // A distributed leaf's graph is that of its local part (core/distribution.h).
    if (const Distribution* layout = distribution_of(leaf)) known.insert(key_of(layout->local));
  }
  std::unordered_set<const Node*> visited;
  std::vector<const Node*> pending;
  auto reaches_another_leaf = [&](const Tensor& t) {
    if (!t.defined()) return false;
    if (const Node* producer = node_of(t)) {
      pending.push_back(producer);
      return false;
    }
    const void* key = key_of(t);
    return key && !known.contains(key);
  };
  for (const Tensor& output : outputs) {
    if (reaches_another_leaf(output)) return true;
  }
  while (!pending.empty()) {
    const Node* node = pending.back();
    pending.pop_back();
    if (!visited.insert(node).second) continue;
    for (const Tensor& input : node->inputs) {
      if (reaches_another_leaf(input)) return true;
    }
  }
  return false;
}

Tensor direction_for(const Tensor& value, const Tensor& direction, const std::string& what) {
  if (direction.dtype() == value.dtype()) return direction;
  EDDY_CHECK(is_complex(value.dtype()) || !is_complex(direction.dtype()), what, " is ", direction.dtype(), " but its ",
             value.dtype(), " value is real: a real function has real derivatives, so the imaginary part would be "
             "dropped; differentiate the real and imaginary parts (real(t), imag(t)) one at a time");
  return cast(direction, value.dtype());
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool create_graph) {
  const Seeds seeds = seed_cotangents(outputs, grad_outputs, "grad");
  std::unordered_set<const void*> targets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    EDDY_CHECK(inputs[i].defined(), "grad: input ", i, " is undefined");
    // Its derivative would read as zeros, as if the outputs did not depend on it (a PINN's u_x
    // of points not marked was 0, and the model trained on another equation). PyTorch refuses too.
    EDDY_CHECK(inputs[i].requires_grad(), "grad: input ", i, " of shape ", inputs[i].shape(), " does not require "
               "gradients, so nothing computed from it was recorded; mark it with requires_grad_() before computing the "
               "outputs from it");
    if (const void* key = key_of(inputs[i])) targets.insert(key);
  }
  std::unordered_map<const void*, Tensor> cotangents;
  {
    GradModeGuard mode(create_graph);
    cotangents = BackwardPass(outputs, targets, false).run(outputs, seeds);
  }
  std::vector<Tensor> result;
  for (const Tensor& input : inputs) {
    auto it = cotangents.find(key_of(input));
    if (key_of(input) && it != cotangents.end()) {
      result.push_back(is_distributed(input) ? distributed_cotangent(input, it->second) : it->second);
    } else {
      result.push_back(zeros_like(input));
    }
  }
  return result;
}

void backward(const Tensor& output, const Tensor& grad_output, bool create_graph) {
  // Inside a capture the gradients are abstract (shapes, no values), and .grad is state outside
  // the graph: the program would leave them there, valueless, and never write them again.
  EDDY_CHECK(!active_trace_recorder(), "backward: called inside a compiled function (eddy.jit, eddy::compile), where "
             "it would leave .grad holding tensors without values; return the loss and call backward on the "
             "compiled function's result, or take grad inside and return the gradients");
  EDDY_CHECK(output.requires_grad(), "backward: tensor does not require gradients (no input of it was "
             "marked requires_grad_)");
  std::vector<Tensor> outputs{output};
  const Seeds seeds = seed_cotangents(outputs, {grad_output}, "backward");
  GradModeGuard mode(create_graph);
  BackwardPass pass(outputs, {}, true);
  auto cotangents = pass.run(outputs, seeds);
  std::unordered_map<const void*, Tensor> leaves = pass.leaves();
  if (output.is_leaf()) leaves.emplace(key_of(output), output);  // backward() on a leaf itself
  // A rule may hand one tensor to several inputs (add's cotangent to both), or a broadcast view:
  // a leaf's .grad is its own dense tensor, as PyTorch's, so that writing into one gradient (an
  // optimiser's in-place scaling) leaves the others alone.
  std::unordered_set<const void*> given;
  for (auto& [key, leaf] : leaves) {
    auto it = cotangents.find(key);
    if (it == cotangents.end()) continue;
    auto& meta = leaf.impl()->autograd;
    if (meta->grad.defined()) {
      meta->grad = add(meta->grad, it->second);
    } else {
      // Taken as it is only when nothing else holds it (not the caller's grad_output, not a view).
      const Tensor& g = it->second;
      const bool own = g.is_contiguous() && g.storage() && g.impl_ptr().use_count() == 1 &&
                       g.storage().use_count() == 1 && given.insert(g.storage().get()).second;
      // A copy, recorded under create_graph (contiguous copies a view already).
      meta->grad = own ? g : g.is_contiguous() ? g * 1.0 : contiguous(g);
    }
    if (!create_graph) meta->grad = meta->grad.detach();
  }
}

}  // namespace eddy
