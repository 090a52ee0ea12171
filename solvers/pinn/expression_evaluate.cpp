// Evaluation of checked expressions to eddy ops, with the derivative cache, filled by Taylor
// mode or nested reverse mode.

#include <algorithm>
#include <numbers>
#include <set>

#include "eddy/autodiff/tape.h"
#include "eddy/compiler/taylor.h"
#include "eddy/core/memory.h"
#include "eddy/ops/ops.h"
#include "solvers/pinn/expression_ast.h"

namespace eddy::pinn {

struct EvaluationState {
  Symbols symbols;
  EvaluationInputs inputs;
  int64_t rows = 0;
  std::vector<Tensor> coordinates;  // [N, 1] leaves that derivatives are taken with respect to
  Tensor field_values;              // [N, fields], once the network has run
  // Scalars and predicates by canonical text, derivatives as "<text>|<coordinate indices>", and
  // a field's Laplacian from Taylor mode as "<field>|laplacian".
  std::map<std::string, Tensor> cache;
  int64_t gradient_calls = 0;
  int64_t taylor_passes = 0;
};

namespace {

// See Evaluator::refuse_if_too_large.
constexpr double kGraphGrowthPerOrder = 3;
// A training step's peak memory per byte of its highest derivative's graph, with the weight
// gradient backpropagated through it (measured 1.8 to 2.3 at orders 8 and 10).
constexpr double kStepMemoryPerGraphByte = 2;
// What a step may take of the usable memory, leaving the rest to the other conditions and the system.
constexpr double kStepMemoryShare = 0.75;

std::string shape_text(const Tensor& tensor) { return cat(tensor.shape()); }

void check_inputs(const Symbols& symbols, const EvaluationInputs& inputs) {
  const std::string prefix = "EvaluationContext: ";
  const Tensor& points = inputs.points;
  const int64_t coordinates = static_cast<int64_t>(symbols.coordinates.size());
  EDDY_CHECK(points.defined() && points.dim() == 2 && points.size(1) == coordinates, prefix,
             "points must be [N, ", coordinates, "] (one column per coordinate), got ",
             points.defined() ? shape_text(points) : "an undefined tensor");
  EDDY_CHECK(points.dtype() == DType::f32 || points.dtype() == DType::f64, prefix,
             "points must be float32 or float64, got ", points.dtype());
  const int64_t rows = points.size(0);
  const Shape column{rows, 1};
  EDDY_CHECK(symbols.fields.empty() || inputs.fields || inputs.field_columns, prefix, "no field function was given");
  for (const std::string& name : symbols.parameters) {
    auto found = inputs.parameters.find(name);
    EDDY_CHECK(found != inputs.parameters.end(), prefix, "no value for parameter '", name, "'");
    const Tensor& value = found->second;
    EDDY_CHECK(value.defined() && (value.numel() == 1 || value.shape() == column), prefix,
               "parameter '", name, "' must have one element or shape [", rows, ", 1], got ",
               value.defined() ? shape_text(value) : "an undefined tensor");
  }
  for (const auto& [name, value] : inputs.parameters) {
    EDDY_CHECK(std::count(symbols.parameters.begin(), symbols.parameters.end(), name), prefix,
               "'", name, "' is not a declared parameter");
  }
  const Shape normals{rows, static_cast<int64_t>(spatial_coordinates(symbols).size())};
  if (symbols.boundary) {
    EDDY_CHECK(inputs.normals.defined() && inputs.normals.shape() == normals, prefix,
               "a boundary context needs normals of shape ", normals, ", got ",
               inputs.normals.defined() ? shape_text(inputs.normals) : "none");
  } else {
    EDDY_CHECK(!inputs.normals.defined(), prefix, "normals were given, but the symbols are not "
               "for a boundary (set Symbols::boundary)");
  }
  EDDY_CHECK(inputs.tolerance >= 0, prefix, "the comparison tolerance must not be negative, got ",
             inputs.tolerance);
}

// A value: a scalar or predicate tensor, or the components of a vector.
struct Value {
  Value() = default;
  Value(Tensor scalar) : scalar(std::move(scalar)) {}  // implicit: most results are scalars
  Tensor scalar;
  std::vector<Tensor> vector;
};

// A scalar quantity that derivatives are taken of, named by its canonical text so that the same
// quantity reached in different ways shares one cache entry (u_xt, d(u_x, t), d(d(u, t), x)).
struct Differentiand {
  std::string key;
  std::function<Tensor()> compute;
  std::vector<int> with_respect_to;  // derivatives already applied, as coordinate indices
  // What `compute` evaluates, for planning the Taylor pass: a field's column, or else an
  // expression (a helper's or the argument's).
  int field = -1;
  const ExpressionSource* source = nullptr;
  const Node* node = nullptr;
};

// What the Taylor pass carries for an expression: it always holds every first derivative.
struct JetPlan {
  bool needed = false;               // the expression differentiates a field
  std::set<int> second_coordinates;  // i where it uses a field's d^2/dx_i^2 on its own
  bool laplacian = false;            // it uses laplacian(field)
  std::set<const Node*> planned;     // expressions walked already (a helper used twice)
};

std::string key_of(const std::string& base, const std::vector<int>& with_respect_to) {
  if (with_respect_to.empty()) return base;
  std::string key = base + "|";
  for (int coordinate : with_respect_to) key += std::to_string(coordinate) + ",";
  return key;
}

std::string laplacian_key(const std::string& field) { return field + "|laplacian"; }

class Evaluator {
 public:
  explicit Evaluator(EvaluationState& state) : state_(state) {}

