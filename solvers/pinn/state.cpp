// PinnState: the model, learnable parameters, sampled points and the loss.

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "eddy/autodiff/tape.h"
#include "eddy/compiler/taylor.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/dist/dtensor.h"
#include "eddy/ops/ops.h"
#include "solvers/pinn/sampler.h"
#include "solvers/pinn/solver.h"
#include "solvers/pinn/stages.h"
#include "solvers/pinn/weighting.h"

namespace eddy::pinn {
namespace {

// Space rows plus, with the interval `time`, a time column from the batch's extra unit coordinate
// (or the interval's start).
Tensor with_time(const std::optional<std::pair<double, double>>& time, DType dtype, const PointBatch& batch,
                 bool initial, int64_t first_row = 0, int64_t rows = -1) {
  const int64_t n = rows < 0 ? batch.size() : rows;
  const int64_t dim = batch.dim, columns = dim + (time ? 1 : 0);
  std::vector<double> values(static_cast<size_t>(n * columns));
  for (int64_t r = 0; r < n; ++r) {
    const int64_t source = first_row + r;
    for (int64_t k = 0; k < dim; ++k) values[r * columns + k] = batch.points[source * dim + k];
    if (time) {
      const double unit = initial ? 0.0 : batch.extras[source * batch.extra];
      values[r * columns + dim] = time->first + unit * (time->second - time->first);
    }
  }
  return rows_to_tensor(values, columns, dtype);
}

Tensor rows_of(const Tensor& t, const std::vector<int64_t>& rows) {
  return index_select(t, 0, tensor(rows));
}

// Rows reordered by the last column (time), ties kept in order: causal chunks are row blocks.
Tensor sorted_by_time(const Tensor& points) {
  const int64_t columns = points.shape()[1];
  const std::vector<double> times = flatten(slice(points, 1, columns - 1, columns)).to_vector<double>();
  std::vector<int64_t> order(times.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return times[a] < times[b]; });
  return rows_of(points, order);
}

// A causal condition's row weights (see SampledCondition) of the rows [first, last) of its `total`
// rows. Causal chunks are the consecutive blocks [k total / chunks, (k + 1) total / chunks) of all
// the rows, whichever ranks hold them.
Tensor causal_row_weights(int64_t first, int64_t last, int64_t total, int64_t chunks, DType dtype) {
  std::vector<double> values(static_cast<size_t>((last - first) * chunks), 0.0);
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * total / chunks, end = (k + 1) * total / chunks;
    for (int64_t row = std::max(begin, first); row < std::min(end, last); ++row) {
      values[(row - first) * chunks + k] = 1.0 / static_cast<double>(end - begin);
    }
  }
  return rows_to_tensor(values, chunks, dtype);
}

// A sum over a condition's rows, whole on every rank: split rows sum to a partial value, which
// is summed over the ranks here (one all-reduce) rather than by each op that reads it.
Tensor replicated(const Tensor& row_sum) {
  return is_distributed(row_sum) ? dist::reshard(row_sum, {Placement::replicate()}) : row_sum;
}

}  // namespace

PinnState::PinnState(const Problem& problem, dist::Communicator& comm)
    : problem_(problem),
      comm_(comm),
      mesh_(comm.size() > 1 ? dist::ProcessMesh::create({comm.size()}, {"dp"}, comm) : nullptr),
      time_(problem.time),
      constants_(problem.constants) {
  model_ = nn::make_pinn_model(problem.model);
  for (const LearnableParameter& p : problem.learnable) {
    learnable_[p.name] = full({1}, p.initial, problem.dtype).requires_grad_();
  }
  const size_t conditions = problem.conditions.size();
  added_.resize(conditions);
  rad_points_.resize(conditions);
  adaptive_weights_.assign(conditions, 1.0);
  causal_weights_.resize(conditions);
  if (problem.training.derivatives == DerivativeMode::taylor) {
    field_jets_ = std::make_shared<TaylorOperator>([this](const Tensor& at) { return network_fields(*model_, at); });
  }
}

