#include "solvers/pinn/problem.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <filesystem>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "eddy/core/error.h"
#include "eddy/core/suggest.h"
#include "eddy/io/array_file.h"
#include "eddy/ops/ops.h"
#include "solvers/common/training_config.h"
#include "solvers/pinn/solver.h"
#include "solvers/pinn/stages.h"

namespace eddy::pinn {
namespace {

using io::ConfigNode;

// Letters, digits and _ (ASCII), not starting with a digit: what expressions read as a name.
bool is_name(const std::string& text) {
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

template <size_t N>
std::array<double, N> fixed(const ConfigNode& node) {
  std::vector<double> values = node.as_numbers();
  if (values.size() != N) node.fail(cat("expected ", N, " numbers, got ", values.size()));
  std::array<double, N> out{};
  std::copy(values.begin(), values.end(), out.begin());
  return out;
}

GeometryPtr build_geometry(const ConfigNode& node);

// The shape builders' errors start with the key ("geometry.space.min: ..."); the file position is
// put before them. The config's own errors, and a nested shape's, have theirs already.
GeometryPtr read_geometry(const ConfigNode& node) {
  try {
    return build_geometry(node);
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.rfind(node.path(), 0) != 0) throw;
    throw Error(cat(node.position(), ": ", message));
  }
}

GeometryPtr build_geometry(const ConfigNode& node) {
  const std::string path = node.path();
  const std::string type = node.choice(
      "type", {"interval", "rectangle", "box", "hypercube", "disk", "sphere", "polygon", "union", "intersection",
               "difference"},
      "interval");
  if (type == "interval") return make_interval(node.number("min"), node.number("max"), path);
  if (type == "rectangle") return make_rectangle(fixed<2>(node.at("min")), fixed<2>(node.at("max")), path);
  if (type == "box") return make_box(fixed<3>(node.at("min")), fixed<3>(node.at("max")), path);
  if (type == "hypercube") return make_hypercube(node.at("min").as_numbers(), node.at("max").as_numbers(), path);
  if (type == "disk") return make_disk(fixed<2>(node.at("center")), node.number("radius"), path);
  if (type == "sphere") return make_sphere(fixed<3>(node.at("center")), node.number("radius"), path);
  if (type == "polygon") {
    std::vector<std::array<double, 2>> vertices;
    for (const ConfigNode& vertex : node.at("vertices").elements()) vertices.push_back(fixed<2>(vertex));
    return make_polygon(vertices, path);
  }
  GeometryPtr a = read_geometry(node.at("a")), b = read_geometry(node.at("b"));
  if (a->dim() != b->dim()) node.fail(cat("a is ", a->dim(), "-D but b is ", b->dim(), "-D"));
  if (type == "union") return make_union(a, b, path);
  if (type == "intersection") return make_intersection(a, b, path);
  return make_difference(a, b, path);
}

// Sizes that cannot fit in memory are refused at their key before anything is built, sampled or
// trained: they used to end in a bare std::bad_alloc, the output grid's only after training. Each
// estimate is a lower bound of what the run allocates, so a refusal is never wrong; what passes
// can still need several times as much (a step keeps derivatives and gradients too).

// The weights, their gradient and Adam's two moments: four copies of width^2 per hidden layer,
// and of the Fourier embedding's frequencies and first layer (2 features x width), which
// fourier_features = 1e8 allocated for 16 s before a message that named neither.
void refuse_model_beyond_memory(const Problem& p, const ConfigNode& model) {
  const double copies = 4 * static_cast<double>(dtype_size(p.dtype));
  if (model.has("width")) {
    const double weights = p.hidden_layer_weights();
    model.at("width").require_memory(cat("a width of ", p.model.width, " gives ", weights,
                                         " weights, which with their gradient and Adam's two moments"),
                                     copies * weights);
  }
  if (model.has("fourier_features")) {
    const auto features = static_cast<double>(p.model.fourier_features);
    const double weights =
        features * (static_cast<double>(p.coordinates.size()) + 2 * static_cast<double>(p.model.width));
    model.at("fourier_features").require_memory(cat("fourier_features = ", p.model.fourier_features, " gives ",
                                                    weights, " embedding weights, which with their gradient and "
                                                    "Adam's two moments"),
                                                copies * weights);
  }
}

// solution.h5 keeps each learnable and each continued parameter's values in history/<name>, beside
// the history's own datasets: a parameter named like one of those trained its whole run and then
// failed to write any results.
void refuse_history_name_clashes(const Problem& p, const ConfigNode& root) {
  std::set<std::string> taken{"step", "loss"};
  if (p.training.causal) taken.insert("min_causal_weight");
  if (p.training.time_marching || p.training.continuation) taken.insert("stage");
  for (const Condition& c : p.conditions) {
    taken.insert("loss_" + c.name);
    taken.insert("weight_" + c.name);
  }
  auto refuse = [&](const ConfigNode& node, const std::string& name, const std::string& role) {
    if (taken.count(name)) {
      node.fail(cat("'", name, "' cannot name a ", role, ": solution.h5 records its values as history/", name,
                    ", a name the run's history already uses"));
    }
  };
  for (const LearnableParameter& parameter : p.learnable) {
    refuse(root.at("parameters").at(parameter.name), parameter.name, "learnable parameter");
  }
  if (p.training.continuation) {
    refuse(root.at("training").at("continuation").at("parameter"), p.training.continuation->parameter,
           "continued parameter");
  }
}

// A training step holds every condition's points and the network's activations at them together;
// the solution file holds the output grid's coordinates and fields.
void refuse_points_beyond_memory(const Problem& p, const ConfigNode& root) {
  const auto bytes = static_cast<double>(dtype_size(p.dtype));
  const auto coordinates = static_cast<double>(p.coordinates.size());
  const double per_point = coordinates + static_cast<double>(p.model.width) * static_cast<double>(p.model.depth + 1);
  const ConfigNode conditions = root.at("conditions");
  double points = 0;
  const Condition* largest = nullptr;  // whose points key asks for the most
  for (const Condition& c : p.conditions) {
    points += static_cast<double>(c.points);
    if ((!largest || c.points > largest->points) && conditions.at(c.name).has("points")) largest = &c;
  }
  if (largest) {
    conditions.at(largest->name)
        .at("points")
        .require_memory(cat("the conditions' ", points, " points, with their coordinates and the network's activations "
                            "at them, in a training step"),
                        points * per_point * bytes);
  }
  // The default grid too (32 points per coordinate above 2-D): a 6-D problem that `eddy check`
  // passed was killed for memory after training, writing its 1e9 points. Writing the grid peaks at
  // about 4.6 times its coordinates, fields and inside mask (measured: 9.45 GB for 6.4e7 points
  // of a 6-D float32 problem): the points formed and joined, the predictions likewise, the mask's
  // temporaries and the rows copied for HDF5.
  constexpr double kGridWritePeak = 5;
  double grid_points = 1;
  for (int64_t n : p.output.grid) grid_points *= static_cast<double>(n);
  const auto grid = root.at("output").find("grid");
  (grid ? *grid : root.at("geometry"))
      .require_memory(cat("the output grid's ", grid_points, " points", grid ? "" : " (by default; give output.grid)",
                          ", with their coordinates, fields and the copies writing them makes,"),
                      kGridWritePeak * grid_points * (coordinates + static_cast<double>(p.fields.size()) + 1) * bytes);
}

// An expression's text. An unquoted [a, b] is a YAML list, not the expression's vector literal:
// refused with the quoting that makes it one (the error said only that a string was expected).
std::string expression_text(const ConfigNode& node) {
  if (node.is_sequence()) {
    node.fail("is a YAML list; a vector is an expression, written in quotes: \"[x*u, y*u]\"");
  }
  return node.as_string();
}

// Parses and checks an expression read from `node`.
Expression expression_at(const ConfigNode& node, const Symbols& symbols, ExpressionKind kind) {
  // Numbers are valid expressions too (value: 0). Errors start with the node's file:line:col and
  // key path, then show the text with a caret.
  std::string where = node.where();
  where.resize(where.size() - 2);  // without the trailing ": " the expression error adds itself
  const std::string text = expression_text(node);
  Expression expression = parse_expression(text, where);
  check(expression, symbols, kind);
  return expression;
}

// A residual built from a condition's parts; each part was checked on its own first, so errors
// point into the user's text, not into the composed one.
Expression composed(const std::string& text, const std::string& where, const Symbols& symbols) {
  Expression expression = parse_expression(text, where);
  check(expression, symbols, ExpressionKind::scalar);
  return expression;
}

// model.fit_initial_condition fits the network's raw outputs to initial values: it needs an
// initial condition given as a field's value, and a field that no output transform rewrites.
void check_initial_fit(const Problem& p, const ConfigNode& key, const ConfigNode& conditions) {
  bool any = false;
  for (const Condition& c : p.conditions) {
    if (c.kind != ConditionKind::initial) continue;
    const ConfigNode node = conditions.at(c.name);
    if (!c.value) {
      node.at("equation").fail("model.fit_initial_condition fits the initial values of a field (`field` and "
                               "`value`); this initial condition is an equation");
    }
    // The fit evaluates the value before training, where no field has a value yet. The value was
    // checked with the fields already; what fails without them is a use of one.
    Symbols without_fields = p.symbols(false);
    without_fields.fields.clear();
    try {
      check(*c.value, without_fields, ExpressionKind::scalar);
    } catch (const Error&) {
      node.at("value").fail(
          "model.fit_initial_condition fits the network to this value before training, so it may only use "
          "coordinates and parameters, not fields");
    }
    const std::string& field = p.fields[static_cast<size_t>(c.field)];
    const auto transform = p.output_transforms.find(field);
    if (transform != p.output_transforms.end() && transform->second.text() != "net_" + field) {
      key.fail(cat("fits the network's output net_", field, " to the initial values of ", field,
                   ", but model.output_transform.", field, " makes ", field,
                   " an expression of it (a hard constraint that already holds the initial condition): use one "
                   "or the other"));
    }
    any = true;
  }
  if (!any) key.fail("needs an initial condition (type: initial, with `field` and `value`) to fit");
}

// A repeat in a list of names was taken without a word (a periodic condition's fields, a
// boundary condition's faces).
void refuse_repeated_names(const ConfigNode& list) {
  std::map<std::string, std::string> first_at;
  for (const ConfigNode& item : list.elements()) {
    const auto [first, inserted] = first_at.try_emplace(item.as_string(), item.path());
    if (!inserted) item.fail(cat("'", item.as_string(), "' is listed twice (first at ", first->second, ")"));
  }
}

int64_t field_index(const Problem& problem, const ConfigNode& node) {
  const std::string name = node.as_string();
  auto it = std::find(problem.fields.begin(), problem.fields.end(), name);
  if (it == problem.fields.end()) {
    node.fail("'" + name + "' is not a field (fields: " + comma_separated(problem.fields) + ")");
  }
  return it - problem.fields.begin();
}

// The key selecting the observation points when `points` is not given: the dataset `points` of an
// HDF5 file, the columns named like the coordinates in a CSV file, the first columns of an NPY array.
std::string default_points_key(const Problem& problem, io::ArrayFormat format) {
  if (format == io::ArrayFormat::hdf5) return "points";
  if (format == io::ArrayFormat::npy) return cat("0:", problem.coordinates.size());
  std::string names;
  for (const std::string& c : problem.coordinates) names += (names.empty() ? "" : ",") + c;
  return names;
}

// The format of the file named at `node`, an unknown extension failing there.
io::ArrayFormat file_format(const ConfigNode& node) {
  try {
    return io::array_format(node.as_string());
  } catch (const Error& e) {
    node.fail(e.what());
  }
}

// An array from a data file (HDF5, CSV or NPY), cast to the problem's dtype; a read error fails at
// `where`.
Tensor read_file_array(const Problem& problem, const std::string& file, const std::string& key,
                       const ConfigNode& where) {
  Tensor values;
  try {
    values = io::read_array(file, key);
  } catch (const Error& e) {
    where.fail(e.what());
  }
  // A cast would keep the real parts alone.
  if (is_complex(values.dtype())) where.fail(cat(file, ": '", key, "' is complex (", values.dtype(), "); PINN data are real"));
  return cast(values, problem.dtype);
}

// A CSV points key that names the coordinates' own columns in another order ("t,x" where the
// coordinates are x, t) read each column as the other coordinate, silently: refused at `where`.
void require_coordinate_order(const Problem& problem, const std::string& key, const ConfigNode& where) {
  std::istringstream columns(key);
  std::string column;
  for (size_t position = 0; std::getline(columns, column, ','); ++position) {
    const size_t first = column.find_first_not_of(" \t"), last = column.find_last_not_of(" \t");
    column = first == std::string::npos ? std::string() : column.substr(first, last - first + 1);
    const auto named = std::find(problem.coordinates.begin(), problem.coordinates.end(), column);
    if (named == problem.coordinates.end() || position >= problem.coordinates.size() ||
        problem.coordinates[position] == column) {
      continue;
    }
    where.fail(cat("'", key, "' puts the column '", column, "' in the place of coordinate '",
                   problem.coordinates[position], "' (points are in coordinate order: ",
                   default_points_key(problem, io::ArrayFormat::csv), ")"));
  }
}

// The points [N, coordinates] that the data file `file` (the node's `file`, resolved) lists at the
// key `points` (default_points_key when not given), for data and points conditions.
Tensor points_from_file(const Problem& problem, const ConfigNode& node, const std::string& file) {
  const io::ArrayFormat format = file_format(node.at("file"));
  if (format == io::ArrayFormat::csv && node.has("points")) {
    require_coordinate_order(problem, node.string("points"), node.at("points"));
  }
  Tensor points =
      read_file_array(problem, file, node.string("points", default_points_key(problem, format)), node.at("file"));
  const int64_t coordinates = static_cast<int64_t>(problem.coordinates.size());
  if (coordinates == 1 && points.dim() == 1) points = reshape(points, {-1, 1});
  if (points.dim() != 2 || points.shape()[1] != coordinates) {
    (node.has("points") ? node.at("points") : node.at("file"))
        .fail(cat(file, ": points have shape ", points.shape(), ", expected [N, ", coordinates,
                  "] (columns in coordinate order)"));
  }
  // The CSV and NPY readers refuse an empty file themselves; an HDF5 dataset of 0 rows reaches here.
  if (points.shape()[0] == 0) {
    node.at("file").fail(cat(file, ": no rows of values (the points have shape ", points.shape(), ")"));
  }
  return points;
}

// Refuses a point that is not finite or lies outside the closed domain (within the tolerance),
// through `fail` (row, message), which names the inline point or the file's row: the network would
// be fitted or scored where the problem has no solution.
void require_in_domain(const Problem& problem, const Tensor& points,
                       const std::function<void(int64_t, const std::string&)>& fail) {
  const int64_t coordinates = static_cast<int64_t>(problem.coordinates.size());
  const std::vector<double> values = cast(points, DType::f64).to_vector<double>();
  for (int64_t r = 0; r < points.shape()[0]; ++r) {
    const double* point = values.data() + r * coordinates;
    if (problem.contains(point)) continue;
    const std::string text = problem.point_text(point);
    const bool finite = std::all_of(point, point + coordinates, [](double x) { return std::isfinite(x); });
    fail(r, finite ? cat("the point ", text, " is outside the domain (the geometry",
                         problem.time ? " times geometry.time" : "", ")")
                   : cat("the point ", text, " is not finite (an empty CSV cell reads as NaN)"));
  }
}

// Refuses an observed value that is not finite (an empty CSV cell reads as NaN), naming its row:
// the loss was NaN at the first step and the message blamed the learning rate.
void require_finite_values(const Tensor& values, const ConfigNode& where, const std::string& file,
                           const std::string& field) {
  const std::vector<double> numbers = cast(values, DType::f64).to_vector<double>();
  for (size_t r = 0; r < numbers.size(); ++r) {
    if (!std::isfinite(numbers[r])) {
      where.fail(cat(file, ": row ", r + 1, " of ", field, " is ", numbers[r], " (an empty CSV cell reads as NaN)"));
    }
  }
}

// Observations from an HDF5, CSV or NPY file: `points` [N, coordinates] and one [N] column per field.
Condition read_data_condition(const Problem& problem, const std::string& name, const ConfigNode& node) {
  Condition c;
  c.name = name;
  c.kind = ConditionKind::data;
  c.weight = node.number("weight", 1.0);
  if (c.weight < 0) node.at("weight").fail(cat("must be non-negative, got ", c.weight));
  const std::string file = node.input_path("file");
  c.fixed_points = points_from_file(problem, node, file);
  c.points = c.fixed_points.shape()[0];
  ConfigNode fields = node.at("fields");
  std::vector<Tensor> columns;
  for (const std::string& field : fields.keys()) {
    auto it = std::find(problem.fields.begin(), problem.fields.end(), field);
    if (it == problem.fields.end()) fields.at(field).fail("'" + field + "' is not a field");
    Tensor values = read_file_array(problem, file, fields.at(field).as_string(), fields.at(field));
    if (values.numel() != c.points) {
      fields.at(field).fail(cat(file, ": ", values.numel(), " values for ", c.points, " points"));
    }
    require_finite_values(values, fields.at(field), file, field);
    c.data_fields.push_back(it - problem.fields.begin());
    columns.push_back(reshape(values, {-1, 1}));
  }
  if (columns.empty()) fields.fail("needs at least one observed field");
  c.data_values = concat(columns, 1);
  // After the columns, whose errors say more about a file read wrongly than its values do.
  require_in_domain(problem, c.fixed_points, [&](int64_t row, const std::string& message) {
    node.at("file").fail(cat(file, ": row ", row + 1, " of the points: ", message));
  });
  return c;
}

// A points condition's points: listed inline (`at`, one row of coordinates per point) or read
// from a data file (`file`, `points`). Each must lie in the closed domain, within the tolerance
// that `==` predicates use: a point outside it is a typo, which training would not reveal.
Tensor listed_points(const Problem& problem, const ConfigNode& node) {
  const int64_t coordinates = static_cast<int64_t>(problem.coordinates.size());
  const bool inline_points = node.has("at"), from_file = node.has("file");
  if (inline_points == from_file) {
    node.fail("a points condition needs either `at` (the points, one [" + cat(coordinates) +
              " coordinates] row each) or `file` (a data file that lists them), not " +
              (inline_points ? "both" : "neither"));
  }
  std::vector<ConfigNode> rows;  // where each row was written, for errors
  Tensor points;
  if (inline_points) {
    std::vector<double> values;
    rows = node.at("at").elements();
    if (rows.empty()) node.at("at").fail("needs at least one point");
    for (const ConfigNode& row : rows) {
      const std::vector<double> point = row.as_numbers();
      if (static_cast<int64_t>(point.size()) != coordinates) {
        row.fail(cat("a point needs ", coordinates, " coordinates (", comma_separated(problem.coordinates), "), got ",
                     point.size()));
      }
      values.insert(values.end(), point.begin(), point.end());
    }
    points = cast(tensor(values, {static_cast<int64_t>(rows.size()), coordinates}), problem.dtype);
  } else {
    points = points_from_file(problem, node, node.input_path("file"));
  }
  require_in_domain(problem, points, [&](int64_t row, const std::string& message) {
    if (inline_points) rows[static_cast<size_t>(row)].fail(message);
    node.at("file").fail(cat(node.string("file"), ": row ", row + 1, " of the points: ", message));
  });
  return points;
}

Condition read_condition(const Problem& problem, const std::string& name, const ConfigNode& node,
                         const std::map<std::string, Expression>& equations,
                         const std::map<std::string, EquationFunction>& functions, UnknownEquationNames unknown_names) {
  Condition c;
  c.name = name;
  const std::string type =
      node.choice("type", {"interior", "initial", "dirichlet", "neumann", "robin", "boundary", "periodic", "data",
                           "points"},
                  "interior");
  if (type == "data") return read_data_condition(problem, name, node);
  if (type == "points") {
    // `points` is the file's key for them here, as in data conditions, not a number to draw.
    c.kind = ConditionKind::points;
    c.fixed_points = listed_points(problem, node);
    c.points = c.fixed_points.shape()[0];
  } else {
    c.points = node.integer("points", 1000);
    if (c.points <= 0) node.at("points").fail(cat("must be positive, got ", c.points));
  }
  c.weight = node.number("weight", 1.0);
  if (c.weight < 0) node.at("weight").fail(cat("must be non-negative, got ", c.weight));
  const Symbols interior = problem.symbols(false), boundary = problem.symbols(true);

  // The condition's equation: a supplied function (then no expression), a named or an inline one.
  auto equation = [&](const Symbols& symbols) -> std::optional<Expression> {
    ConfigNode text = node.at("equation");
    if (auto function = functions.find(text.as_string()); function != functions.end()) {
      if (c.kind == ConditionKind::boundary) {
        text.fail("equation '" + function->first + "' is a supplied function; those serve interior, initial and "
                  "points conditions only (write boundary equations as text)");
      }
      c.function = std::make_shared<const EquationFunction>(function->second);
      c.function_name = function->first;
      return std::nullopt;
    }
    auto named = equations.find(text.as_string());
    if (named != equations.end()) return named->second;
    try {
      return expression_at(text, symbols, ExpressionKind::scalar);
    } catch (const Error&) {
      // A lone name that is not a symbol is most likely a misspelt equation name.
      const std::string name = text.as_string();
      std::vector<std::string> names;
      for (const auto& [known, expression] : equations) names.push_back(known);
      for (const auto& [known, function] : functions) names.push_back(known);
      const bool lone_name = !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char ch) {
        return std::isalnum(ch) || ch == '_';
      });
      if (lone_name && unknown_names == UnknownEquationNames::supplied_when_trained) {
        c.function_name = name;
        c.function = std::make_shared<const EquationFunction>([name](const Tensor&, const Tensor&, const auto&) -> Tensor {
          throw Error(cat("the equation '", name, "' was a function supplied when the run was trained; it is not "
                          "available here"));
        });
        return std::nullopt;
      }
      if (const std::string hint = did_you_mean(name, names); lone_name && !hint.empty()) {
        text.fail(cat("'", name, "' is neither one of `equations` nor an expression", hint));
      }
      throw;
    }
  };
  // field - value, for Dirichlet and initial conditions.
  auto field_minus_value = [&](const Symbols& symbols, const std::string& lhs) {
    ConfigNode value = node.at("value");
    Expression checked = expression_at(value, symbols, ExpressionKind::scalar);
    return composed("(" + lhs + ") - (" + checked.text() + ")", node.path(), symbols);
  };