  Value value_of(const ExpressionSource& source, const Node& node) {
    switch (node.kind) {
      case Node::Kind::number: return {constant(node.number)};
      case Node::Kind::symbol: return symbol_value(source, node);
      case Node::Kind::unary: return unary_value(source, node);
      case Node::Kind::binary: return binary_value(source, node);
      case Node::Kind::call: return call_value(source, node);
      case Node::Kind::vector: {
        Value vector;
        for (const NodePtr& element : node.children) vector.vector.push_back(scalar_of(source, *element));
        return vector;
      }
    }
    return {};
  }

  // When the expression differentiates fields, evaluates them in one Taylor pass that carries
  // the derivatives it will ask for, into the cache. Before any other use of the fields, so that
  // the network runs once.
  void prepare_field_jets(const ExpressionSource& source) {
    if (state_.inputs.field_columns) return take_field_columns();
    if (!state_.inputs.field_jets || state_.field_values.defined()) return;
    JetPlan plan;
    this->plan(source, *source.root, plan);
    if (!plan.needed) return;
    TaylorOptions options;
    options.second_coordinates.assign(plan.second_coordinates.begin(), plan.second_coordinates.end());
    options.laplacian = plan.laplacian;
    const std::vector<int> spatial = spatial_coordinates(state_.symbols);
    options.laplacian_coordinates.assign(spatial.begin(), spatial.end());
    const TaylorJets jets = (*state_.inputs.field_jets)(concat(state_.coordinates, 1), options);
    set_field_values(jets.value);
    ++state_.taylor_passes;
    for (size_t f = 0; f < state_.symbols.fields.size(); ++f) {
      const std::string& name = state_.symbols.fields[f];
      const int64_t index = static_cast<int64_t>(f);
      auto column = [index](const Tensor& all) { return slice(all, 1, index, index + 1); };
      for (size_t i = 0; i < jets.first.size(); ++i) {
        state_.cache.emplace(key_of(name, {static_cast<int>(i)}), column(jets.first[i]));
      }
      for (size_t k = 0; k < jets.second.size(); ++k) {
        const int coordinate = static_cast<int>(options.second_coordinates[k]);
        state_.cache.emplace(key_of(name, {coordinate, coordinate}), column(jets.second[k]));
      }
      if (plan.laplacian) state_.cache.emplace(laplacian_key(name), column(jets.laplacian));
    }
  }

  // The pure second derivatives that evaluating `source` asks for, as coordinate indices.
  std::vector<int> planned_second_coordinates(const ExpressionSource& source) {
    JetPlan plan;
    this->plan(source, *source.root, plan);
    if (plan.laplacian) {
      for (int coordinate : spatial_coordinates(state_.symbols)) plan.second_coordinates.insert(coordinate);
    }
    return {plan.second_coordinates.begin(), plan.second_coordinates.end()};
  }

