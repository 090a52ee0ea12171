// Problem configs: a valid one reads completely, and bad ones fail before any training with a
// message that names the file position, the key path and the fault.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "eddy/core/error.h"
#include "eddy/io/config.h"
#include "eddy/io/hdf5.h"
#include "eddy/ops/ops.h"
#include "solvers/pinn/problem.h"
#include "support/expect_error.h"
#include "support/npy_file.h"

namespace eddy::pinn {
namespace {

const std::string kValid = R"(description: heat
dtype: float64
geometry:
  space: {type: rectangle, min: [0, 0], max: [1, 1]}
  time: {min: 0, max: 1}
fields: [u]
parameters:
  kappa: 0.1
  source: {learnable: true, initial: 0.5}
helpers:
  forcing: source*sin(pi*x)
equations:
  heat: u_t - kappa*laplacian(u) - forcing
conditions:
  pde: {type: interior, equation: heat, points: 100}
  start: {type: initial, field: u, value: sin(pi*x)*sin(pi*y), points: 50}
  walls: {type: dirichlet, faces: [left, right], field: u, points: 40}
  top: {type: neumann, on: y == 1, field: u, value: 0, points: 20}
  bottom: {type: robin, on: y == 0, field: u, alpha: 1, beta: 0.5, points: 20}
model: {width: 16, depth: 2}
training:
  adam: {steps: 10, learning_rate: 1.0e-3, schedule: {type: cosine, warmup: 2}}
output: {dir: /tmp/eddy-test-run, grid: [8, 8, 4]}
)";

Problem read(const std::string& text, const std::vector<std::string>& overrides = {}) {
  auto config = io::Config::parse(text, "problem.yaml", overrides);
  return read_problem(*config);
}

TEST(Problem, ReadsEverySection) {
  Problem p = read(kValid);
  EXPECT_EQ(p.coordinates, (std::vector<std::string>{"x", "y", "t"}));
  EXPECT_EQ(p.fields, (std::vector<std::string>{"u"}));
  EXPECT_EQ(p.constants.at("kappa"), 0.1);
  ASSERT_EQ(p.learnable.size(), 1u);
  EXPECT_EQ(p.learnable[0].name, "source");
  ASSERT_EQ(p.conditions.size(), 5u);
  EXPECT_EQ(p.model.inputs, 3);
  EXPECT_EQ(p.model.input_lower, (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(p.training.schedule.type, optim::ScheduleType::cosine);
  EXPECT_EQ(p.output.grid, (std::vector<int64_t>{8, 8, 4}));
  EXPECT_NE(p.resolved_config.find("weight: 1"), std::string::npos);  // defaults are recorded
  // One grid size serves every coordinate (it did in 1-D only).
  EXPECT_EQ(read(kValid, {"output.grid=6"}).output.grid, (std::vector<int64_t>{6, 6, 6}));
}

// The memory check kept the largest points key by assigning ConfigNodes, which wrote each larger
// value into the key kept before: with a smaller condition first, the resolved config (a run
// folder's config.yaml) gave it the larger one's points ("points: &1 100" and "points: *1").
// The tolerance of `==` and of a listed point's containment is the space's: with the time span
// in the diagonal, x == 0 on a 1 cm square over an hour took points 3.6 mm from the wall, and a
// point 20% outside the square was accepted.
TEST(Problem, ComparisonsTakeTheSpacesToleranceWhateverTheTimeSpan) {
  const Problem p = read(kValid, {"geometry.space={type: rectangle, min: [0, 0], max: [0.01, 0.01]}",
                                  "geometry.time={min: 0, max: 3600}"});
  EXPECT_NEAR(p.tolerance(), 1e-6 * 0.01 * std::sqrt(2.0), 1e-15);
  const double outside[] = {0.012, 0.005, 10.0}, on_the_wall[] = {0.01 + 1e-9, 0.005, 3600.0};
  EXPECT_FALSE(p.contains(outside));
  EXPECT_TRUE(p.contains(on_the_wall));
}

TEST(Problem, TheResolvedConfigKeepsEachConditionsPoints) {
  const Problem p = read(kValid, {"conditions.pde.points=10", "conditions.start.points=30"});
  EXPECT_NE(p.resolved_config.find("points: 10,"), std::string::npos) << p.resolved_config;
  EXPECT_NE(p.resolved_config.find("points: 30,"), std::string::npos) << p.resolved_config;
  EXPECT_EQ(p.resolved_config.find('&'), std::string::npos) << p.resolved_config;
}

TEST(Problem, RobinCoefficientsKeepEveryDigit) {
  // The residual is built as text: its coefficients were written with six digits (1.23457e+06).
  const Problem p = read(kValid, {"conditions.bottom.alpha=1234567.89", "conditions.bottom.beta=0.123456789"});
  const auto bottom = std::find_if(p.conditions.begin(), p.conditions.end(),
                                   [](const Condition& c) { return c.name == "bottom"; });
  ASSERT_TRUE(bottom != p.conditions.end() && bottom->residual);
  EXPECT_NE(bottom->residual->text().find("1234567.89*u + 0.123456789*dot(grad(u), n)"), std::string::npos)
      << bottom->residual->text();
}

TEST(Problem, OverridesApplyBeforeValidation) {
  Problem p = read(kValid, {"model.width=32", "training.adam.steps=99"});
  EXPECT_EQ(p.model.width, 32);
  EXPECT_EQ(p.training.first_order_steps, 99);
}

struct BadConfig {
  std::string name;
  std::string from, to;  // replace `from` by `to` in the valid config ("" from: append `to`)
  std::string message;   // must appear in the error
};

// Where training options go in kValid: before its adam line.
const std::string kTraining = "adam: {steps: 10";

// The valid config's training section with SOAP instead of Adam, and `setting` in training.soap.
std::string soap_with(const std::string& setting) { return "optimizer: soap\n  soap: {" + setting + ", steps: 10"; }

TEST(Problem, SoapSettings) {
  std::string text = kValid;
  text.replace(text.find(kTraining), kTraining.size(),
               "optimizer: soap\n  soap: {betas: [0.9, 0.99], precondition_frequency: 5, steps: 7");
  Problem p = read(text, {"training.soap.learning_rate=0.01"});
  EXPECT_EQ(p.training.optimizer, FirstOrderOptimizer::soap);
  EXPECT_EQ(p.training.first_order_steps, 7);
  EXPECT_EQ(p.training.learning_rate, 0.01);
  EXPECT_EQ(p.training.soap.beta1, 0.9);
  EXPECT_EQ(p.training.soap.beta2, 0.99);
  EXPECT_EQ(p.training.soap.shampoo_beta, 0.99);  // beta2 unless set
  EXPECT_EQ(p.training.soap.precondition_frequency, 5);
  EXPECT_EQ(p.training.soap.eps, 1e-8);
  EXPECT_EQ(p.training.soap.weight_decay, 0);
}

std::vector<BadConfig> bad_configs() {
  return {
      {"unknown_top_key", "", "trainig: {}\n", "problem.yaml:24:1: unknown key 'trainig' in (top level) (did you mean 'training'?)"},
      {"unknown_nested_key", "width: 16", "widht: 16", "unknown key 'widht' in model (did you mean 'width'?)"},
      {"bad_dtype", "dtype: float64", "dtype: float16", "problem.yaml:2:8: dtype: 'float16' is not one of: float32, float64"},
      {"geometry_type", "type: rectangle", "type: rectangel", "'rectangel' is not one of"},
      // A value starting with ! is a YAML tag, dropped by readers: the rest ran alone.
      {"yaml_tag", "on: y == 1", "on: !top && y == 1",
       "conditions.top.on: starts with '!top', which YAML reads as a tag and drops; quote the value"},
      // A space axis named t was taken for time by laplacian, grad and div.
      {"space_axis_named_t", "max: [1, 1]}", "max: [1, 1]}\n  coordinates: [x, t]",
       "geometry.coordinates[1]: 't' is the name of time (geometry.time)"},
      // A parameter u_x hid the derivative u_x in every equation.
      {"parameter_named_as_a_derivative", "kappa: 0.1", "kappa: 0.1\n  u_x: 5",
       "parameters.u_x: 'u_x' cannot be a parameter name: it reads as a derivative of field 'u'"},
      // docs/config.md writes vectors [a, b]: unquoted in YAML that is a list, and the error said
      // only that a string was expected.
      {"vector_helper_as_a_yaml_list", "forcing: source*sin(pi*x)", "forcing: source*sin(pi*x)\n  flux: [x*u, y*u]",
       "helpers.flux: is a YAML list; a vector is an expression, written in quotes: \"[x*u, y*u]\""},
      {"helper_named_as_a_derivative", "forcing: source*sin(pi*x)", "forcing: source*sin(pi*x)\n  forcing_t: 1",
       "helpers.forcing_t: 'forcing_t' cannot be a helper name: it reads as a derivative of helper 'forcing'"},
      // Declared before the helper it reads as a derivative of, it got past the check (made as
      // each name was declared) and replaced that derivative silently; a parameter too.
      {"helper_before_the_one_it_derives", "forcing: source*sin(pi*x)", "forcing_t: 1\n  forcing: source*sin(pi*x)",
       "helpers.forcing_t: 'forcing_t' cannot be a helper name: it reads as a derivative of helper 'forcing'"},
      {"parameter_named_as_a_helpers_derivative", "kappa: 0.1", "kappa: 0.1\n  forcing_x: 5",
       "parameters.forcing_x: 'forcing_x' cannot be a parameter name: it reads as a derivative of helper 'forcing'"},
      // A name n_x (a parameter, field or helper) replaced the normal's x component in every
      // boundary condition.
      {"parameter_named_as_a_normal_component", "kappa: 0.1", "kappa: 0.1\n  n_x: 5",
       "parameters.n_x: 'n_x' cannot be a parameter name: it means the boundary normal's x component"},
      {"helper_named_as_a_normal_component", "forcing: source*sin(pi*x)", "forcing: source*sin(pi*x)\n  n_y: 1",
       "helpers.n_y: 'n_y' cannot be a helper name: it means the boundary normal's y component"},
      {"field_named_as_a_normal_component", "fields: [u]", "fields: [u, n_x]",
       "fields[1]: 'n_x' cannot be a field name: it means the boundary normal's x component"},
      {"field_named_as_a_derivative", "fields: [u]", "fields: [u, u_t]",
       "fields[1]: 'u_t' cannot be a field name: it reads as a derivative of field 'u'"},
      // Coordinates were left out of both checks: the coordinate replaced the derivative or the
      // normal's component in every expression.
      {"coordinate_named_as_a_derivative", "max: [1, 1]}", "max: [1, 1]}\n  coordinates: [x, u_x]",
       "geometry.coordinates[1]: 'u_x' cannot be a coordinate name: it reads as a derivative of field 'u'"},
      {"coordinate_named_as_a_normal_component", "max: [1, 1]}", "max: [1, 1]}\n  coordinates: [x, n_x]",
       "geometry.coordinates[1]: 'n_x' cannot be a coordinate name: it means the boundary normal's x component"},
      // Repeats were taken without a word; no field at all passed eddy check and failed in eddy
      // solve, naming no key.
      {"face_twice", "faces: [left, right]", "faces: [left, left]",
       "conditions.walls.faces[1]: 'left' is listed twice (first at conditions.walls.faces[0])"},
      {"periodic_without_fields", "walls: {type: dirichlet, faces: [left, right], field: u, points: 40}",
       "walls: {type: periodic, axis: x, fields: [], points: 40}",
       "conditions.walls.fields: names no field; leave `fields` out for every field"},
      {"periodic_field_twice", "walls: {type: dirichlet, faces: [left, right], field: u, points: 40}",
       "walls: {type: periodic, axis: x, fields: [u, u], points: 40}",
       "conditions.walls.fields[1]: 'u' is listed twice (first at conditions.walls.fields[0])"},
      {"reference_without_fields", "output: {dir:", "validation: {reference: {expressions: {}}}\noutput: {dir:",
       "validation.reference.expressions: names no field; give each field's exact solution"},
      // Helper errors give file:line:col like the equations' (they gave the key path alone).
      {"helper_unknown_symbol", "forcing: source*sin(pi*x)", "forcing: source*sin(pi*bb)",
       "problem.yaml:11:12: helpers.forcing: unknown symbol 'bb'"},
      // Checked by `eddy check` too: they were refused only when training built the schedule.
      {"cosine_warmup_whole_run", "warmup: 2", "warmup: 10",
       "training.adam.schedule.warmup: must be less than training.adam.steps (10); got 10"},
      {"cosine_floor_above_peak", "warmup: 2}", "warmup: 2, floor: 0.5}",
       "training.adam.schedule.floor: must not exceed the learning rate (0.001); got 0.5"},
      // The shape's own check, placed in the file (it named the key alone).
      {"rectangle_bounds", "max: [1, 1]", "max: [1, 0]",
       "problem.yaml:4:10: geometry.space.min: rectangle min [0, 0] is not below max [1, 0] on axis 1"},
      {"rectangle_arity", "min: [0, 0]", "min: [0, 0, 0]", "geometry.space.min: expected 2 numbers, got 3"},
      {"time_order", "time: {min: 0, max: 1}", "time: {min: 1, max: 0}", "geometry.time.max: must be above min = 1, got 0"},
      {"no_fields", "fields: [u]", "fields: []", "fields: needs at least one field"},
      {"field_twice", "fields: [u]", "fields: [u, v, u]",
       "problem.yaml:6:16: fields[2]: field 'u' is declared twice (first at fields[0])"},
      {"coordinate_twice", "max: [1, 1]}", "max: [1, 1]}\n  coordinates: [x, x]",
       "problem.yaml:5:20: geometry.coordinates[1]: coordinate 'x' is declared twice (first at "
       "geometry.coordinates[0])"},
      {"field_named_like_time", "fields: [u]", "fields: [u, t]",
       "problem.yaml:6:13: fields[1]: 't' is declared as a field but is already a coordinate (geometry)"},
      {"parameter_named_like_a_field", "kappa: 0.1", "u: 0.1",
       "problem.yaml:8:6: parameters.u: 'u' is declared as a parameter but is already a field (fields[0])"},
      {"helper_named_pi", "forcing: source", "pi: source", "helpers.pi: 'pi' cannot be declared as a helper"},
      {"parameter_type", "kappa: 0.1", "kappa: fast", "parameters.kappa: expected a number, got 'fast'"},
      {"learnable_flag", "learnable: true", "learnable: false", "a parameter given as a map must set learnable: true"},
      {"equation_syntax", "u_t - kappa*laplacian(u) - forcing", "u_t - kappa*laplacian(u) -", "equations.heat"},
      {"equation_unknown_symbol", "u_t - kappa*laplacian(u) - forcing", "u_t - kapa*laplacian(u) - forcing", "kapa"},
      {"equation_bad_derivative", "u_t - kappa*laplacian(u) - forcing", "u_q - forcing", "u_q"},
      {"helper_unknown", "source*sin(pi*x)", "sorce*sin(pi*x)", "sorce"},
      {"condition_type", "type: neumann", "type: neuman", "'neuman' is not one of"},
      {"condition_field", "faces: [left, right], field: u", "faces: [left, right], field: v", "'v' is not a field (fields: u)"},
      {"condition_face", "faces: [left, right]", "faces: [left, rigth]", "'rigth' is not a face of this rectangle"},
      // It read as "no restriction", the whole boundary.
      {"condition_no_faces", "faces: [left, right]", "faces: []", "names no face; leave `faces` out"},
      // Both were taken and intersected, so `on: x == 0` with `faces: [left, right]` trained at x = 0 only.
      {"condition_on_and_faces", "faces: [left, right]", "faces: [left, right], on: x == 0",
       "conditions.walls.faces: give `on` or `faces`, not both"},
      {"equation_name_misspelt", "equation: heat, points: 100", "equation: haet, points: 100",
       "conditions.pde.equation: 'haet' is neither one of `equations` nor an expression (did you mean 'heat'?)"},
      {"equation_comma_in_flow_map", "equation: heat, points: 100", "equation: u_t - pow(u, 2), points: 100",
       "conditions.pde.2): has no value: in a map written {...}, a comma ends a value, so quote a value that holds "
       "one"},
      // It was refused when validation began, after eddy check had passed it.
      {"reference_reads_a_field", "output: {dir:", "validation: {reference: {expressions: {u: 2*u}}}\noutput: {dir:",
       "validation.reference.expressions.u: a reference may only use coordinates and parameters, not the fields"},
      {"equation_unclosed_parenthesis", "equation: heat, points: 100", "equation: 'u_t - (u_xx', points: 100",
       "conditions.pde.equation: expected ')' to close the '(' at column 7, found the end of the expression"},
      {"initial_equation_and_field", "type: initial, field: u,", "type: initial, equation: u_t, field: u,",
       "conditions.start.field: give `equation`, or `field` and `value`, not both"},
      {"condition_points", "points: 100", "points: -5", "conditions.pde.points: must be positive, got -5"},
      {"condition_weight", "equation: heat, points: 100", "equation: heat, points: 100, weight: -1", "must be non-negative"},
      {"predicate_not_boolean", "on: y == 1", "on: y + 1", "conditions.top.on"},
      {"normal_in_interior", "u_t - kappa*laplacian(u) - forcing", "u_t - n_x", "n_x"},
      {"robin_missing_alpha", "alpha: 1, ", "", "conditions.bottom: missing required key 'alpha'"},
      // Both coefficients 0: accepted, a constant value^2 added to the loss.
      {"robin_without_coefficients", "alpha: 1, beta: 0.5", "alpha: 0, beta: 0",
       "conditions.bottom.beta: alpha and beta are both 0, so the condition constrains nothing"},
      {"time_derivative_without_time", "  time: {min: 0, max: 1}\n", "", "u_t"},
      {"model_width", "width: 16", "width: 0", "model.width must be positive, got 0"},
      // It was accepted and did nothing.
      {"fourier_scale_without_features", "width: 16", "width: 16, fourier_scale: 5",
       "model.fourier_scale: scales Fourier features; set model.fourier_features too"},
      // Sizes beyond any machine's memory, refused before allocating (they ended in std::bad_alloc).
      {"width_beyond_memory", "width: 16", "width: 100000000",
       "model.width: a width of 100000000 gives 2e+16 weights, which with their gradient and Adam's two moments "
       "need at least 568 PiB; this "},
      {"fourier_features_beyond_memory", "width: 16", "width: 16, fourier_features: 1000000000",
       "model.fourier_features: fourier_features = 1000000000 gives 3.5e+10 embedding weights, which with their "
       "gradient and Adam's two moments need at least "},
      {"points_beyond_memory", "points: 100}", "points: 1000000000000}",
       "conditions.pde.points: the conditions' 1e+12 points, with their coordinates and the network's activations "
       "at them, in a training step need at least 371 TiB; this "},
      {"grid_beyond_memory", "grid: [8, 8, 4]", "grid: [100000, 100000, 100000]",
       "output.grid: the output grid's 1e+15 points, with their coordinates, fields and the copies writing them makes, "
       "need at least 178 PiB; this "},
      {"model_activation", "depth: 2}", "depth: 2, activation: relu6}", "'relu6' is not one of"},
      {"adam_steps_type", "steps: 10", "steps: ten", "training.adam.steps: expected an integer, got 'ten'"},
      {"learning_rate", "learning_rate: 1.0e-3", "learning_rate: -1", "training.adam.learning_rate: must be positive"},
      {"optimizer_name", kTraining, "optimizer: shampoo\n  " + kTraining, "'shampoo' is not one of: adam, soap"},
      {"soap_section_with_adam", kTraining, "soap: {steps: 10}\n  " + kTraining,
       "training.soap: is read only with training.optimizer: soap; this run's optimizer is adam"},
      {"adam_section_with_soap", kTraining, "optimizer: soap\n  " + kTraining,
       "training.adam: is read only with training.optimizer: adam; this run's optimizer is soap, whose settings go in "
       "training.soap"},
      {"zero_stage_with_soap", kTraining, "optimizer: soap\n  zero_stage: 1\n  soap: {steps: 10",
       "training.zero_stage: 1 shards the state of optimisers that update each element on its own (adam); soap"},
      {"zero_stage_value", kTraining, "zero_stage: 3\n  " + kTraining, "training.zero_stage: must be 0"},
      {"soap_learning_rate", "adam: {steps: 10, learning_rate: 1.0e-3", "optimizer: soap\n  soap: {steps: 10, learning_rate: 0",
       "training.soap.learning_rate: must be positive"},
      {"soap_betas_count", kTraining, soap_with("betas: [0.9]"), "training.soap.betas: needs two numbers, [beta1, beta2]; got 1"},
      {"soap_betas_range", kTraining, soap_with("betas: [0.9, 1]"), "training.soap.betas: each must lie in [0, 1), got 1"},
      {"soap_shampoo_beta", kTraining, soap_with("shampoo_beta: -0.5"), "training.soap.shampoo_beta: must lie in [0, 1), got -0.5"},
      {"soap_precondition_frequency", kTraining, soap_with("precondition_frequency: 0"),
       "training.soap.precondition_frequency: must be at least 1, got 0"},
      {"soap_eps", kTraining, soap_with("eps: 0"), "training.soap.eps: must be positive, got 0"},
      {"soap_weight_decay", kTraining, soap_with("weight_decay: -1"), "training.soap.weight_decay: must be non-negative, got -1"},
      {"soap_unknown_key", kTraining, soap_with("precondition_frequncy: 5"),
       "unknown key 'precondition_frequncy' in training.soap (did you mean 'precondition_frequency'?)"},
      {"schedule_type", "type: cosine", "type: cosin", "'cosin' is not one of: constant, exponential, step, cosine"},
      {"output_grid", "grid: [8, 8, 4]", "grid: [8, 8]", "output.grid: needs one size per coordinate (3)"},
      {"output_grid_zero", "grid: [8, 8, 4]", "grid: [0, 8, 4]",
       "output.grid: sizes must be whole numbers of at least 1, got 0"},
      {"output_grid_fraction", "grid: [8, 8, 4]", "grid: [8, 8.5, 4]",
       "output.grid[1]: expected an integer, got '8.5'"},
      {"checkpoint_every", "grid: [8, 8, 4]", "grid: [8, 8, 4], checkpoint_every: -1",
       "output.checkpoint_every: must be non-negative (0: only at the end), got -1"},
      {"lbfgs_iterations", kTraining, "lbfgs: {iterations: -5}\n  " + kTraining,
       "training.lbfgs.iterations: must be non-negative (0: no L-BFGS), got -5"},
      {"lbfgs_evaluations", kTraining, "lbfgs: {iterations: 5, evaluations: 0}\n  " + kTraining,
       "training.lbfgs.evaluations: must be at least 2 (the start and one trial), got 0"},
      // L-BFGS refused it with no key named.
      {"lbfgs_one_evaluation", kTraining, "lbfgs: {iterations: 5, evaluations: 1}\n  " + kTraining,
       "training.lbfgs.evaluations: must be at least 2"},
      {"log_every", kTraining, "log_every: -1\n  " + kTraining,
       "training.log_every: must be non-negative (0: no progress lines), got -1"},
      {"validation_points", "", "validation: {points: 0}\n", "validation.points: must be at least 1, got 0"},
      {"validation_every", "", "validation: {every: -2}\n",
       "validation.every: must be non-negative (0: only at the end), got -2"},
      // Both were named without the file's line and column, and the first with no near match.
      {"sampler_name", "", "sampling: {method: sobel}\n",
       "problem.yaml:24:20: sampling.method: 'sobel' is not one of: uniform, latin_hypercube, sobol, halton, lhs (did "
       "you mean 'sobol'?)"},
      // It was accepted as "never".
      {"resample_every_negative", "", "sampling: {resample_every: -3}\n",
       "sampling.resample_every: must be 0 (draw the points once) or more, got -3"},
      {"missing_conditions", "conditions:", "conditionz:", "missing required key 'conditions'"},
      {"weighting_scheme", kTraining, "loss_weighting: {scheme: softadapt}\n" + kTraining,
       "'softadapt' is not one of: fixed, grad_norm, ntk"},
      {"ntk_points_zero", kTraining, "loss_weighting: {scheme: ntk, ntk_points: 0}\n" + kTraining,
       "training.loss_weighting.ntk_points: must be at least 1, got 0"},
      {"ntk_points_negative", kTraining, "loss_weighting: {scheme: ntk, ntk_points: -8}\n" + kTraining,
       "training.loss_weighting.ntk_points: must be at least 1, got -8"},
      {"ntk_points_fraction", kTraining, "loss_weighting: {scheme: ntk, ntk_points: 2.5}\n" + kTraining,
       "training.loss_weighting.ntk_points: expected an integer"},
      // Both were "unknown key ...; valid keys: ...", of a documented key.
      {"ntk_points_of_ntk_only", kTraining, "loss_weighting: {scheme: grad_norm, ntk_points: 64}\n" + kTraining,
       "training.loss_weighting.ntk_points: is read only with training.loss_weighting.scheme: ntk; this run's scheme "
       "is grad_norm"},
      {"every_without_scheme", kTraining, "loss_weighting: {every: 10}\n" + kTraining,
       "training.loss_weighting.every: is read only with training.loss_weighting.scheme: grad_norm or ntk; this run's "
       "scheme is fixed (the default)"},
      {"weighting_alpha_one", kTraining, "loss_weighting: {scheme: grad_norm, alpha: 1}\n" + kTraining,
       "training.loss_weighting.alpha: must be in [0, 1), got 1"},
      {"weighting_alpha_negative", kTraining, "loss_weighting: {scheme: grad_norm, alpha: -0.1}\n" + kTraining,
       "training.loss_weighting.alpha: must be in [0, 1), got -0.1"},
      {"weighting_every", kTraining, "loss_weighting: {scheme: grad_norm, every: 0}\n" + kTraining,
       "training.loss_weighting.every: must be at least 1, got 0"},
      {"causal_chunks", kTraining, "causal: {chunks: 0}\n" + kTraining,
       "training.causal.chunks: must be at least 1, got 0"},
      {"causal_chunks_above_points", kTraining, "causal: {chunks: 101}\n" + kTraining,
       "training.causal.chunks: 101 chunks, but conditions.pde has only 100 points"},
      {"causal_epsilon", kTraining, "causal: {epsilon: -1}\n" + kTraining,
       "training.causal.epsilon: must be non-negative, got -1"},
      {"causal_unknown_key", kTraining, "causal: {chunk: 4}\n" + kTraining,
       "unknown key 'chunk' in training.causal (did you mean 'chunks'?)"},
      {"rar_add_above_candidates", "", "sampling: {rar: {candidates: 50, add: 60}}\n",
       "sampling.rar.add: must not exceed candidates (50), got 60"},
      {"rar_every", "", "sampling: {rar: {every: 0}}\n", "sampling.rar.every: must be at least 1, got 0"},
      {"rar_candidates", "", "sampling: {rar: {candidates: -3}}\n",
       "sampling.rar.candidates: must be at least 1, got -3"},
      {"rar_add", "", "sampling: {rar: {add: 0}}\n", "sampling.rar.add: must be at least 1, got 0"},
      {"rad_every", "", "sampling: {rad: {every: 0}}\n", "sampling.rad.every: must be at least 1, got 0"},
      {"rad_candidates_below_points", "", "sampling: {rad: {candidates: 99}}\n",
       "sampling.rad.candidates: must be at least conditions.pde.points (100), got 99"},
      {"rad_k", "", "sampling: {rad: {k: -1}}\n", "sampling.rad.k: must be a non-negative number, got -1"},
      {"rad_c", "", "sampling: {rad: {c: -0.5}}\n", "sampling.rad.c: must be a non-negative number, got -0.5"},
      {"rad_c_type", "", "sampling: {rad: {c: much}}\n", "sampling.rad.c: expected a number, got 'much'"},
      {"rad_unknown_key", "", "sampling: {rad: {candidate: 500}}\n",
       "unknown key 'candidate' in sampling.rad (did you mean 'candidates'?)"},
      {"rad_with_rar", "", "sampling: {rar: {}, rad: {}}\n",
       "sampling.rad: cannot be combined with sampling.rar"},
      {"marching_windows", kTraining, "time_marching: {windows: 0}\n  " + kTraining,
       "training.time_marching.windows: must be at least 1, got 0"},
      // eddy check drew every window's boundary points first: 71 s at a million windows.
      {"marching_windows_beyond_memory", kTraining, "time_marching: {windows: 1000000000000}\n  " + kTraining,
       "training.time_marching.windows: 1000000000000 windows, each keeping its trained network of 512 weights, need "
       "at least "},
      {"marching_unknown_key", kTraining, "time_marching: {window: 2}\n  " + kTraining,
       "unknown key 'window' in training.time_marching (did you mean 'windows'?)"},
      {"continuation_unknown_parameter", kTraining, "continuation: {parameter: nu, values: [1, 0.1]}\n  " + kTraining,
       "training.continuation.parameter: 'nu' is not a parameter of the problem (parameters: kappa)"},
      {"continuation_learnable_parameter", kTraining,
       "continuation: {parameter: source, values: [1, 0.5]}\n  " + kTraining,
       "training.continuation.parameter: 'source' is a learnable parameter; continuation steps a constant one"},
      {"continuation_no_values", kTraining, "continuation: {parameter: kappa, values: []}\n  " + kTraining,
       "training.continuation.values: needs at least one value"},
      {"continuation_value_type", kTraining, "continuation: {parameter: kappa, values: [1, fast, 0.1]}\n  " + kTraining,
       "expected a number, got 'fast'"},
      {"continuation_values_scalar", kTraining, "continuation: {parameter: kappa, values: 0.1}\n  " + kTraining,
       "training.continuation.values: must be a list of numbers, one per stage"},
      {"continuation_last_value", kTraining, "continuation: {parameter: kappa, values: [1, 0.5]}\n  " + kTraining,
       "training.continuation.values: the last value (0.5) must be kappa's value under parameters (0.1)"},
      {"continuation_with_marching", kTraining,
       "time_marching: {windows: 2}\n  continuation: {parameter: kappa, values: [1, 0.1]}\n  " + kTraining,
       "training.continuation: cannot be combined with training.time_marching"},
      {"fit_initial_under_a_transform", "model: {width: 16, depth: 2}",
       "model: {width: 16, depth: 2, fit_initial_condition: true, output_transform: {u: sin(pi*x)*sin(pi*y) + t*net_u}}",
       "model.fit_initial_condition: fits the network's output net_u to the initial values of u, but "
       "model.output_transform.u makes u an expression of it"},
      {"parallel_tensor_axis", "", "parallel: {mesh: [2], names: [mp]}\n",
       "parallel.names: a PINN splits its collocation points over the ranks (dp) and nothing else"},
      {"parallel_two_axes", "", "parallel: {mesh: [2, 2], names: [dp, mp]}\n",
       "parallel.names: a PINN splits its collocation points over the ranks (dp) and nothing else"},
      {"parallel_axis_count", "", "parallel: {mesh: [2, 2], names: [dp]}\n",
       "parallel.names: needs one name per mesh axis; the mesh has 2 axes"},
      {"derivative_mode", kTraining, "derivatives: forward\n  " + kTraining,
       "problem.yaml:22:16: training.derivatives: 'forward' is not one of: taylor, reverse"},
      {"derivative_mode_key", kTraining, "derivative: reverse\n  " + kTraining,
       "unknown key 'derivative' in training (did you mean 'derivatives'?)"},
      // Found when the first condition drew its points, with no position.
      {"empty_difference", "space: {type: rectangle, min: [0, 0], max: [1, 1]}",
       "space: {type: difference, a: {type: disk, center: [0, 0], radius: 1}, "
       "b: {type: disk, center: [0, 0], radius: 2}}",
       "problem.yaml:4:10: geometry.space: difference.sample_interior: accepted only 0 of"},
      // Names are expression names and HDF5 names: these trained, then failed writing the results.
      {"field_named_inside", "fields: [u]", "fields: [u, inside]",
       "fields[1]: 'inside' cannot be a field name: solution.h5 stores fields/inside beside the fields"},
      {"field_named_condition", "fields: [u]", "fields: [u, condition]",
       "fields[1]: 'condition' cannot be a field name: points.vtp tags each point"},
      {"field_not_a_name", "fields: [u]", "fields: [u, \"a/b\"]",
       "fields[1]: 'a/b' cannot be a field name: use letters, digits and _"},
      // At its own line: it was placed at the first condition's.
      {"condition_not_a_name", "  start: {type: initial", "  \"st/art\": {type: initial",
       "problem.yaml:16:13: conditions.st/art: 'st/art' cannot be a condition name: use letters, digits, _ and -"},
      // A required key misspelt: the near miss among the keys given.
      {"required_key_misspelt", "min: [0, 0], max: [1, 1]", "min: [0, 0], maxx: [1, 1]",
       "geometry.space: missing required key 'max' (is 'maxx' a misspelling of it?)"},
  };
}

void PrintTo(const BadConfig& bad, std::ostream* out) { *out << bad.name; }

class BadProblemTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadProblemTest, FailsWithAClearMessage) {
  const BadConfig& bad = GetParam();
  std::string text = kValid;
  if (bad.from.empty()) {
    text += bad.to;
  } else {
    const size_t at = text.find(bad.from);
    ASSERT_NE(at, std::string::npos) << "test setup: '" << bad.from << "' not in the valid config";
    text.replace(at, bad.from.size(), bad.to);
  }
  try {
    read(text);
    FAIL() << "expected an error containing: " << bad.message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad.message), std::string::npos) << e.what();
  }
}