  if (type == "interior") {
    c.kind = ConditionKind::interior;
    c.residual = equation(interior);
    return c;
  }
  // Initial and points conditions: an equation, or a field's value (0 when omitted).
  auto equation_or_field_value = [&]() -> std::optional<Expression> {
    if (node.has("equation")) {
      for (const char* key : {"field", "value"}) {
        if (node.has(key)) node.at(key).fail("give `equation`, or `field` and `value`, not both");
      }
      return equation(interior);
    }
    c.field = field_index(problem, node.at("field"));
    const std::string field = problem.fields[static_cast<size_t>(c.field)];
    node.string("value", "0");
    c.value = expression_at(node.at("value"), interior, ExpressionKind::scalar);
    return field_minus_value(interior, field);
  };
  if (type == "points") {
    c.residual = equation_or_field_value();
    return c;
  }
  if (type == "initial") {
    if (!problem.time) node.at("type").fail("an initial condition needs geometry.time");
    c.kind = ConditionKind::initial;
    c.residual = equation_or_field_value();
    return c;
  }
  if (type == "periodic") {
    c.kind = ConditionKind::periodic;
    const std::string axis = node.string("axis");
    auto it = std::find(problem.coordinates.begin(), problem.coordinates.begin() + problem.spatial_dim(), axis);
    if (it == problem.coordinates.begin() + problem.spatial_dim()) {
      node.at("axis").fail("'" + axis + "' is not a spatial coordinate");
    }
    c.periodic_axis = it - problem.coordinates.begin();
    // The condition pairs the faces min_k and max_k, which only box-like shapes have.
    const std::vector<std::string> faces = problem.space->face_names();
    const std::string lower_face = cat("min_", c.periodic_axis);
    if (!problem.space->find_face(lower_face)) {
      node.fail(cat("a periodic condition pairs the faces ", lower_face, " and max_", c.periodic_axis,
                    " of an interval, rectangle, box or hypercube; geometry.space has ",
                    faces.empty() ? std::string("no named faces") : cat("the faces ", comma_separated(faces))));
    }
    // Every field unless named, written into the resolved config, as read_soap writes its betas.
    const ConfigNode fields = node.sequence("fields", problem.fields);
    if (fields.elements().empty()) fields.fail("names no field; leave `fields` out for every field");
    refuse_repeated_names(fields);
    for (const ConfigNode& f : fields.elements()) c.periodic_fields.push_back(field_index(problem, f));
    return c;
  }
  // Boundary conditions.
  c.kind = ConditionKind::boundary;
  if (node.has("on") && node.has("faces")) node.at("faces").fail("give `on` or `faces`, not both");
  if (auto on = node.find("on")) c.selector = expression_at(*on, boundary, ExpressionKind::predicate);
  if (auto faces = node.find("faces")) {
    // An empty list read as "no restriction", the whole boundary.
    if (faces->elements().empty()) faces->fail("names no face; leave `faces` out for the whole boundary");
    refuse_repeated_names(*faces);
    for (const ConfigNode& face : faces->elements()) {
      const std::string face_name = face.as_string();
      if (!problem.space->find_face(face_name)) {
        std::string valid;
        for (const std::string& f : problem.space->face_names()) valid += (valid.empty() ? "" : ", ") + f;
        face.fail("'" + face_name + "' is not a face of this " + problem.space->type_name() +
                  (valid.empty() ? " (it has no named faces; use `on`)" : " (faces: " + valid + ")"));
      }
      c.faces.push_back(face_name);
    }
  }
  if (type == "boundary") {
    c.residual = equation(boundary);
    return c;
  }
  const std::string field = problem.fields[field_index(problem, node.at("field"))];
  node.string("value", "0");
  if (type == "dirichlet") {
    c.residual = field_minus_value(boundary, field);
  } else if (type == "neumann") {
    c.residual = field_minus_value(boundary, "dot(grad(" + field + "), n)");
  } else {
    const double alpha = node.number("alpha"), beta = node.number("beta");
    if (alpha == 0 && beta == 0) {
      node.at("beta").fail("alpha and beta are both 0, so the condition constrains nothing (its loss is value^2 "
                           "whatever the network does); alpha 0 is a neumann condition, beta 0 a dirichlet one");
    }
    // The coefficients' every digit: cat's six made 1234567.89 into 1.23457e+06.
    c.residual = field_minus_value(boundary, cat(io::shortest_text(alpha), "*", field, " + ", io::shortest_text(beta),
                                                 "*dot(grad(", field, "), n)"));
  }
  return c;
}

