// Taylor mode against nested reverse mode for the derivatives of the fields: every expression
// form gives the same values and weight gradients either way, with the counters showing which
// mode did the work; then whole problems give the same loss, gradient and Adam trajectory.

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "eddy/compiler/taylor.h"
#include "eddy/eddy.h"
#include "eddy/nn/pinn_models.h"
#include "eddy/optim/adam.h"
#include "solvers/pinn/expression.h"
#include "solvers/pinn/problem.h"
#include "solvers/pinn/solver.h"
#include "solvers/pinn/training_step.h"

namespace eddy::pinn {
namespace {

// The largest difference relative to the largest reference value, over tensors of any shapes.
double relative_difference(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected) {
  double difference = 0, scale = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const Tensor a = cast(actual[i], DType::f64), b = cast(expected[i], DType::f64);
    difference = std::max(difference, max(abs(a - b)).item<double>());
    scale = std::max(scale, max(abs(b)).item<double>());
  }
  return scale > 0 ? difference / scale : difference;
}

double tolerance_for(DType dtype) { return dtype == DType::f64 ? 1e-10 : 1e-6; }

// Fields u, v of (x, y, t) from a PINN model, a learnable nu, and helpers that differentiate.
class Network {
 public:
  explicit Network(DType dtype) {
    nn::PinnModelOptions options;
    options.inputs = 3;
    options.outputs = 2;
    options.width = 16;
    options.depth = 2;
    options.dtype = dtype;
    options.seed = 5;
    model_ = nn::make_pinn_model(options);
    nu_ = full({1}, 0.3, dtype).requires_grad_();
    Generator generator(11);
    points_ = rand({24, 3}, dtype, &generator) * 2.0 - 1.0;
    const Tensor angle = rand({24, 1}, dtype, &generator) * 6.0;
    normals_ = concat({cos(angle), sin(angle)}, 1);
    jets_ = std::make_shared<TaylorOperator>([this](const Tensor& at) { return fields(at); });
  }

  Tensor fields(const Tensor& points) {
    ++field_calls_;
    return (*model_)(points);
  }
  int field_calls() const { return field_calls_; }

  // A fresh context at the same points; with Taylor mode, all of them share one operator.
  EvaluationContext context(bool taylor, bool boundary) {
    Symbols symbols{.coordinates = {"x", "y", "t"}, .fields = {"u", "v"}, .parameters = {"nu"}, .boundary = boundary};
    symbols.helpers.insert_or_assign("flux", parse_expression("nu*grad(u)", "helpers.flux"));
    symbols.helpers.insert_or_assign("energy", parse_expression("u*u + v*v", "helpers.energy"));
    symbols.helpers.insert_or_assign("divergence", parse_expression("u_x + v_y", "helpers.divergence"));
    EvaluationInputs inputs{.points = points_,
                            .fields = [this](const Tensor& at) { return fields(at); },
                            .parameters = {{"nu", nu_}}};
    if (boundary) inputs.normals = normals_;
    if (taylor) inputs.field_jets = jets_;
    return EvaluationContext(symbols, inputs);
  }

  std::vector<Tensor> weights() const {
    std::vector<Tensor> all = model_->parameters();
    all.push_back(nu_);
    return all;
  }

