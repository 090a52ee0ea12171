#include "solvers/pinn/output.h"

#include <algorithm>
#include <vector>

#include "eddy/autodiff/tape.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/io/hdf5.h"
#include "eddy/io/vtk.h"
#include "eddy/ops/ops.h"
#include "solvers/common/checkpoint_history.h"
#include "solvers/common/run_files.h"
#include "solvers/common/training_loop.h"
#include "solvers/pinn/stages.h"

namespace eddy::pinn {

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

// The output grid: one linspace per coordinate, whose combinations in C order are its points.
struct Grid {
  std::vector<Tensor> axes;
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
  return grid;
}

// This rank's rows [first, last) of the grid's first axis, and the model evaluated on them plus
// the next rank's first row, which the two ranks' VTK pieces share.
struct GridBlock {
  int64_t first = 0, last = 0;
  int64_t points_per_row = 0;  // of the first axis
  Tensor prediction, inside;   // at the evaluated points: [points, fields] and [points]
  Shape shape;                 // of the evaluated rows
  int64_t owned_points() const { return points_per_row * (last - first); }
};

GridBlock evaluate_block(PinnState& state, const Grid& grid) {
  const Problem& p = state.problem();
  const dist::Communicator& comm = state.communicator();
  GridBlock block;
  std::tie(block.first, block.last) = dist::shard(0, grid.shape[0], comm.rank(), comm.size());
  const int64_t evaluated_last = block.first == block.last ? block.last : std::min(block.last + 1, grid.shape[0]);
  std::vector<Tensor> block_axes = grid.axes;  // no rank forms the whole grid's points
  block_axes[0] = slice(grid.axes[0], 0, block.first, evaluated_last);
  const Tensor points = meshgrid_points(block_axes);
  block.points_per_row = numel(Shape(grid.shape.begin() + 1, grid.shape.end()));
  // In chunks: the network's activations over a grid of 1e8 points at once took 16 GB, where the
  // points and fields take 2.4.
  constexpr int64_t kPointsPerChunk = int64_t{1} << 16;
  const int64_t count = points.shape()[0];
  std::vector<Tensor> predictions;
  for (int64_t start = 0; start < count; start += kPointsPerChunk) {
    predictions.push_back(state.predict(slice(points, 0, start, std::min(start + kPointsPerChunk, count))));
  }
  block.prediction = predictions.empty() ? state.predict(points) : concat(predictions, 0);
  block.inside = p.space->contains(slice(points, 1, 0, p.spatial_dim()));
  block.shape = grid.shape;
  block.shape[0] = evaluated_last - block.first;
  return block;
}

void write_hdf5(PinnState& state, const History& history, const Grid& grid, const GridBlock& block,
                const std::string& path) {
  const Problem& p = state.problem();
  io::Hdf5Writer out(path, state.communicator());
  for (size_t a = 0; a < p.coordinates.size(); ++a) out.write("coordinates/" + p.coordinates[a], grid.axes[a]);
  Shape owned_shape = grid.shape;
  owned_shape[0] = block.last - block.first;
  auto owned_rows = [&](const Tensor& values) {
    return reshape(slice(values, 0, 0, block.owned_points()), owned_shape);
  };
  for (size_t f = 0; f < p.fields.size(); ++f) {
    out.write_rows("fields/" + p.fields[f], owned_rows(slice(block.prediction, 1, f, f + 1)), block.first,
                   grid.shape[0]);
  }
  out.write_rows("fields/inside", owned_rows(block.inside), block.first, grid.shape[0]);
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
  if (!history.stage.empty()) {
    out.write("history/stage", tensor(history.stage));
    if (p.training.continuation) {  // the continued parameter's value at each logged step
      std::vector<double> values;
      for (int64_t stage : history.stage) values.push_back(p.training.continuation->values[stage]);
      out.write("history/" + p.training.continuation->parameter, tensor(values));
    }
  }
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

// Rank 0 removes the VTK files an earlier run left in `dir` (solution.vti or .pvti and its pieces,
// one such image per time slice of a series, solution.pvd, points.vtp) before any rank writes this
// run's. ParaView opens a series or a parallel image by its file names, so a slice or a piece
// this run does not write again would be shown as part of its results.
void remove_earlier_vtk_files(dist::Communicator& comm, const std::string& dir) {
  if (comm.rank() == 0) solvers::remove_earlier_outputs(dir, solvers::kPinnVtkFiles);
  comm.barrier();
}

// A .vti of this rank's block or, on several ranks, its piece and (rank 0) the .pvti joining
// them; returns the file's name, relative to `dir`.
std::string write_image(const dist::Communicator& comm, const std::string& dir, const std::string& stem,
                        const std::vector<double>& origin, const std::vector<double>& spacing, const Shape& whole,
                        const GridBlock& block, const Shape& block_shape, const io::PointFields& fields) {
  if (comm.size() == 1) {
    io::write_vti(dir + "/" + stem + ".vti", origin, spacing, whole, fields);
    return stem + ".vti";
  }
  auto piece_file = [&](int rank) { return cat(stem, "_piece", rank, ".vti"); };
  if (block.last > block.first) {
    io::write_vti_piece(dir + "/" + piece_file(comm.rank()), origin, spacing, block.first, block_shape, fields);
  }
  if (comm.rank() == 0) {
    std::vector<io::VtiPiece> pieces;
    for (int r = 0; r < comm.size(); ++r) {
      const auto [first, last] = dist::shard(0, whole[0], r, comm.size());
      if (last > first) pieces.push_back({first, std::min(last + 1, whole[0]) - first, piece_file(r)});
    }
    io::write_pvti(dir + "/" + stem + ".pvti", origin, spacing, whole, pieces, fields);
  }
  return stem + ".pvti";
}

void write_vtk(PinnState& state, const Grid& grid, const GridBlock& block, const std::string& dir) {
  const Problem& p = state.problem();
  const dist::Communicator& comm = state.communicator();
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
    write_image(comm, dir, "solution", origin, steps, grid.shape, block, block.shape,
                fields_of(block.prediction, block.inside));
  } else {
    const int64_t slices = grid.shape.back();
    std::vector<double> origin(box.lower.begin(), box.lower.end() - 1), steps;
    for (int64_t a = 0; a + 1 < rank; ++a) steps.push_back(spacing(a));
    const Shape space_shape(grid.shape.begin(), grid.shape.end() - 1);
    const Shape block_space_shape(block.shape.begin(), block.shape.end() - 1);
    std::vector<std::pair<double, std::string>> series;
    std::vector<double> times = grid.axes.back().to_vector<double>();
    // C order puts time fastest: slice k is every `slices`-th row from k.
    for (int64_t k = 0; k < slices; ++k) {
      const Tensor rows = slice(block.prediction, 0, k, block.prediction.shape()[0], slices);
      const Tensor mask = slice(block.inside, 0, k, block.inside.shape()[0], slices);
      series.emplace_back(times[k], write_image(comm, dir, "solution_" + std::to_string(k), origin, steps,
                                                space_shape, block, block_space_shape, fields_of(rows, mask)));
    }
    if (comm.rank() == 0) io::write_pvd(dir + "/solution.pvd", series);
  }
  if (comm.rank() != 0) return;
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
  // Every coordinate as an array too: a point has at most three, so a 3-D problem in time lost
  // t, and a 1-D or 2-D one shows it only as y or z.
  for (size_t a = 0; a < p.coordinates.size(); ++a) {
    point_fields[p.coordinates[a]] = flatten(slice(all, 1, static_cast<int64_t>(a), static_cast<int64_t>(a) + 1));
  }
  io::write_vtp(dir + "/points.vtp", slice(all, 1, 0, std::min<int64_t>(rank, 3)), point_fields);
}

}  // namespace