// A grid reference's axes (one 1-D dataset per coordinate) in `layout` order, and its values
// checked against them.
void read_reference_grid(const Problem& problem, const ConfigNode& node, const ConfigNode& fields,
                         Reference& reference) {
  ConfigNode coordinates = node.at("coordinates");
  for (const std::string& c : coordinates.keys()) {
    if (std::find(problem.coordinates.begin(), problem.coordinates.end(), c) == problem.coordinates.end()) {
      coordinates.at(c).fail(cat("'", c, "' is not a coordinate (", comma_separated(problem.coordinates), ")"));
    }
  }
  for (const ConfigNode& axis : node.at("layout").elements()) reference.layout.push_back(axis.as_string());
  std::set<std::string> expected(problem.coordinates.begin(), problem.coordinates.end());
  std::set<std::string> given(reference.layout.begin(), reference.layout.end());
  if (given != expected || reference.layout.size() != expected.size()) {
    node.at("layout").fail("must list each coordinate once");
  }
  std::vector<int64_t> grid;  // the axes' lengths in layout order
  for (const std::string& c : reference.layout) {
    if (!coordinates.has(c)) coordinates.fail(cat("needs the dataset of coordinate '", c, "', which `layout` lists"));
    reference.axes.push_back(
        flatten(read_file_array(problem, reference.file, coordinates.at(c).as_string(), coordinates.at(c))));
    grid.push_back(reference.axes.back().numel());
  }
  // Values stored flat can only be counted; stored as an array, each axis must have its coordinate's
  // length, or the grid would be read transposed (a layout of [x, t] for values stored [t, x]).
  auto described = [&] {
    std::vector<std::string> lengths;
    for (size_t i = 0; i < grid.size(); ++i) lengths.push_back(cat(reference.layout[i], ": ", grid[i]));
    return comma_separated(lengths);
  };
  const int64_t grid_points = std::accumulate(grid.begin(), grid.end(), int64_t{1}, std::multiplies<>());
  for (auto& [field, values] : reference.values) {
    const bool flat = values.dim() == 1 && grid.size() > 1;
    if (flat ? values.numel() != grid_points : values.shape() != grid) {
      fields.at(field).fail(cat(reference.file, ": values of shape ", values.shape(), " for a grid of shape ",
                                grid, " (`layout` in the values' axis order, ", described(), ")"));
    }
    values = flatten(values);
  }
}