// Windows keep their networks but not the parameters they were trained with: through an output
// transform every window was evaluated with the parameter's last value, silently.
TEST(Problem, TimeMarchingRefusesALearnableParameterInTheOutputTransform) {
  expect_error([] { read(kValid, {"model.output_transform={u: source*net_u}", "training.time_marching={windows: 2}"}); },
               {"training.time_marching: cannot train the learnable parameter 'source', which "
                "model.output_transform.u reads"});
  EXPECT_NO_THROW(read(kValid, {"model.output_transform={u: kappa*net_u}", "training.time_marching={windows: 2}"}));
}

// It failed when the condition drew its points, naming a face (min_0) the file never wrote.
TEST(Problem, APeriodicConditionNeedsABoxLikeShape) {
  std::string text = kValid;
  const auto replace = [&](const std::string& from, const std::string& to) { text.replace(text.find(from), from.size(), to); };
  replace("space: {type: rectangle, min: [0, 0], max: [1, 1]}", "space: {type: disk, center: [0, 0], radius: 1}");
  replace("walls: {type: dirichlet, faces: [left, right], field: u, points: 40}", "walls: {type: periodic, axis: x}");
  expect_error([&] { read(text); }, {"problem.yaml:17:10: conditions.walls: a periodic condition pairs the faces min_0 "
                                     "and max_0 of an interval, rectangle, box or hypercube; geometry.space has the "
                                     "faces boundary"});
}

