// Name resolution and type checking: every mistake a config can make in an expression is found
// here, before any point is evaluated.

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "eddy/core/suggest.h"
#include "eddy/ops/ops.h"
#include "solvers/pinn/expression_ast.h"

namespace eddy::pinn {
namespace {

std::optional<int> index_of(const std::vector<std::string>& names, const std::string& name) {
  auto found = std::find(names.begin(), names.end(), name);
  if (found == names.end()) return std::nullopt;
  return static_cast<int>(found - names.begin());
}

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) text += (i ? ", " : "") + names[i];
  return text;
}

// " (did you mean 'nu'?)" for a close candidate, otherwise the list of candidates, if any.
std::string suggestion(const std::string& name, const std::vector<std::string>& candidates,
                       const std::string& list_label) {
  if (candidates.empty()) return "";
  const std::string hint = did_you_mean(name, candidates);
  return hint.empty() ? " (" + list_label + ": " + join(candidates) + ")" : hint;
}

std::vector<std::string> symbol_names(const Symbols& symbols) {
  std::vector<std::string> names = symbols.coordinates;
  names.insert(names.end(), symbols.fields.begin(), symbols.fields.end());
  names.insert(names.end(), symbols.parameters.begin(), symbols.parameters.end());
  for (const auto& [name, helper] : symbols.helpers) names.push_back(name);
  names.push_back("pi");
  if (symbols.boundary) names.push_back("n");
  return names;
}

[[noreturn]] void fail_unknown_symbol(const ExpressionSource& source, size_t position,
                                      const std::string& name, const Symbols& symbols) {
  fail_at(source, position, name.size(),
          "unknown symbol '" + name + "'" + suggestion(name, symbol_names(symbols), "symbols here"));
}

std::vector<std::string> names_of(const Symbols& symbols, const std::vector<int>& indices) {
  std::vector<std::string> names;
  for (int i : indices) names.push_back(symbols.coordinates[i]);
  return names;
}

// Names that two meanings compete for would make expressions ambiguous.
void check_declarations(const Expression& expression, const Symbols& symbols) {
  std::map<std::string, std::string> roles;
  auto declare = [&](const std::string& name, const std::string& role) {
    const std::string prefix = expression.where().empty() ? "" : expression.where() + ": ";
    if (name == "pi" || name == "n") {
      throw Error(prefix + "'" + name + "' cannot be declared as a " + role + ": it means " +
                  (name == "pi" ? "the constant pi" : "the boundary normal"));
    }
    if (auto [it, inserted] = roles.emplace(name, role); !inserted) {
      throw Error(prefix + (it->second == role ? role + " '" + name + "' is declared twice"
                                               : "'" + name + "' is declared both as a " + it->second +
                                                     " and as a " + role));
    }
  };
  for (const auto& name : symbols.coordinates) declare(name, "coordinate");
  for (const auto& name : symbols.fields) declare(name, "field");
  for (const auto& name : symbols.parameters) declare(name, "parameter");
  for (const auto& [name, helper] : symbols.helpers) declare(name, "helper");
}

std::string describe(const ValueType& type) {
  switch (type.kind) {
    case ValueType::Kind::scalar: return "a scalar";
    case ValueType::Kind::vector: return "a vector of " + std::to_string(type.length);
    case ValueType::Kind::predicate: return "a true/false condition";
  }
  return "";
}

const ValueType kScalar{ValueType::Kind::scalar};
const ValueType kPredicate{ValueType::Kind::predicate};

bool is_scalar(const ValueType& type) { return type.kind == ValueType::Kind::scalar; }
bool is_vector(const ValueType& type) { return type.kind == ValueType::Kind::vector; }

struct FunctionSignature {
  size_t min_arguments;
  size_t max_arguments;
  std::string usage;
};

// The language's own calculus, next to the math functions of the op list (eddy::math_functions).
const std::map<std::string, FunctionSignature>& calculus_functions() {
  static const std::map<std::string, FunctionSignature> table = {
      {"d", {2, 3, "d(e, x) or d(e, x, order)"}},
      {"laplacian", {1, 1, "laplacian(e)"}},
      {"grad", {1, 1, "grad(e)"}},         {"div", {1, 1, "div(v)"}},
      {"dot", {2, 2, "dot(a, b)"}},
  };
  return table;
}