// The reference's points with a value of every field, refused where one lies outside the domain:
// it would score the network where the problem has no solution (a reference on [0, 2] for a
// problem on [0, 1] reported 0.61 where the error in it was 1.2e-5). Checked as the problem is
// read, so that `eddy check` finds it too.
void select_reference_rows(const Problem& problem, const ConfigNode& node, Reference& reference) {
  std::vector<bool> valid(static_cast<size_t>(reference.points.shape()[0]), false);
  for (const auto& [field, values] : reference.values) {
    const std::vector<bool> finite = eq(values, values).to_vector<bool>();
    if (std::none_of(finite.begin(), finite.end(), [](bool value) { return value; })) {
      node.at("fields").at(field).fail(cat(reference.file, ": the reference has no finite values of ", field));
    }
    for (size_t i = 0; i < valid.size(); ++i) valid[i] = valid[i] || finite[i];
  }
  for (size_t i = 0; i < valid.size(); ++i) {
    if (valid[i]) reference.rows.push_back(static_cast<int64_t>(i));
  }
  const auto coordinates = static_cast<int64_t>(problem.coordinates.size());
  const std::vector<double> at = cast(reference.points, DType::f64).to_vector<double>();
  int64_t outside = 0, first_outside = -1;
  for (int64_t row : reference.rows) {
    if (problem.contains(at.data() + row * coordinates)) continue;
    if (outside++ == 0) first_outside = row;
  }
  if (outside > 0) {
    node.at("file").fail(cat(reference.file, ": ", outside, " of the reference's ", reference.rows.size(),
                             " points with values lie outside the domain (the first: ",
                             problem.point_text(at.data() + first_outside * coordinates),
                             "); crop the reference to the domain, or give those points NaN values, which are left out"));
  }
}

Reference read_reference(const Problem& problem, const ConfigNode& node) {
  Reference reference;
  const Symbols symbols = problem.symbols(false);
  if (node.has("expressions") && node.has("file")) {
    node.at("file").fail("give `expressions` (the exact solution) or `file` (tabulated values), not both");
  }
  if (auto expressions = node.find("expressions")) {
    for (const std::string& field : expressions->keys()) {
      if (std::find(problem.fields.begin(), problem.fields.end(), field) == problem.fields.end()) {
        expressions->at(field).fail("'" + field + "' is not a field");
      }
      Expression expression = expression_at(expressions->at(field), symbols, ExpressionKind::scalar);
      // A reference is the solution itself: it may not read the network's fields (found here, by
      // eddy check too, not when validation began).
      Symbols without_fields = symbols;
      without_fields.fields.clear();
      try {
        check(expression, without_fields, ExpressionKind::scalar);
      } catch (const Error&) {
        expressions->at(field).fail("a reference may only use coordinates and parameters, not the fields it scores");
      }
      // A learnable parameter's value is the run's guess, not the truth: `eddy solve` scored the run
      // against the initial guess, `eddy eval` against the trained value.
      const std::set<std::string> read = parameters_read(expression, symbols);
      std::string learnable;
      for (const LearnableParameter& parameter : problem.learnable) {
        if (read.count(parameter.name)) learnable += (learnable.empty() ? "" : ", ") + parameter.name;
      }
      if (!learnable.empty()) {
        expressions->at(field).fail(cat("a reference may not use a learnable parameter (", learnable,
                                        "): it is the value being trained, not the true one; write the true value"));
      }
      reference.expressions.emplace(field, std::move(expression));
    }
    // The run trained every step and then failed at its end, in validation, naming no key.
    if (reference.expressions.empty()) expressions->fail("names no field; give each field's exact solution");
    return reference;
  }
  reference.file = node.input_path("file");
  file_format(node.at("file"));
  if (!std::filesystem::is_regular_file(reference.file)) node.at("file").fail(cat("no such file: ", reference.file));
  ConfigNode fields = node.at("fields");
  for (const std::string& field : fields.keys()) {
    if (std::find(problem.fields.begin(), problem.fields.end(), field) == problem.fields.end()) {
      fields.at(field).fail("'" + field + "' is not a field");
    }
    reference.values[field] = read_file_array(problem, reference.file, fields.at(field).as_string(), fields.at(field));
  }
  if (reference.values.empty()) fields.fail("names no field; give the dataset of each field to score");
  // Scattered points unless the grid's keys are given, read as a data condition's, `points`
  // defaulting alike (a CSV reference without it was taken for a grid without `coordinates`).
  if (node.has("points") || !(node.has("coordinates") || node.has("layout"))) {
    reference.points = points_from_file(problem, node, reference.file);
    for (auto& [field, values] : reference.values) {
      if (values.numel() != reference.points.shape()[0]) {
        fields.at(field).fail(cat(reference.file, ": ", values.numel(), " values for ", reference.points.shape()[0],
                                  " points"));
      }
      values = flatten(values);
    }
  } else {
    read_reference_grid(problem, node, fields, reference);
    // The grid in the file's axis order, its columns then put in coordinate order.
    std::vector<int64_t> column_of;
    for (const std::string& name : problem.coordinates) {
      column_of.push_back(std::find(reference.layout.begin(), reference.layout.end(), name) - reference.layout.begin());
    }
    reference.points = index_select(meshgrid_points(reference.axes), 1, tensor(column_of));
  }
  select_reference_rows(problem, node, reference);
  return reference;
}