bool writes_vtk(const Problem& problem) { return problem.output.vtk && problem.spatial_dim() <= 3; }

void write_results(PinnState& state, const History& history, const std::string& dir) {
  NoGradGuard no_grad;
  const Grid grid = make_grid(state.problem());
  const GridBlock block = evaluate_block(state, grid);
  write_hdf5(state, history, grid, block, dir + "/solution.h5");
  remove_earlier_vtk_files(state.communicator(), dir);
  if (writes_vtk(state.problem())) write_vtk(state, grid, block, dir);
  // Rank 0 writes the shared files (.pvti, .pvd) after the others are done with their pieces:
  // waiting here means that, on every rank, the whole output is on disk when this returns.
  state.communicator().barrier();
}

namespace {

std::vector<double> as_doubles(const std::vector<int64_t>& steps) { return {steps.begin(), steps.end()}; }

std::vector<int64_t> as_steps(const std::vector<double>& values) { return {values.begin(), values.end()}; }

}  // namespace

void save_history(const History& history, const Problem& p, nn::StateDict& saved) {
  using solvers::save_series;
  save_series(saved, "step", as_doubles(history.steps));
  save_series(saved, "loss", history.loss);
  for (size_t c = 0; c < p.conditions.size(); ++c) {
    std::vector<double> term, weight;
    for (const auto& row : history.terms) term.push_back(row[c]);
    for (const auto& row : history.weights) weight.push_back(row[c]);
    save_series(saved, "loss_" + p.conditions[c].name, term);
    save_series(saved, "weight_" + p.conditions[c].name, weight);
  }
  save_series(saved, "min_causal_weight", history.min_causal_weight);
  if (stage_count(p) > 1) save_series(saved, "stage", as_doubles(history.stage));
  for (const LearnableParameter& parameter : p.learnable) {
    std::vector<double> values;
    for (const auto& row : history.learned) values.push_back(row.at(parameter.name));
    save_series(saved, "learned." + parameter.name, values);
  }
  save_series(saved, "metric_step", as_doubles(history.metric_steps));
  for (const auto& [field, l2] : history.metrics.empty() ? std::map<std::string, double>()
                                                         : history.metrics.front().relative_l2) {
    std::vector<double> l2s, max_errors;
    for (const Metrics& m : history.metrics) {
      l2s.push_back(m.relative_l2.at(field));
      max_errors.push_back(m.max_error.at(field));
    }
    save_series(saved, "relative_l2." + field, l2s);
    save_series(saved, "max_error." + field, max_errors);
  }
}

