#pragma once
// Internal to the expression language: the syntax tree, error excerpts, and the meaning of a name
// in a set of Symbols, shared by the checker and the evaluator so that they cannot disagree.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "solvers/pinn/expression.h"

namespace eddy::pinn {

enum class Operator { add, subtract, multiply, divide, power, negate, equal, not_equal, less,
                      less_equal, greater, greater_equal, logical_and, logical_or, logical_not };

struct Node;
using NodePtr = std::shared_ptr<const Node>;

struct Node {
  enum class Kind { number, symbol, unary, binary, call, vector };
  Kind kind;
  // Where messages point: `position` and `length` mark the node's own token (the number, name,
  // operator or opening bracket); `begin` and `end` bound all of its text.
  size_t position = 0;
  size_t length = 1;
  size_t begin = 0;
  size_t end = 0;
  double number = 0;                 // number
  std::string name;                  // symbol, call
  Operator op = Operator::add;       // unary, binary
  std::vector<NodePtr> children;     // operands, arguments, elements
  int depth = 1;                     // of the subtree, which the parser bounds
};

struct ExpressionSource {
  std::string text;
  std::string where;
  NodePtr root;
};

// Throws eddy::Error: "<where>: <message>", then the line of the expression holding the fault,
// then a caret line marking `length` characters from `position`.
[[noreturn]] void fail_at(const ExpressionSource& source, size_t position, size_t length,
                          const std::string& message);
// Marks the node's own token.
[[noreturn]] inline void fail_at(const ExpressionSource& source, const Node& node,
                                 const std::string& message) {
  fail_at(source, node.position, node.length, message);
}
// Marks all of the node's text.
[[noreturn]] inline void fail_at_whole(const ExpressionSource& source, const Node& node,
                                       const std::string& message) {
  fail_at(source, node.begin, node.end - node.begin, message);
}

// The highest derivative order, of d(e, x, k), of derivative notation (u_xxx) and of both nested
// (d(u_x, x, 3) is order 4): beyond it is a typo, and would build an enormous graph.
inline constexpr int kMaxDerivativeOrder = 16;

// A fully parenthesised rendering: equal texts mean equal values in one context, which makes it
// the key of the evaluation caches.
std::string canonical_text(const Node& node);

// What a symbol name stands for in a set of Symbols.
struct Meaning {
  enum class Kind { coordinate, field, parameter, helper, pi, normal, normal_component, derivative };
  Meaning(Kind kind, std::string name, int index = 0, std::vector<int> with_respect_to = {})
      : kind(kind), name(std::move(name)), index(index), with_respect_to(std::move(with_respect_to)) {}
  Kind kind;
  std::string name;                  // the symbol, or the base of a derivative (a field or helper)
  int index;                         // coordinate, field or spatial-dimension index
  std::vector<int> with_respect_to;  // derivative: coordinate indices, sorted
};

// The meaning of the symbol `node` in `symbols`; throws (with the caret in `source`) for unknown
// names, bad derivative notation and the normal outside boundary contexts.
Meaning resolve_symbol(const ExpressionSource& source, const Node& node, const Symbols& symbols);

// Indices of the spatial coordinates: every coordinate except time `t`.
std::vector<int> spatial_coordinates(const Symbols& symbols);

// The shape of values: a scalar, a vector of `length` scalars, or a true/false predicate.
struct ValueType {
  enum class Kind { scalar, vector, predicate };
  Kind kind = Kind::scalar;
  int length = 0;  // vectors only
};

// Checks the expression against the symbols (helpers included) and returns its type.
ValueType check_type(const Expression& expression, const Symbols& symbols);

}  // namespace eddy::pinn