std::optional<FunctionSignature> signature_of(const std::string& name) {
  if (auto calculus = calculus_functions().find(name); calculus != calculus_functions().end()) return calculus->second;
  const MathFunction* function = math_function_named(name);
  if (!function) return std::nullopt;
  const size_t arity = static_cast<size_t>(function->arity);
  return FunctionSignature{arity, arity, name + (arity == 1 ? "(a)" : "(a, b)")};
}

std::vector<std::string> function_names() {
  std::vector<std::string> names;
  for (const auto& [name, signature] : calculus_functions()) names.push_back(name);
  for (const MathFunction& function : math_functions()) names.emplace_back(function.name);
  return names;
}

class TypeChecker {
 public:
  explicit TypeChecker(const Symbols& symbols) : symbols_(symbols) {}

  ValueType type_of(const ExpressionSource& source, const Node& node) {
    switch (node.kind) {
      case Node::Kind::number: return kScalar;
      case Node::Kind::symbol: return symbol_type(source, node);
      case Node::Kind::unary: return unary_type(source, node);
      case Node::Kind::binary: return binary_type(source, node);
      case Node::Kind::call: return call_type(source, node);
      case Node::Kind::vector:
        for (const NodePtr& element : node.children) {
          require_scalar(source, *element, "a vector element");
        }
        return {ValueType::Kind::vector, static_cast<int>(node.children.size())};
    }
    return kScalar;
  }

 private:
  void require_scalar(const ExpressionSource& source, const Node& node, const std::string& what) {
    const ValueType type = type_of(source, node);
    if (!is_scalar(type)) fail_at_whole(source, node, what + " must be a scalar, found " + describe(type));
  }

  ValueType symbol_type(const ExpressionSource& source, const Node& node) {
    const Meaning meaning = resolve_symbol(source, node, symbols_);
    if (meaning.kind == Meaning::Kind::normal) return spatial_vector(source, node);
    if (meaning.kind == Meaning::Kind::helper) return helper_type(source, node, meaning.name);
    if (meaning.kind == Meaning::Kind::derivative && symbols_.helpers.count(meaning.name)) {
      const ValueType type = helper_type(source, node, meaning.name);
      if (!is_scalar(type)) {
        fail_at(source, node, "'" + node.name + "' differentiates helper '" + meaning.name +
                                  "', which is " + describe(type) + ", not a scalar");
      }
    }
    return kScalar;
  }

  ValueType helper_type(const ExpressionSource& source, const Node& node, const std::string& name) {
    if (auto known = helper_types_.find(name); known != helper_types_.end()) return known->second;
    if (auto loop = std::find(in_progress_.begin(), in_progress_.end(), name); loop != in_progress_.end()) {
      std::string cycle;
      for (auto it = loop; it != in_progress_.end(); ++it) cycle += *it + " -> ";
      fail_at(source, node, "helper cycle: " + cycle + name);
    }
    in_progress_.push_back(name);
    const Expression& helper = symbols_.helpers.at(name);
    const ValueType type = type_of(helper.source(), *helper.source().root);
    in_progress_.pop_back();
    helper_types_[name] = type;
    return type;
  }

  ValueType unary_type(const ExpressionSource& source, const Node& node) {
    const ValueType operand = type_of(source, *node.children[0]);
    if (node.op == Operator::logical_not) {
      if (operand.kind != ValueType::Kind::predicate) {
        fail_at_whole(source, *node.children[0],
                      "'!' needs a true/false condition, found " + describe(operand));
      }
      return operand;
    }
    if (operand.kind == ValueType::Kind::predicate) {
      fail_at_whole(source, *node.children[0], "cannot negate " + describe(operand));
    }
    return operand;
  }