 private:
  Tensor scalar_of(const ExpressionSource& source, const Node& node) { return value_of(source, node).scalar; }

  // The given columns into the cache, under the keys derivative() looks up: the fields, their
  // first and pure second derivatives, and the Laplacian where every spatial second is given.
  void take_field_columns() {
    const FieldColumns& columns = *state_.inputs.field_columns;
    const std::vector<int> spatial = spatial_coordinates(state_.symbols);
    for (size_t f = 0; f < state_.symbols.fields.size(); ++f) {
      const std::string& name = state_.symbols.fields[f];
      state_.cache.emplace(name, columns.values.at(f));
      for (size_t i = 0; i < columns.first.size(); ++i) {
        state_.cache.emplace(key_of(name, {static_cast<int>(i)}), columns.first[i].at(f));
      }
      Tensor laplacian;
      size_t spatial_seconds = 0;
      for (size_t k = 0; k < columns.second.size(); ++k) {
        const int coordinate = columns.second_coordinates.at(k);
        state_.cache.emplace(key_of(name, {coordinate, coordinate}), columns.second[k].at(f));
        if (std::count(spatial.begin(), spatial.end(), coordinate)) {
          laplacian = laplacian.defined() ? laplacian + columns.second[k][f] : columns.second[k][f];
          ++spatial_seconds;
        }
      }
      if (spatial_seconds == spatial.size()) state_.cache.emplace(laplacian_key(name), laplacian);
    }
  }

  Tensor constant(double value) const { return scalar(value, state_.inputs.points.dtype()); }

  Tensor cached(const std::string& key, const std::function<Tensor()>& compute) {
    if (auto found = state_.cache.find(key); found != state_.cache.end()) return found->second;
    Tensor value = compute();
    state_.cache.emplace(key, value);
    return value;
  }

  void set_field_values(const Tensor& values) {
    const Shape expected{state_.rows, static_cast<int64_t>(state_.symbols.fields.size())};
    EDDY_CHECK(values.defined() && values.shape() == expected, "EvaluationContext: the field "
               "function must return ", expected, " (one column per field), got ",
               values.defined() ? shape_text(values) : "an undefined tensor");
    state_.field_values = values;
  }

  Tensor field(int index) {
    if (!state_.field_values.defined()) set_field_values(state_.inputs.fields(concat(state_.coordinates, 1)));
    return slice(state_.field_values, 1, index, index + 1);
  }

  // The field derivatives that evaluating `node` asks for, walked as value_of evaluates.
  void plan(const ExpressionSource& source, const Node& node, JetPlan& jets) {
    if (node.kind == Node::Kind::symbol) {
      const Meaning::Kind kind = resolve_symbol(source, node, state_.symbols).kind;
      if (kind == Meaning::Kind::field || kind == Meaning::Kind::helper || kind == Meaning::Kind::derivative) {
        plan_derivative(scalar_differentiand(source, node), {}, jets);
      }
      return;
    }
    if (node.kind == Node::Kind::call) {
      const std::vector<int> spatial = spatial_coordinates(state_.symbols);
      if (node.name == "d") return plan_derivative(scalar_differentiand(source, node), {}, jets);
      if (node.name == "laplacian" || node.name == "grad") {
        const Differentiand quantity = scalar_differentiand(source, *node.children[0]);
        if (node.name == "laplacian" && quantity.field >= 0 && quantity.with_respect_to.empty()) {
          jets.needed = jets.laplacian = true;
          return;
        }
        for (int coordinate : spatial) {
          const std::vector<int> more = node.name == "grad" ? std::vector<int>{coordinate}
                                                            : std::vector<int>{coordinate, coordinate};
          plan_derivative(quantity, more, jets);
        }
        return;
      }
      if (node.name == "div") {
        const std::vector<Differentiand> components = vector_differentiands(source, *node.children[0]);
        for (size_t k = 0; k < components.size(); ++k) plan_derivative(components[k], {spatial[k]}, jets);
        return;
      }
    }
    for (const NodePtr& child : node.children) plan(source, *child, jets);
  }

