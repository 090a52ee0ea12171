#include "eddy/compiler/graph.h"

#include <sstream>

namespace eddy::compiler {

ValueId Graph::add_value(const Shape& shape, DType dtype, ValueSource source) {
  values.push_back(ValueInfo{shape, dtype, source});
  return static_cast<ValueId>(values.size() - 1);
}

const CapturedTensor* Graph::find_captured(ValueId id) const {
  for (const CapturedTensor& entry : captured) {
    if (entry.id == id) return &entry;
  }
  return nullptr;
}

std::vector<int> Graph::captured_positions() const {
  std::vector<int> positions(values.size(), -1);
  for (size_t i = 0; i < captured.size(); ++i) positions[static_cast<size_t>(captured[i].id)] = static_cast<int>(i);
  return positions;
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> uses(values.size(), 0);
  for (const GraphNode& node : nodes) {
    for (ValueId input : node.inputs) ++uses[static_cast<size_t>(input)];
  }
  for (ValueId output : outputs) ++uses[static_cast<size_t>(output)];
  return uses;
}

std::string Graph::to_string() const {
  std::ostringstream out;
  auto describe = [&](ValueId id) {
    const ValueInfo& info = value(id);
    out << dtype_name(info.dtype) << info.shape;
  };
  for (ValueId id : inputs) {
    out << "%" << id << " = input : ";
    describe(id);
    out << "\n";
  }
  for (const CapturedTensor& entry : captured) {
    out << "%" << entry.id << " = " << (entry.constant ? "constant" : "captured") << " : ";
    describe(entry.id);
    out << "\n";
  }
  for (const GraphNode& node : nodes) {
    out << "%" << node.output << " = " << node.primitive->name << "(";
    for (size_t i = 0; i < node.inputs.size(); ++i) out << (i ? ", %" : "%") << node.inputs[i];
    out << ") : ";
    describe(node.output);
    out << "\n";
  }
  out << "return";
  for (size_t i = 0; i < outputs.size(); ++i) out << (i ? ", %" : " %") << outputs[i];
  out << "\n";
  return out.str();
}

void replace_uses(Graph& graph, const std::vector<ValueId>& replacement) {
  EDDY_CHECK(replacement.size() == graph.values.size(), "replace_uses: a table of ", replacement.size(),
             " entries for a graph of ", graph.values.size(), " values");
  const auto count = static_cast<ValueId>(replacement.size());
  auto redirect = [&](ValueId& use) {
    const ValueId target = replacement[static_cast<size_t>(use)];
    EDDY_CHECK(target >= 0 && target < count, "replace_uses: %", use, " goes to %", target, ", out of range");
    EDDY_CHECK(replacement[static_cast<size_t>(target)] == target, "replace_uses: %", use, " goes to %", target,
               ", which is itself replaced by %", replacement[static_cast<size_t>(target)]);
    use = target;
  };
  for (GraphNode& node : graph.nodes) {
    for (ValueId& input : node.inputs) redirect(input);
  }
  for (ValueId& output : graph.outputs) redirect(output);
}

void verify(const Graph& graph) {
  const auto count = static_cast<ValueId>(graph.values.size());
  std::vector<bool> defined(graph.values.size(), false);
  auto check_id = [&](ValueId id, const char* what) {
    EDDY_CHECK(id >= 0 && id < count, "graph: ", what, " refers to value %", id, ", out of range");
  };
  for (ValueId id : graph.inputs) {
    check_id(id, "an input");
    defined[static_cast<size_t>(id)] = true;
  }
  for (const CapturedTensor& entry : graph.captured) {
    check_id(entry.id, "a captured tensor");
    defined[static_cast<size_t>(entry.id)] = true;
  }
  for (const GraphNode& node : graph.nodes) {
    for (ValueId input : node.inputs) {
      check_id(input, "a node input");
      EDDY_CHECK(defined[static_cast<size_t>(input)], "graph: ", node.primitive->name, " producing %",
                 node.output, " uses %", input, " before it is defined");
    }
    check_id(node.output, "a node output");
    EDDY_CHECK(!defined[static_cast<size_t>(node.output)], "graph: %", node.output, " is defined twice");
    defined[static_cast<size_t>(node.output)] = true;
  }
  for (ValueId id : graph.outputs) {
    check_id(id, "an output");
    EDDY_CHECK(defined[static_cast<size_t>(id)], "graph: output %", id, " is never defined");
  }
}

}  // namespace eddy::compiler
