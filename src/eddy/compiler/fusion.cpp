#include "eddy/compiler/fusion.h"

#include <algorithm>
#include <unordered_set>

#include "eddy/compiler/codegen.h"

namespace eddy::compiler {

bool fusable(const Graph& graph, const GraphNode& node) {
  if (!node.primitive->elementwise || !has_scalar_expression(node.primitive->name)) return false;
  auto renderable = [](DType dtype) { return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::b8; };
  if (!renderable(graph.value(node.output).dtype)) return false;
  return std::all_of(node.inputs.begin(), node.inputs.end(),
                     [&](ValueId input) { return renderable(graph.value(input).dtype); });
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

// No transcendental function: a few cycles per element, less than loading a stored result.
bool cheap(const GraphNode& node) {
  static const std::unordered_set<std::string_view> expensive = {"exp", "log", "sin", "cos", "tanh", "pow", "sqrt"};
  return !expensive.count(node.primitive->name);
}

}  // namespace

Epilogue reduction_epilogue(const Graph& graph, const GraphNode& node) {
  if (node.primitive->name != "sum") return Epilogue::none;
  const ValueInfo& input = graph.value(node.inputs[0]);
  if (input.dtype != DType::f32 && input.dtype != DType::f64) return Epilogue::none;
  // One output element sums every input element, whichever axes were named.
  if (numel(graph.value(node.output).shape) == 1) return Epilogue::sum_all;
  if (input.shape.size() != 2 || node.attrs.axes.size() != 1) return Epilogue::none;
  const int64_t columns = input.shape[1];
  if (node.attrs.axes[0] == 0) return columns >= kMinColumnsSummedOverRows ? Epilogue::sum_leading : Epilogue::none;
  return columns >= kMinColumnsSummedAlongRows ? Epilogue::sum_trailing : Epilogue::none;
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
      return p < 0 || !fusable(graph, graph.nodes[static_cast<size_t>(p)]) || !cheap(graph.nodes[static_cast<size_t>(p)]);
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
    if (!fusable(graph, node)) continue;
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

  std::vector<FusionGroup> groups;
  for (std::vector<size_t>& nodes : members) {
    if (nodes.size() < 2) continue;  // one op gains nothing from a generated loop
    std::reverse(nodes.begin(), nodes.end());
    FusionGroup group{std::move(nodes), {}, -1};
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
    group.epilogue = reduction_epilogue(graph, graph.nodes[group.nodes.back()]);
    groups.push_back(std::move(group));
  }
  std::sort(groups.begin(), groups.end(), [](const FusionGroup& a, const FusionGroup& b) { return a.nodes.back() < b.nodes.back(); });
  return groups;
}

}  // namespace eddy::compiler