  ValueType binary_type(const ExpressionSource& source, const Node& node) {
    const ValueType left = type_of(source, *node.children[0]);
    const ValueType right = type_of(source, *node.children[1]);
    auto mismatch = [&](const std::string& hint) -> ValueType {
      fail_at(source, node, "cannot apply '" + source.text.substr(node.position, node.length) +
                                "' to " + describe(left) + " and " + describe(right) + hint);
    };
    switch (node.op) {
      case Operator::add:
      case Operator::subtract:
        if (is_scalar(left) && is_scalar(right)) return kScalar;
        if (is_vector(left) && is_vector(right) && left.length == right.length) return left;
        return mismatch("");
      case Operator::multiply:
        if (is_scalar(left) && is_scalar(right)) return kScalar;
        if (is_scalar(left) && is_vector(right)) return right;
        if (is_vector(left) && is_scalar(right)) return left;
        return mismatch(is_vector(left) && is_vector(right) ? " (use dot(a, b))" : "");
      case Operator::divide:
        if (is_scalar(right) && (is_scalar(left) || is_vector(left))) return left;
        return mismatch("");
      case Operator::power:
        if (is_scalar(left) && is_scalar(right)) return kScalar;
        return mismatch("");
      case Operator::logical_and:
      case Operator::logical_or:
        if (left.kind == ValueType::Kind::predicate && right.kind == ValueType::Kind::predicate) {
          return kPredicate;
        }
        return mismatch(" (comparisons such as x == 1 give true/false conditions)");
      default:  // comparisons
        if (is_scalar(left) && is_scalar(right)) return kPredicate;
        return mismatch("");
    }
  }

  ValueType call_type(const ExpressionSource& source, const Node& node) {
    const std::optional<FunctionSignature> function = signature_of(node.name);
    if (!function) {
      const std::vector<std::string> symbols = symbol_names(symbols_);
      if (std::find(symbols.begin(), symbols.end(), node.name) != symbols.end()) {
        fail_at(source, node, "'" + node.name + "' is a symbol, not a function");
      }
      fail_at(source, node, "unknown function '" + node.name + "'" + suggestion(node.name, function_names(), "functions"));
    }
    const FunctionSignature& signature = *function;
    const size_t count = node.children.size();
    if (count < signature.min_arguments || count > signature.max_arguments) {
      const std::string expected = signature.min_arguments == signature.max_arguments
                                       ? std::to_string(signature.min_arguments)
                                       : std::to_string(signature.min_arguments) + " or " +
                                             std::to_string(signature.max_arguments);
      fail_at(source, node, node.name + " takes " + expected + " argument" +
                                (signature.max_arguments == 1 ? "" : "s") + " (" + signature.usage +
                                "), found " + std::to_string(count));
    }
    const std::string& name = node.name;
    const std::string argument_of = "the argument of " + name;
    if (name == "d") return derivative_type(source, node);
    if (name == "dot") {
      const ValueType a = type_of(source, *node.children[0]);
      const ValueType b = type_of(source, *node.children[1]);
      if (!is_vector(a) || !is_vector(b) || a.length != b.length) {
        fail_at(source, node, "dot needs two vectors of the same length, found " + describe(a) +
                                  " and " + describe(b));
      }
      return kScalar;
    }
    if (name == "div") {
      const ValueType expected = spatial_vector(source, node);
      const ValueType v = type_of(source, *node.children[0]);
      if (!is_vector(v) || v.length != expected.length) {
        fail_at_whole(source, *node.children[0], argument_of + " must be " + describe(expected) +
                                                     " (one per spatial coordinate), found " + describe(v));
      }
      return kScalar;
    }
    for (const NodePtr& argument : node.children) require_scalar(source, *argument, argument_of);
    if (name == "grad") return spatial_vector(source, node);
    if (name == "laplacian") spatial_vector(source, node);  // for its check
    return kScalar;
  }

  ValueType derivative_type(const ExpressionSource& source, const Node& node) {
    require_scalar(source, *node.children[0], "the first argument of d");
    const Node& coordinate = *node.children[1];
    if (coordinate.kind != Node::Kind::symbol || !index_of(symbols_.coordinates, coordinate.name)) {
      fail_at_whole(source, coordinate, "the second argument of d must be a coordinate (" +
                                            join(symbols_.coordinates) + ")");
    }
    if (node.children.size() == 3) {
      const Node& order = *node.children[2];
      if (order.kind != Node::Kind::number || order.number < 1 || order.number > kMaxDerivativeOrder ||
          std::floor(order.number) != order.number) {
        fail_at_whole(source, order, "the order of a derivative must be a whole number from 1 to " +
                                         std::to_string(kMaxDerivativeOrder));
      }
    }
    return kScalar;
  }

