#include "eddy/compiler/fusion.h"

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include "eddy/compiler/codegen.h"

namespace eddy::compiler {

bool fusable(const Graph& graph, const GraphNode& node, bool complex_values) {
  if (!node.primitive->elementwise || node.inputs.empty()) return false;
  auto renderable = [complex_values](DType dtype) {
    return is_inexact(dtype) ? !is_half(dtype) && (complex_values || !is_complex(dtype)) : dtype == DType::b8;
  };
  if (!renderable(graph.value(node.output).dtype)) return false;
  if (!std::all_of(node.inputs.begin(), node.inputs.end(),
                   [&](ValueId input) { return renderable(graph.value(input).dtype); })) {
    return false;
  }
  // Operands share one dtype (where's bool condition aside), so the last one tells the kind.
  const bool complex_operands = is_complex(graph.value(node.inputs.back()).dtype);
  return !node.primitive->lowering.form_for(complex_operands).empty();
}

namespace {

// At most this many groups recompute one shared cheap node.
constexpr size_t kMaxCopies = 4;

// The shortest rows a sum over one axis of [N, C] ends a loop for. The fused loop runs along a
// row, so shorter rows leave vector lanes idle (and a transcendental body runs its remainder
// scalar), and a sum over axis 1 adds its lanes up after every row; there storing the terms
// from one flat loop and summing them apart was measured faster (docs/compiler.md).
constexpr int64_t kMinColumnsSummedOverRows = 8;    // Epilogue::sum_leading
constexpr int64_t kMinColumnsSummedAlongRows = 64;  // Epilogue::sum_trailing

// At most this many nodes are recomputed to spare a group one stored input.
constexpr size_t kMaxRecomputedNodes = 8;

// A few cycles per element, less than loading a stored result.
bool cheap(const GraphNode& node) { return node.primitive->cost == CostClass::cheap; }

// The shape a group's loop runs over: its input's for a group that ends in a sum.
const Shape& loop_shape(const Graph& graph, const std::vector<size_t>& nodes) {
  const GraphNode& root = graph.nodes[nodes.back()];
  return reduction_epilogue(graph, root) == Epilogue::none ? graph.value(root.output).shape
                                                            : graph.value(root.inputs[0]).shape;
}

// Merges groups into the groups whose values they read (FusionOptions::multi_output). Units are
// groups (union-find over their ids) and, for the dependency walk, the nodes left out of every
// group (unit count + node index).
class GroupMerger {
 public:
  GroupMerger(const Graph& graph, const std::vector<std::vector<size_t>>& consumers, const std::vector<int>& producer,
              const std::vector<std::vector<int>>& groups_of, std::vector<std::vector<size_t>>& members)
      : graph_(graph), consumers_(consumers), producer_(producer), groups_of_(groups_of), members_(members),
        parent_(members.size()) {
    for (size_t g = 0; g < parent_.size(); ++g) parent_[g] = static_cast<int>(g);
    for (std::vector<size_t>& nodes : members_) std::sort(nodes.begin(), nodes.end());
  }

  int find(int group) {
    while (parent_[static_cast<size_t>(group)] != group) group = parent_[static_cast<size_t>(group)];
    return group;
  }

  // Merges every group that can be, producers first.
  void merge() {
    std::vector<int> order;
    for (size_t g = 0; g < members_.size(); ++g) {
      if (!members_[g].empty() && mergeable(static_cast<int>(g))) order.push_back(static_cast<int>(g));
    }
    auto last_node = [&](int group) { return members_[static_cast<size_t>(group)].back(); };
    std::sort(order.begin(), order.end(), [&](int a, int b) { return last_node(a) < last_node(b); });
    for (int consumer : order) {
      for (int producer = producer_to_merge_into(consumer); producer >= 0;
           producer = producer_to_merge_into(consumer)) {
        consumer = join(producer, consumer);
      }
    }
    // Then groups that read the same value and do not depend on each other (a tangent's product
    // and the second-order term both reading tanh'(z) and a backward matmul's result).
    for (int group : order) {
      if (find(group) != group) continue;
      for (int sibling = sibling_to_merge_with(group); sibling >= 0; sibling = sibling_to_merge_with(group)) {
        group = join(sibling, group);
      }
    }
  }