// solution.h5 records learnable and continued parameters under history/<name>: one named like a
// dataset of the history trained its whole run and then wrote no results at all.
TEST(Problem, ParametersNamedLikeTheHistorysDatasetsAreRefused) {
  auto renamed = [](std::string text, const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
    return text;
  };
  expect_error([&] { read(renamed(kValid, "source", "loss_pde")); },
               {"problem.yaml:9:13: parameters.loss_pde: 'loss_pde' cannot name a learnable parameter: solution.h5 "
                "records its values as history/loss_pde, a name the run's history already uses"});
  expect_error([&] { read(renamed(kValid, "source", "step")); }, {"'step' cannot name a learnable parameter"});
  expect_error([&] { read(renamed(kValid, "kappa", "weight_top"),
                          {"training.continuation={parameter: weight_top, values: [1, 0.1]}"}); },
               {"training.continuation.parameter: 'weight_top' cannot name a continued parameter"});
  EXPECT_EQ(read(renamed(kValid, "source", "loss_total")).learnable.at(0).name, "loss_total");
  // history/stage is written only by runs in stages.
  EXPECT_EQ(read(renamed(kValid, "source", "stage")).learnable.at(0).name, "stage");
  expect_error([&] { read(renamed(kValid, "source", "stage"), {"training.time_marching={windows: 2}"}); },
               {"'stage' cannot name a learnable parameter"});
}