  void plan_derivative(const Differentiand& quantity, const std::vector<int>& more, JetPlan& jets) {
    if (quantity.field < 0) {
      if (jets.planned.insert(quantity.node).second) plan(*quantity.source, *quantity.node, jets);
      return;
    }
    std::vector<int> with_respect_to = quantity.with_respect_to;
    with_respect_to.insert(with_respect_to.end(), more.begin(), more.end());
    if (with_respect_to.empty()) return;
    jets.needed = true;
    if (with_respect_to.size() == 2 && with_respect_to[0] == with_respect_to[1]) {
      jets.second_coordinates.insert(with_respect_to[0]);
    }
  }

  Value symbol_value(const ExpressionSource& source, const Node& node) {
    const Meaning meaning = resolve_symbol(source, node, state_.symbols);
    switch (meaning.kind) {
      case Meaning::Kind::coordinate: return {state_.coordinates[meaning.index]};
      case Meaning::Kind::parameter: return {state_.inputs.parameters.at(meaning.name)};
      case Meaning::Kind::pi: return {constant(std::numbers::pi)};
      case Meaning::Kind::normal_component: return {normal(meaning.index)};
      case Meaning::Kind::normal: {
        Value vector;
        for (size_t k = 0; k < spatial_coordinates(state_.symbols).size(); ++k) {
          vector.vector.push_back(normal(static_cast<int>(k)));
        }
        return vector;
      }
      case Meaning::Kind::helper: return helper_value(meaning.name);
      case Meaning::Kind::field:
      case Meaning::Kind::derivative: return {derivative(scalar_differentiand(source, node), {}, source, node)};
    }
    return {};
  }

  Tensor normal(int index) const { return slice(state_.inputs.normals, 1, index, index + 1); }

  // Scalar and predicate helpers are cached; a vector helper is cheap to rebuild from its
  // components, whose derivatives are cached.
  Value helper_value(const std::string& name) {
    if (auto found = state_.cache.find(name); found != state_.cache.end()) return {found->second};
    const ExpressionSource& helper = state_.symbols.helpers.at(name).source();
    Value value = value_of(helper, *helper.root);
    if (value.scalar.defined()) state_.cache.emplace(name, value.scalar);
    return value;
  }

  Differentiand scalar_differentiand(const ExpressionSource& source, const Node& node) {
    if (node.kind == Node::Kind::symbol) {
      const Meaning meaning = resolve_symbol(source, node, state_.symbols);
      if (meaning.kind == Meaning::Kind::field || meaning.kind == Meaning::Kind::helper ||
          meaning.kind == Meaning::Kind::derivative) {
        const std::string base = meaning.name;
        auto field = std::find(state_.symbols.fields.begin(), state_.symbols.fields.end(), base);
        if (field != state_.symbols.fields.end()) {
          const int index = static_cast<int>(field - state_.symbols.fields.begin());
          return {base, [this, index] { return this->field(index); }, meaning.with_respect_to, index};
        }
        const ExpressionSource& helper = state_.symbols.helpers.at(base).source();
        return {base, [this, base] { return helper_value(base).scalar; }, meaning.with_respect_to, -1, &helper,
                helper.root.get()};
      }
    }
    if (node.kind == Node::Kind::call && node.name == "d") {
      Differentiand inner = scalar_differentiand(source, *node.children[0]);
      const int coordinate = coordinate_index(node.children[1]->name);
      const int order = node.children.size() == 3 ? static_cast<int>(node.children[2]->number) : 1;
      inner.with_respect_to.insert(inner.with_respect_to.end(), order, coordinate);
      return inner;
    }
    return {canonical_text(node), [this, &source, &node] { return scalar_of(source, node); }, {}, -1, &source, &node};
  }