  // Whether a value of `node` is read by a unit that does not compute it itself.
  bool read_outside(size_t node) { return !units_reading(node).empty(); }

 private:
  int unit_count() const { return static_cast<int>(members_.size()); }

  const GraphNode& root(int group) const { return graph_.nodes[members_[static_cast<size_t>(group)].back()]; }
  // A group that ends in a sum keeps its one output.
  bool mergeable(int group) const { return reduction_epilogue(graph_, root(group)) == Epilogue::none; }
  const Shape& domain(int group) const { return loop_shape(graph_, members_[static_cast<size_t>(group)]); }

  bool contains(int unit, size_t node) {
    return std::any_of(groups_of_[node].begin(), groups_of_[node].end(), [&](int g) { return find(g) == unit; });
  }

  // The units that read `node`'s value without computing it.
  std::vector<int> units_reading(size_t node) {
    std::vector<int> units;
    for (size_t c : consumers_[static_cast<size_t>(graph_.nodes[node].output)]) {
      if (groups_of_[c].empty()) {
        units.push_back(unit_count() + static_cast<int>(c));
        continue;
      }
      for (int g : groups_of_[c]) {
        const int unit = find(g);
        if (!contains(unit, node) && std::find(units.begin(), units.end(), unit) == units.end()) units.push_back(unit);
      }
    }
    return units;
  }

  // The units that read a value of `unit`, listed anew after each merge: the walks between
  // merges look them up many times.
  const std::vector<int>& successors(int unit) {
    if (successors_.empty()) {
      successors_.resize(static_cast<size_t>(unit_count()) + graph_.nodes.size());
      for (int group = 0; group < unit_count(); ++group) {
        std::vector<int>& next = successors_[static_cast<size_t>(group)];
        for (size_t node : members_[static_cast<size_t>(group)]) {
          for (int reader : units_reading(node)) {
            if (std::find(next.begin(), next.end(), reader) == next.end()) next.push_back(reader);
          }
        }
      }
      for (size_t node = 0; node < graph_.nodes.size(); ++node) {
        if (groups_of_[node].empty()) successors_[static_cast<size_t>(unit_count()) + node] = units_reading(node);
      }
    }
    return successors_[static_cast<size_t>(unit)];
  }

  // Merges `from` into `into`, returning the merged group.
  int join(int into, int from) {
    std::vector<size_t>& target = members_[static_cast<size_t>(into)];
    std::vector<size_t>& source = members_[static_cast<size_t>(from)];
    std::vector<size_t> joined;
    std::set_union(target.begin(), target.end(), source.begin(), source.end(), std::back_inserter(joined));
    target = std::move(joined);
    source.clear();
    parent_[static_cast<size_t>(from)] = into;
    successors_.clear();
    return into;
  }

  // Whether `to` depends on `from` through some other unit (or, with `directly`, at all): merging
  // them would leave that unit needing to run both before and after the merged loop.
  bool reaches(int from, int to, bool directly) {
    std::vector<int> stack;
    std::vector<bool> seen(static_cast<size_t>(unit_count()) + graph_.nodes.size(), false);
    for (int next : successors(from)) {
      if (directly || next != to) stack.push_back(next);
    }
    while (!stack.empty()) {
      const int unit = stack.back();
      stack.pop_back();
      if (unit == to) return true;
      if (seen[static_cast<size_t>(unit)]) continue;
      seen[static_cast<size_t>(unit)] = true;
      for (int next : successors(unit)) stack.push_back(next);
    }
    return false;
  }

  // A group that `consumer` reads a value of and can be merged with, or -1.
  int producer_to_merge_into(int consumer) {
    for (size_t node : members_[static_cast<size_t>(consumer)]) {
      for (ValueId input : graph_.nodes[node].inputs) {
        const int p = producer_[static_cast<size_t>(input)];
        if (p < 0 || groups_of_[static_cast<size_t>(p)].empty() || contains(consumer, static_cast<size_t>(p))) continue;
        const int producer = find(groups_of_[static_cast<size_t>(p)][0]);
        if (mergeable(producer) && domain(producer) == domain(consumer) && !reaches(producer, consumer, false)) {
          return producer;
        }
      }
    }
    return -1;
  }