TEST(Problem, FitInitialConditionNeedsInitialValuesToFit) {
  const std::vector<std::string> fit = {"model.fit_initial_condition=true"};
  EXPECT_TRUE(read(kValid, fit).fit_initial_condition);
  const std::string value_form = "start: {type: initial, field: u, value: sin(pi*x)*sin(pi*y), points: 50}";
  std::string text = kValid;
  text.replace(text.find(value_form), value_form.size(),
               "start: {type: initial, equation: u - sin(pi*x)*sin(pi*y), points: 50}");
  expect_error([&] { read(text, fit); },
               {"problem.yaml:16:36: conditions.start.equation: model.fit_initial_condition fits the initial values of "
                                    "a field (`field` and `value`); this initial condition is an equation"});
  // The fit runs before training: a field in the value was refused only when eddy solve got there,
  // after eddy check had called the file valid.
  text = kValid;
  text.replace(text.find(value_form), value_form.size(), "start: {type: initial, field: u, value: 2*u, points: 50}");
  expect_error([&] { read(text, fit); },
               {"problem.yaml:16:43: conditions.start.value: model.fit_initial_condition fits the network to this "
                "value before training, so it may only use coordinates and parameters, not fields"});
  text = kValid;
  text.erase(text.find("  " + value_form), value_form.size() + 3);
  expect_error([&] { read(text, fit); }, {"model.fit_initial_condition: needs an initial condition (type: initial, "
                                          "with `field` and `value`) to fit"});
}

