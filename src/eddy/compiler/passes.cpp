#include "eddy/compiler/passes.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "eddy/core/backend.h"
#include "eddy/core/suggest.h"
#include "eddy/core/tracing.h"

namespace eddy::compiler {
namespace {

constexpr std::string_view kDisableVariable = "EDDY_COMPILER_DISABLE";
constexpr std::array<std::string_view, 15> kPassNames = {
    "dce",           "cse",           "fold",          "simplify",
    "pad_sum",       "scatter_sum",   "gemm_addend",   "fusion",
    "reduction_epilogue", "multi_output", "rematerialize", "buffer_reuse",
    "replicated_collectives", "placement_search", "fused_interior"};

// A fold runs a kernel at compile time and keeps its result for every run: these bound the
// work and the memory that can cost, per node.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 16;
// Constants are compared byte for byte to be merged; larger ones are rarely duplicates.
constexpr int64_t kMaxMergedConstantElements = 64;
// optimize's passes reach a fixed point in two or three rounds; the bound only guards against a
// future pair of rules that undo each other.
constexpr int kMaxRounds = 8;

// Collectives are rendezvous with the other ranks: every rank must make the same calls in the
// same order, whatever its graph does with the results. Rank-dependent code traces fine (only
// rank 0 returning a reduced loss), so one rank's graph may use a collective's result while
// another's does not: no pass may drop, merge or evaluate one at compile time.
//
// A node whose value is a function of its primitive, Attrs and input values alone. A payload
// (a checkpoint's closure, a communicator) is state no comparison can see into.
bool is_pure(const GraphNode& node) { return node.attrs.payload == nullptr && !node.primitive->is_collective(); }

std::string pass_list() {
  std::string list;
  for (std::string_view name : kPassNames) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

std::string_view trimmed(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

void check_pass_name(std::string_view name, std::string_view where) {
  if (std::find(kPassNames.begin(), kPassNames.end(), name) != kPassNames.end()) return;
  const std::vector<std::string> candidates(kPassNames.begin(), kPassNames.end());
  throw Error(cat(where, ": unknown compiler pass '", name, "'", did_you_mean(name, candidates),
                  "; valid names: ", pass_list()));
}

// Keeps the entries of `items` whose position `keep` accepts; returns whether any went.
template <typename T, typename Keep>
bool keep_where(std::vector<T>& items, Keep keep) {
  size_t kept = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (keep(i)) {
      if (kept != i) items[kept] = std::move(items[i]);
      ++kept;
    }
  }
  const bool removed = kept != items.size();
  items.resize(kept);
  return removed;
}

std::vector<ValueId> identity_table(const Graph& graph) {
  std::vector<ValueId> table(graph.values.size());
  std::iota(table.begin(), table.end(), ValueId{0});
  return table;
}

// Shape, dtype, device and bytes of a small constant: equal keys, interchangeable tensors. Bytes,
// not values, so -0 and +0, or two NaNs with different payloads, stay apart.
std::string constant_key(const Tensor& tensor) {
  return cat(dtype_name(tensor.dtype()), tensor.shape(), tensor.device(), ":") + element_bytes(tensor);
}

// Merges constants with equal keys into the first; returns whether any merged.
bool merge_constants(Graph& graph, std::vector<ValueId>& replacement) {
  std::unordered_map<std::string, ValueId> first_with_key;
  std::vector<bool> merged(graph.captured.size(), false);
  for (size_t i = 0; i < graph.captured.size(); ++i) {
    const CapturedTensor& entry = graph.captured[i];
    if (!entry.constant || entry.tensor.numel() > kMaxMergedConstantElements) continue;
    auto [first, inserted] = first_with_key.emplace(constant_key(entry.tensor), entry.id);
    if (inserted) continue;
    replacement[static_cast<size_t>(entry.id)] = first->second;
    merged[i] = true;
  }
  return keep_where(graph.captured, [&](size_t i) { return !merged[i]; });
}

// Hash and equality of nodes, by position in `nodes`, for the set of the nodes seen so far.
struct NodeHash {
  const std::vector<GraphNode>* nodes;
  size_t operator()(size_t position) const {
    const GraphNode& node = (*nodes)[position];
    size_t seed = std::hash<const Primitive*>{}(node.primitive);
    auto mix = [&seed](size_t value) { seed ^= value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); };
    for (ValueId input : node.inputs) mix(std::hash<ValueId>{}(input));
    for (int64_t extent : node.attrs.shape) mix(std::hash<int64_t>{}(extent));
    for (int64_t axis : node.attrs.axes) mix(std::hash<int64_t>{}(axis));
    mix(std::hash<int64_t>{}(node.attrs.axis));
    mix(static_cast<size_t>(node.attrs.dtype));
    return seed;
  }
};

struct NodeEqual {
  const std::vector<GraphNode>* nodes;
  bool operator()(size_t a, size_t b) const {
    const GraphNode &x = (*nodes)[a], &y = (*nodes)[b];
    return x.primitive == y.primitive && x.inputs == y.inputs && x.attrs == y.attrs;
  }
};

}  // namespace

bool eliminate_dead_code(Graph& graph) {
  std::vector<bool> needed(graph.values.size(), false);
  for (ValueId output : graph.outputs) needed[static_cast<size_t>(output)] = true;
  std::vector<bool> keep(graph.nodes.size(), false);
  for (size_t i = graph.nodes.size(); i-- > 0;) {
    const GraphNode& node = graph.nodes[i];
    keep[i] = needed[static_cast<size_t>(node.output)] || node.primitive->is_collective();
    if (!keep[i]) continue;
    for (ValueId input : node.inputs) needed[static_cast<size_t>(input)] = true;
  }
  const bool dropped_nodes = keep_where(graph.nodes, [&](size_t i) { return keep[i]; });
  const bool dropped_captured = keep_where(
      graph.captured, [&](size_t i) { return needed[static_cast<size_t>(graph.captured[i].id)]; });
  return dropped_nodes || dropped_captured;
}

bool eliminate_common_subexpressions(Graph& graph) {
  std::vector<ValueId> replacement = identity_table(graph);
  bool changed = merge_constants(graph, replacement);
  std::unordered_set<size_t, NodeHash, NodeEqual> seen(graph.nodes.size(), NodeHash{&graph.nodes},
                                                        NodeEqual{&graph.nodes});
  std::vector<bool> duplicate(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    GraphNode& node = graph.nodes[i];
    // Redirected as we go, so the users of two merged nodes become equal in this same sweep.
    for (ValueId& input : node.inputs) input = replacement[static_cast<size_t>(input)];
    if (!is_pure(node)) continue;
    auto [first, inserted] = seen.insert(i);
    if (inserted) continue;
    replacement[static_cast<size_t>(node.output)] = graph.nodes[*first].output;
    duplicate[i] = true;
    changed = true;
  }
  replace_uses(graph, replacement);
  keep_where(graph.nodes, [&](size_t i) { return !duplicate[i]; });
  return changed;
}

bool fold_constants(Graph& graph) {
  // The kernels run here belong to no traced function, even when one compiles another.
  TraceRecorderScope not_traced(nullptr);
  std::vector<int> constant_at = graph.captured_positions();
  for (const CapturedTensor& entry : graph.captured) {
    if (!entry.constant) constant_at[static_cast<size_t>(entry.id)] = -1;
  }
  std::vector<bool> folded(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const GraphNode& node = graph.nodes[i];
    ValueInfo& info = graph.values[static_cast<size_t>(node.output)];
    if (!is_pure(node) || numel(info.shape) > kMaxFoldedElements) continue;
    std::vector<Tensor> inputs;
    for (ValueId input : node.inputs) {
      const int position = constant_at[static_cast<size_t>(input)];
      if (position < 0) break;
      const Tensor& value = graph.captured[static_cast<size_t>(position)].tensor;
      if (value.numel() > kMaxFoldedElements) break;
      inputs.push_back(value);
    }
    if (inputs.size() != node.inputs.size()) continue;
    Tensor value = node.primitive->eval(inputs, node.attrs, OutputSpec{info.shape, info.dtype});
    EDDY_CHECK(value.shape() == info.shape && value.dtype() == info.dtype, "fold_constants: ",
               node.primitive->name, " evaluated to ", value.dtype(), value.shape(), " where the graph has ",
               info.dtype, info.shape);
    constant_at[static_cast<size_t>(node.output)] = static_cast<int>(graph.captured.size());
    graph.captured.push_back(CapturedTensor{node.output, std::move(value), true});
    info.source = ValueSource::captured;
    folded[i] = true;
  }
  return keep_where(graph.nodes, [&](size_t i) { return !folded[i]; });
}

// Where a value is its parts at offsets along one axis and zeros elsewhere: a pad along one axis,
// or a sum of such values whose parts do not overlap.
struct ZeroPaddedParts {
  int64_t axis = -1;
  std::vector<std::pair<int64_t, ValueId>> parts;  // (offset, value), by offset
};

bool concatenate_padded_sums(Graph& graph) {
  static const Primitive& pad = registered_primitive("pad");
  static const Primitive& add = registered_primitive("add");
  static const Primitive& concat = registered_primitive("concat");

  std::vector<std::optional<ZeroPaddedParts>> padded(graph.values.size());
  bool changed = false;
  for (GraphNode& node : graph.nodes) {
    const Shape& shape = graph.value(node.output).shape;
    if (node.primitive == &pad) {
      std::vector<size_t> padded_axes;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (node.attrs.lo[d] != 0 || node.attrs.hi[d] != 0) padded_axes.push_back(d);
      }
      if (padded_axes.size() != 1) continue;
      const size_t axis = padded_axes[0];
      padded[static_cast<size_t>(node.output)] =
          ZeroPaddedParts{static_cast<int64_t>(axis), {{node.attrs.lo[axis], node.inputs[0]}}};
      continue;
    }
    if (node.primitive != &add) continue;
    const std::optional<ZeroPaddedParts>& left = padded[static_cast<size_t>(node.inputs[0])];
    const std::optional<ZeroPaddedParts>& right = padded[static_cast<size_t>(node.inputs[1])];
    if (!left || !right || left->axis != right->axis || graph.value(node.inputs[0]).shape != shape ||
        graph.value(node.inputs[1]).shape != shape) {
      continue;
    }
    const auto axis = static_cast<size_t>(left->axis);
    ZeroPaddedParts sum{left->axis, left->parts};
    sum.parts.insert(sum.parts.end(), right->parts.begin(), right->parts.end());
    std::sort(sum.parts.begin(), sum.parts.end());
    bool disjoint = true, tiles = true;
    int64_t end = 0;
    for (const auto& [offset, value] : sum.parts) {
      disjoint = disjoint && offset >= end;
      tiles = tiles && offset == end;
      end = offset + graph.value(value).shape[axis];
    }
    if (!disjoint) continue;  // overlapping parts are summed, not placed
    if (tiles && end == shape[axis]) {
      node.primitive = &concat;
      node.attrs = Attrs{};
      node.attrs.axis = left->axis;
      node.inputs.clear();
      for (const auto& [offset, value] : sum.parts) node.inputs.push_back(value);
      changed = true;
    } else {
      padded[static_cast<size_t>(node.output)] = std::move(sum);
    }
  }
  return changed;
}