History restored_history(const nn::StateDict& saved, const Problem& p, const std::string& checkpoint) {
  auto series = [&](const std::string& name) { return solvers::restored_series(saved, name, checkpoint); };
  History history;
  history.steps = as_steps(series("step"));
  history.loss = series("loss");
  const size_t records = history.steps.size();
  history.terms.assign(records, std::vector<double>(p.conditions.size()));
  history.weights = history.terms;
  for (size_t c = 0; c < p.conditions.size(); ++c) {
    const std::vector<double> term = series("loss_" + p.conditions[c].name);
    const std::vector<double> weight = series("weight_" + p.conditions[c].name);
    for (size_t r = 0; r < records; ++r) {
      history.terms[r][c] = term.at(r);
      history.weights[r][c] = weight.at(r);
    }
  }
  history.min_causal_weight = series("min_causal_weight");
  if (stage_count(p) > 1) history.stage = as_steps(series("stage"));
  history.learned.resize(records);
  for (const LearnableParameter& parameter : p.learnable) {
    const std::vector<double> values = series("learned." + parameter.name);
    for (size_t r = 0; r < records; ++r) history.learned[r][parameter.name] = values.at(r);
  }
  history.metric_steps = as_steps(series("metric_step"));
  history.metrics.resize(history.metric_steps.size());
  for (const std::string& field : p.fields) {
    if (!saved.count("history.relative_l2." + field)) continue;  // a field the reference does not give
    const std::vector<double> l2s = series("relative_l2." + field), max_errors = series("max_error." + field);
    for (size_t m = 0; m < history.metrics.size(); ++m) {
      history.metrics[m].relative_l2[field] = l2s.at(m);
      history.metrics[m].max_error[field] = max_errors.at(m);
    }
  }
  return history;
}

}  // namespace eddy::pinn