// An NPY file with no rows is refused where the config names it, as a CSV file with none is (it was
// read as observations that gave a loss of 0).
TEST(Problem, ADescriptionTooLongForTheResultsIsRefused) {
  // solution.h5 keeps it as an HDF5 attribute: the write failed after training.
  expect_error([&] { read(kValid, {"description=" + std::string(70000, 'x')}); },
               {"description: is 70000 bytes", "at most 65000"});
  EXPECT_EQ(read(kValid, {"description=" + std::string(65000, 'x')}).description.size(), 65000u);
}

TEST(Problem, DataFileWithNoRowsIsRefused) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / cat("eddy_problem_", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string npy = (dir / "empty.npy").string(), csv = (dir / "empty.csv").string();
  const std::string h5 = (dir / "empty.h5").string();
  write_npy(npy, "<f8", "(0, 4)");
  std::ofstream(csv) << "x,y,t,u\n";
  io::Hdf5Writer datasets(h5);
  datasets.write("points", zeros({0, 3}, DType::f64));
  datasets.write("u", zeros({0}, DType::f64));
  datasets.commit();
  for (const auto& [file, column] : {std::pair{npy, "3"}, std::pair{csv, "u"}, std::pair{h5, "u"}}) {
    std::string text = kValid;
    text.insert(text.find("model:"), cat("  seen: {type: data, file: ", file, ", fields: {u: ", column, "}}\n"));
    expect_error([&] { read(text); }, {"conditions.seen.file: " + file + ": no rows of values"});
  }
  std::filesystem::remove_all(dir);
}