// Lets each add absorb the node that produces one of its operands, where that value has no other
// use: absorb(add, side, producer) rewrites the add in place and returns true, and the producer
// goes. `producer_of` finds a value's producing node, or null.
template <typename Absorb>
bool absorb_into_adds(Graph& graph, Absorb absorb) {
  static const Primitive& add = registered_primitive("add");
  std::vector<int> producer(graph.values.size(), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i) producer[static_cast<size_t>(graph.nodes[i].output)] = static_cast<int>(i);
  const auto producer_of = [&](ValueId value) -> const GraphNode* {
    const int at = producer[static_cast<size_t>(value)];
    return at < 0 ? nullptr : &graph.nodes[static_cast<size_t>(at)];
  };
  const std::vector<int> uses = graph.use_counts();
  std::vector<bool> absorbed(graph.nodes.size(), false);
  bool changed = false;
  for (GraphNode& node : graph.nodes) {
    if (node.primitive != &add) continue;
    for (size_t side = 0; side < 2; ++side) {
      const ValueId operand = node.inputs[side];
      const GraphNode* made = producer_of(operand);
      if (!made || uses[static_cast<size_t>(operand)] != 1 || !absorb(node, side, *made, producer_of)) continue;
      absorbed[static_cast<size_t>(producer[static_cast<size_t>(operand)])] = true;
      changed = true;
      break;
    }
  }
  keep_where(graph.nodes, [&](size_t i) { return !absorbed[i]; });
  return changed;
}

