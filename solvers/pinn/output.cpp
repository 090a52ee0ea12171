#include "solvers/pinn/output.h"

#include <filesystem>

#include "eddy/autodiff/tape.h"
#include "eddy/io/hdf5.h"
#include "eddy/io/vtk.h"
#include "eddy/ops/ops.h"

namespace eddy::pinn {
namespace {

}  // namespace

Tensor meshgrid_points(const std::vector<Tensor>& axes) {
  const int64_t rank = static_cast<int64_t>(axes.size());
  Shape full;
  for (const Tensor& axis : axes) full.push_back(axis.numel());
  std::vector<Tensor> columns;
  for (int64_t a = 0; a < rank; ++a) {
    Shape shape(rank, 1);
    shape[a] = full[a];
    columns.push_back(reshape(expand(reshape(axes[a], shape), full), {-1, 1}));
  }
  return concat(columns, 1);
}

namespace {

// The output grid: one linspace per coordinate, and all their combinations in C order.
struct Grid {
  std::vector<Tensor> axes;
  Tensor points;  // [prod(n), coordinates]
  Shape shape;
};

Grid make_grid(const Problem& p) {
  Grid grid;
  BoundingBox box = p.domain_box();
  const int64_t rank = static_cast<int64_t>(p.coordinates.size());
  for (int64_t a = 0; a < rank; ++a) {
    grid.axes.push_back(linspace(box.lower[a], box.upper[a], p.output.grid[a], p.dtype));
    grid.shape.push_back(p.output.grid[a]);
  }
  grid.points = meshgrid_points(grid.axes);
  return grid;
}

void write_hdf5(PinnState& state, const History& history, const Grid& grid, const Tensor& prediction,
                const Tensor& inside, const std::string& path) {
  const Problem& p = state.problem();
  io::Hdf5Writer out(path);
  for (size_t a = 0; a < p.coordinates.size(); ++a) out.write("coordinates/" + p.coordinates[a], grid.axes[a]);
  for (size_t f = 0; f < p.fields.size(); ++f) {
    out.write("fields/" + p.fields[f], reshape(slice(prediction, 1, f, f + 1), grid.shape));
  }
  out.write("fields/inside", reshape(inside, grid.shape));
  for (size_t c = 0; c < p.conditions.size(); ++c) {
    const Tensor& points = state.all_samples()[c].points;
    out.write("points/" + p.conditions[c].name + "/coordinates", points);
    Tensor at_points = state.predict(points);
    for (size_t f = 0; f < p.fields.size(); ++f) {
      out.write("points/" + p.conditions[c].name + "/" + p.fields[f], flatten(slice(at_points, 1, f, f + 1)));
    }
  }
  out.write("history/step", tensor(history.steps));
  out.write("history/loss", tensor(history.loss));
  for (size_t c = 0; c < p.conditions.size(); ++c) {
    std::vector<double> term;
    for (const auto& row : history.terms) term.push_back(row[c]);
    out.write("history/loss_" + p.conditions[c].name, tensor(term));
    std::vector<double> weight;
    for (const auto& row : history.weights) weight.push_back(row[c]);
    out.write("history/weight_" + p.conditions[c].name, tensor(weight));
  }
  if (p.training.causal) out.write("history/min_causal_weight", tensor(history.min_causal_weight));
  for (const LearnableParameter& parameter : p.learnable) {
    std::vector<double> values;
    for (const auto& row : history.learned) values.push_back(row.at(parameter.name));
    out.write("history/" + parameter.name, tensor(values));
    out.write("parameters/" + parameter.name, state.learnable().at(parameter.name));
  }
  if (!history.metrics.empty()) {
    out.write("metrics/step", tensor(history.metric_steps));
    for (const std::string& field : p.fields) {
      if (!history.metrics.back().relative_l2.count(field)) continue;
      std::vector<double> l2, max_error;
      for (const Metrics& m : history.metrics) {
        l2.push_back(m.relative_l2.at(field));
        max_error.push_back(m.max_error.at(field));
      }
      out.write("metrics/" + field + "_relative_l2", tensor(l2));
      out.write("metrics/" + field + "_max_error", tensor(max_error));
      out.set_attribute("/", field + "_relative_l2", l2.back());
    }
  }
  out.write_string("config", p.resolved_config);
  out.set_attribute("/", "config_hash", p.config_hash);
  out.set_attribute("/", "description", p.description);
  out.commit();
}

void write_vtk(PinnState& state, const Grid& grid, const Tensor& prediction, const Tensor& inside,
               const std::string& dir) {
  const Problem& p = state.problem();
  BoundingBox box = p.domain_box();
  const int64_t rank = static_cast<int64_t>(p.coordinates.size());
  auto spacing = [&](int64_t a) {
    return grid.shape[a] > 1 ? (box.upper[a] - box.lower[a]) / static_cast<double>(grid.shape[a] - 1) : 1.0;
  };
  auto fields_of = [&](const Tensor& values, const Tensor& mask) {
    io::PointFields fields;
    for (size_t f = 0; f < p.fields.size(); ++f) fields[p.fields[f]] = flatten(slice(values, 1, f, f + 1));
    fields["inside"] = cast(flatten(mask), DType::f64);
    return fields;
  };
  // A 1-D problem in time is drawn as an (x, t) image; larger ones in time as a series.
  if (!p.time || rank <= 2) {
    std::vector<double> origin(box.lower.begin(), box.lower.end()), steps;
    for (int64_t a = 0; a < rank; ++a) steps.push_back(spacing(a));
    io::write_vti(dir + "/solution.vti", origin, steps, grid.shape, fields_of(prediction, inside));
  } else {
    const int64_t slices = grid.shape.back();
    std::vector<double> origin(box.lower.begin(), box.lower.end() - 1), steps;
    for (int64_t a = 0; a + 1 < rank; ++a) steps.push_back(spacing(a));
    Shape space_shape(grid.shape.begin(), grid.shape.end() - 1);
    std::vector<std::pair<double, std::string>> series;
    std::vector<double> times = grid.axes.back().to_vector<double>();
    // C order puts time fastest: slice k is every `slices`-th row from k.
    for (int64_t k = 0; k < slices; ++k) {
      Tensor rows = slice(prediction, 0, k, prediction.shape()[0], slices);
      Tensor mask = slice(inside, 0, k, inside.shape()[0], slices);
      const std::string name = "solution_" + std::to_string(k) + ".vti";
      io::write_vti(dir + "/" + name, origin, steps, space_shape, fields_of(rows, mask));
      series.emplace_back(times[k], name);
    }
    io::write_pvd(dir + "/solution.pvd", series);
  }
  // Every condition's points, tagged by condition index.
  std::vector<Tensor> points, tags;
  for (size_t c = 0; c < p.conditions.size(); ++c) {
    const Tensor& at = state.all_samples()[c].points;
    points.push_back(at);
    tags.push_back(full({at.shape()[0]}, static_cast<double>(c), DType::f64));
  }
  Tensor all = concat(points, 0);
  io::PointFields point_fields = fields_of(state.predict(all), ones({all.shape()[0]}, DType::b8));
  point_fields.erase("inside");
  point_fields["condition"] = concat(tags, 0);
  io::write_vtp(dir + "/points.vtp", slice(all, 1, 0, std::min<int64_t>(rank, 3)), point_fields);
}

}  // namespace

void write_results(PinnState& state, const History& history, const std::string& dir) {
  const Problem& p = state.problem();
  NoGradGuard no_grad;
  Grid grid = make_grid(p);
  Tensor prediction = state.predict(grid.points);
  Tensor inside = p.space->contains(slice(grid.points, 1, 0, p.spatial_dim()));
  write_hdf5(state, history, grid, prediction, inside, dir + "/solution.h5");
  if (p.output.vtk) write_vtk(state, grid, prediction, inside, dir);
}

}  // namespace eddy::pinn