  // A vector with one entry per spatial coordinate, for grad, div, laplacian and n at `node`;
  // they mean nothing without spatial coordinates.
  ValueType spatial_vector(const ExpressionSource& source, const Node& node) const {
    const int length = static_cast<int>(spatial_coordinates(symbols_).size());
    if (length == 0) {
      fail_at(source, node, "'" + node.name + "' needs spatial coordinates, and the only coordinate is time");
    }
    return {ValueType::Kind::vector, length};
  }

  const Symbols& symbols_;
  std::map<std::string, ValueType> helper_types_;
  std::vector<std::string> in_progress_;  // the helpers being checked, outermost first
};

}  // namespace

std::vector<int> spatial_coordinates(const Symbols& symbols) {
  std::vector<int> spatial;
  for (size_t i = 0; i < symbols.coordinates.size(); ++i) {
    if (symbols.coordinates[i] != "t") spatial.push_back(static_cast<int>(i));
  }
  return spatial;
}

namespace {

// The parameters, or the fields (read as they are or through a derivative), a node reads, itself
// or through the helpers it uses.
void collect_reads(const ExpressionSource& source, const Node& node, const Symbols& symbols, Meaning::Kind kind,
                   std::set<std::string>& helpers_walked, std::set<std::string>& names) {
  if (node.kind == Node::Kind::symbol) {
    const Meaning meaning = resolve_symbol(source, node, symbols);
    const bool field_derivative =
        meaning.kind == Meaning::Kind::derivative && index_of(symbols.fields, meaning.name).has_value();
    if (meaning.kind == kind || (kind == Meaning::Kind::field && field_derivative)) names.insert(meaning.name);
    const bool helper = meaning.kind == Meaning::Kind::helper ||
                        (meaning.kind == Meaning::Kind::derivative && symbols.helpers.count(meaning.name));
    if (helper && helpers_walked.insert(meaning.name).second) {
      const ExpressionSource& body = symbols.helpers.at(meaning.name).source();
      collect_reads(body, *body.root, symbols, kind, helpers_walked, names);
    }
  }
  for (const NodePtr& child : node.children) collect_reads(source, *child, symbols, kind, helpers_walked, names);
}

std::set<std::string> names_read(const Expression& expression, const Symbols& symbols, Meaning::Kind kind) {
  std::set<std::string> helpers_walked, names;
  collect_reads(expression.source(), *expression.source().root, symbols, kind, helpers_walked, names);
  return names;
}

}  // namespace

std::set<std::string> parameters_read(const Expression& expression, const Symbols& symbols) {
  return names_read(expression, symbols, Meaning::Kind::parameter);
}

std::set<std::string> fields_read(const Expression& expression, const Symbols& symbols) {
  return names_read(expression, symbols, Meaning::Kind::field);
}