bool has_interior_condition(const Problem& problem) {
  return std::any_of(problem.conditions.begin(), problem.conditions.end(),
                     [](const Condition& c) { return c.kind == ConditionKind::interior; });
}

LossWeightingOptions read_loss_weighting(const ConfigNode& node) {
  LossWeightingOptions w;
  w.scheme = node.choice(
      "scheme", {{"fixed", LossWeighting::fixed}, {"grad_norm", LossWeighting::grad_norm}, {"ntk", LossWeighting::ntk}},
      w.scheme);
  // A key the scheme does not read is refused naming the scheme it needs: the unknown-key check
  // said "valid keys: scheme" of a documented key, without saying that scheme was the cause.
  auto refuse_unread = [&](std::initializer_list<const char*> keys, const char* needs) {
    for (const char* key : keys) {
      if (auto unread = node.find(key)) {
        unread->fail(cat("is read only with training.loss_weighting.scheme: ", needs, "; this run's scheme is ",
                         w.scheme == LossWeighting::fixed ? "fixed (the default)" : "grad_norm"));
      }
    }
  };
  if (w.scheme == LossWeighting::fixed) {
    refuse_unread({"every", "alpha"}, "grad_norm or ntk");
    refuse_unread({"ntk_points"}, "ntk");
    return w;
  }
  w.every = node.integer("every", w.every);
  w.alpha = node.number("alpha", w.alpha);
  if (w.every < 1) node.at("every").fail(cat("must be at least 1, got ", w.every));
  if (!(w.alpha >= 0 && w.alpha < 1)) node.at("alpha").fail(cat("must be in [0, 1), got ", w.alpha));
  if (w.scheme != LossWeighting::ntk) {
    refuse_unread({"ntk_points"}, "ntk");
    return w;
  }
  w.ntk_points = node.integer("ntk_points", w.ntk_points);
  if (w.ntk_points < 1) node.at("ntk_points").fail(cat("must be at least 1, got ", w.ntk_points));
  return w;
}

CausalOptions read_causal(const Problem& problem, const ConfigNode& node) {
  CausalOptions causal;
  causal.chunks = node.integer("chunks", causal.chunks);
  causal.epsilon = node.number("epsilon", causal.epsilon);
  if (!problem.time) node.fail("causal weighting needs geometry.time (its chunks are intervals of t)");
  if (!has_interior_condition(problem)) {
    node.fail("causal weighting applies to interior conditions, and there are none");
  }
  if (causal.chunks < 1) node.at("chunks").fail(cat("must be at least 1, got ", causal.chunks));
  if (!(causal.epsilon >= 0)) node.at("epsilon").fail(cat("must be non-negative, got ", causal.epsilon));
  for (const Condition& c : problem.conditions) {
    if (c.kind == ConditionKind::interior && c.points < causal.chunks) {
      node.at("chunks").fail(cat(causal.chunks, " chunks, but conditions.", c.name, " has only ", c.points, " points"));
    }
  }
  return causal;
}

// Candidates are drawn and their residuals evaluated at once: a count beyond memory failed at the
// first refinement, after the run had removed the earlier run's files, as std::bad_alloc.
void refuse_candidates_beyond_memory(const Problem& problem, const ConfigNode& candidates, int64_t count) {
  const auto columns = static_cast<double>(problem.coordinates.size() + problem.fields.size() + 1);
  candidates.require_memory(cat(count, " candidate points with their coordinates and residuals"),
                            static_cast<double>(count) * columns * static_cast<double>(dtype_size(problem.dtype)));
}

RefinementOptions read_refinement(const Problem& problem, const ConfigNode& node) {
  RefinementOptions rar;
  rar.every = node.integer("every", rar.every);
  rar.candidates = node.integer("candidates", rar.candidates);
  rar.add = node.integer("add", rar.add);
  if (!has_interior_condition(problem)) {
    node.fail("refinement adds interior points, and there are no interior conditions");
  }
  if (rar.every < 1) node.at("every").fail(cat("must be at least 1, got ", rar.every));
  if (rar.candidates < 1) node.at("candidates").fail(cat("must be at least 1, got ", rar.candidates));
  refuse_candidates_beyond_memory(problem, node.at("candidates"), rar.candidates);
  if (rar.add < 1) node.at("add").fail(cat("must be at least 1, got ", rar.add));
  if (rar.add > rar.candidates) {
    node.at("add").fail(cat("must not exceed candidates (", rar.candidates, "), got ", rar.add));
  }
  return rar;
}

RadOptions read_rad(const Problem& problem, const ConfigNode& node) {
  RadOptions rad;
  rad.every = node.integer("every", rad.every);
  rad.candidates = node.integer("candidates", rad.candidates);
  rad.k = node.number("k", rad.k);
  rad.c = node.number("c", rad.c);
  if (!has_interior_condition(problem)) {
    node.fail("RAD redistributes interior points, and there are no interior conditions");
  }
  if (problem.refinement) {
    node.fail("cannot be combined with sampling.rar: RAD replaces the interior points that RAR would add to; "
              "choose one");
  }
  if (rad.every < 1) node.at("every").fail(cat("must be at least 1, got ", rad.every));
  refuse_candidates_beyond_memory(problem, node.at("candidates"), rad.candidates);
  // The draw is without replacement, so it needs as many candidates as a condition has points.
  for (const Condition& c : problem.conditions) {
    if (c.kind == ConditionKind::interior && rad.candidates < c.points) {
      node.at("candidates").fail(cat("must be at least conditions.", c.name, ".points (", c.points, "), got ",
                                     rad.candidates));
    }
  }
  if (!(rad.k >= 0 && std::isfinite(rad.k))) node.at("k").fail(cat("must be a non-negative number, got ", rad.k));
  if (!(rad.c >= 0 && std::isfinite(rad.c))) node.at("c").fail(cat("must be a non-negative number, got ", rad.c));
  return rad;
}

// An optimiser's eps: positive, and not rounded to 0 by the training dtype (1e-46 in float32 was,
// and a weight with a zero gradient took 0 / 0).
void refuse_eps(const ConfigNode& node, double eps, DType dtype) {
  if (!(std::isfinite(eps) && eps > 0)) node.at("eps").fail(cat("must be positive, got ", eps));
  if (dtype == DType::f32 && static_cast<float>(eps) == 0) {
    node.at("eps").fail(cat(eps, " is 0 in float32 (dtype); give at least 1e-45, or dtype: float64"));
  }
}

// training.soap's settings besides steps, learning_rate and schedule; optim::Soap checks them
// too, but here the error names the key.
optim::SoapOptions read_soap(const ConfigNode& node, DType dtype) {
  optim::SoapOptions soap;
  // Written into the resolved config when absent: a --resume that spells the default out is the
  // same run (it was refused, the key "not set" in the checkpoint).
  const std::vector<double> values = node.numbers("betas", {soap.beta1, soap.beta2});
  if (values.size() != 2) node.at("betas").fail(cat("needs two numbers, [beta1, beta2]; got ", values.size()));
  for (double beta : values) {
    if (!(beta >= 0 && beta < 1)) node.at("betas").fail(cat("each must lie in [0, 1), got ", beta));
  }
  soap.beta1 = values[0];
  soap.beta2 = values[1];
  soap.shampoo_beta = node.derived_number("shampoo_beta", soap.beta2);
  if (!(*soap.shampoo_beta >= 0 && *soap.shampoo_beta < 1)) {
    node.at("shampoo_beta").fail(cat("must lie in [0, 1), got ", *soap.shampoo_beta));
  }
  soap.precondition_frequency = node.integer("precondition_frequency", soap.precondition_frequency);
  if (soap.precondition_frequency < 1) {
    node.at("precondition_frequency").fail(cat("must be at least 1, got ", soap.precondition_frequency));
  }
  soap.eps = node.number("eps", soap.eps);
  refuse_eps(node, soap.eps, dtype);
  soap.weight_decay = node.number("weight_decay", soap.weight_decay);
  if (!(std::isfinite(soap.weight_decay) && soap.weight_decay >= 0)) {
    node.at("weight_decay").fail(cat("must be non-negative, got ", soap.weight_decay));
  }
  return soap;
}

}  // namespace