// A grid reference is read when the problem is: a field stored [t, x] under `layout: [x, t]`
// (which reshaped it transposed, and reported a validation error of 0.67 for a good solution), a
// layout coordinate without its dataset, a missing file and a file beside expressions are refused
// at their keys.
TEST(Problem, GridReferenceIsCheckedAgainstItsLayout) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / cat("eddy_reference_", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string h5 = (dir / "reference.h5").string();
  io::Hdf5Writer datasets(h5);
  datasets.write("x", linspace(0, 1, 5, DType::f64));
  datasets.write("t", linspace(0, 1, 3, DType::f64));
  datasets.write("u", reshape(arange(0, 15, 1, DType::f64), {3, 5}));  // [t, x]
  datasets.write("u_flat", arange(0, 15, 1, DType::f64));
  datasets.commit();
  const std::string line = "geometry: {space: {type: interval, min: 0, max: 1}, time: {min: 0, max: 1}}\n"
                           "fields: [u]\nconditions:\n  pde: {type: interior, equation: u_t - u_xx, points: 10}\n"
                           "validation:\n  reference: {file: " + h5;
  auto reference = [&](const std::string& rest) { return read(line + rest + "}\n").validation.reference; };
  const auto fits = reference(", coordinates: {x: x, t: t}, layout: [t, x], fields: {u: u}");
  ASSERT_TRUE(fits.has_value());
  EXPECT_EQ(fits->axes.size(), 2u);
  EXPECT_EQ(fits->axes[0].numel(), 3);
  EXPECT_EQ(fits->values.at("u").shape(), (Shape{15}));
  EXPECT_EQ(reference(", coordinates: {x: x, t: t}, layout: [x, t], fields: {u: u_flat}")->values.at("u").numel(), 15);
  expect_error([&] { reference(", coordinates: {x: x, t: t}, layout: [x, t], fields: {u: u}"); },
               {"validation.reference.fields.u: " + h5 + ": values of shape [3, 5] for a grid of shape [5, 3]",
                "x: 5, t: 3"});
  expect_error([&] { reference(", coordinates: {x: t, t: x}, layout: [t, x], fields: {u: u}"); },
               {"values of shape [3, 5] for a grid of shape [5, 3]"});
  expect_error([&] { reference(", coordinates: {x: x}, layout: [t, x], fields: {u: u}"); },
               {"validation.reference.coordinates: needs the dataset of coordinate 't'"});
  expect_error([&] { reference(", coordinates: {x: x, t: t, y: x}, layout: [t, x], fields: {u: u}"); },
               {"validation.reference.coordinates.y: 'y' is not a coordinate (x, t)"});
  expect_error([&] { reference(", coordinates: {x: x, t: t}, layout: [t, x], fields: {u: w}"); },
               {"validation.reference.fields.u: " + h5 + ": no dataset 'w'"});
  // Both kinds of reference at once named only the second as an unknown key.
  expect_error([&] { reference(", coordinates: {x: x, t: t}, layout: [t, x], fields: {u: u}, expressions: {u: x}"); },
               {"validation.reference.file: give `expressions` (the exact solution) or `file` (tabulated values), "
                "not both"});
  // The run trained every step and failed at its end, in validation.
  expect_error([&] { reference(", coordinates: {x: x, t: t}, layout: [t, x], fields: {}"); },
               {"validation.reference.fields: names no field; give the dataset of each field to score"});
  std::filesystem::remove_all(dir);
  expect_error([&] { reference(", coordinates: {x: x, t: t}, layout: [t, x], fields: {u: u}"); },
               {"validation.reference.file: no such file: " + h5});
}

// Without `points` and the grid's keys, a reference's points are read as a data condition's by
// default: a CSV reference was taken for a grid and refused for a missing `coordinates`.
TEST(Problem, AScatteredReferenceTakesTheDataConditionsDefaultPoints) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / cat("eddy_reference_csv_", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string csv = (dir / "reference.csv").string(), h5 = (dir / "reference.h5").string();
  std::ofstream(csv) << "t,x,u\n0,0.25,1\n0.5,0.5,2\n1,0.75,3\n";
  {
    io::Hdf5Writer datasets(h5);
    datasets.write("points", tensor(std::vector<double>{0.25, 0, 0.5, 0.5, 0.75, 1, 1, 1}, {4, 2}));
    datasets.write("u", tensor(std::vector<double>{1, 2, 3, 4}));
    datasets.commit();
  }
  const std::string line = "geometry: {space: {type: interval, min: 0, max: 1}, time: {min: 0, max: 1}}\n"
                           "fields: [u]\nconditions:\n  pde: {type: interior, equation: u_t - u_xx, points: 10}\n"
                           "validation:\n  reference: {file: ";
  auto reference = [&](const std::string& file) { return read(line + file + ", fields: {u: u}}\n").validation.reference; };
  // The CSV's columns by name, in coordinate order (x, t) whatever the file's.
  const auto from_csv = reference(csv);
  ASSERT_TRUE(from_csv.has_value());
  EXPECT_EQ(from_csv->points.to_vector<double>(), (std::vector<double>{0.25, 0, 0.5, 0.5, 0.75, 1}));
  EXPECT_EQ(from_csv->values.at("u").to_vector<double>(), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(reference(h5)->points.shape(), (Shape{4, 2}));
  std::filesystem::remove_all(dir);
}

// A closed cavity: a pressure gauge pins p at one corner, where `on: x == 0 && y == 0` would select
// no sampled boundary point; points conditions take their points as listed.
const std::string kCavity = R"(geometry: {space: {type: rectangle, min: [0, 0], max: [1, 1]}}
fields: [u, v, p]
conditions:
  continuity: {type: interior, equation: u_x + v_y, points: 10}
)";

TEST(Problem, PointsConditionTakesItsPointsAsListed) {
  Problem p = read(kCavity + "  gauge: {type: points, at: [[0, 0]], field: p}\n"
                             "  probes: {type: points, at: [[0.5, 0.25], [1, 1]], equation: u_x - 1, weight: 2}\n");
  ASSERT_EQ(p.conditions.size(), 3u);
  const Condition& gauge = p.conditions[1];
  EXPECT_EQ(gauge.kind, ConditionKind::points);
  EXPECT_EQ(gauge.points, 1);
  EXPECT_EQ(gauge.fixed_points.shape(), (Shape{1, 2}));
  EXPECT_EQ(gauge.fixed_points.dtype(), DType::f32);
  EXPECT_EQ(gauge.residual->text(), "(p) - (0)");
  EXPECT_NE(p.resolved_config.find("value: 0"), std::string::npos);  // the default, resolved
  const Condition& probes = p.conditions[2];
  EXPECT_EQ(probes.points, 2);
  EXPECT_EQ(cast(probes.fixed_points, DType::f64).to_vector<double>(), (std::vector<double>{0.5, 0.25, 1, 1}));
  EXPECT_EQ(probes.weight, 2);
  // An equation supplied as a function (the Python API's equations=) serves a points condition.
  auto config = io::Config::parse(kCavity + "  probe: {type: points, at: [[0.5, 0.5]], equation: pressure_drop}\n",
                                  "problem.yaml");
  const EquationFunction pressure_drop = [](const Tensor& points, const Tensor& fields, const auto&) {
    return slice(fields, 1, 2, 3);
  };
  EXPECT_TRUE(read_problem(*config, {{"pressure_drop", pressure_drop}}).conditions[1].function);
  // One coordinate: a point may be a bare number.
  Problem line = read("geometry: {space: {type: interval, min: 0, max: 1}}\nfields: [u]\nconditions:\n"
                      "  ends: {type: points, at: [0, 1], field: u, value: 2}\n");
  EXPECT_EQ(line.conditions[0].fixed_points.shape(), (Shape{2, 1}));
}

// Sizes beyond memory are refused at their key, the default output grid's too (a 6-D problem was
// killed writing its 32^6 points after training; 1e12 refinement candidates threw bad_alloc).
TEST(Problem, SizesBeyondMemoryAreRefusedAtTheirKey) {
  expect_error([&] { read(kValid, {"sampling={rar: {candidates: 1e12}}"}); },
               {"sampling.rar.candidates", "1000000000000 candidate points", "need at least"});
  expect_error([&] { read(kValid, {"validation.points=1e12"}); }, {"validation.points", "need at least"});
  const std::vector<std::string> eight_dimensions{
      "geometry.space={type: hypercube, min: [0, 0, 0, 0, 0, 0, 0, 0], max: [1, 1, 1, 1, 1, 1, 1, 1]}",
      "geometry.coordinates=[x, y, a, b, c, d, e, f]", "output={dir: /tmp/eddy-test-run}",
      "conditions={pde: {type: interior, equation: heat, points: 10}}"};
  expect_error([&] { read(kValid, eight_dimensions); },
               {"geometry:", "output grid's", "(by default; give output.grid)", "need at least"});
  // Not a trained run's config (eval, export): a run trained on a larger machine loads on a smaller.
  auto trained = io::Config::parse(kValid, "test.yaml", {"output.grid=[1e5, 1e5, 1e5]"});
  EXPECT_NO_THROW(read_problem(*trained, {}, UnknownEquationNames::supplied_when_trained));
}