Meaning resolve_symbol(const ExpressionSource& source, const Node& node, const Symbols& symbols) {
  const std::string& name = node.name;
  if (auto i = index_of(symbols.coordinates, name)) return {Meaning::Kind::coordinate, name, *i};
  if (auto i = index_of(symbols.fields, name)) return {Meaning::Kind::field, name, *i};
  if (index_of(symbols.parameters, name)) return {Meaning::Kind::parameter, name};
  if (symbols.helpers.count(name)) return {Meaning::Kind::helper, name};
  if (name == "pi") return {Meaning::Kind::pi, name};

  const std::vector<int> spatial = spatial_coordinates(symbols);
  if (name == "n" || name.starts_with("n_")) {
    if (!symbols.boundary) {
      fail_at(source, node, "the normal '" + name + "' exists only in boundary conditions");
    }
    if (name == "n") return {Meaning::Kind::normal, name};
    const std::string component = name.substr(2);
    for (size_t k = 0; k < spatial.size(); ++k) {
      if (symbols.coordinates[spatial[k]] == component) {
        return {Meaning::Kind::normal_component, name, static_cast<int>(k)};
      }
    }
    fail_at(source, node.position + 2, component.size(),
            "'" + component + "' is not a spatial coordinate, so '" + name +
                "' is not a component of the normal (spatial coordinates: " +
                join(names_of(symbols, spatial)) + ")");
  }

  // Derivative notation: <field or helper>_<coordinate letters>, e.g. u_xt.
  const size_t underscore = name.rfind('_');
  if (underscore == std::string::npos || underscore == 0 || underscore + 1 == name.size()) {
    fail_unknown_symbol(source, node.position, name, symbols);
  }
  const std::string base = name.substr(0, underscore);
  const std::string letters = name.substr(underscore + 1);
  std::vector<int> with_respect_to;
  for (char letter : letters) {
    if (auto i = index_of(symbols.coordinates, std::string(1, letter))) with_respect_to.push_back(*i);
  }
  const bool all_coordinates = with_respect_to.size() == letters.size();
  const bool differentiable = index_of(symbols.fields, base) || symbols.helpers.count(base);
  if (!differentiable) {
    if (!all_coordinates) fail_unknown_symbol(source, node.position, name, symbols);
    const std::string role = index_of(symbols.coordinates, base) ? "a coordinate"
                             : index_of(symbols.parameters, base) ? "a parameter"
                             : base == "pi"                       ? "a constant"
                                                                  : "";
    if (!role.empty()) {
      fail_at(source, node, "'" + name + "' is not a derivative: derivative notation applies to "
                                "fields and helpers, and '" + base + "' is " + role);
    }
    std::vector<std::string> candidates = symbols.fields;
    for (const auto& [helper, expression] : symbols.helpers) candidates.push_back(helper);
    fail_at(source, node.position, base.size(),
            "unknown field or helper '" + base + "'" + suggestion(base, candidates, "fields and helpers"));
  }
  for (size_t k = 0; k < letters.size(); ++k) {
    if (!index_of(symbols.coordinates, std::string(1, letters[k]))) {
      // Coordinates of more than one letter (x1, x2) have no subscript form; d() takes them.
      std::vector<std::string> letter_names;
      for (const std::string& c : symbols.coordinates) {
        if (c.size() == 1) letter_names.push_back(c);
      }
      const std::string named = letter_names.empty() ? "none of this problem's has one letter"
                                                     : "here: " + join(letter_names);
      fail_at(source, node.position + underscore + 1 + k, 1,
              "'" + name + "' is not a derivative of '" + base + "': '" + letters[k] +
                  "' is not a coordinate (the subscript form takes coordinates of one letter, " + named +
                  "; d(" + base + ", x, k) takes any: d(" + base + ", " + symbols.coordinates.front() + ", 1))");
    }
  }
  if (letters.size() > static_cast<size_t>(kMaxDerivativeOrder)) {
    fail_at(source, node.position + underscore + 1, letters.size(),
            "'" + name + "' differentiates " + std::to_string(letters.size()) +
                " times; the order of a derivative must be from 1 to " + std::to_string(kMaxDerivativeOrder));
  }
  std::sort(with_respect_to.begin(), with_respect_to.end());
  return {Meaning::Kind::derivative, base, 0, with_respect_to};
}

ValueType check_type(const Expression& expression, const Symbols& symbols) {
  check_declarations(expression, symbols);
  return TypeChecker(symbols).type_of(expression.source(), *expression.source().root);
}

void check(const Expression& expression, const Symbols& symbols, ExpressionKind expected) {
  const ValueType type = check_type(expression, symbols);
  const Node& root = *expression.source().root;
  if (expected == ExpressionKind::scalar && !is_scalar(type)) {
    fail_at_whole(expression.source(), root, "expected a scalar expression, found " + describe(type));
  }
  if (expected == ExpressionKind::predicate && type.kind != ValueType::Kind::predicate) {
    fail_at_whole(expression.source(), root,
                  "expected a true/false condition (such as x == 0), found " + describe(type));
  }
}

}  // namespace eddy::pinn