Symbols Problem::symbols(bool boundary) const {
  Symbols s;
  s.coordinates = coordinates;
  s.fields = fields;
  for (const auto& [name, value] : constants) s.parameters.push_back(name);
  for (const LearnableParameter& p : learnable) s.parameters.push_back(p.name);
  s.helpers = helpers;
  s.boundary = boundary;
  return s;
}

Symbols Problem::transform_symbols() const {
  Symbols s = symbols(false);
  s.helpers.clear();
  for (std::string& field : s.fields) field = "net_" + field;
  return s;
}

namespace {

// A float32 domain far from 0 for its width holds few coordinates: on [1e6, 1e6 + 1] the points,
// the grid and the validation took 17 distinct values (float32's spacing is 1/16 there), the PDE
// held at those alone and the error was measured at them, silently; on [1e8, 1e8 + 1] min and max
// are one number. Refused below this many float32 values across a coordinate's range, where
// rounding moves a point by more than about 1e-4 of the width.
constexpr double kLeastFloat32Steps = 4096;

void refuse_coordinates_float32_rounds(const Problem& p, const ConfigNode& geometry) {
  const BoundingBox box = p.domain_box();
  for (size_t k = 0; k < box.lower.size(); ++k) {
    const double reach = std::max(std::abs(box.lower[k]), std::abs(box.upper[k]));
    const auto farthest = static_cast<float>(reach);
    const ConfigNode key = geometry.at(p.time && k + 1 == box.lower.size() ? "time" : "space");
    if (!std::isfinite(farthest)) {
      key.fail(cat("coordinate ", p.coordinates[k], " reaches ", reach,
                   ", beyond float32's range (dtype); rescale it, or give dtype: float64"));
    }
    const double spacing = static_cast<double>(std::nextafter(farthest, std::numeric_limits<float>::infinity())) -
                           static_cast<double>(farthest);
    const double steps = (box.upper[k] - box.lower[k]) / spacing;
    if (steps >= kLeastFloat32Steps) continue;
    key.fail(cat(
        "coordinate ", p.coordinates[k], " spans [", io::shortest_text(box.lower[k]), ", ",
        io::shortest_text(box.upper[k]), "], which float32 (dtype) holds as ", std::max(1.0, std::floor(steps) + 1),
        " distinct values ", spacing, " apart: its points would round onto them. Shift the coordinate towards 0 "
        "(its range's middle to 0), or give dtype: float64"));
  }
}

}  // namespace

BoundingBox Problem::domain_box() const {
  BoundingBox box = space->bounding_box();
  if (time) {
    box.lower.push_back(time->first);
    box.upper.push_back(time->second);
  }
  return box;
}

bool Problem::contains(const double* point) const {
  const int64_t count = static_cast<int64_t>(coordinates.size()), spatial = spatial_dim();
  // A NaN coordinate passed the distance test (the distances' max and min drop it).
  if (!std::all_of(point, point + count, [](double x) { return std::isfinite(x); })) return false;
  const double slack = tolerance();
  const bool in_time = !time || (point[spatial] >= time->first - slack && point[spatial] <= time->second + slack);
  return in_time && space->holds(point, slack);
}

std::string Problem::point_text(const double* point) const {
  std::string text;
  for (size_t k = 0; k < coordinates.size(); ++k) text += cat(k ? ", " : "", coordinates[k], " = ", point[k]);
  return text;
}

// The spatial diagonal's: the time axis in it made `x == 0` on a 1 cm square over an hour select
// points 3.6 mm from the wall (a tolerance of 3.6e-3), and let listed points 20% outside the
// square in; time bounds take the same, tighter slack.
double Problem::tolerance() const {
  const BoundingBox box = space->bounding_box();
  double diagonal = 0;
  for (size_t i = 0; i < box.lower.size(); ++i) diagonal += std::pow(box.upper[i] - box.lower[i], 2);
  return 1e-6 * std::sqrt(diagonal);
}

double Problem::hidden_layer_weights() const {
  const auto width = static_cast<double>(model.width);
  return width * width * static_cast<double>(model.depth);
}