  // The components of a vector, as quantities to differentiate (for div).
  std::vector<Differentiand> vector_differentiands(const ExpressionSource& source, const Node& node) {
    std::vector<Differentiand> components;
    if (node.kind == Node::Kind::vector) {
      for (const NodePtr& element : node.children) components.push_back(scalar_differentiand(source, *element));
      return components;
    }
    if (node.kind == Node::Kind::call && node.name == "grad") {
      for (int coordinate : spatial_coordinates(state_.symbols)) {
        Differentiand component = scalar_differentiand(source, *node.children[0]);
        component.with_respect_to.push_back(coordinate);
        components.push_back(std::move(component));
      }
      return components;
    }
    if (node.kind == Node::Kind::symbol && state_.symbols.helpers.count(node.name)) {
      const ExpressionSource& helper = state_.symbols.helpers.at(node.name).source();
      return vector_differentiands(helper, *helper.root);
    }
    const std::string text = canonical_text(node);
    const size_t length = spatial_coordinates(state_.symbols).size();
    for (size_t k = 0; k < length; ++k) {
      components.push_back({text + "[" + std::to_string(k) + "]",
                            [this, &source, &node, k] { return value_of(source, node).vector[k]; }, {}, -1, &source,
                            &node});
    }
    return components;
  }

  // The derivative of `quantity` with respect to its own coordinates plus `more`, which `asking`
  // (a node of `source`) needs: errors point at it.
  Tensor derivative(const Differentiand& quantity, const std::vector<int>& more, const ExpressionSource& source,
                    const Node& asking) {
    std::vector<int> with_respect_to = quantity.with_respect_to;
    with_respect_to.insert(with_respect_to.end(), more.begin(), more.end());
    // The checker bounds each d() and each derivative notation; d() of them adds their orders.
    if (with_respect_to.size() > static_cast<size_t>(kMaxDerivativeOrder)) {
      fail_at_whole(source, asking, cat("differentiates to order ", with_respect_to.size(),
                                        " in all; the order of a derivative must be from 1 to ", kMaxDerivativeOrder));
    }
    std::sort(with_respect_to.begin(), with_respect_to.end());
    return derivative_sorted(quantity, with_respect_to, source, asking);
  }

  Tensor derivative_sorted(const Differentiand& quantity, const std::vector<int>& with_respect_to,
                           const ExpressionSource& source, const Node& asking) {
    const std::string key = key_of(quantity.key, with_respect_to);
    if (with_respect_to.empty()) return cached(key, quantity.compute);
    if (auto found = state_.cache.find(key); found != state_.cache.end()) return found->second;
    // Differentiate a lower derivative already at hand if there is one (u_xy after u_y), else
    // peel off the last coordinate; either way every lower derivative is computed only once.
    size_t peel = with_respect_to.size() - 1;
    for (size_t i = 0; i < with_respect_to.size(); ++i) {
      std::vector<int> lower = with_respect_to;
      lower.erase(lower.begin() + static_cast<std::ptrdiff_t>(i));
      if (state_.cache.count(key_of(quantity.key, lower))) {
        peel = i;
        break;
      }
    }
    std::vector<int> lower = with_respect_to;
    lower.erase(lower.begin() + static_cast<std::ptrdiff_t>(peel));
    const Tensor below = derivative_sorted(quantity, lower, source, asking);
    if (state_.inputs.field_columns) {
      fail_at_whole(source, asking, "needs a derivative other than the fields' values, first derivatives and pure "
                                    "second derivatives, which are all the given field columns hold");
    }
    refuse_if_too_large(below, with_respect_to.size(), source, asking);
    const Tensor& coordinate = state_.coordinates[with_respect_to[peel]];
    // Each point's value depends only on its own coordinates, so the gradient of the sum is the
    // pointwise derivative.
    Tensor result = grad({below}, {coordinate}, {ones_like(below)}, true)[0];
    ++state_.gradient_calls;
    state_.cache.emplace(key, result);
    return result;
  }