std::vector<Tensor> PinnState::trainable() const {
  std::vector<Tensor> all = model_->parameters();
  for (const auto& [name, value] : learnable_) all.push_back(value);
  return all;
}

std::map<std::string, Tensor> PinnState::parameter_values() const {
  std::map<std::string, Tensor> values = learnable_;
  for (const auto& [name, value] : constants_) values[name] = scalar(value, problem_.dtype);
  return values;
}

Tensor PinnState::network_fields(nn::Module& network, const Tensor& points) {
  if (problem_.output_transforms.empty()) return network(points);
  EvaluationInputs inputs;
  inputs.points = points;
  inputs.fields = [&network](const Tensor& at) { return network(at); };
  inputs.parameters = parameter_values();
  EvaluationContext context(problem_.transform_symbols(), inputs);
  std::vector<Tensor> columns;
  for (const std::string& field : problem_.fields) {
    columns.push_back(evaluate(problem_.output_transforms.at(field), context));
  }
  return concat(columns, 1);
}

void PinnState::set_adaptive_weights(std::vector<double> weights) {
  EDDY_CHECK(weights.size() == adaptive_weights_.size(), "set_adaptive_weights: ", weights.size(), " weights for ",
             adaptive_weights_.size(), " conditions");
  adaptive_weights_ = std::move(weights);
}

double PinnState::effective_weight(size_t condition) const {
  return problem_.conditions[condition].weight * adaptive_weights_[condition];
}

std::vector<Tensor> PinnState::weight_tensors() const {
  std::vector<Tensor> weights;
  for (size_t c = 0; c < problem_.conditions.size(); ++c) {
    weights.push_back(scalar(effective_weight(c), problem_.dtype));
  }
  return weights;
}

void PinnState::record_causal_weights(size_t condition, const Tensor& weights) {
  causal_weights_[condition] = weights.to_vector<double>();
}

double PinnState::min_causal_weight() const {
  double smallest = 1.0;
  for (const std::vector<double>& weights : causal_weights_) {
    for (double w : weights) smallest = std::min(smallest, w);
  }
  return smallest;
}

bool PinnState::causal(size_t condition) const {
  return problem_.training.causal && problem_.conditions[condition].kind == ConditionKind::interior;
}

Tensor PinnState::interior_points(int64_t count, Generator& generator, bool whole_time) const {
  const int64_t extra = problem_.time ? 1 : 0;
  return with_time(whole_time ? problem_.time : time_, problem_.dtype,
                   problem_.space->interior_points(count, extra, problem_.sampler, generator), false);
}

