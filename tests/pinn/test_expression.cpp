// The PINN expression language: precedence checked by value, derivatives against analytic ones,
// the derivative cache, predicates with their tolerance, and the exact text of error messages.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numbers>
#include <set>
#include <string>
#include <vector>

#include "eddy/eddy.h"
#include "eddy/ops/primitive.h"
#include "solvers/pinn/expression.h"

namespace eddy::pinn {
namespace {

Tensor column(const std::vector<double>& values) {
  return tensor<double>(values, {static_cast<int64_t>(values.size()), 1});
}

// [N, columns.size()] points from one vector of values per coordinate.
Tensor points_of(const std::vector<std::vector<double>>& columns) {
  std::vector<Tensor> tensors;
  for (const auto& values : columns) tensors.push_back(column(values));
  return concat(tensors, 1);
}

Tensor coordinate(const Tensor& points, int64_t index) { return slice(points, 1, index, index + 1); }

std::vector<double> values_of(const Tensor& tensor) { return cast(tensor, DType::f64).to_vector<double>(); }

Tensor evaluate_text(const std::string& text, EvaluationContext& context) {
  return evaluate(parse_expression(text, "test"), context);
}

void expect_values(const Tensor& actual, const std::vector<double>& expected, const std::string& what) {
  ASSERT_EQ(actual.shape(), (Shape{static_cast<int64_t>(expected.size()), 1})) << what;
  const std::vector<double> got = values_of(actual);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-11) << what << " at " << i;
}

// The message of the eddy::Error that `action` throws, or "" when it throws none.
std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

// ---- parsing and precedence ----

double value_at(const std::string& text, double x) {
  EvaluationContext context(Symbols{.coordinates = {"x"}}, {.points = column({x})});
  return evaluate_text(text, context).item<double>();
}

TEST(PinnExpression, PrecedenceAndAssociativity) {
  const std::vector<std::pair<std::string, double>> cases = {
      {"1 + 2*3", 7},        {"(1 + 2)*3", 9},       {"2^3^2", 512},       {"(2^3)^2", 64},
      {"-2^2", -4},          {"(-2)^2", 4},          {"-x^2", -9},         {"2*x^2", 18},
      {"x^-1", 1.0 / 3},     {"2^-x^2", std::pow(2, -9)},                  {"8/2/2", 2},
      {"1 - 2 - 3", -4},     {"2 - -3", 5},          {"-x*2", -6},         {"x*-2", -6},
      {"1e-3 + .5 + 2.5E+1", 25.501},                {"pi", std::numbers::pi},
      {"sin(pi/2) + cos(0)", 2},                     {"pow(2, 10)", 1024}, {"exp(log(3))", 3},
      {"sqrt(16) + abs(-2) + tanh(0)", 6},           {"dot([1, 2]*3 - [1, 1], -[1, 10]/2)", -26},
  };
  for (const auto& [text, expected] : cases) EXPECT_NEAR(value_at(text, 3), expected, 1e-12) << text;
}

TEST(PinnExpression, LogicalPrecedence) {
  const Tensor x = column({-2, -1, 0, 1, 2});
  EvaluationContext context(Symbols{.coordinates = {"x"}}, {.points = x});
  // && binds tighter than ||, and ! is looser than comparisons: !x < 0 is !(x < 0).
  expect_values(evaluate_text("x == -1 || x > 0 && x < 2", context), {0, 1, 0, 1, 0}, "and/or");
  expect_values(evaluate_text("!x < 0", context), {0, 0, 1, 1, 1}, "not");
  expect_values(evaluate_text("!(x == 0) && !(x > 1)", context), {1, 1, 0, 1, 0}, "not and");
}

TEST(PinnExpression, ExpressionsKeepTheirTextAndWhere) {
  const Expression expression = parse_expression("u_t +\n  u*u_x", "equations.residual");
  EXPECT_EQ(expression.text(), "u_t +\n  u*u_x");
  EXPECT_EQ(expression.where(), "equations.residual");
  const Expression copy = expression;
  EXPECT_EQ(&copy.source(), &expression.source());
}

// ---- derivatives ----

// u = sin(x) exp(t) at a few (x, t), computed from the points so that autodiff sees it.
struct HeatLikeProblem {
  std::vector<double> xs = {-1.2, -0.3, 0.4, 1.7};
  std::vector<double> ts = {0.0, 0.5, -0.25, 1.0};
  int field_calls = 0;