  // Nested reverse mode differentiates the whole graph of the order below, which about triples
  // it with each order (2.6 to 3 times the nodes and bytes per order, measured on MLPs), so a
  // derivative order that is harmless at 4 exhausts any machine's memory by 12 or 16. Refused
  // here, before the grad call that would allocate it, with what it would need.
  void refuse_if_too_large(const Tensor& below, size_t order, const ExpressionSource& source, const Node& asking) const {
    const int64_t memory = usable_memory().bytes;
    if (memory <= 0) return;
    const int64_t rows = state_.inputs.planned_rows > 0 ? state_.inputs.planned_rows : state_.rows;
    const double held = static_cast<double>(recorded_graph_size(below).bytes) * static_cast<double>(rows) /
                        static_cast<double>(std::max<int64_t>(state_.rows, 1));
    const double step = kStepMemoryPerGraphByte * kGraphGrowthPerOrder * held;
    if (step <= kStepMemoryShare * static_cast<double>(memory)) return;
    fail_at_whole(source, asking,
                  cat("differentiating to order ", order, " would take a training step about ", memory_text(step),
                      ": nested reverse mode about triples the graph with each order (order ", order - 1, " holds ",
                      memory_text(held), " for these ", rows,
                      " points), and the weight gradient about doubles it", usable_memory_note(),
                      ". Use a lower order or fewer points"));
  }

  int coordinate_index(const std::string& name) const {
    const auto& coordinates = state_.symbols.coordinates;
    return static_cast<int>(std::find(coordinates.begin(), coordinates.end(), name) - coordinates.begin());
  }

  Value unary_value(const ExpressionSource& source, const Node& node) {
    Value operand = value_of(source, *node.children[0]);
    if (node.op == Operator::logical_not) return {eq(operand.scalar, scalar(0, DType::b8))};
    if (operand.scalar.defined()) return {neg(operand.scalar)};
    for (Tensor& component : operand.vector) component = neg(component);
    return operand;
  }

  Value binary_value(const ExpressionSource& source, const Node& node) {
    const Value left = value_of(source, *node.children[0]);
    const Value right = value_of(source, *node.children[1]);
    const Tensor& a = left.scalar;
    const Tensor& b = right.scalar;
    switch (node.op) {
      case Operator::add: return componentwise(left, right, [](const Tensor& x, const Tensor& y) { return x + y; });
      case Operator::subtract: return componentwise(left, right, [](const Tensor& x, const Tensor& y) { return x - y; });
      case Operator::multiply: return componentwise(left, right, [](const Tensor& x, const Tensor& y) { return x * y; });
      case Operator::divide: return componentwise(left, right, [](const Tensor& x, const Tensor& y) { return x / y; });
      case Operator::power: return {pow(a, b)};
      case Operator::logical_and: return {where(a, b, a)};
      case Operator::logical_or: return {where(a, a, b)};
      default: return {compare(node.op, a, b)};
    }
  }

  // Applies `op` to two scalars, to matching vector components, or to each component and a scalar.
  template <typename Op>
  static Value componentwise(const Value& left, const Value& right, Op op) {
    if (left.scalar.defined() && right.scalar.defined()) return {op(left.scalar, right.scalar)};
    Value result;
    const size_t length = std::max(left.vector.size(), right.vector.size());
    for (size_t k = 0; k < length; ++k) {
      result.vector.push_back(op(left.scalar.defined() ? left.scalar : left.vector[k],
                                 right.scalar.defined() ? right.scalar : right.vector[k]));
    }
    return result;
  }

  // The comparisons allow `tolerance` of rounding, so that a point sampled on the face x = 1
  // satisfies x == 1, x <= 1 and x >= 1 but not x < 1 or x > 1.
  Tensor compare(Operator op, const Tensor& a, const Tensor& b) const {
    NoGradGuard no_grad;  // a selection has no derivative; recording one would waste memory
    const Tensor difference = a - b;
    const Tensor tolerance = scalar(state_.inputs.tolerance, difference.dtype());
    switch (op) {
      case Operator::equal: return le(abs(difference), tolerance);
      case Operator::not_equal: return gt(abs(difference), tolerance);
      case Operator::less: return lt(difference, -tolerance);
      case Operator::less_equal: return le(difference, tolerance);
      case Operator::greater: return gt(difference, tolerance);
      default: return ge(difference, -tolerance);  // greater_equal
    }
  }