SampledCondition PinnState::sample_condition(const Condition& c, Generator& generator) const {
  const Problem& p = problem_;
  const int64_t extra = p.time ? 1 : 0;
  SampledCondition s;
  switch (c.kind) {
    case ConditionKind::interior:
      s.points = interior_points(c.points, generator);
      return s;
    case ConditionKind::initial:
      s.points = with_time(time_, p.dtype, p.space->interior_points(c.points, 0, p.sampler, generator), true);
      return s;
    case ConditionKind::periodic: {
      const std::string face = "min_" + std::to_string(c.periodic_axis);
      PointBatch batch = p.space->boundary_points(c.points, extra, p.sampler, generator, {face});
      s.points = with_time(time_, p.dtype, batch, false);
      const double upper = p.space->bounding_box().upper[c.periodic_axis];
      std::vector<double> shift(p.coordinates.size(), 0.0);
      shift[c.periodic_axis] = upper - p.space->bounding_box().lower[c.periodic_axis];
      s.partner = s.points + cast(tensor(shift, {1, static_cast<int64_t>(shift.size())}), p.dtype);
      return s;
    }
    case ConditionKind::data:
      s.points = c.fixed_points;
      s.targets = c.data_values;
      return s;
    case ConditionKind::points:
      s.points = c.fixed_points;
      return s;
    case ConditionKind::boundary:
      break;
  }
  // Boundary: draw from the faces, keep what the `on` predicate selects, until there are enough.
  std::vector<Tensor> kept_points, kept_normals;
  int64_t kept = 0;
  // The predicate's own position when it has one (file:line:col: conditions.NAME.on).
  const std::string on = c.selector ? c.selector->where() : cat(p.source, ": conditions.", c.name, ".on");
  for (int round = 0; kept < c.points; ++round) {
    EDDY_CHECK(round < 50 || kept > 0, on, " selects no points of the boundary (is it a boundary face of the geometry?)");
    EDDY_CHECK(round < 1000, on, " selects too few boundary points");
    const int64_t draw = std::max<int64_t>(c.points - kept, 64) * (round == 0 ? 1 : 4);
    PointBatch batch = p.space->boundary_points(draw, extra, p.sampler, generator, c.faces);
    Tensor points = with_time(time_, p.dtype, batch, false);
    Tensor normals = rows_to_tensor(batch.normals, batch.dim, p.dtype);
    if (c.selector) {
      EvaluationInputs inputs;
      inputs.points = points;
      inputs.fields = [&](const Tensor&) -> Tensor {
        throw Error(cat(c.selector->where(), ": the `on` predicate may only use coordinates and parameters"));
      };
      inputs.parameters = parameter_values();
      inputs.normals = normals;
      inputs.tolerance = p.tolerance();
      EvaluationContext context(p.symbols(true), inputs);
      const std::vector<bool> selected = flatten(evaluate(*c.selector, context)).to_vector<bool>();
      std::vector<int64_t> rows;
      for (size_t i = 0; i < selected.size(); ++i) {
        if (selected[i]) rows.push_back(static_cast<int64_t>(i));
      }
      if (rows.empty()) continue;
      points = rows_of(points, rows);
      normals = rows_of(normals, rows);
    }
    // Batches come face by face, so a surplus is dropped evenly over the batch, at random within:
    // keeping the first rows put every point of a small condition on the first faces (an
    // interval's left end), and random rows put both of an interval's two points on one end for
    // about half of the seeds.
    if (points.shape()[0] > c.points - kept) {
      const std::vector<int64_t> rows = spread_subset(points.shape()[0], c.points - kept, generator);
      points = rows_of(points, rows);
      normals = rows_of(normals, rows);
    }
    kept += points.shape()[0];
    kept_points.push_back(points);
    kept_normals.push_back(normals);
  }
  s.points = concat(kept_points, 0);
  s.normals = concat(kept_normals, 0);
  return s;
}

void PinnState::sample(int64_t round) {
  NoGradGuard no_grad;
  drawn_.clear();
  all_samples_.resize(problem_.conditions.size());
  samples_.resize(problem_.conditions.size());
  for (size_t i = 0; i < problem_.conditions.size(); ++i) {
    if (rad_points_[i].defined()) {
      SampledCondition redistributed;
      redistributed.points = rad_points_[i];
      drawn_.push_back(std::move(redistributed));
    } else {
      // One stream per (seed, round, condition): a resumed run redraws exactly the same points.
      Generator generator = step_stream(problem_.seed, kResamplingSalt, round, i);
      drawn_.push_back(sample_condition(problem_.conditions[i], generator));
      if (!windows_.empty() && problem_.conditions[i].kind == ConditionKind::initial) {
        drawn_.back().targets = initial_targets(i, drawn_.back().points);
      }
    }
    assemble(i);
  }
}

void PinnState::set_rad_points(size_t condition, const Tensor& points) {
  rad_points_[condition] = points.detach();
  if (drawn_.empty()) return;  // sample() will use them
  drawn_[condition] = SampledCondition();
  drawn_[condition].points = rad_points_[condition];
  assemble(condition);
}

void PinnState::add_points(size_t condition, const Tensor& points) {
  Tensor& added = added_[condition];
  added = added.defined() ? concat({added, points.detach()}, 0) : points.detach();
  if (!drawn_.empty()) assemble(condition);  // else sample() will
}

