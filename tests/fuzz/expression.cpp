// The PINN expression language (solvers/pinn/expression.h) on any text: parsed, checked against an
// interior and a boundary context as both kinds, and evaluated (with derivatives) on three points
// wherever the check accepts it.
#include "eddy/eddy.h"
#include "fuzz_support.h"
#include "solvers/pinn/expression.h"

namespace {

using namespace eddy;
using namespace eddy::pinn;

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
          evaluate_in(expression, boundary);
        });
      }
    }
  });
  return 0;
}
