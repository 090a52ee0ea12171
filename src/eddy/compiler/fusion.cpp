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

std::vector<FusionGroup> plan_fusion(const Graph& graph) {
  std::vector<std::vector<size_t>> consumers(graph.values.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (ValueId input : graph.nodes[i].inputs) consumers[static_cast<size_t>(input)].push_back(i);
  }
  std::vector<bool> is_output(graph.values.size(), false);
  for (ValueId id : graph.outputs) is_output[static_cast<size_t>(id)] = true;

  // Consumers before producers, so a node's consumers have their groups when it is visited.
  std::vector<int> group_of(graph.nodes.size(), -1);
  std::vector<std::vector<size_t>> members;
  for (size_t i = graph.nodes.size(); i-- > 0;) {
    const GraphNode& node = graph.nodes[i];
    if (!fusable(graph, node)) continue;
    const std::vector<size_t>& users = consumers[static_cast<size_t>(node.output)];
    int group = -1;
    if (!is_output[static_cast<size_t>(node.output)] && !users.empty()) {
      const int candidate = group_of[users.front()];
      const bool one_group = std::all_of(users.begin(), users.end(), [&](size_t c) { return group_of[c] == candidate; });
      const size_t root = candidate >= 0 ? members[static_cast<size_t>(candidate)].front() : 0;
      if (candidate >= 0 && one_group && graph.value(graph.nodes[root].output).shape == graph.value(node.output).shape) {
        group = candidate;
      }
    }
    if (group < 0) {
      group = static_cast<int>(members.size());
      members.emplace_back();
    }
    group_of[i] = group;
    members[static_cast<size_t>(group)].push_back(i);
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
    groups.push_back(std::move(group));
  }
  std::sort(groups.begin(), groups.end(), [](const FusionGroup& a, const FusionGroup& b) { return a.nodes.back() < b.nodes.back(); });
  return groups;
}

}  // namespace eddy::compiler
