#pragma once
// The PINN expression language: PDE residuals, boundary values and boundary predicates written as
// text in a config, e.g. `u_t + u*u_x - nu*u_xx`, `dot(grad(u), n) - g` or `x == -1 || x == 1`.
//
// The three steps are separate so that a config can be validated before any training starts:
// parse_expression (syntax), check (names, arities, types against the problem's symbols), and
// evaluate (eddy ops on a batch of points, differentiable with respect to the network weights and
// learnable parameters). Every error is an eddy::Error that starts with the caller's `where`
// (a config key path) and shows the offending line of the expression with a caret under the fault.
//
// The language:
//   numbers 2, 0.5, 1e-6; the constant pi; + - * / and ^ (power, right-associative, binding
//   tighter than unary minus: -x^2 = -(x^2)); parentheses.
//   sin cos exp log tanh sqrt abs (one argument), pow(a, b).
//   u_x, u_xx, u_xt, u_xxyy: derivatives of a field or helper in single-letter coordinates.
//   d(e, x) and d(e, x, k): the first or k-th derivative of any scalar expression e.
//   laplacian(e): the sum of second derivatives over the spatial coordinates (all but t).
//   grad(e): the vector of first derivatives over the spatial coordinates; div(v); dot(a, b);
//   vector literals [a, b]; vectors add, subtract, and scale by scalars.
//   n, n_x, n_y, n_z: the outward unit normal and its components, in boundary contexts only.
//   == != < <= > >= (with an absolute tolerance, see EvaluationInputs), &&, ||, ! for predicates.
//   `!` binds looser than comparisons, so `!x < 0` means `!(x < 0)`; comparisons do not chain.
//   Names are the coordinates, fields, parameters and helpers of a Symbols; `pi` and `n` are
//   reserved.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy {
class TaylorOperator;  // eddy/compiler/taylor.h
}

namespace eddy::pinn {

struct ExpressionSource;  // the parsed tree and its text (expression_ast.h)
struct EvaluationState;   // the caches of an EvaluationContext (expression_evaluate.cpp)

// A parsed expression: immutable and cheap to copy. It keeps its text and `where` for messages.
class Expression {
 public:
  explicit Expression(std::shared_ptr<const ExpressionSource> source);
  const std::string& text() const;
  const std::string& where() const;
  const ExpressionSource& source() const { return *source_; }  // the tree, for check and evaluate

 private:
  std::shared_ptr<const ExpressionSource> source_;
};

// Parses `text`; `where` (e.g. "equations.residual") prefixes every message about it.
Expression parse_expression(std::string_view text, std::string_view where);

// What names mean in one context (the interior, or one boundary).
struct Symbols {
  // Members carry `{}` so that designated initializers may leave them out without warnings.
  std::vector<std::string> coordinates{};       // e.g. {"x", "y", "t"}; "t" is time, the rest are spatial
  std::vector<std::string> fields{};            // network outputs, in column order, e.g. {"u", "v", "p"}
  std::vector<std::string> parameters{};        // constants and learnable parameters, e.g. {"nu"}
  std::map<std::string, Expression> helpers{};  // named expressions usable in any other expression
  bool boundary = false;                        // whether the normal n is available
};

// Which kind of result a context wants: a number per point, or a true/false selection per point.
enum class ExpressionKind { scalar, predicate };

// Checks names, arities, derivative notation, helper cycles and types, and that the result has
// the wanted kind, without evaluating anything.
void check(const Expression& expression, const Symbols& symbols, ExpressionKind expected);

// The parameters, and the fields (as they are or through a derivative), a checked `expression`
// reads, itself or through the helpers it uses.
std::set<std::string> parameters_read(const Expression& expression, const Symbols& symbols);
std::set<std::string> fields_read(const Expression& expression, const Symbols& symbols);

// The network outputs at the points: [N, number of coordinates] -> [N, number of fields].
using FieldFunction = std::function<Tensor(const Tensor& points)>;

// The coordinates, fields and field derivatives at the points as given [N, 1] columns, instead
// of a field function: how the PINN solver's fused pass (taylor_mlp_pass.h) hands its streams to
// the residual. An expression that needs a derivative not given (mixed, third order, of a
// helper) is an error rather than a derivative taken through the network.
struct FieldColumns {
  std::vector<Tensor> coordinates;              // per coordinate
  std::vector<Tensor> values;                   // per field
  std::vector<std::vector<Tensor>> first;       // [coordinate][field]
  std::vector<int> second_coordinates;          // the coordinates of the pure second derivatives
  std::vector<std::vector<Tensor>> second;      // [k][field]: d2/dc2 for c = second_coordinates[k]
};

// The pure second derivatives of the fields that `expression` uses, as coordinate indices: what
// a Taylor pass must carry besides the values and every first derivative (laplacian(u) uses every
// spatial one).
std::vector<int> pure_second_coordinates(const Expression& expression, const Symbols& symbols);

struct EvaluationInputs {
  Tensor points{};                             // [N, number of coordinates], float32 or float64
  FieldFunction fields{};                      // called at most once per context
  std::map<std::string, Tensor> parameters{};  // every declared parameter: one element or [N, 1]
  Tensor normals{};                            // boundary contexts only: [N, spatial dimensions]
  // Taylor mode for `fields` (the same function, traced): when given, an expression that
  // differentiates fields gets their values, first derivatives and the pure second derivatives
  // it uses (u_xx, d(u, x, 2), laplacian(u), div(grad(u))) from one forward pass of it, instead
  // of one reverse pass each. Mixed and higher derivatives are reverse mode from those. The
  // operator keeps its trace per shape, so share one across contexts (training steps).
  std::shared_ptr<TaylorOperator> field_jets{};
  // Instead of `fields` and `field_jets`; the coordinates then come from here, not `points`.
  std::shared_ptr<const FieldColumns> field_columns{};
  // Absolute tolerance of the comparisons: a == b is |a - b| <= tolerance, a < b is
  // a < b - tolerance, and so on, so points on a face are selected despite rounding. Scale it
  // with the size of the domain.
  double tolerance = 1e-6;
  // When `points` are a sample of the rows a training step will hold (eddy check), how many
  // those are: the memory bound on derivatives is taken for them. 0: the points themselves.
  int64_t planned_rows = 0;
};

// One batch of points with everything evaluated on it so far. Expressions evaluated in the same
// context share the network output, helper values and derivatives: u_x used twice is computed
// once, and u_xx reuses u_x. A context holds one forward pass: make a new one for each training
// step, since the cached values belong to the weights and parameters they were computed with.
class EvaluationContext {
 public:
  EvaluationContext(Symbols symbols, EvaluationInputs inputs);
  ~EvaluationContext();

  const Symbols& symbols() const;
  // How many eddy::grad calls the derivatives have needed so far (a measure of the caching), and
  // how many Taylor-mode passes (at most one).
  int64_t gradient_calls() const;
  int64_t taylor_passes() const;

 private:
  friend Tensor evaluate(const Expression& expression, EvaluationContext& context);
  std::unique_ptr<EvaluationState> state_;
};

// Checks `expression` against the context's symbols, then evaluates it at the context's points:
// a [N, 1] tensor of the points' dtype (or a wider parameter's) for scalar expressions, a bool
// [N, 1] tensor for predicates. Derivatives are taken with create_graph, so the result can be differentiated again.
Tensor evaluate(const Expression& expression, EvaluationContext& context);

}  // namespace eddy::pinn