void PinnState::assemble(size_t condition) {
  NoGradGuard no_grad;
  SampledCondition all = drawn_[condition];
  if (added_[condition].defined()) all.points = concat({all.points, added_[condition]}, 0);
  if (causal(condition)) all.points = sorted_by_time(all.points);
  const int64_t total = all.points.shape()[0];
  const auto [first, last] = dist::shard(0, total, comm_.rank(), comm_.size());
  // This rank's rows of a tensor of all of them, as the distributed tensor they make.
  auto split_by_rows = [&](const Tensor& rows) {
    if (!mesh_) return rows;
    Shape whole = rows.shape();
    whole[0] = total;
    return dist::from_local(rows, mesh_, {Placement::shard(0)}, whole);
  };
  SampledCondition split;
  for (Tensor SampledCondition::*member : kSampleTensors) {  // row_weights, not drawn, stays undefined
    if ((all.*member).defined()) split.*member = split_by_rows(slice(all.*member, 0, first, last));
  }
  if (causal(condition)) {
    split.row_weights =
        split_by_rows(causal_row_weights(first, last, total, problem_.training.causal->chunks, problem_.dtype));
  } else {
    split.row_weights = scalar(1.0 / static_cast<double>(std::max<int64_t>(total, 1)), problem_.dtype);
  }
  all_samples_[condition] = std::move(all);
  samples_[condition] = std::move(split);
}

Tensor PinnState::expression_residual(const Condition& c, const Tensor& points, const Tensor& normals,
                                      int64_t planned_rows, nn::Module* network) {
  nn::Module& fields = network ? *network : *model_;
  if (c.function) {
    const Tensor at = points.detach().requires_grad_();
    const Tensor residual = (*c.function)(at, network_fields(fields, at), parameter_values());
    EDDY_CHECK(residual.numel() == points.shape()[0] && residual.dim() <= 2,
               "conditions.", c.name, ": the supplied equation returned shape ", residual.shape(), " for ",
               points.shape()[0], " points (expected [N] or [N, 1])");
    return reshape(residual, {-1, 1});
  }
  EvaluationInputs inputs;
  inputs.points = points;
  inputs.fields = [this, &fields](const Tensor& at) { return network_fields(fields, at); };
  inputs.parameters = parameter_values();
  inputs.normals = normals;
  inputs.tolerance = problem_.tolerance();
  if (!network) inputs.field_jets = field_jets_;  // the Taylor operator is the model's
  inputs.planned_rows = planned_rows;
  EvaluationContext context(problem_.symbols(c.kind == ConditionKind::boundary), inputs);
  return evaluate(*c.residual, context);
}

void PinnState::check_boundary_selections() {
  if (!problem_.training.time_marching) return;
  const auto whole = time_;
  const int64_t windows = problem_.training.time_marching->windows;
  Generator probe(problem_.seed);
  for (int64_t k = 0; k < windows; ++k) {
    time_ = time_window(problem_, k);
    for (const Condition& c : problem_.conditions) {
      if (c.kind != ConditionKind::boundary || !c.selector) continue;
      try {
        sample_condition(c, probe);
      } catch (const Error& e) {
        time_ = whole;
        throw Error(cat(e.what(), " in time-marching window ", k + 1, " of ", windows, " (t from ",
                        time_window(problem_, k).first, " to ", time_window(problem_, k).second, ")"));
      }
    }
  }
  time_ = whole;
}

void PinnState::check_derivative_memory() {
  constexpr int64_t kSampleRows = 8;
  if (samples_.empty()) sample(0);
  for (size_t i = 0; i < problem_.conditions.size(); ++i) {
    const Condition& c = problem_.conditions[i];
    if (!c.residual || c.function) continue;  // data and periodic conditions have no residual to differentiate
    // This rank's rows, which are what its memory holds.
    const Tensor points = local_part(samples_[i].points), normals = local_part(samples_[i].normals);
    const int64_t rows = points.size(0);
    const int64_t sampled = std::min(rows, kSampleRows);
    if (sampled == 0) continue;
    expression_residual(c, slice(points, 0, 0, sampled), normals.defined() ? slice(normals, 0, 0, sampled) : Tensor(),
                        rows);
  }
}

