// The PINN expression language (solvers/pinn/expression.h) on any text: parsed, checked against an
// interior and a boundary context as both kinds, and evaluated (with derivatives) on three points
// wherever the check accepts it.
//
// Expressions whose derivatives add up to more than kMaxEvaluatedOrder are checked but not
// evaluated: nested reverse mode takes about three times as long per order (d(u, x, 12) takes 27 s
// on three points in a release build), and evaluation refuses an order by the memory it needs, not
// by its time, so a valid order 14 would only measure this machine's speed.
#include <algorithm>

#include "eddy/eddy.h"
#include "fuzz_support.h"
#include "solvers/pinn/expression.h"
#include "solvers/pinn/expression_ast.h"

namespace {

using namespace eddy;
using namespace eddy::pinn;

constexpr int kMaxEvaluatedOrder = 6;

// The derivatives taken anywhere in the tree, added up: at least its highest order.
int derivatives_in(const pinn::Node& node) {
  int count = 0;
  if (node.kind == pinn::Node::Kind::symbol && node.name.find('_') != std::string::npos) {
    count += static_cast<int>(node.name.size() - node.name.rfind('_') - 1);
  }
  if (node.kind == pinn::Node::Kind::call) {
    if (node.name == "d") count += node.children.size() == 3 ? static_cast<int>(std::min(node.children[2]->number, 1e3)) : 1;
    if (node.name == "laplacian") count += 2;
    if (node.name == "grad" || node.name == "div") count += 1;
  }
  for (const pinn::NodePtr& child : node.children) count += derivatives_in(*child);
  return count;
}

Tensor coordinate(const Tensor& points, int64_t index) { return slice(points, 1, index, index + 1); }

Symbols symbols(bool boundary) {
  Symbols result{.coordinates = {"x", "y", "t"}, .fields = {"u", "v"}, .parameters = {"nu"}, .boundary = boundary};
  result.helpers.emplace("r2", parse_expression("x^2 + y^2", "helpers.r2"));
  result.helpers.emplace("flux", parse_expression("r2*grad(u)", "helpers.flux"));
  return result;
}

// u = sin(x) cos(y) exp(t), v = x y + t at three points, with unit normals.
void evaluate_in(const Expression& expression, bool boundary) {
  const Tensor points = tensor<double>({0.1, 0.3, 0.2, -0.6, 0.8, 0.0, 1.0, -1.1, 0.7}, {3, 3});
  FieldFunction fields = [](const Tensor& p) {
    const Tensor x = coordinate(p, 0), y = coordinate(p, 1), t = coordinate(p, 2);
    return concat({sin(x) * cos(y) * exp(t), x * y + t}, 1);
  };
  EvaluationInputs inputs{.points = points, .fields = fields, .parameters = {{"nu", tensor<double>({0.01})}}};
  if (boundary) inputs.normals = tensor<double>({1, 0, 0, 1, 0.6, 0.8}, {3, 2});
  EvaluationContext context(symbols(boundary), inputs);
  fuzz::read_every_byte(evaluate(expression, context));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expecting_errors([&] {
    const Expression expression = parse_expression(fuzz::as_text(data, size), "equations.residual");
    for (const bool boundary : {false, true}) {
      for (const ExpressionKind kind : {ExpressionKind::scalar, ExpressionKind::predicate}) {
        fuzz::expecting_errors([&] {
          check(expression, symbols(boundary), kind);
          // flux, a helper, takes a gradient.
          const bool flux = expression.text().find("flux") != std::string::npos;
          if (derivatives_in(*expression.source().root) + flux <= kMaxEvaluatedOrder) evaluate_in(expression, boundary);
        });
      }
    }
  });
  return 0;
}