  // A group that reads a value of `group`'s shape that `group` also reads from outside, depends
  // on it in neither direction and can be merged with it, or -1.
  int sibling_to_merge_with(int group) {
    for (size_t node : members_[static_cast<size_t>(group)]) {
      for (ValueId input : graph_.nodes[node].inputs) {
        // Sharing a bias or a constant saves nothing worth a bigger loop.
        if (graph_.value(input).shape != domain(group)) continue;
        const int p = producer_[static_cast<size_t>(input)];
        if (p >= 0 && contains(group, static_cast<size_t>(p))) continue;
        for (size_t reader : consumers_[static_cast<size_t>(input)]) {
          for (int g : groups_of_[reader]) {
            const int sibling = find(g);
            if (sibling == group || !mergeable(sibling) || domain(sibling) != domain(group) ||
                (p >= 0 && contains(sibling, static_cast<size_t>(p)))) {
              continue;
            }
            if (!reaches(sibling, group, true) && !reaches(group, sibling, true)) return sibling;
          }
        }
      }
    }
    return -1;
  }

  const Graph& graph_;
  const std::vector<std::vector<size_t>>& consumers_;
  const std::vector<int>& producer_;
  const std::vector<std::vector<int>>& groups_of_;
  std::vector<std::vector<size_t>>& members_;
  std::vector<int> parent_;
  std::vector<std::vector<int>> successors_;  // per unit; empty when a merge made it stale
};

// Rematerialisation: a group that reads a value another group stores, where that value is a
// short chain of cheap ops over values the group reads anyway, recomputes the chain instead of
// reading it. A training step's backward loops are where this pays: they read y and the
// tangents for their own terms, and with them tanh'(z) = 1 - y*y, tanh''(z) and Taylor mode's
// sum of squared tangents, which the forward loop would otherwise store for them. A few
// multiplies per element cost less than one more array written in one loop and read in another.
class Rematerializer {
 public:
  // `groups_of` names each node's groups by their final (merged) ids.
  Rematerializer(const Graph& graph, const std::vector<int>& producer, std::vector<std::vector<int>>& groups_of,
                 std::vector<std::vector<size_t>>& members, bool complex_values)
      : graph_(graph), producer_(producer), groups_of_(groups_of), members_(members), recomputed_(members.size()),
        complex_values_(complex_values) {}

  void run() {
    for (size_t g = 0; g < members_.size(); ++g) {
      if (!members_[g].empty()) recompute_inputs(static_cast<int>(g));
    }
  }

  // Whether `group` holds `node` only as a copy, its value stored (if at all) by another group.
  bool recomputed(int group, size_t node) const {
    const std::vector<size_t>& copies = recomputed_[static_cast<size_t>(group)];
    return std::find(copies.begin(), copies.end(), node) != copies.end();
  }

 private:
  void recompute_inputs(int group) {
    std::vector<size_t>& nodes = members_[static_cast<size_t>(group)];
    const Shape& shape = loop_shape(graph_, nodes);
    std::unordered_set<ValueId> read;  // what the loop reads or computes anyway
    for (size_t n : nodes) {
      read.insert(graph_.nodes[n].output);
      read.insert(graph_.nodes[n].inputs.begin(), graph_.nodes[n].inputs.end());
    }
    for (bool changed = true; changed;) {
      changed = false;
      std::vector<ValueId> candidates(read.begin(), read.end());
      std::sort(candidates.begin(), candidates.end());  // the same kernels on every run
      for (ValueId input : candidates) {
        const int p = producer_[static_cast<size_t>(input)];
        if (p < 0 || in_group(group, static_cast<size_t>(p))) continue;
        std::vector<size_t> chain;
        if (!collect(group, shape, static_cast<size_t>(p), read, chain)) continue;
        for (size_t n : chain) {
          nodes.push_back(n);
          groups_of_[n].push_back(group);
          recomputed_[static_cast<size_t>(group)].push_back(n);
          read.insert(graph_.nodes[n].output);
        }
        std::sort(nodes.begin(), nodes.end());
        changed = true;
      }
    }
  }