 private:
  std::shared_ptr<nn::Module> model_;
  Tensor nu_, points_, normals_;
  std::shared_ptr<TaylorOperator> jets_;
  int field_calls_ = 0;
};

struct Case {
  std::string text;
  bool boundary;
  int64_t taylor_passes;   // with Taylor mode
  int64_t gradient_calls;  // with Taylor mode: what stays on reverse mode
};

// Field derivatives up to pure second order come from the one Taylor pass; mixed and higher ones
// are reverse mode from the jets; derivatives of anything but a field are reverse mode entirely.
std::vector<Case> cases() {
  return {
      {"u", false, 0, 0},
      {"u_x + v_t", false, 1, 0},
      {"u_xx", false, 1, 0},
      {"v_tt - d(u, y, 2)", false, 1, 0},
      {"laplacian(u)", false, 1, 0},
      {"laplacian(v) + u_yy", false, 1, 0},
      {"div(grad(u))", false, 1, 0},
      {"u_t + u*u_x + v*u_y - nu*laplacian(u)", false, 1, 0},
      {"dot(grad(u), n) + n_x*v_x", true, 1, 0},
      {"divergence*nu", false, 1, 0},
      {"div(flux)", false, 1, 2},
      {"u_xy", false, 1, 1},
      {"divergence + u_xy + d(u_x, y)", false, 1, 1},
      {"u_xxx + u_xxt", false, 1, 3},
      {"laplacian(u_x)", false, 1, 4},
      {"d(u*v, x)", false, 0, 1},
      {"laplacian(u*v)", false, 0, 4},
      {"d(energy, y, 2) + energy_x", false, 0, 3},
  };
}

void expect_modes_agree(DType dtype) {
  Network network(dtype);
  const int calls_before = network.field_calls();
  const std::vector<Case> all = cases();
  for (const Case& c : all) {
    SCOPED_TRACE(c.text);
    const Expression expression = parse_expression(c.text, "test");
    EvaluationContext reverse = network.context(false, c.boundary);
    EvaluationContext taylor = network.context(true, c.boundary);
    const Tensor expected = evaluate(expression, reverse);
    const Tensor actual = evaluate(expression, taylor);
    EXPECT_EQ(actual.dtype(), dtype);
    EXPECT_LE(relative_difference({actual}, {expected}), tolerance_for(dtype));
    EXPECT_EQ(taylor.taylor_passes(), c.taylor_passes);
    EXPECT_EQ(taylor.gradient_calls(), c.gradient_calls);
    EXPECT_EQ(reverse.taylor_passes(), 0);

    const std::vector<Tensor> weights = network.weights();
    const std::vector<Tensor> through_taylor = grad({sum(square(actual))}, weights);
    const std::vector<Tensor> through_reverse = grad({sum(square(expected))}, weights);
    EXPECT_LE(relative_difference(through_taylor, through_reverse), tolerance_for(dtype));
  }
  // Each reverse context runs the network once, and so does each Taylor context without field
  // derivatives; the Taylor operator traced it once for all the others.
  const auto without_derivatives =
      std::count_if(all.begin(), all.end(), [](const Case& c) { return c.taylor_passes == 0; });
  EXPECT_EQ(network.field_calls() - calls_before, static_cast<int64_t>(all.size()) + without_derivatives + 1);
}

TEST(DerivativeModes, ExpressionsAgreeInFloat64) { expect_modes_agree(DType::f64); }
TEST(DerivativeModes, ExpressionsAgreeInFloat32) { expect_modes_agree(DType::f32); }

TEST(DerivativeModes, LaterExpressionsInAContextUseTheJetsOfTheFirst) {
  Network network(DType::f64);
  EvaluationContext reverse = network.context(false, false);
  EvaluationContext taylor = network.context(true, false);
  for (const std::string text : {"u_t", "u_xx + laplacian(v)", "u_x"}) {
    SCOPED_TRACE(text);
    const Expression expression = parse_expression(text, "test");
    EXPECT_LE(relative_difference({evaluate(expression, taylor)}, {evaluate(expression, reverse)}), 1e-10);
  }
  // The first expression asked for first derivatives only: the second ones came by reverse mode
  // from them (the Laplacian's u_xx shared with the term before it).
  EXPECT_EQ(taylor.taylor_passes(), 1);
  EXPECT_EQ(taylor.gradient_calls(), 3);
}

// ---- whole problems ----

// A heat-like equation with a Laplacian, a u_xx term, a mixed term and a learnable coefficient;
// a Neumann condition (first derivatives on the boundary) and an initial condition (values only).
const std::string kHeat = R"(seed: 3
geometry:
  space: {type: rectangle, min: [0, 0], max: [1, 1]}
  time: {min: 0, max: 1}
fields: [u]
parameters:
  kappa: {learnable: true, initial: 0.1}
equations:
  heat: u_t - kappa*laplacian(u) + 0.5*u*u_xx + 0.1*u_xy
conditions:
  pde: {type: interior, equation: heat, points: 64}
  start: {type: initial, field: u, value: sin(pi*x)*sin(pi*y), points: 32}
  walls: {type: neumann, field: u, value: 0, points: 32}
model: {width: 16, depth: 2}
training:
  adam: {steps: 5, learning_rate: 0.01}
)";

