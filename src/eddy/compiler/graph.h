#pragma once
// The graph IR: a function of eddy primitives in static single assignment form. Values are
// numbered; each is a function input, a tensor the function captured (parameters by reference,
// constants it created), or the output of one node. Nodes are kept in an order where every
// input is defined before use. The same graph feeds the passes, code generation, Taylor mode and
// inference export.

#include <cstdint>
#include <string>
#include <vector>

#include "eddy/core/tensor.h"
#include "eddy/ops/primitive.h"

namespace eddy::dist {
class Communicator;
}

namespace eddy::compiler {

using ValueId = int32_t;

enum class ValueSource { input, captured, node };

struct ValueInfo {
  Shape shape;
  DType dtype;
  ValueSource source;
};

struct GraphNode {
  const Primitive* primitive;
  Attrs attrs;
  std::vector<ValueId> inputs;
  ValueId output;
};

// A tensor the function used without computing it. It is read when the graph runs, so in-place
// updates (an optimiser's step on a parameter) are seen. `constant` marks tensors nothing outside
// the graph can reach, which are safe to fold.
struct CapturedTensor {
  ValueId id;
  Tensor tensor;
  bool constant;
};

// A value every rank of `communicator` holds alike, as the program that traced the graph knew
// (a distributed tensor's part placed Replicate on that mesh axis).
struct ReplicatedValue {
  ValueId id;
  dist::Communicator* communicator;
};

struct Graph {
  std::vector<ValueInfo> values;
  std::vector<ValueId> inputs;
  std::vector<CapturedTensor> captured;
  std::vector<GraphNode> nodes;
  std::vector<ValueId> outputs;
  std::vector<ReplicatedValue> replicated;

  ValueId add_value(const Shape& shape, DType dtype, ValueSource source);
  const ValueInfo& value(ValueId id) const { return values.at(static_cast<size_t>(id)); }
  // The captured entry of `id`, or null.
  const CapturedTensor* find_captured(ValueId id) const;
  // For every value, the position of its entry in `captured`, or -1: find_captured for passes
  // that look up many values.
  std::vector<int> captured_positions() const;
  // How many node inputs and graph outputs refer to each value.
  std::vector<int> use_counts() const;
  // One line per node, "%3 = mul(%1, %2) : f32[10, 20]", for tests and EDDY_COMPILER_DUMP.
  std::string to_string() const;
};

// Redirects every use (node inputs and graph outputs) of each value v to replacement[v], a table
// with one entry per value, v itself where nothing changes. One walk applies any number of
// replacements, which keeps a pass that rewrites many nodes linear. A replacement must not be
// replaced itself, and must be defined before the uses it takes over.
void replace_uses(Graph& graph, const std::vector<ValueId>& replacement);

// Throws eddy::Error unless every node's inputs are defined before it and every id is in range:
// passes call it in debug checks and tests.
void verify(const Graph& graph);

}  // namespace eddy::compiler