  EvaluationContext context() {
    FieldFunction fields = [this](const Tensor& points) {
      ++field_calls;
      return sin(coordinate(points, 0)) * exp(coordinate(points, 1));
    };
    return EvaluationContext(Symbols{.coordinates = {"x", "t"}, .fields = {"u"}},
                             {.points = points_of({xs, ts}), .fields = fields});
  }

  std::vector<double> map(const std::function<double(double, double)>& f) const {
    std::vector<double> out;
    for (size_t i = 0; i < xs.size(); ++i) out.push_back(f(xs[i], ts[i]));
    return out;
  }
};

TEST(PinnExpression, DerivativeNotationAndOperatorD) {
  HeatLikeProblem problem;
  EvaluationContext context = problem.context();
  auto u = [](double x, double t) { return std::sin(x) * std::exp(t); };
  auto u_x = [](double x, double t) { return std::cos(x) * std::exp(t); };
  auto u_xx = [&](double x, double t) { return -u(x, t); };
  auto u_xxx = [&](double x, double t) { return -u_x(x, t); };
  expect_values(evaluate_text("u", context), problem.map(u), "u");
  expect_values(evaluate_text("u_x", context), problem.map(u_x), "u_x");
  expect_values(evaluate_text("u_t", context), problem.map(u), "u_t");
  expect_values(evaluate_text("u_xx", context), problem.map(u_xx), "u_xx");
  expect_values(evaluate_text("u_xt", context), problem.map(u_x), "u_xt");
  expect_values(evaluate_text("u_tx", context), problem.map(u_x), "u_tx");
  expect_values(evaluate_text("u_xxx", context), problem.map(u_xxx), "u_xxx");
  expect_values(evaluate_text("u_xxtt", context), problem.map(u_xx), "u_xxtt");
  expect_values(evaluate_text("d(u, x)", context), problem.map(u_x), "d(u, x)");
  expect_values(evaluate_text("d(u, x, 2)", context), problem.map(u_xx), "d(u, x, 2)");
  expect_values(evaluate_text("d(d(u, x), t)", context), problem.map(u_x), "d(d(u, x), t)");
  expect_values(evaluate_text("d(u_x, x, 2)", context), problem.map(u_xxx), "d(u_x, x, 2)");
  expect_values(evaluate_text("d(u*u, x)", context),
                problem.map([&](double x, double t) { return 2 * u(x, t) * u_x(x, t); }), "d(u*u, x)");
  expect_values(evaluate_text("d(sin(u) + x*t, t)", context),
                problem.map([&](double x, double t) { return std::cos(u(x, t)) * u(x, t) + x; }),
                "d(sin(u) + x*t, t)");
  // Burgers' residual with nu = 0.1 written in: every term is a derivative above.
  expect_values(evaluate_text("u_t + u*u_x - 0.1*u_xx", context),
                problem.map([&](double x, double t) { return u(x, t) + u(x, t) * u_x(x, t) + 0.1 * u(x, t); }),
                "burgers");
}

TEST(PinnExpression, DerivativesDoNotNeedTheCallerToRecord) {
  HeatLikeProblem problem;
  EvaluationContext context = problem.context();
  NoGradGuard no_grad;
  expect_values(evaluate_text("u_x", context),
                problem.map([](double x, double t) { return std::cos(x) * std::exp(t); }), "u_x");
}

TEST(PinnExpression, LaplacianGradAndDivSkipTime) {
  // u = sin(x) cos(2y) exp(t): the spatial Laplacian is -5u, whatever t does.
  const std::vector<double> xs = {0.1, 0.9, -0.6}, ys = {0.3, -1.1, 0.8}, ts = {0.2, 0.0, 0.7};
  FieldFunction fields = [](const Tensor& p) {
    return sin(coordinate(p, 0)) * cos(2.0 * coordinate(p, 1)) * exp(coordinate(p, 2));
  };
  EvaluationContext context(Symbols{.coordinates = {"x", "y", "t"}, .fields = {"u"}},
                            {.points = points_of({xs, ys, ts}), .fields = fields});
  std::vector<double> u, u_x, u_y, laplacian;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double e = std::exp(ts[i]);
    u.push_back(std::sin(xs[i]) * std::cos(2 * ys[i]) * e);
    u_x.push_back(std::cos(xs[i]) * std::cos(2 * ys[i]) * e);
    u_y.push_back(-2 * std::sin(xs[i]) * std::sin(2 * ys[i]) * e);
    laplacian.push_back(-5 * u.back());
  }
  expect_values(evaluate_text("laplacian(u)", context), laplacian, "laplacian(u)");
  expect_values(evaluate_text("div(grad(u))", context), laplacian, "div(grad(u))");
  expect_values(evaluate_text("u_xx + u_yy", context), laplacian, "u_xx + u_yy");
  expect_values(evaluate_text("dot(grad(u), [1, 0])", context), u_x, "grad x");
  expect_values(evaluate_text("dot(grad(u), [0, 1])", context), u_y, "grad y");
  std::vector<double> sum(u_x.size());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = u_x[i] + u_y[i];
  expect_values(evaluate_text("div([u, u])", context), sum, "div([u, u])");
  // div of a vector that is neither a literal nor a gradient: div(2*grad(u) - [x, y]) = 2 lap u - 2.
  std::vector<double> shifted(laplacian.size());
  for (size_t i = 0; i < shifted.size(); ++i) shifted[i] = 2 * laplacian[i] - 2;
  expect_values(evaluate_text("div(2*grad(u) - [x, y])", context), shifted, "div(2 grad u - r)");
}