Problem read_problem(io::Config& config, const std::map<std::string, EquationFunction>& functions,
                     UnknownEquationNames unknown_names) {
  // A trained run's config.yaml (eval, export) is read without the checks of what training would
  // meet: a run trained on a larger machine, or before a check, still loads.
  const bool trained_run = unknown_names == UnknownEquationNames::supplied_when_trained;
  Problem p;
  p.source = config.source();
  ConfigNode root = config.root();
  p.description = root.string("description", "");
  // solution.h5 keeps it as an HDF5 attribute, which holds a little under 64 KiB: a longer one
  // failed the results' write after training.
  constexpr size_t kLongestDescription = 65000;
  if (p.description.size() > kLongestDescription) {
    root.at("description").fail(cat("is ", p.description.size(), " bytes; solution.h5 keeps it as an HDF5 attribute, "
                                    "which holds at most ", kLongestDescription));
  }
  p.dtype = root.choice("dtype", {{"float32", DType::f32}, {"float64", DType::f64}}, DType::f32);
  const int64_t seed = root.integer("seed", 0);
  if (seed < 0) root.at("seed").fail(cat("must be non-negative, got ", seed));
  p.seed = static_cast<uint64_t>(seed);
  p.device = solvers::read_device(root);

  // Geometry and coordinates.
  ConfigNode geometry = root.at("geometry");
  p.space = read_geometry(geometry.at("space"));
  // Coordinates this large overflow the bounding box's measure (2e308 along one axis), and the
  // samplers' counts with it.
  const BoundingBox extent = p.space->bounding_box();
  double measure = 1;
  for (size_t k = 0; k < extent.lower.size(); ++k) {
    measure *= extent.upper[k] - extent.lower[k];
    if (!std::isfinite(measure)) {
      geometry.at("space").fail(cat("extends from ", extent.lower[k], " to ", extent.upper[k], " along axis ", k,
                                    ", too far for its length, area or volume to be a finite number; rescale the "
                                    "coordinates"));
    }
  }
  // A shape with nothing inside (a hole larger than the shape) is found here, at its key, rather
  // than when the first condition draws its points.
  try {
    Generator probe(0);
    p.space->sample_interior(1, probe);
  } catch (const Error& e) {
    geometry.at("space").fail(e.what());
  }
  if (auto time = geometry.find("time")) {
    const double start = time->number("min"), end = time->number("max");
    if (!(end > start)) time->at("max").fail(cat("must be above min = ", start, ", got ", end));
    p.time = std::make_pair(start, end);
  }
  // Every name an expression can use, with where it was declared: a second declaration is an
  // error at its own key, since expressions using the name would be ambiguous.
  std::map<std::string, std::pair<std::string, std::string>> declared;  // name -> (role, key path)
  std::vector<std::tuple<std::string, std::string, ConfigNode>> named;    // (name, role, node)
  auto declare = [&](const ConfigNode& node, const std::string& name, const std::string& role) {
    // Expressions read names of ASCII letters, digits and _; results use them as HDF5 names.
    if (!is_name(name)) {
      node.fail(cat("'", name, "' cannot be a ", role, " name: use letters, digits and _, starting with a letter "
                    "or _"));
    }
    if (role == "field" && (name == "inside" || name == "coordinates")) {
      node.fail(cat("'", name, "' cannot be a field name: solution.h5 stores ", name == "inside" ? "fields/inside" :
                    "points/<condition>/coordinates", " beside the fields"));
    }
    // points.vtp's array of that name holds each point's condition index (it overwrote the field's
    // values there, or the coordinate's the index).
    if ((role == "field" || role == "coordinate") && name == "condition") {
      node.fail(cat("'condition' cannot be a ", role, " name: points.vtp tags each point with its condition's "
                    "index in an array of that name"));
    }
    if (name == "pi" || name == "n") {
      node.fail(cat("'", name, "' cannot be declared as a ", role, ": it means ",
                    name == "pi" ? "the constant pi" : "the boundary normal"));
    }
    named.emplace_back(name, role, node);
    const auto [first, inserted] = declared.try_emplace(name, role, node.path());
    if (inserted) return;
    const auto& [first_role, first_path] = first->second;
    node.fail(first_role == role ? cat(role, " '", name, "' is declared twice (first at ", first_path, ")")
                                 : cat("'", name, "' is declared as a ", role, " but is already a ", first_role,
                                       " (", first_path, ")"));
  };
  const std::vector<std::string> default_names{"x", "y", "z"};
  if (auto names = geometry.find("coordinates")) {
    for (const ConfigNode& name : names->elements()) {
      // `t` is time's name wherever derivatives are taken (laplacian, grad and div leave it out):
      // a space axis named t gave laplacian(u) without u_tt, silently.
      if (name.as_string() == "t") {
        name.fail("'t' is the name of time (geometry.time); give this space axis another name");
      }
      declare(name, name.as_string(), "coordinate");
      p.coordinates.push_back(name.as_string());
    }
    if (static_cast<int64_t>(p.coordinates.size()) != p.space->dim()) {
      names->fail(cat("names ", p.coordinates.size(), " coordinates for a ", p.space->dim(), "-D geometry"));
    }
  } else {
    if (p.space->dim() > 3) geometry.fail("geometry.coordinates must name the axes of a space above 3-D");
    p.coordinates.assign(default_names.begin(), default_names.begin() + p.space->dim());
  }
  if (p.time) p.coordinates.push_back("t");
  if (p.dtype == DType::f32 && !trained_run) refuse_coordinates_float32_rounds(p, geometry);
  // The default names and t (those named in geometry.coordinates are declared already).
  for (const std::string& name : p.coordinates) declared.try_emplace(name, "coordinate", "geometry");

  for (const ConfigNode& field : root.at("fields").elements()) {
    declare(field, field.as_string(), "field");
    p.fields.push_back(field.as_string());
    p.field_where.push_back(field.where());
  }
  if (p.fields.empty()) root.at("fields").fail("needs at least one field");

  if (auto parameters = root.find("parameters")) {
    for (const std::string& name : parameters->keys()) {
      ConfigNode value = parameters->at(name);
      declare(value, name, "parameter");
      if (value.is_map()) {
        if (!value.boolean("learnable", false)) value.fail("a parameter given as a map must set learnable: true");
        p.learnable.push_back({name, value.number("initial"), value.where()});
      } else {
        p.constants[name] = value.as_number();
      }
    }
  }
  if (auto helpers = root.find("helpers")) {
    for (const std::string& name : helpers->keys()) {
      declare(helpers->at(name), name, "helper");
      // Named by file:line:col and key path, as an equation's errors are (it was the path alone).
      std::string where = helpers->at(name).where();
      where.resize(where.size() - 2);  // without the trailing ": " the expression error adds itself
      p.helpers.emplace(name, parse_expression(expression_text(helpers->at(name)), where));
    }
    // Helpers are checked where they are used: one may be a predicate, a vector, or use n.
  }
  // A name that reads as a derivative of a field or helper (u_x) would hide it: names are looked up
  // first, so parameters: {u_x: 5} made every u_x 5. Checked once every name is declared: checked
  // as each was, a parameter, or a helper before the helper it reads as a derivative of, got past
  // and replaced that derivative silently, and a field u_x beside u was not checked at all.
  for (const auto& [name, role, node] : named) {
    // So would n_x, a component of the boundary normal, in every boundary condition.
    const std::string component = name.starts_with("n_") ? name.substr(2) : "";
    if (component != "t" && std::find(p.coordinates.begin(), p.coordinates.end(), component) != p.coordinates.end()) {
      node.fail(cat("'", name, "' cannot be a ", role, " name: it means the boundary normal's ", component,
                    " component"));
    }
    const size_t mark = name.rfind('_');
    if (mark == std::string::npos || mark + 1 == name.size()) continue;
    const auto base = declared.find(name.substr(0, mark));
    const std::string suffix = name.substr(mark + 1);
    const bool coordinates_only = std::all_of(suffix.begin(), suffix.end(), [&](char c) {
      return std::find(p.coordinates.begin(), p.coordinates.end(), std::string(1, c)) != p.coordinates.end();
    });
    if (base != declared.end() && (base->second.first == "field" || base->second.first == "helper") &&
        coordinates_only) {
      node.fail(cat("'", name, "' cannot be a ", role, " name: it reads as a derivative of ", base->second.first,
                    " '", base->first, "'"));
    }
  }
  std::map<std::string, Expression> equations;
  if (auto section = root.find("equations")) {
    for (const std::string& name : section->keys()) {
      if (functions.count(name)) section->at(name).fail("equation '" + name + "' is also supplied as a function");
      equations.emplace(name, expression_at(section->at(name), p.symbols(false), ExpressionKind::scalar));
    }
  }
  ConfigNode conditions = root.at("conditions");
  for (const std::string& name : conditions.keys()) {
    // A condition's name is a key of override paths and an HDF5 name (points/NAME, loss_NAME).
    constexpr std::string_view kConditionCharacters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
    if (name.empty() || name.find_first_not_of(kConditionCharacters) != std::string::npos) {
      conditions.at(name).fail(cat("'", name, "' cannot be a condition name: use letters, digits, _ and -"));
    }
    p.conditions.push_back(read_condition(p, name, conditions.at(name), equations, functions, unknown_names));
  }
  if (p.conditions.empty()) conditions.fail("needs at least one condition");
  // A supplied function that no condition takes would be left out of training without a word.
  for (const auto& [name, function] : functions) {
    if (std::none_of(p.conditions.begin(), p.conditions.end(),
                     [&](const Condition& c) { return c.function_name == name; })) {
      conditions.fail(cat("the equation '", name, "' is supplied as a function, but no condition's `equation` names ",
                          "it (conditions: ", comma_separated(conditions.keys()), ")"));
    }
  }

  ConfigNode sampling = root.section("sampling");
  // Read as a choice, so that a misspelt name is named with its file, line and column.
  std::vector<std::string> samplers = Sampler::names();
  samplers.push_back("lhs");
  p.sampler = Sampler::from_name(sampling.choice("method", samplers, "uniform"), sampling.path() + ".method");
  p.resample_every = sampling.integer("resample_every", 0);
  if (p.resample_every < 0) {
    sampling.at("resample_every").fail(cat("must be 0 (draw the points once) or more, got ", p.resample_every));
  }
  if (auto rar = sampling.find("rar")) p.refinement = read_refinement(p, *rar);
  if (auto rad = sampling.find("rad")) p.rad = read_rad(p, *rad);

  ConfigNode model = root.section("model");
  p.model.architecture = nn::parse_architecture(
      model.choice("architecture", {"mlp", "modified_mlp", "resnet", "pirate_net"}, "mlp"));
  p.model.width = model.integer("width", 50);
  p.model.depth = model.integer("depth", 4);
  p.model.activation = nn::parse_activation(
      model.choice("activation", {"tanh", "sin", "gelu", "silu", "relu", "softplus"}, "tanh"));
  p.model.adaptive_activation = model.boolean("adaptive_activation", false);
  p.model.fourier_features = model.integer("fourier_features", 0);
  p.model.fourier_scale = model.number("fourier_scale", 1.0);
  // A scale other than the default says Fourier features were meant; without them it did nothing.
  if (p.model.fourier_features == 0 && p.model.fourier_scale != 1.0) {
    model.at("fourier_scale").fail("scales Fourier features; set model.fourier_features too (0: none, so no scale)");
  }
  p.model.weight_factorization = model.boolean("weight_factorization", false);
  if (auto periodic = model.find("periodic")) {
    for (const std::string& coordinate : periodic->keys()) {
      const auto axis = std::find(p.coordinates.begin(), p.coordinates.end(), coordinate);
      const ConfigNode entry = periodic->at(coordinate);
      if (axis == p.coordinates.end()) {
        entry.fail(cat("'", coordinate, "' is not a coordinate (coordinates: ", comma_separated(p.coordinates), ")"));
      }
      const double period = entry.as_number();
      if (!(period > 0) || !std::isfinite(period)) entry.fail(cat("the period must be positive, got ", period));
      p.model.periodic_axes.push_back(axis - p.coordinates.begin());
      p.model.periods.push_back(period);
    }
  }
  if (auto transforms = model.find("output_transform")) {
    for (const std::string& field : transforms->keys()) {
      if (std::find(p.fields.begin(), p.fields.end(), field) == p.fields.end()) {
        transforms->at(field).fail("'" + field + "' is not a field");
      }
      p.output_transforms.emplace(field, expression_at(transforms->at(field), p.transform_symbols(), ExpressionKind::scalar));
    }
    for (const std::string& field : p.fields) {  // the others pass through
      p.output_transforms.emplace(field, parse_expression("net_" + field, transforms->path()));
    }
  }
  p.fit_initial_condition = model.boolean("fit_initial_condition", false);
  if (p.fit_initial_condition) check_initial_fit(p, model.at("fit_initial_condition"), conditions);
  p.model.inputs = static_cast<int64_t>(p.coordinates.size());
  p.model.outputs = static_cast<int64_t>(p.fields.size());
  p.model.dtype = p.dtype;
  p.model.seed = p.seed;
  if (model.boolean("normalize_inputs", true)) {
    BoundingBox box = p.domain_box();
    p.model.input_lower = box.lower;
    p.model.input_upper = box.upper;
  }
  if (!trained_run) refuse_model_beyond_memory(p, model);
  try {
    nn::make_pinn_model(p.model);  // option errors now, not after sampling
  } catch (const Error& e) {
    model.fail(e.what());
  }

  ConfigNode training = root.section("training");
  p.training.derivatives = training.choice(
      "derivatives", {{"taylor", DerivativeMode::taylor}, {"reverse", DerivativeMode::reverse}}, DerivativeMode::taylor);
  p.training.optimizer = training.choice(
      "optimizer", {{"adam", FirstOrderOptimizer::adam}, {"soap", FirstOrderOptimizer::soap}}, FirstOrderOptimizer::adam);
  // The first-order phase reads the section named after its optimiser; the other one's settings
  // would be silently ignored, so they are refused.
  const bool soap = p.training.optimizer == FirstOrderOptimizer::soap;
  if (auto other = training.find(soap ? "adam" : "soap")) {
    other->fail(cat("is read only with training.optimizer: ", soap ? "adam" : "soap", "; this run's optimizer is ",
                    soap ? "soap, whose settings go in training.soap" : "adam"));
  }
  ConfigNode phase = training.section(soap ? "soap" : "adam");
  p.training.first_order_steps = phase.integer("steps", 1000);
  p.training.learning_rate = phase.number("learning_rate", 1e-3);
  if (p.training.first_order_steps < 0) phase.at("steps").fail("must be non-negative");
  if (!(p.training.learning_rate > 0)) phase.at("learning_rate").fail("must be positive");
  p.training.schedule =
      solvers::read_schedule(phase.section("schedule"), 1000, p.training.learning_rate,
                             solvers::RunLength{p.training.first_order_steps, phase.path() + ".steps"});
  if (soap) {
    p.training.soap = read_soap(phase, p.dtype);
  } else {
    p.training.adam_eps = phase.number("eps", 1e-8);
    refuse_eps(phase, p.training.adam_eps, p.dtype);
  }
  p.training.zero_stage = solvers::read_zero_stage(training);
  if (soap && p.training.zero_stage == 1) {
    training.at("zero_stage").fail("1 shards the state of optimisers that update each element on its own (adam); "
                                   "soap (training.optimizer) rotates whole matrices, so its state cannot be split "
                                   "by elements: use adam, or zero_stage 0");
  }
  ConfigNode lbfgs = training.section("lbfgs");
  p.training.lbfgs_iterations = lbfgs.integer("iterations", 0);
  if (p.training.lbfgs_iterations < 0) {
    lbfgs.at("iterations").fail(cat("must be non-negative (0: no L-BFGS), got ", p.training.lbfgs_iterations));
  }
  p.training.lbfgs_evaluations = lbfgs.derived_integer("evaluations", p.training.lbfgs_iterations * 5 / 4 + 1);
  const int64_t least_evaluations = p.training.lbfgs_iterations > 0 ? 2 : 1;  // the start and one trial
  if (p.training.lbfgs_evaluations < least_evaluations) {
    lbfgs.at("evaluations").fail(cat("must be at least ", least_evaluations, least_evaluations == 2 ? " (the start and "
                                     "one trial)" : "", ", got ", p.training.lbfgs_evaluations));
  }
  p.training.log_every = training.integer("log_every", 100);
  if (p.training.log_every < 0) {
    training.at("log_every").fail(cat("must be non-negative (0: no progress lines), got ", p.training.log_every));
  }
  p.training.loss_weighting = read_loss_weighting(training.section("loss_weighting"));
  if (auto causal = training.find("causal")) p.training.causal = read_causal(p, *causal);
  if (auto marching = training.find("time_marching")) p.training.time_marching = read_time_marching(p, *marching);
  if (auto continuation = training.find("continuation")) p.training.continuation = read_continuation(p, *continuation);

  ConfigNode validation = root.section("validation");
  p.validation.every = validation.integer("every", 0);
  if (p.validation.every < 0) {
    validation.at("every").fail(cat("must be non-negative (0: only at the end), got ", p.validation.every));
  }
  p.validation.points = validation.integer("points", 4096);
  if (p.validation.points < 1) validation.at("points").fail(cat("must be at least 1, got ", p.validation.points));
  validation.at("points").require_memory(
      cat("the validation's ", p.validation.points, " points with their coordinates and fields"),
      static_cast<double>(p.validation.points) * static_cast<double>(p.coordinates.size() + 2 * p.fields.size()) *
          static_cast<double>(dtype_size(p.dtype)));
  if (auto reference = validation.find("reference")) p.validation.reference = read_reference(p, *reference);

  ConfigNode output = root.section("output");
  const std::string stem = std::filesystem::path(p.source).stem().string();
  p.output.dir = solvers::read_output_dir(output, "runs/" + stem);
  std::vector<double> grid(p.coordinates.size(), p.coordinates.size() > 2 ? 32 : 128);
  if (auto sizes = output.find("grid")) {
    // As integers, so that 010 is refused as any integer key refuses it (it read as 10 here, as 8 elsewhere).
    grid.clear();
    for (const ConfigNode& size : sizes->is_scalar() ? std::vector<ConfigNode>{*sizes} : sizes->elements()) {
      grid.push_back(static_cast<double>(size.as_integer()));
    }
    if (sizes->is_scalar()) grid.resize(p.coordinates.size(), grid[0]);
    if (grid.size() != p.coordinates.size()) {
      sizes->fail(cat("needs one size per coordinate (", p.coordinates.size(), "), or one for all"));
    }
    for (double n : grid) {
      if (!(n >= 1 && n == std::floor(n))) sizes->fail(cat("sizes must be whole numbers of at least 1, got ", n));
    }
  }
  for (double n : grid) p.output.grid.push_back(static_cast<int64_t>(n));
  p.output.vtk = output.boolean("vtk", true);
  p.output.checkpoint_every = output.integer("checkpoint_every", 1000);
  if (p.output.checkpoint_every < 0) {
    output.at("checkpoint_every")
        .fail(cat("must be non-negative (0: only at the end), got ", p.output.checkpoint_every));
  }

  if (auto parallel = root.find("parallel")) {
    p.parallel = solvers::read_parallel(*parallel, {"dp", "mp"});
    if (p.parallel.names != std::vector<std::string>{"dp"}) {
      parallel->at("names").fail("a PINN splits its collocation points over the ranks (dp) and nothing else: its "
                                 "networks are too small to pay for splitting their layers; use {mesh: [N], names: [dp]}");
    }
  }

  refuse_history_name_clashes(p, root);
  if (!trained_run) refuse_points_beyond_memory(p, root);

  config.check_no_unknown_keys();
  p.resolved_config = config.resolved();
  p.derived_settings = solvers::derived_settings(config);
  p.config_hash = config.hash();
  return p;
}