bool scatter_into_sums(Graph& graph) {
  static const Primitive& full = registered_primitive("full");
  return absorb_into_adds(graph, [&](GraphNode& sum, size_t side, const GraphNode& scatter, const auto& producer_of) {
    if (!scatter.primitive->adds_onto_first_input) return false;  // a full(), say, has no input to read
    const ValueId other = sum.inputs[1 - side];
    const GraphNode* base = producer_of(scatter.inputs[0]);
    // Both terms of the sum's own shape and dtype: a scatter broadcast over the other term's rows
    // would be scattered along the wrong axis once it became that term's.
    const ValueInfo& result = graph.value(sum.output);
    const auto sum_sized = [&](ValueId value) {
      return graph.value(value).shape == result.shape && graph.value(value).dtype == result.dtype;
    };
    if (!base || base->primitive != &full || std::complex<double>(base->attrs.value) != 0.0 || !sum_sized(other) ||
        !sum_sized(scatter.output)) {
      return false;
    }
    sum.inputs = scatter.inputs;
    sum.inputs[0] = other;
    sum.attrs = scatter.attrs;
    sum.primitive = scatter.primitive;
    return true;
  });
}

// Where fusion would take the add into an elementwise loop (a bias followed by an activation),
// that loop already reads the product once and writes the sum once; the GEMM summing onto a copied
// addend would add a pass, not remove one, so such adds stay.
bool fuse_gemm_addends(Graph& graph) {
  std::vector<bool> read_elementwise(graph.values.size(), false);
  for (const GraphNode& node : graph.nodes) {
    if (!node.primitive->elementwise) continue;
    for (ValueId input : node.inputs) read_elementwise[static_cast<size_t>(input)] = true;
  }
  return absorb_into_adds(graph, [&](GraphNode& sum, size_t side, const GraphNode& product, const auto&) {
    if (!product.primitive->plus_addend || read_elementwise[static_cast<size_t>(sum.output)] ||
        graph.value(product.output).shape != graph.value(sum.output).shape) {
      return false;
    }
    const ValueId addend = sum.inputs[1 - side];
    sum.inputs = product.inputs;
    sum.inputs.push_back(addend);
    sum.attrs = product.attrs;
    sum.primitive = product.primitive->plus_addend;
    return true;
  });
}