TEST(PinnExpression, NormalInBoundaryContexts) {
  // u = x^2 + 3y on points with unit normals.
  const std::vector<double> xs = {1, -1, 0.5}, ys = {0.2, 0.4, 1};
  const std::vector<double> nx = {1, -1, 0.6}, ny = {0, 0, 0.8};
  FieldFunction fields = [](const Tensor& p) { return square(coordinate(p, 0)) + 3.0 * coordinate(p, 1); };
  EvaluationContext context(
      Symbols{.coordinates = {"x", "y"}, .fields = {"u"}, .boundary = true},
      {.points = points_of({xs, ys}), .fields = fields, .normals = points_of({nx, ny})});
  std::vector<double> flux;
  for (size_t i = 0; i < xs.size(); ++i) flux.push_back(2 * xs[i] * nx[i] + 3 * ny[i]);
  expect_values(evaluate_text("dot(grad(u), n)", context), flux, "dot(grad(u), n)");
  expect_values(evaluate_text("n_x*u_x + n_y*u_y", context), flux, "components");
  expect_values(evaluate_text("dot(n, n)", context), {1, 1, 1}, "unit normal");
}

TEST(PinnExpression, HelpersChainAndDifferentiate) {
  // u = sin(x) y; r2 = x^2 + y^2; f = 2 r2 + u; flux = r2 grad(u).
  const std::vector<double> xs = {0.3, -0.8}, ys = {1.2, 0.5};
  FieldFunction fields = [](const Tensor& p) { return sin(coordinate(p, 0)) * coordinate(p, 1); };
  Symbols symbols{.coordinates = {"x", "y"}, .fields = {"u"}};
  symbols.helpers.insert_or_assign("r2", parse_expression("x^2 + y^2", "helpers.r2"));
  symbols.helpers.insert_or_assign("f", parse_expression("2*r2 + u", "helpers.f"));
  symbols.helpers.insert_or_assign("flux", parse_expression("r2*grad(u)", "helpers.flux"));
  symbols.helpers.insert_or_assign("inside", parse_expression("r2 < 1", "helpers.inside"));
  EvaluationContext context(symbols, {.points = points_of({xs, ys}), .fields = fields});
  std::vector<double> f, f_x, f_yy, div_flux;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], y = ys[i], r2 = x * x + y * y;
    f.push_back(2 * r2 + std::sin(x) * y);
    f_x.push_back(4 * x + std::cos(x) * y);
    f_yy.push_back(4);
    div_flux.push_back(2 * x * std::cos(x) * y - r2 * std::sin(x) * y + 2 * y * std::sin(x));
  }
  expect_values(evaluate_text("f", context), f, "f");
  expect_values(evaluate_text("f_x", context), f_x, "f_x");
  expect_values(evaluate_text("d(f, y, 2)", context), f_yy, "d(f, y, 2)");
  expect_values(evaluate_text("div(flux)", context), div_flux, "div(flux)");
  expect_values(evaluate_text("inside", context), {0, 1}, "predicate helper");
}