Tensor PinnState::interior_residual(size_t condition, const Tensor& points) {
  const Condition& c = problem_.conditions[condition];
  EDDY_CHECK(c.kind == ConditionKind::interior, "interior_residual: conditions.", c.name,
             " is not an interior condition");
  return expression_residual(c, points, Tensor());
}

Tensor PinnState::residual_at_rows(size_t condition, const std::vector<int64_t>& rows) {
  const SampledCondition& all = all_samples_[condition];
  SampledCondition some;
  for (Tensor SampledCondition::*member : kSampleTensors) {
    if ((all.*member).defined()) some.*member = rows_of(all.*member, rows);
  }
  return reshape(residual_at(condition, some), {static_cast<int64_t>(rows.size()), -1});
}

Tensor PinnState::residual_at(size_t condition, const SampledCondition& s) {
  const Condition& c = problem_.conditions[condition];
  if (c.kind == ConditionKind::data) {
    Tensor prediction = network_fields(*model_, s.points);
    std::vector<Tensor> columns;
    for (int64_t f : c.data_fields) columns.push_back(slice(prediction, 1, f, f + 1));
    return concat(columns, 1) - s.targets;
  }
  if (c.kind == ConditionKind::periodic) {
    Tensor difference = network_fields(*model_, s.points) - network_fields(*model_, s.partner);
    std::vector<Tensor> columns;
    for (int64_t f : c.periodic_fields) columns.push_back(slice(difference, 1, f, f + 1));
    return concat(columns, 1);
  }
  const Tensor residual = expression_residual(c, s.points, s.normals);
  // Time marching: an initial condition after the first window matches the window before.
  return s.targets.defined() ? residual - s.targets : residual;
}

// The mean of the squared residual over all ranks' rows and the residual's columns; for a causal
// condition, its mean per time chunk, weighted as causal_loss says.
std::pair<Tensor, Tensor> PinnState::condition_loss_at(size_t condition, const SampledCondition& sample) {
  const Tensor residual = residual_at(condition, sample);
  const int64_t columns = residual.dim() == 2 ? residual.shape()[1] : 1;
  const Tensor squared = reshape(square(residual), {sample.points.shape()[0], columns});
  const double column_count = static_cast<double>(columns);
  if (!causal(condition)) return {replicated(sum(squared) * sample.row_weights) / column_count, Tensor()};
  const Tensor row_sums = transpose(sum(squared, {1}, true));  // [1, rows]
  const Tensor chunk_means = replicated(reshape(matmul(row_sums, sample.row_weights), {-1})) / column_count;
  CausalLoss causal = causal_loss(chunk_means, *problem_.training.causal);
  return {causal.loss, causal.weights};
}

Tensor PinnState::condition_loss(size_t condition) {
  auto [loss, causal_weights] = condition_loss_at(condition, samples_[condition]);
  if (causal_weights.defined()) record_causal_weights(condition, causal_weights);
  return loss;
}

LossParts PinnState::loss_parts(const std::vector<SampledCondition>& samples, const std::vector<Tensor>& weights,
                                const std::vector<bool>& left_out) {
  LossParts parts;
  for (size_t i = 0; i < problem_.conditions.size(); ++i) {
    if (i < left_out.size() && left_out[i]) {
      parts.terms.emplace_back();
      parts.causal_weights.emplace_back();
      continue;
    }
    auto [term, causal_weights] = condition_loss_at(i, samples[i]);
    Tensor weighted = weights[i] * term;
    parts.total = parts.total.defined() ? parts.total + weighted : weighted;
    parts.terms.push_back(term);
    parts.causal_weights.push_back(causal_weights);
  }
  return parts;
}

Tensor PinnState::loss(std::vector<double>* terms) {
  const LossParts parts = loss_parts(samples_, weight_tensors());
  if (terms) terms->clear();
  for (size_t i = 0; i < parts.terms.size(); ++i) {
    if (parts.causal_weights[i].defined()) record_causal_weights(i, parts.causal_weights[i]);
    if (terms) terms->push_back(parts.terms[i].item<double>());
  }
  return parts.total;
}

}  // namespace eddy::pinn