// An eps float32 rounds to 0 gave 0 / 0 for a weight with a zero gradient (a dead relu unit).
TEST(Problem, AnEpsTheDtypeRoundsToZeroIsRefused) {
  expect_error([&] { read(kValid, {"dtype=float32", "training.adam.eps=1e-46"}); },
               {"training.adam.eps: 1e-46 is 0 in float32 (dtype)", "dtype: float64"});
  EXPECT_EQ(read(kValid, {"training.adam.eps=1e-46"}).training.adam_eps, 1e-46);  // float64
}

// In float32 a domain far from 0 for its width holds a few coordinates only (on [1e6, 1e6 + 1] the
// points and the grid took 17 values, the error measured at them): refused at the key.
TEST(Problem, ACoordinateFloat32CannotResolveIsRefused) {
  expect_error([&] { read(kValid, {"dtype=float32", "geometry.time={min: 1.0e6, max: 1000001}"}); },
               {"geometry.time: coordinate t spans [1e+06, 1000001], which float32 (dtype) holds as 17 distinct "
                "values 0.0625 apart", "Shift the coordinate towards 0", "dtype: float64"});
  EXPECT_NO_THROW(read(kValid, {"dtype=float32", "geometry.time={min: 1000, max: 1001}"}));
  EXPECT_NO_THROW(read(kValid, {"geometry.time={min: 1.0e8, max: 100000001}"}));  // float64
  expect_error([&] { read(kValid, {"dtype=float32", "geometry.time={min: 0, max: 1.0e39}"}); },
               {"geometry.time: coordinate t reaches 1e+39, beyond float32's range"});
  // A trained run's config still loads (eval, export of a run trained before the check).
  auto trained = io::Config::parse(kValid, "test.yaml", {"dtype=float32", "geometry.time={min: 1.0e6, max: 1000001}"});
  EXPECT_NO_THROW(read_problem(*trained, {}, UnknownEquationNames::supplied_when_trained));
  // Integer keys read as integers: a leading zero is refused as elsewhere, a negative seed too.
  expect_error([&] { read(kValid, {"output.grid=010"}); }, {"output.grid", "leading 0"});
  expect_error([&] { read(kValid, {"seed=-1"}); }, {"seed", "must be non-negative"});
}

// A default derived from another key follows it when a run's config.yaml is read again with that
// key overridden: the resolved config held lbfgs.evaluations, 13 for 10 iterations, and a rerun
// with 200 iterations stopped at 13 evaluations.
TEST(Problem, ADerivedDefaultFollowsItsKeyWhenARunsConfigIsReadAgain) {
  const Problem first = read(kValid, {"training.lbfgs.iterations=10"});
  EXPECT_EQ(first.training.lbfgs_evaluations, 13);
  EXPECT_EQ(first.resolved_config.find("evaluations"), std::string::npos) << first.resolved_config;
  EXPECT_EQ(read(first.resolved_config, {"training.lbfgs.iterations=200"}).training.lbfgs_evaluations, 251);
  // Checkpoints record it as they did when config.yaml held it.
  EXPECT_EQ(first.derived_settings.at("training.lbfgs.evaluations"), "13");
  EXPECT_EQ(read(kValid, {"training.lbfgs={iterations: 10, evaluations: 40}"}).training.lbfgs_evaluations, 40);
  // SOAP's shampoo_beta follows betas' second likewise.
  std::string soap = kValid;
  soap.replace(soap.find(kTraining), kTraining.size(), soap_with("betas: [0.9, 0.95]"));
  const Problem with_soap = read(soap);
  EXPECT_EQ(with_soap.training.soap.shampoo_beta, with_soap.training.soap.beta2);
  EXPECT_EQ(with_soap.resolved_config.find("shampoo_beta"), std::string::npos) << with_soap.resolved_config;
  EXPECT_EQ(read(with_soap.resolved_config, {"training.soap.betas=[0.9, 0.999]"}).training.soap.shampoo_beta, 0.999);
}

TEST(Problem, PointsConditionReadsItsPointsFromADataFile) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / cat("eddy_points_", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string csv = (dir / "gauges.csv").string();
  std::ofstream(csv) << "name_index,x,y\n0,0.1,0.2\n1,0.3,0.4\n2,0.5,0.6\n";
  Problem p =
      read("dtype: float64\n" + kCavity + "  gauges: {type: points, file: " + csv + ", field: p, value: x + y}\n");
  EXPECT_EQ(cast(p.conditions[1].fixed_points, DType::f64).to_vector<double>(),
            (std::vector<double>{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}));
  // A point outside the domain names its row of the file.
  std::ofstream(csv) << "x,y\n0.1,0.2\n0.3,1.5\n";
  expect_error([&] { read(kCavity + "  gauges: {type: points, file: " + csv + ", field: p}\n"); },
               {"problem.yaml:5:32: conditions.gauges.file: " + csv +
                ": row 2 of the points: the point x = 0.3, y = 1.5 is outside the domain"});
  // An empty cell reads as NaN: it passed the domain test and the loss was NaN at step 0.
  std::ofstream(csv) << "x,y\n0.1,0.2\n0.3,\n";
  expect_error([&] { read(kCavity + "  gauges: {type: points, file: " + csv + ", field: p}\n"); },
               {"conditions.gauges.file: " + csv + ": row 2 of the points: the point x = 0.3, y = nan is not finite"});
  // Columns named like the coordinates but listed in another order were read as each other.
  std::ofstream(csv) << "x,y\n0.1,0.2\n0.3,0.4\n";
  expect_error([&] { read(kCavity + "  gauges: {type: points, file: " + csv + ", points: 'y, x', field: p}\n"); },
               {"conditions.gauges.points: 'y, x' puts the column 'y' in the place of coordinate 'x'",
                "coordinate order: x,y"});
  EXPECT_NO_THROW(read(kCavity + "  gauges: {type: points, file: " + csv + ", points: 'x,y', field: p}\n"));
  std::filesystem::remove_all(dir);
}

// Observations were taken as they came: NaN values (an empty CSV cell) made the loss NaN at step 0,
// blamed on the learning rate, and points outside the domain were fitted there.
TEST(Problem, DataConditionsRefuseNonFiniteValuesAndPointsOutsideTheDomain) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / cat("eddy_data_rows_", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string csv = (dir / "observed.csv").string();
  const std::string condition = "  seen: {type: data, file: " + csv + ", fields: {p: p}}\n";
  std::ofstream(csv) << "x,y,p\n0.1,0.2,1\n0.3,0.4,\n";
  expect_error([&] { read(kCavity + condition); },
               {"conditions.seen.fields.p: " + csv + ": row 2 of p is nan (an empty CSV cell reads as NaN)"});
  std::ofstream(csv) << "x,y,p\n0.1,0.2,1\n1.5,0.4,2\n";
  expect_error([&] { read(kCavity + condition); },
               {"conditions.seen.file: " + csv + ": row 2 of the points: the point x = 1.5, y = 0.4 is outside the domain"});
  std::ofstream(csv) << "x,y,p\n0.1,0.2,1\n0.3,0.4,2\n";
  EXPECT_EQ(read(kCavity + condition).conditions[1].fixed_points.shape(), (Shape{2, 2}));
  std::filesystem::remove_all(dir);
}