TEST(PinnExpression, ParametersAndGradientsThroughTheResidual) {
  // u = w sin(x) exp(t), so u_t = u and u_xx = -u; r = u_t - nu u_xx + k = (1 + nu) u + k,
  // with a learnable nu, a network weight w and a per-point coefficient k.
  const std::vector<double> xs = {0.4, -1.1, 2.0}, ts = {0.1, 0.3, -0.2}, ks = {0.5, -1, 2};
  const double nu0 = 0.3, w0 = 1.7;
  Tensor nu = tensor<double>({nu0}).requires_grad_();
  Tensor w = tensor<double>({w0}).requires_grad_();
  FieldFunction fields = [&](const Tensor& p) { return w * sin(coordinate(p, 0)) * exp(coordinate(p, 1)); };
  EvaluationContext context(Symbols{.coordinates = {"x", "t"}, .fields = {"u"}, .parameters = {"nu", "k"}},
                            {.points = points_of({xs, ts}), .fields = fields,
                             .parameters = {{"nu", nu}, {"k", column(ks)}}});
  const Tensor residual = evaluate_text("u_t - nu*u_xx + k", context);
  const Tensor loss = sum(square(residual));
  const std::vector<Tensor> gradients = grad({loss}, {nu, w});
  double d_nu = 0, d_w = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double s = std::sin(xs[i]) * std::exp(ts[i]);
    const double r = (1 + nu0) * w0 * s + ks[i];
    d_nu += 2 * r * w0 * s;
    d_w += 2 * r * (1 + nu0) * s;
  }
  EXPECT_NEAR(gradients[0].item<double>(), d_nu, 1e-10);
  EXPECT_NEAR(gradients[1].item<double>(), d_w, 1e-10);
}

TEST(PinnExpression, ConstantsBroadcastToEveryPoint) {
  EvaluationContext context(Symbols{.coordinates = {"x"}, .parameters = {"c"}},
                            {.points = column({1, 2, 3}), .parameters = {{"c", tensor<double>({4})}}});
  expect_values(evaluate_text("2*c", context), {8, 8, 8}, "constant");
  expect_values(evaluate_text("1 < 2", context), {1, 1, 1}, "constant predicate");
}

TEST(PinnExpression, Float32PointsGiveFloat32Results) {
  const Tensor points = cast(points_of({{0.2, -0.7, 1.3}}), DType::f32);
  FieldFunction fields = [](const Tensor& p) { return sin(p); };
  EvaluationContext context(Symbols{.coordinates = {"x"}, .fields = {"u"}}, {.points = points, .fields = fields});
  const Tensor residual = evaluate_text("u_xx + u + 2*pi - 2*pi", context);
  EXPECT_EQ(residual.dtype(), DType::f32);
  for (double value : values_of(residual)) EXPECT_NEAR(value, 0, 1e-6);
}

// ---- the derivative cache ----

TEST(PinnExpression, DerivativesAreComputedOnce) {
  int field_calls = 0;
  FieldFunction fields = [&](const Tensor& p) {
    ++field_calls;
    return sin(coordinate(p, 0)) * cos(coordinate(p, 1));
  };
  EvaluationContext context(Symbols{.coordinates = {"x", "y"}, .fields = {"u"}},
                            {.points = points_of({{0.1, 0.2}, {0.3, 0.4}}), .fields = fields});
  evaluate_text("u_x + u_x*u_xx", context);
  EXPECT_EQ(context.gradient_calls(), 2);  // u_x once, u_xx from it
  evaluate_text("u_xy + u_yx", context);
  EXPECT_EQ(context.gradient_calls(), 3);  // u_xy from the cached u_x; u_yx is the same
  evaluate_text("laplacian(u)", context);
  EXPECT_EQ(context.gradient_calls(), 5);  // u_xx cached; u_y and u_yy new
  evaluate_text("d(u, x, 2) + d(d(u, y), y) + dot(grad(u), [1, 1]) + div(grad(u))", context);
  EXPECT_EQ(context.gradient_calls(), 5);
  evaluate_text("d(u*u, x) + d(u*u, x)", context);
  EXPECT_EQ(context.gradient_calls(), 6);
  EXPECT_EQ(field_calls, 1);
}

// ---- predicates ----