  bool in_group(int group, size_t node) const {
    return std::find(groups_of_[node].begin(), groups_of_[node].end(), group) != groups_of_[node].end();
  }

  // Adds to `chain` the nodes that compute `node`'s value from values in `read` and scalar
  // inputs or constants: cheap, of the group's loop `shape`, and each also computed by a loop of
  // another group, which keeps storing it for any other reader. False when there is no such
  // chain short enough.
  bool collect(int group, const Shape& shape, size_t node, const std::unordered_set<ValueId>& read,
               std::vector<size_t>& chain) const {
    if (std::find(chain.begin(), chain.end(), node) != chain.end()) return true;
    const GraphNode& n = graph_.nodes[node];
    if (!fusable(graph_, n, complex_values_) || !cheap(n) || chain.size() == kMaxRecomputedNodes ||
        graph_.value(n.output).shape != shape) {
      return false;
    }
    const bool computed_by_another_loop = std::any_of(groups_of_[node].begin(), groups_of_[node].end(), [&](int g) {
      return g != group && members_[static_cast<size_t>(g)].size() > 1;
    });
    if (!computed_by_another_loop) return false;
    chain.push_back(node);
    for (ValueId input : n.inputs) {
      const int p = producer_[static_cast<size_t>(input)];
      if (read.count(input) || (p < 0 && numel(graph_.value(input).shape) == 1)) continue;
      if (p < 0 || !collect(group, shape, static_cast<size_t>(p), read, chain)) return false;
    }
    return true;
  }