void refuse_untrainable(const Problem& p) {
  std::set<std::string> parameters, fields;
  auto note = [&](const Expression& expression, const Symbols& symbols) {
    for (const std::string& name : parameters_read(expression, symbols)) parameters.insert(name);
    for (const std::string& name : fields_read(expression, symbols)) fields.insert(name);
  };
  for (const Condition& c : p.conditions) {
    if (c.function) return;
    for (const std::optional<Expression>* part : {&c.residual, &c.value}) {
      if (*part) note(**part, p.symbols(true));
    }
    std::vector<int64_t> set = c.data_fields;
    set.insert(set.end(), c.periodic_fields.begin(), c.periodic_fields.end());
    if (c.field >= 0) set.push_back(c.field);
    for (int64_t column : set) fields.insert(p.fields[static_cast<size_t>(column)]);
  }
  for (const auto& [field, transform] : p.output_transforms) {
    note(transform, p.transform_symbols());
    fields.insert(field);
  }
  for (const LearnableParameter& parameter : p.learnable) {
    EDDY_CHECK(parameters.count(parameter.name), parameter.where, "the learnable parameter '", parameter.name,
               "' is read by no condition's equation or value and no output transform (an `on` predicate passes "
               "no gradient), so training cannot move it from its initial value; use it, or make it a constant");
  }
  for (size_t i = 0; i < p.fields.size(); ++i) {
    EDDY_CHECK(fields.count(p.fields[i]), p.field_where[i], "the field '", p.fields[i], "' is read by no condition's "
               "equation or value, set by none (field:, data, periodic) and has no output transform, so no loss term "
               "constrains it and training would leave it the untrained network's output; use it, or leave it out "
               "of fields");
  }
}

}  // namespace eddy::pinn