bool pass_enabled(std::string_view name) {
  check_pass_name(name, "pass_enabled");
  const char* variable = std::getenv(std::string(kDisableVariable).c_str());
  if (!variable) return true;
  bool enabled = true;
  std::string_view rest = variable;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view entry = trimmed(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (entry.empty()) continue;
    check_pass_name(entry, kDisableVariable);
    if (entry == name) enabled = false;
  }
  return enabled;
}

const Primitive& registered_primitive(std::string_view name) {
  if (const Primitive* primitive = find_primitive(name)) return *primitive;
  throw Error(cat("compiler: no primitive named '", name, "' is registered"));
}

bool compiler_verbose() {
  const char* value = std::getenv("EDDY_COMPILER_VERBOSE");
  return value && *value && std::string_view(value) != "0";
}

void optimize(Graph& graph) {
  const bool simplify = pass_enabled("simplify"), fold = pass_enabled("fold"), cse = pass_enabled("cse");
  for (int round = 0; round < kMaxRounds; ++round) {
    bool changed = false;
    if (simplify) changed = simplify_algebra(graph) || changed;
    if (fold) changed = fold_constants(graph) || changed;
    if (cse) changed = eliminate_common_subexpressions(graph) || changed;
    if (!changed) break;
  }
  if (pass_enabled("pad_sum")) concatenate_padded_sums(graph);
  if (pass_enabled("scatter_sum")) scatter_into_sums(graph);
  if (pass_enabled("gemm_addend")) fuse_gemm_addends(graph);
  if (pass_enabled("dce")) eliminate_dead_code(graph);
  verify(graph);
}

}  // namespace eddy::compiler