  const Graph& graph_;
  const std::vector<int>& producer_;
  std::vector<std::vector<int>>& groups_of_;
  std::vector<std::vector<size_t>>& members_;
  std::vector<std::vector<size_t>> recomputed_;  // per group, the nodes it holds as copies
  bool complex_values_;
};

}  // namespace

Epilogue reduction_epilogue(const Graph& graph, const GraphNode& node) {
  if (!node.primitive->additive_reduction) return Epilogue::none;
  const ValueInfo& input = graph.value(node.inputs[0]);
  if (input.dtype != DType::f32 && input.dtype != DType::f64) return Epilogue::none;
  // One output element sums every input element, whichever axes were named.
  if (numel(graph.value(node.output).shape) == 1) return Epilogue::sum_all;
  // Of a [..., C] domain, the rows being every axis but the last: a sum over the last axis, or
  // over all the others (a layer norm's row statistics and its weight's gradient on [B, T, C]).
  const auto rank = static_cast<int64_t>(input.shape.size());
  if (rank < 2) return Epilogue::none;
  const std::vector<int64_t>& axes = node.attrs.axes;
  const int64_t columns = input.shape.back();
  if (axes == std::vector<int64_t>{rank - 1}) {
    return columns >= kMinColumnsSummedAlongRows ? Epilogue::sum_trailing : Epilogue::none;
  }
  std::vector<int64_t> leading(static_cast<size_t>(rank - 1));
  std::iota(leading.begin(), leading.end(), int64_t{0});
  if (axes == leading) return columns >= kMinColumnsSummedOverRows ? Epilogue::sum_leading : Epilogue::none;
  return Epilogue::none;
}

std::vector<FusionGroup> plan_fusion(const Graph& graph, FusionOptions options) {
  std::vector<std::vector<size_t>> consumers(graph.values.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (ValueId input : graph.nodes[i].inputs) consumers[static_cast<size_t>(input)].push_back(i);
  }
  std::vector<bool> is_output(graph.values.size(), false);
  for (ValueId id : graph.outputs) is_output[static_cast<size_t>(id)] = true;
  std::vector<int> producer(graph.values.size(), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i) producer[static_cast<size_t>(graph.nodes[i].output)] = static_cast<int>(i);
  // Only one op is recomputed per copy: a shared node whose inputs could be recomputed too would
  // pull whole chains into every group.
  auto reads_stored_values = [&](const GraphNode& node) {
    return std::all_of(node.inputs.begin(), node.inputs.end(), [&](ValueId input) {
      const int p = producer[static_cast<size_t>(input)];
      return p < 0 || !fusable(graph, graph.nodes[static_cast<size_t>(p)], options.complex_values) ||
             !cheap(graph.nodes[static_cast<size_t>(p)]);
    });
  };

  // Consumers before producers, so a node's consumers have their groups when it is visited. A
  // node joins the one group all its uses are in; a cheap node whose uses are spread over a few
  // groups joins each of them instead (recomputing a multiply costs less than a round trip of
  // its result through memory).
  std::vector<std::vector<int>> groups_of(graph.nodes.size());
  std::vector<std::vector<size_t>> members;
  std::vector<Shape> domain;  // per group, the shape its loop runs over
  auto start_group = [&](const Shape& shape) {
    members.emplace_back();
    domain.push_back(shape);
    return static_cast<int>(members.size() - 1);
  };
  for (size_t i = graph.nodes.size(); i-- > 0;) {
    const GraphNode& node = graph.nodes[i];
    if (options.reduction_epilogues && reduction_epilogue(graph, node) != Epilogue::none) {
      // A sum only ever ends a loop: its result is stored whoever reads it.
      groups_of[i] = {start_group(graph.value(node.inputs[0]).shape)};
      members.back().push_back(i);
      continue;
    }
    if (!fusable(graph, node, options.complex_values)) continue;
    const std::vector<size_t>& users = consumers[static_cast<size_t>(node.output)];
    std::vector<int> joined;
    bool all_uses_fused = !is_output[static_cast<size_t>(node.output)] && !users.empty();
    for (size_t c = 0; c < users.size() && all_uses_fused; ++c) {
      all_uses_fused = !groups_of[users[c]].empty();
      for (int group : groups_of[users[c]]) {
        if (std::find(joined.begin(), joined.end(), group) == joined.end()) joined.push_back(group);
      }
    }
    const bool same_shape = std::all_of(joined.begin(), joined.end(), [&](int group) {
      return domain[static_cast<size_t>(group)] == graph.value(node.output).shape;
    });
    const bool shareable = joined.size() == 1 || (joined.size() <= kMaxCopies && cheap(node) && reads_stored_values(node));
    if (!all_uses_fused || !same_shape || !shareable) joined = {start_group(graph.value(node.output).shape)};
    groups_of[i] = joined;
    for (int group : joined) members[static_cast<size_t>(group)].push_back(i);
  }

  GroupMerger merger(graph, consumers, producer, groups_of, members);
  if (options.multi_output) merger.merge();
  for (std::vector<int>& groups : groups_of) {
    for (int& group : groups) group = merger.find(group);
  }
  Rematerializer rematerializer(graph, producer, groups_of, members, options.complex_values);
  if (options.rematerialize) rematerializer.run();

  std::vector<FusionGroup> groups;
  for (size_t id = 0; id < members.size(); ++id) {
    std::vector<size_t>& nodes = members[id];
    if (nodes.size() < 2) continue;  // one op gains nothing from a generated loop
    std::sort(nodes.begin(), nodes.end());
    FusionGroup group{std::move(nodes), {}, -1, {}};
    std::unordered_set<ValueId> inside;
    for (size_t n : group.nodes) {
      for (ValueId input : graph.nodes[n].inputs) {
        if (!inside.count(input) && std::find(group.inputs.begin(), group.inputs.end(), input) == group.inputs.end()) {
          group.inputs.push_back(input);
        }
      }
      inside.insert(graph.nodes[n].output);
    }
    group.output = graph.nodes[group.nodes.back()].output;
    for (size_t n : group.nodes) {
      const ValueId value = graph.nodes[n].output;
      if (value != group.output && !rematerializer.recomputed(static_cast<int>(id), n) &&
          (is_output[static_cast<size_t>(value)] || merger.read_outside(n))) {
        group.side_outputs.push_back(value);
      }
    }
    group.epilogue = reduction_epilogue(graph, graph.nodes[group.nodes.back()]);
    groups.push_back(std::move(group));
  }
  std::sort(groups.begin(), groups.end(), [](const FusionGroup& a, const FusionGroup& b) { return a.nodes.back() < b.nodes.back(); });
  return groups;
}

}  // namespace eddy::compiler