  Value call_value(const ExpressionSource& source, const Node& node) {
    const std::string& name = node.name;
    const std::vector<NodePtr>& arguments = node.children;
    if (name == "d") return {derivative(scalar_differentiand(source, node), {}, source, node)};
    if (name == "laplacian" || name == "grad") {
      const Differentiand quantity = scalar_differentiand(source, *arguments[0]);
      if (name == "laplacian" && quantity.field >= 0 && quantity.with_respect_to.empty()) {
        auto from_jets = state_.cache.find(laplacian_key(quantity.key));
        if (from_jets != state_.cache.end()) return {from_jets->second};
      }
      Value result;
      for (int coordinate : spatial_coordinates(state_.symbols)) {
        if (name == "grad") {
          result.vector.push_back(derivative(quantity, {coordinate}, source, node));
        } else {
          const Tensor second = derivative(quantity, {coordinate, coordinate}, source, node);
          result.scalar = result.scalar.defined() ? result.scalar + second : second;
        }
      }
      return result;
    }
    if (name == "div") {
      const std::vector<Differentiand> components = vector_differentiands(source, *arguments[0]);
      const std::vector<int> spatial = spatial_coordinates(state_.symbols);
      Tensor sum = derivative(components[0], {spatial[0]}, source, node);
      for (size_t k = 1; k < components.size(); ++k) sum = sum + derivative(components[k], {spatial[k]}, source, node);
      return {sum};
    }
    if (name == "dot") {
      const Value a = value_of(source, *arguments[0]);
      const Value b = value_of(source, *arguments[1]);
      Tensor sum = a.vector[0] * b.vector[0];
      for (size_t k = 1; k < a.vector.size(); ++k) sum = sum + a.vector[k] * b.vector[k];
      return {sum};
    }
    const MathFunction* function = math_function_named(name);
    EDDY_CHECK(function, "internal: the expression checker admitted an unknown function '", name, "'");
    const Tensor x = scalar_of(source, *arguments[0]);
    return {function->arity == 1 ? function->unary(x) : function->binary(x, scalar_of(source, *arguments[1]))};
  }

  EvaluationState& state_;
};

}  // namespace

EvaluationContext::EvaluationContext(Symbols symbols, EvaluationInputs inputs)
    : state_(std::make_unique<EvaluationState>()) {
  check_inputs(symbols, inputs);
  state_->rows = inputs.points.size(0);
  if (inputs.field_columns) state_->coordinates = inputs.field_columns->coordinates;
  for (int64_t i = 0; !inputs.field_columns && i < inputs.points.size(1); ++i) {
    // One tensor per coordinate, so that a derivative with respect to one coordinate is one grad
    // call: a leaf of its own, unless the points are themselves differentiated by an enclosing
    // evaluation (output transforms), which must then see through this one.
    Tensor column = contiguous(slice(inputs.points, 1, i, i + 1));
    state_->coordinates.push_back(column.requires_grad() ? column : column.detach().requires_grad_());
  }
  state_->symbols = std::move(symbols);
  state_->inputs = std::move(inputs);
}

EvaluationContext::~EvaluationContext() = default;

std::vector<int> pure_second_coordinates(const Expression& expression, const Symbols& symbols) {
  EvaluationState state;
  state.symbols = symbols;
  return Evaluator(state).planned_second_coordinates(expression.source());
}

const Symbols& EvaluationContext::symbols() const { return state_->symbols; }
int64_t EvaluationContext::gradient_calls() const { return state_->gradient_calls; }
int64_t EvaluationContext::taylor_passes() const { return state_->taylor_passes; }

Tensor evaluate(const Expression& expression, EvaluationContext& context) {
  const ExpressionSource& source = expression.source();
  const ValueType type = check_type(expression, context.symbols());
  if (type.kind == ValueType::Kind::vector) {
    fail_at_whole(source, *source.root, "expected a scalar or a true/false condition, found a vector of " +
                                            std::to_string(type.length));
  }
  EvaluationState& state = *context.state_;
  // Derivatives are gradients of recorded graphs, also when the caller has turned recording off
  // (to validate, say); without this they would silently come out as zeros.
  GradModeGuard recording(true);
  Evaluator evaluator(state);
  evaluator.prepare_field_jets(source);
  const Tensor value = evaluator.value_of(source, *source.root).scalar;
  return expand(value, {state.rows, 1});
}

}  // namespace eddy::pinn