TEST(Problem, PointsConditionErrorsNameTheKey) {
  expect_error([&] { read(kCavity + "  gauge: {type: points, at: [[0, 0], [2, 0.5]], field: p}\n"); },
               {"problem.yaml:5:38: conditions.gauge.at[1]: the point x = 2, y = 0.5 is outside the domain "
                "(the geometry)"});
  expect_error([&] { read(kCavity + "  gauge: {type: points, at: [[0, 0, 0]], field: p}\n"); },
               {"problem.yaml:5:30: conditions.gauge.at[0]: a point needs 2 coordinates (x, y), got 3"});
  expect_error([&] { read(kCavity + "  gauge: {type: points, field: p}\n"); },
               {"conditions.gauge: a points condition needs either `at`", "not neither"});
  expect_error([&] { read(kCavity + "  gauge: {type: points, at: [[0, 0]], file: g.csv, field: p}\n"); },
               {"conditions.gauge: a points condition needs either `at`", "not both"});
  expect_error([&] { read(kCavity + "  gauge: {type: points, at: [], field: p}\n"); },
               {"conditions.gauge.at: needs at least one point"});
  expect_error([&] { read(kCavity + "  gauge: {type: points, at: [[0, 0]], field: q}\n"); },
               {"conditions.gauge.field: 'q' is not a field"});
  expect_error([&] { read(kCavity + "  gauge: {type: points, at: [[0, 0]], field: p, value: n_x}\n"); },
               {"conditions.gauge.value"});  // no normal away from a boundary condition
  // Time is a coordinate like the others, and must lie in geometry.time.
  const std::string heat = "geometry: {space: {type: interval, min: 0, max: 1}, time: {min: 0, max: 1}}\n"
                           "fields: [u]\nconditions:\n";
  EXPECT_EQ(read(heat + "  probe: {type: points, at: [[0.5, 1]], field: u}\n").conditions[0].fixed_points.shape(),
            (Shape{1, 2}));
  expect_error([&] { read(heat + "  probe: {type: points, at: [[0.5, 2]], field: u}\n"); },
               {"conditions.probe.at[0]: the point x = 0.5, t = 2 is outside the domain (the geometry times "
                "geometry.time)"});
}

TEST(Problem, PeriodicEmbeddingAndPirateNet) {
  Problem p = read(kValid, {"model={architecture: pirate_net, fourier_features: 16, periodic: {x: 2, t: 0.5}}"});
  EXPECT_EQ(p.model.architecture, nn::PinnArchitecture::pirate_net);
  EXPECT_EQ(p.model.periodic_axes, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(p.model.periods, (std::vector<double>{2, 0.5}));
  expect_error([&] { read(kValid, {"model.periodic={z: 1}"}); },
               {"model.periodic.z: 'z' is not a coordinate (coordinates: x, y, t)"});
  expect_error([&] { read(kValid, {"model.periodic={y: -1}"}); },
               {"model.periodic.y: the period must be positive, got -1"});
  expect_error([&] { read(kValid, {"model.architecture=pirate_net"}); },
               {"model", "pirate_net needs model.fourier_features > 0"});
}

TEST(Problem, InitialConditionNeedsTime) {
  const std::string text = R"(geometry: {space: {type: interval, min: 0, max: 1}}
fields: [u]
conditions:
  start: {type: initial, field: u, value: 0}
)";
  try {
    read(text);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conditions.start.type: an initial condition needs geometry.time"),
              std::string::npos)
        << e.what();
  }
}

TEST(Problem, ReadsTheTrainingAids) {
  Problem p = read(kValid, {"training.loss_weighting={scheme: grad_norm, every: 50, alpha: 0.8}",
                            "training.causal={chunks: 10, epsilon: 2}",
                            "sampling.rar={every: 200, candidates: 500, add: 20}"});
  EXPECT_EQ(p.training.loss_weighting.scheme, LossWeighting::grad_norm);
  EXPECT_EQ(p.training.loss_weighting.every, 50);
  EXPECT_EQ(p.training.loss_weighting.alpha, 0.8);
  ASSERT_TRUE(p.training.causal);
  EXPECT_EQ(p.training.causal->chunks, 10);
  EXPECT_EQ(p.training.causal->epsilon, 2.0);
  ASSERT_TRUE(p.refinement);
  EXPECT_EQ(p.refinement->every, 200);
  EXPECT_EQ(p.refinement->candidates, 500);
  EXPECT_EQ(p.refinement->add, 20);
}

TEST(Problem, ReadsNtkWeightingAndRad) {
  Problem p = read(kValid, {"training.loss_weighting={scheme: ntk, every: 50, alpha: 0.8, ntk_points: 32}",
                            "sampling.rad={every: 200, candidates: 500, k: 2, c: 0.5}"});
  EXPECT_EQ(p.training.loss_weighting.scheme, LossWeighting::ntk);
  EXPECT_EQ(p.training.loss_weighting.every, 50);
  EXPECT_EQ(p.training.loss_weighting.alpha, 0.8);
  EXPECT_EQ(p.training.loss_weighting.ntk_points, 32);
  ASSERT_TRUE(p.rad);
  EXPECT_EQ(p.rad->every, 200);
  EXPECT_EQ(p.rad->candidates, 500);
  EXPECT_EQ(p.rad->k, 2.0);
  EXPECT_EQ(p.rad->c, 0.5);

  // Defaults, which the resolved config records.
  Problem on = read(kValid, {"training.loss_weighting.scheme=ntk", "sampling.rad={}"});
  EXPECT_EQ(on.training.loss_weighting.ntk_points, 256);
  EXPECT_EQ(on.rad->every, 1000);
  EXPECT_EQ(on.rad->candidates, 100000);
  EXPECT_EQ(on.rad->k, 1.0);
  EXPECT_EQ(on.rad->c, 1.0);
  EXPECT_NE(on.resolved_config.find("ntk_points: 256"), std::string::npos) << on.resolved_config;
  EXPECT_NE(on.resolved_config.find("candidates: 100000"), std::string::npos) << on.resolved_config;
  EXPECT_FALSE(read(kValid).rad);
}

TEST(Problem, TrainingAidDefaults) {
  Problem plain = read(kValid);
  EXPECT_EQ(plain.training.loss_weighting.scheme, LossWeighting::fixed);
  EXPECT_FALSE(plain.training.causal);
  EXPECT_FALSE(plain.refinement);
  EXPECT_NE(plain.resolved_config.find("scheme: fixed"), std::string::npos);
  // An empty map turns a feature on with its defaults, which the resolved config records.
  Problem on = read(kValid, {"training.loss_weighting.scheme=grad_norm", "training.causal={}", "sampling.rar={}"});
  EXPECT_EQ(on.training.loss_weighting.every, 100);
  EXPECT_EQ(on.training.loss_weighting.alpha, 0.9);
  EXPECT_EQ(on.training.causal->chunks, 16);
  EXPECT_EQ(on.training.causal->epsilon, 1.0);
  EXPECT_EQ(on.refinement->every, 1000);
  EXPECT_EQ(on.refinement->candidates, 10000);
  EXPECT_EQ(on.refinement->add, 100);
  EXPECT_NE(on.resolved_config.find("candidates: 10000"), std::string::npos);
}

TEST(Problem, DerivativesAreTaylorModeUnlessReverseIsChosen) {
  Problem plain = read(kValid);
  EXPECT_EQ(plain.training.derivatives, DerivativeMode::taylor);
  EXPECT_NE(plain.resolved_config.find("derivatives: taylor"), std::string::npos);
  EXPECT_EQ(read(kValid, {"training.derivatives=reverse"}).training.derivatives, DerivativeMode::reverse);
}

TEST(Problem, CausalWeightingNeedsTime) {
  const std::string text = R"(geometry: {space: {type: interval, min: 0, max: 1}}
fields: [u]
conditions:
  pde: {type: interior, equation: u_xx}
training:
  causal: {chunks: 4}
)";
  expect_error([&] { read(text); }, {"problem.yaml:6:11: training.causal: causal weighting needs geometry.time"});
}

TEST(Problem, CausalWeightingRefinementAndRadNeedAnInteriorCondition) {
  const std::string text = R"(geometry:
  space: {type: interval, min: 0, max: 1}
  time: {min: 0, max: 1}
fields: [u]
conditions:
  start: {type: initial, field: u, value: 0}
)";
  expect_error([&] { read(text + "training: {causal: {}}\n"); },
               {"training.causal: causal weighting applies to interior conditions"});
  expect_error([&] { read(text + "sampling: {rar: {}}\n"); }, {"sampling.rar: refinement adds interior points"});
  expect_error([&] { read(text + "sampling: {rad: {}}\n"); },
               {"sampling.rad: RAD redistributes interior points, and there are no interior conditions"});
}

INSTANTIATE_TEST_SUITE_P(Configs, BadProblemTest, ::testing::ValuesIn(bad_configs()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace eddy::pinn