// The wave equation through a hard constraint: the output transform is inside the Taylor pass.
const std::string kWave = R"(geometry:
  space: {type: interval, min: 0, max: 1}
  time: {min: 0, max: 1}
fields: [u]
parameters: {c: 1}
conditions:
  pde: {type: interior, equation: u_tt - c^2*u_xx, points: 64}
model:
  width: 16
  depth: 2
  output_transform: {u: sin(pi*x) + x*(1 - x)*t^2*net_u}
training:
  adam: {steps: 5, learning_rate: 0.01}
)";

class DerivativeModesProblem : public ::testing::Test {
 protected:
  Problem read(const std::string& text, const std::string& dtype, const std::string& derivatives) {
    const std::vector<std::string> overrides{"dtype=" + dtype, "training.derivatives=" + derivatives};
    configs_.push_back(io::Config::parse(text, "problem.yaml", overrides));
    return read_problem(*configs_.back());
  }

  // The loss, its gradient, and the losses of `steps` Adam steps from there.
  struct Run {
    double loss = 0;
    std::vector<Tensor> gradient;
    std::vector<double> trajectory;
  };

  Run run(const Problem& problem) {
    PinnState state(problem);
    state.sample(0);
    Run result;
    const Tensor loss = state.loss();
    result.loss = loss.item<double>();
    result.gradient = grad({loss}, state.trainable());
    optim::AdamOptions options;
    options.learning_rate = problem.training.learning_rate;
    optim::Adam adam(state.trainable(), options);
    for (int64_t step = 0; step < problem.training.first_order_steps; ++step) {
      adam.zero_grad();
      Tensor step_loss = state.loss();
      result.trajectory.push_back(step_loss.item<double>());
      backward(step_loss);
      adam.step();
    }
    return result;
  }

  void expect_modes_agree(const std::string& text, const std::string& dtype) {
    SCOPED_TRACE(dtype);
    const Problem taylor_problem = read(text, dtype, "taylor"), reverse_problem = read(text, dtype, "reverse");
    const Run taylor = run(taylor_problem), reverse = run(reverse_problem);
    const double tolerance = tolerance_for(taylor_problem.dtype);
    EXPECT_NEAR(taylor.loss, reverse.loss, tolerance * std::abs(reverse.loss));
    EXPECT_LE(relative_difference(taylor.gradient, reverse.gradient), tolerance);
    ASSERT_EQ(taylor.trajectory.size(), reverse.trajectory.size());
    for (size_t step = 0; step < reverse.trajectory.size(); ++step) {
      EXPECT_NEAR(taylor.trajectory[step], reverse.trajectory[step], tolerance * reverse.trajectory[step])
          << "Adam step " << step;
    }
    EXPECT_LT(reverse.trajectory.back(), reverse.trajectory.front());  // the steps did train
  }

 private:
  std::vector<std::unique_ptr<io::Config>> configs_;
};

TEST_F(DerivativeModesProblem, LaplacianAndSecondDerivativeTermsAgree) {
  expect_modes_agree(kHeat, "float64");
  expect_modes_agree(kHeat, "float32");
}

TEST_F(DerivativeModesProblem, OutputTransformsAreInsideTheTaylorPass) {
  expect_modes_agree(kWave, "float64");
}

// The solver runs its training step compiled: the Taylor pass is captured into that step's graph
// (its own trace of the network nested inside) and gives what eager reverse mode gives.
TEST_F(DerivativeModesProblem, TheCompiledTaylorStepGivesTheEagerReverseOne) {
  const Problem taylor_problem = read(kHeat, "float64", "taylor"), reverse_problem = read(kHeat, "float64", "reverse");
  PinnState taylor_state(taylor_problem), reverse_state(reverse_problem);
  taylor_state.sample(0);
  reverse_state.sample(0);
  std::string report;
  TrainingStep compiled(taylor_state, true, [&](const std::string& line) { report = line; });
  TrainingStep eager(reverse_state, false, {});
  const StepEvaluation a = compiled.evaluate(), b = eager.evaluate();
  EXPECT_NE(report.find("training step compiled in"), std::string::npos) << report;
  EXPECT_NEAR(a.loss.item<double>(), b.loss.item<double>(), 1e-10 * b.loss.item<double>());
  EXPECT_LE(relative_difference(a.gradients, b.gradients), 1e-10);
}

}  // namespace
}  // namespace eddy::pinn