TEST(PinnExpression, PredicatesSelectFacesWithinTheTolerance) {
  const std::vector<double> xs = {-1, -0.5, 0, 0.5, 1, 1 + 1e-9, 1 + 1e-3, 1e-9};
  const std::vector<double> ys = {1, -1, 2, 0.5, -0.5, 1, 1, 1};
  auto selected = [&](const std::string& text, double tolerance) {
    EvaluationContext context(Symbols{.coordinates = {"x", "y"}},
                              {.points = points_of({xs, ys}), .tolerance = tolerance});
    const Tensor result = evaluate_text(text, context);
    EXPECT_EQ(result.dtype(), DType::b8) << text;
    return values_of(result);
  };
  using V = std::vector<double>;
  EXPECT_EQ(selected("x == -1 || x == 1", 1e-6), (V{1, 0, 0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(selected("x == -1 || x == 1", 1e-2), (V{1, 0, 0, 0, 1, 1, 1, 0}));
  EXPECT_EQ(selected("x == -1 || x == 1", 0), (V{1, 0, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(selected("y > 0 && !(x < 0)", 1e-6), (V{0, 0, 1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(selected("x <= 0", 1e-6), (V{1, 1, 1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(selected("x > 0", 1e-6), (V{0, 0, 0, 1, 1, 1, 1, 0}));
  EXPECT_EQ(selected("x >= 1", 1e-6), (V{0, 0, 0, 0, 1, 1, 1, 0}));
  EXPECT_EQ(selected("x != 0", 1e-6), (V{1, 1, 0, 1, 1, 1, 1, 0}));
}

// ---- errors ----

Symbols burgers_symbols() {
  return Symbols{.coordinates = {"x", "t"}, .fields = {"u"}, .parameters = {"nu"}};
}

// The message of checking `text` (parsed at equations.residual) as a scalar in `symbols`.
std::string check_error(const std::string& text, const Symbols& symbols = burgers_symbols(),
                        ExpressionKind kind = ExpressionKind::scalar) {
  return error_of([&] { check(parse_expression(text, "equations.residual"), symbols, kind); });
}

TEST(PinnExpressionErrors, ParseErrorsPointAtTheFault) {
  EXPECT_EQ(check_error("u_t + * u"),
            "equations.residual: expected a number, a name, '(' or '[', found '*'\n"
            "  u_t + * u\n"
            "        ^");
  EXPECT_EQ(check_error("u_t + u*"),
            "equations.residual: expected a number, a name, '(' or '[', found the end of the expression\n"
            "  u_t + u*\n"
            "          ^");
  EXPECT_EQ(check_error("(u + 1"),
            "equations.residual: expected ')' to close the '(' at column 1, found the end of the expression\n"
            "  (u + 1\n"
            "        ^");
  EXPECT_EQ(check_error("sin(u + 1"),
            "equations.residual: expected ')' or ',' in the arguments of sin, found the end of the expression\n"
            "  sin(u + 1\n"
            "           ^");
  EXPECT_EQ(check_error("u + 1)"),
            "equations.residual: this ')' closes nothing\n"
            "  u + 1)\n"
            "       ^");
  EXPECT_EQ(check_error("u_t + 2 u"),
            "equations.residual: expected an operator or the end of the expression, found 'u' (use '*' to multiply)\n"
            "  u_t + 2 u\n"
            "          ^");
  EXPECT_EQ(check_error("u ,"),
            "equations.residual: expected an operator or the end of the expression, found ','\n"
            "  u ,\n"
            "    ^");
  EXPECT_EQ(check_error("   "),
            "equations.residual: the expression is empty\n"
            "     \n"
            "  ^");
  EXPECT_EQ(check_error("x = 1"),
            "equations.residual: unexpected character '=' (use '==' to compare)\n"
            "  x = 1\n"
            "    ^");
  EXPECT_EQ(check_error("0 < x < 1", burgers_symbols(), ExpressionKind::predicate),
            "equations.residual: comparisons cannot be chained: write (a < b) && (b < c)\n"
            "  0 < x < 1\n"
            "        ^");
  EXPECT_EQ(check_error("1.2.3 + u"),
            "equations.residual: malformed number '1.2.3'\n"
            "  1.2.3 + u\n"
            "  ^~~~~");
  EXPECT_EQ(check_error("[]"),
            "equations.residual: expected an expression in the vector started at column 1, found ']'\n"
            "  []\n"
            "   ^");
}

TEST(PinnExpressionErrors, DeepNestingIsAnErrorNotACrash) {
  const std::string parentheses = std::string(5000, '(') + "u" + std::string(5000, ')');
  EXPECT_NE(check_error(parentheses).find("equations.residual: the expression nests more than 1000 levels deep\n"),
            std::string::npos);
  // A flat sum is long, not deep: up to 2000 terms are checked and evaluated (they were refused
  // as nesting 1000 levels deep from 1000 terms on); only a chain longer than the evaluator's
  // stack is sized for is refused, and the message says it is the chain.
  constexpr int kTerms = 1999;
  std::string long_sum = "u";
  for (int i = 1; i < kTerms; ++i) long_sum += " + u";
  EXPECT_EQ(check_error(long_sum), "");
  HeatLikeProblem problem;
  EvaluationContext context = problem.context();
  auto summed_in_order = [](double x, double t) {
    double total = 0;
    for (int i = 0; i < kTerms; ++i) total += std::sin(x) * std::exp(t);
    return total;
  };
  expect_values(evaluate_text(long_sum, context), problem.map(summed_in_order), "long sum");
  std::string too_long_sum = "u";
  for (int i = 0; i < 2000; ++i) too_long_sum += " + u";
  EXPECT_NE(check_error(too_long_sum).find("the expression chains more than 2000 operations"), std::string::npos);
}

TEST(PinnExpressionErrors, MultiLineExpressionsShowTheFaultyLine) {
  EXPECT_EQ(check_error("u_t\n  + nuu*u_xx"),
            "equations.residual: unknown symbol 'nuu' (did you mean 'nu'?)\n"
            "    + nuu*u_xx\n"
            "      ^~~");
}

TEST(PinnExpressionErrors, UnknownSymbolsSuggestTheNearest) {
  EXPECT_EQ(check_error("u_t + u*u_x - nuu*u_xx"),
            "equations.residual: unknown symbol 'nuu' (did you mean 'nu'?)\n"
            "  u_t + u*u_x - nuu*u_xx\n"
            "                ^~~");
  EXPECT_EQ(check_error("u + foo"),
            "equations.residual: unknown symbol 'foo' (symbols here: x, t, u, nu, pi)\n"
            "  u + foo\n"
            "      ^~~");
  EXPECT_EQ(check_error("w_x"),
            "equations.residual: unknown field or helper 'w' (did you mean 'u'?)\n"
            "  w_x\n"
            "  ^");
  EXPECT_EQ(check_error("u_t + ab_x"),
            "equations.residual: unknown field or helper 'ab' (fields and helpers: u)\n"
            "  u_t + ab_x\n"
            "        ^~");
  EXPECT_EQ(check_error("sine(x)"),
            "equations.residual: unknown function 'sine' (did you mean 'sin'?)\n"
            "  sine(x)\n"
            "  ^~~~");
  EXPECT_EQ(check_error("u(x)"),
            "equations.residual: 'u' is a symbol, not a function\n"
            "  u(x)\n"
            "  ^");
}

TEST(PinnExpressionErrors, DerivativeNotationNeedsCoordinates) {
  // Coordinates of two letters have no subscript form (it listed x1, x2 as single letters).
  EXPECT_EQ(check_error("u_x1", Symbols{.coordinates = {"x1", "x2"}, .fields = {"u"}}).substr(0, 205),
            "equations.residual: 'u_x1' is not a derivative of 'u': 'x' is not a coordinate (the subscript form "
            "takes coordinates of one letter, none of this problem's has one letter; d(u, x, k) takes any: "
            "d(u, x1, 1))");
  EXPECT_EQ(check_error("u_t + u_q"),
            "equations.residual: 'u_q' is not a derivative of 'u': 'q' is not a coordinate "
            "(the subscript form takes coordinates of one letter, here: x, t; d(u, x, k) takes any: d(u, x, 1))\n"
            "  u_t + u_q\n"
            "          ^");
  EXPECT_EQ(check_error("nu_x"),
            "equations.residual: 'nu_x' is not a derivative: derivative notation applies to fields "
            "and helpers, and 'nu' is a parameter\n"
            "  nu_x\n"
            "  ^~~~");
  EXPECT_EQ(check_error("d(u, nu)"),
            "equations.residual: the second argument of d must be a coordinate (x, t)\n"
            "  d(u, nu)\n"
            "       ^~");
  EXPECT_EQ(check_error("d(u, x, 1.5)"),
            "equations.residual: the order of a derivative must be a whole number from 1 to 16\n"
            "  d(u, x, 1.5)\n"
            "          ^~~");
  // Derivative notation has the same bound as d(): 17 letters ran for minutes (found by fuzzing).
  EXPECT_EQ(check_error("u_xxxxxxxxxxxxxxxxx"),
            "equations.residual: 'u_xxxxxxxxxxxxxxxxx' differentiates 17 times; the order of a derivative must "
            "be from 1 to 16\n"
            "  u_xxxxxxxxxxxxxxxxx\n"
            "    ^~~~~~~~~~~~~~~~~");
}

// d() of a derivative adds the orders, which evaluation bounds like each one alone.
TEST(PinnExpressionErrors, NestedDerivativeOrdersAddUp) {
  EvaluationContext context(Symbols{.coordinates = {"x"}, .fields = {"u"}},
                            {.points = column({0.5}), .fields = [](const Tensor& p) { return p; }});
  try {
    evaluate_text("d(u_xxxxxxxxx, x, 8)", context);
    FAIL() << "order 17 was evaluated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("differentiates to order 17 in all; the order of a derivative must be from "
                                         "1 to 16\n  d(u_xxxxxxxxx, x, 8)"),
              std::string::npos)
        << e.what();
  }
}

TEST(PinnExpressionErrors, NormalOnlyOnBoundaries) {
  EXPECT_EQ(check_error("dot(grad(u), n)"),
            "equations.residual: the normal 'n' exists only in boundary conditions\n"
            "  dot(grad(u), n)\n"
            "               ^");
  EXPECT_EQ(check_error("n_x*u_x"),
            "equations.residual: the normal 'n_x' exists only in boundary conditions\n"
            "  n_x*u_x\n"
            "  ^~~");
  Symbols boundary = burgers_symbols();
  boundary.boundary = true;
  EXPECT_EQ(check_error("n_t", boundary),
            "equations.residual: 't' is not a spatial coordinate, so 'n_t' is not a component of "
            "the normal (spatial coordinates: x)\n"
            "  n_t\n"
            "    ^");
  EXPECT_EQ(check_error("dot(grad(u), n) - u", boundary), "");
}

TEST(PinnExpressionErrors, ArityAndTypes) {
  EXPECT_EQ(check_error("sin(x, t)"),
            "equations.residual: sin takes 1 argument (sin(a)), found 2\n"
            "  sin(x, t)\n"
            "  ^~~");
  EXPECT_EQ(check_error("u_t - d(u)"),
            "equations.residual: d takes 2 or 3 arguments (d(e, x) or d(e, x, order)), found 1\n"
            "  u_t - d(u)\n"
            "        ^");
  EXPECT_EQ(check_error("pow(u)"),
            "equations.residual: pow takes 2 arguments (pow(a, b)), found 1\n"
            "  pow(u)\n"
            "  ^~~");
  EXPECT_EQ(check_error("grad(u) + 1"),
            "equations.residual: cannot apply '+' to a vector of 1 and a scalar\n"
            "  grad(u) + 1\n"
            "          ^");
  EXPECT_EQ(check_error("grad(u)*grad(u)"),
            "equations.residual: cannot apply '*' to a vector of 1 and a vector of 1 (use dot(a, b))\n"
            "  grad(u)*grad(u)\n"
            "         ^");
  EXPECT_EQ(check_error("sin(grad(u))"),
            "equations.residual: the argument of sin must be a scalar, found a vector of 1\n"
            "  sin(grad(u))\n"
            "      ^~~~~~~");
  EXPECT_EQ(check_error("x == 1"),
            "equations.residual: expected a scalar expression, found a true/false condition\n"
            "  x == 1\n"
            "  ^~~~~~");
  EXPECT_EQ(check_error("x + 1", burgers_symbols(), ExpressionKind::predicate),
            "equations.residual: expected a true/false condition (such as x == 0), found a scalar\n"
            "  x + 1\n"
            "  ^~~~~");
  EXPECT_EQ(check_error("x > 0 && u", burgers_symbols(), ExpressionKind::predicate),
            "equations.residual: cannot apply '&&' to a true/false condition and a scalar "
            "(comparisons such as x == 1 give true/false conditions)\n"
            "  x > 0 && u\n"
            "        ^~");
  Symbols time_only{.coordinates = {"t"}, .fields = {"u"}};
  EXPECT_EQ(check_error("u_t - laplacian(u)", time_only),
            "equations.residual: 'laplacian' needs spatial coordinates, and the only coordinate is time\n"
            "  u_t - laplacian(u)\n"
            "        ^~~~~~~~~");
}

TEST(PinnExpressionErrors, HelperCyclesAreNamed) {
  Symbols symbols = burgers_symbols();
  symbols.helpers.insert_or_assign("a", parse_expression("b + 1", "helpers.a"));
  symbols.helpers.insert_or_assign("b", parse_expression("2*a_x", "helpers.b"));
  EXPECT_EQ(check_error("u + a", symbols),
            "helpers.b: helper cycle: a -> b -> a\n"
            "  2*a_x\n"
            "    ^~~");
  symbols.helpers.insert_or_assign("b", parse_expression("2*nuu", "helpers.b"));
  EXPECT_EQ(check_error("u + a", symbols),
            "helpers.b: unknown symbol 'nuu' (did you mean 'nu'?)\n"
            "  2*nuu\n"
            "    ^~~");
}

TEST(PinnExpressionErrors, DeclarationsMustNotClash) {
  Symbols symbols = burgers_symbols();
  symbols.parameters.push_back("u");
  EXPECT_EQ(check_error("u", symbols), "equations.residual: 'u' is declared both as a field and as a parameter");
  symbols = burgers_symbols();
  symbols.fields.push_back("u");
  EXPECT_EQ(check_error("u", symbols), "equations.residual: field 'u' is declared twice");
  symbols = burgers_symbols();
  symbols.fields.push_back("n");
  EXPECT_EQ(check_error("u", symbols),
            "equations.residual: 'n' cannot be declared as a field: it means the boundary normal");
}

TEST(PinnExpressionErrors, EvaluateChecksFirst) {
  HeatLikeProblem problem;
  EvaluationContext context = problem.context();
  EXPECT_EQ(error_of([&] { evaluate(parse_expression("u_q", "bc.left"), context); }),
            "bc.left: 'u_q' is not a derivative of 'u': 'q' is not a coordinate "
            "(the subscript form takes coordinates of one letter, here: x, t; d(u, x, k) takes any: d(u, x, 1))\n"
            "  u_q\n"
            "    ^");
  EXPECT_EQ(error_of([&] { evaluate(parse_expression("grad(u)", "bc.left"), context); }),
            "bc.left: expected a scalar or a true/false condition, found a vector of 1\n"
            "  grad(u)\n"
            "  ^~~~~~~");
  EXPECT_EQ(problem.field_calls, 0);
}

TEST(PinnExpressionErrors, EvaluationInputsAreChecked) {
  const Tensor points = points_of({{0.1, 0.2}, {0.3, 0.4}});
  FieldFunction wrong_width = [](const Tensor& p) { return concat({p, p}, 1); };
  EXPECT_EQ(error_of([&] { EvaluationContext context(burgers_symbols(), {.points = points, .fields = wrong_width}); }),
            "EvaluationContext: no value for parameter 'nu'");
  EvaluationContext context(burgers_symbols(), {.points = points, .fields = wrong_width,
                                                .parameters = {{"nu", tensor<double>({0.1})}}});
  EXPECT_EQ(error_of([&] { evaluate_text("u", context); }),
            "EvaluationContext: the field function must return [2, 1] (one column per field), got [2, 4]");
  EXPECT_EQ(error_of([&] { EvaluationContext bad(burgers_symbols(), {.points = column({1, 2})}); }),
            "EvaluationContext: points must be [N, 2] (one column per coordinate), got [2, 1]");
  Symbols boundary = burgers_symbols();
  boundary.boundary = true;
  EXPECT_EQ(error_of([&] {
              EvaluationContext bad(boundary, {.points = points, .fields = wrong_width,
                                               .parameters = {{"nu", tensor<double>({0.1})}}});
            }),
            "EvaluationContext: a boundary context needs normals of shape [2, 1], got none");
}

// ---- the op list ----

// Every math function of the op list (eddy/ops/math_functions.def) is a function of the language
// under its own name, and computes what the op does.
TEST(PinnExpression, EveryMathFunctionOfTheOpListIsAFunctionHere) {
  const Tensor points = points_of({{0.6, 0.9, 1.4}, {1.3, 0.7, 1.1}});
  EvaluationContext context(Symbols{.coordinates = {"x", "y"}}, {.points = points});
  const Tensor x = coordinate(points, 0), y = coordinate(points, 1);
  for (const MathFunction& function : math_functions()) {
    const std::string name(function.name);
    const Tensor expected = function.arity == 1 ? function.unary(x) : function.binary(x, y);
    expect_values(evaluate_text(name + (function.arity == 1 ? "(x)" : "(x, y)"), context), values_of(expected), name);
  }
}

// Each elementwise primitive is reachable from the language, as a function or an operator, or is
// listed here with the reason it is not: a primitive added without a name here fails this test.
TEST(PinnExpression, EveryElementwisePrimitiveHasAnExpressionForm) {
  const std::set<std::string_view> operators = {"neg", "add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge"};
  // The language is real-valued and has no dtypes or conditional values (a predicate selects
  // points), and an equation's derivatives are all meant (no stop_gradient).
  const std::set<std::string_view> outside = {"where", "cast", "real", "imag", "conj", "angle", "complex",
                                              "stop_gradient"};
  std::set<std::string_view> functions;
  for (const MathFunction& function : math_functions()) functions.insert(function.name);
  for (const Primitive& primitive : all_primitives()) {
    if (!primitive.elementwise) continue;
    EXPECT_TRUE(functions.count(primitive.name) + operators.count(primitive.name) + outside.count(primitive.name) == 1)
        << primitive.name << " is neither a math function (ops/math_functions.def), an operator nor listed as outside "
        << "the expression language";
  }
}

}  // namespace
}  // namespace eddy::pinn
