#include "solvers/pinn/fused_interior.h"

#include <algorithm>

#include "eddy/autodiff/tape.h"
#include "eddy/compiler/passes.h"
#include "eddy/ops/ops.h"
#include "solvers/pinn/expression.h"
#include "solvers/pinn/taylor_mlp_pass.h"

namespace eddy::pinn {
namespace {

// The widest hidden layer the pass takes. Measured per step against the compiled step, one thread
// (2026-12-05, Intel Xeon): faster at widths 20 to 28 (Burgers, 8 layers: 1.35x float32 and
// 1.3x float64 at 20, about 1.9x at 24 and 28), slower from 32 on in the example files (heat2d,
// width 32: 1.4x slower; poisson_lshape, 40: 1.25x; cavity, 64: 1.2x), where the compiled step's
// row-major products run OpenBLAS at K >= 32 near its peak.
constexpr int64_t kWidestHiddenLayer = 28;

// The sum of a chunk's values (the padding's are 0: the head masks them).
template <typename T>
double sum_of(const Tensor& values) {
  const T* v = values.data<T>();
  const int64_t n = values.numel();
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(v[j]);
  return sum;
}

// into = scale * derivative, over a whole chunk.
template <typename T>
void scaled_cotangent(const Tensor& derivative, double scale, T* into) {
  const T* d = derivative.data<T>();
  const int64_t n = derivative.numel();
  for (int64_t j = 0; j < n; ++j) into[j] = static_cast<T>(scale) * d[j];
}

int64_t widest_hidden_layer(const nn::PlainMlp& mlp) {
  int64_t widest = 0;
  for (size_t l = 0; l + 1 < mlp.weights.size(); ++l) widest = std::max(widest, mlp.weights[l].size(1));
  return widest;
}

}  // namespace

std::unique_ptr<FusedInterior> FusedInterior::make(PinnState& state, size_t condition, std::string& why_not) {
  const Problem& problem = state.problem();
  const Condition& c = problem.conditions.at(condition);
  EDDY_CHECK(c.kind == ConditionKind::interior, "FusedInterior: conditions.", c.name, " is not an interior condition");
  why_not.clear();
  std::string model_has;
  std::optional<nn::PlainMlp> mlp = nn::plain_mlp(state.model(), model_has);
  if (!compiler::pass_enabled("fused_interior")) {
    why_not = "EDDY_COMPILER_DISABLE names fused_interior";
  } else if (!c.residual) {
    why_not = "its equation is supplied as a function";
  } else if (state.mesh() || state.communicator().size() > 1) {
    why_not = "the run is distributed";
  } else if (problem.dtype != DType::f32 && problem.dtype != DType::f64) {
    why_not = cat("the ", problem.dtype, " dtype");
  } else if (state.trainable().at(0).device() != cpu()) {
    why_not = "the model is not on the CPU";
  } else if (state.causal(condition)) {
    why_not = "causal weighting";
  } else if (!problem.output_transforms.empty()) {
    why_not = "output transforms";
  } else if (!mlp) {
    why_not = cat("the model has ", model_has);
  } else if (!taylor_mlp_supports(mlp->activation)) {
    why_not = cat("the ", nn::activation_name(mlp->activation), " activation");
  } else if (const int64_t width = widest_hidden_layer(*mlp); width > kWidestHiddenLayer) {
    why_not = cat("hidden layers of width ", width, ": the pass is faster up to ", kWidestHiddenLayer);
  }
  if (!why_not.empty()) return nullptr;
  const std::vector<int> second = pure_second_coordinates(*c.residual, problem.symbols(false));
  std::unique_ptr<FusedInterior> fused(new FusedInterior(state, condition, *mlp, second));
  // Traced and compiled now, at the chunks' shape: an equation that needs more than the streams
  // hold (a mixed derivative, say) is turned away here, with the evaluator's message.
  const int64_t chunk = fused->chunk_points_;
  const size_t columns = static_cast<size_t>(problem.coordinates.size()) +
                         static_cast<size_t>(taylor_mlp_streams(*mlp, second) * mlp->biases.back().numel()) + 1;
  std::vector<Tensor> probe;
  for (size_t k = 0; k < columns; ++k) probe.push_back(zeros({chunk, 1}, problem.dtype));
  try {
    fused->head_(probe);
  } catch (const Error& error) {
    // The first line: the rest is the expression's excerpt with a caret.
    const std::string message = error.what();
    why_not = message.substr(0, message.find('\n'));
    return nullptr;
  }
  return fused;
}

FusedInterior::FusedInterior(PinnState& state, size_t condition, nn::PlainMlp mlp, std::vector<int> second)
    : state_(state),
      condition_(condition),
      mlp_(std::move(mlp)),
      second_(std::move(second)),
      chunk_points_(taylor_mlp_chunk(mlp_, second_)),
      head_([this](const std::vector<Tensor>& columns) { return residual_head(columns); }) {
  const std::vector<Tensor> trainable = state.trainable();
  auto index_of = [&](const Tensor& parameter) {
    for (size_t i = 0; i < trainable.size(); ++i) {
      if (trainable[i].impl() == parameter.impl()) return i;
    }
    throw Error("FusedInterior: a layer's parameter is not among the trainable tensors");
  };
  for (const Tensor& weight : mlp_.weights) trainable_index_.push_back(index_of(weight));
  for (const Tensor& bias : mlp_.biases) trainable_index_.push_back(index_of(bias));
  for (const auto& [name, value] : state.learnable()) {
    learnable_.push_back(value);
    trainable_index_.push_back(index_of(value));
  }
}

std::vector<Tensor> FusedInterior::residual_head(const std::vector<Tensor>& columns) const {
  const Problem& problem = state_.problem();
  const size_t inputs = problem.coordinates.size(), fields = static_cast<size_t>(mlp_.biases.back().numel());
  auto given = std::make_shared<FieldColumns>();
  given->coordinates.assign(columns.begin(), columns.begin() + static_cast<std::ptrdiff_t>(inputs));
  std::vector<Tensor> streams;
  for (size_t k = inputs; k + 1 < columns.size(); ++k) streams.push_back(columns[k].detach().requires_grad_());
  const Tensor& mask = columns.back();
  auto stream = [&](size_t s) {
    return std::vector<Tensor>(streams.begin() + static_cast<std::ptrdiff_t>(s * fields),
                               streams.begin() + static_cast<std::ptrdiff_t>((s + 1) * fields));
  };
  given->values = stream(0);
  for (size_t i = 0; i < inputs; ++i) given->first.push_back(stream(1 + i));
  given->second_coordinates = second_;
  for (size_t k = 0; k < second_.size(); ++k) given->second.push_back(stream(1 + inputs + k));

  EvaluationInputs evaluation;
  evaluation.points = concat(given->coordinates, 1);
  evaluation.parameters = state_.parameter_values();
  evaluation.tolerance = problem.tolerance();
  evaluation.field_columns = given;
  EvaluationContext context(problem.symbols(false), evaluation);
  // Learnable parameters are captured by reference, so each run reads their current values.
  const Tensor squares = square(pinn::evaluate(*problem.conditions[condition_].residual, context)) * mask;
  std::vector<Tensor> with_respect_to = streams;
  with_respect_to.insert(with_respect_to.end(), learnable_.begin(), learnable_.end());
  std::vector<Tensor> outputs{squares};
  const std::vector<Tensor> derivatives = grad({sum(squares)}, with_respect_to);
  outputs.insert(outputs.end(), derivatives.begin(), derivatives.end());
  return outputs;
}

FusedInterior::Term FusedInterior::evaluate(double weight) {
  const SampledCondition& sample = state_.samples().at(condition_);
  const DType dtype = sample.points.dtype();
  // The condition's term is the squares' sum times the row weight (1 / rows): the cotangents of
  // weight * term carry both factors.
  const double row_weight = sample.row_weights.item<double>();
  const double scale = weight * row_weight;
  // Each chunk's derivatives with respect to the learnable parameters, added up in chunk order
  // after the pass, so that the sums do not depend on which thread ran which chunk.
  std::vector<std::vector<double>> parameter_parts(
      static_cast<size_t>((sample.points.size(0) + chunk_points_ - 1) / chunk_points_));
  // Which of a chunk's points are valid (1) and which are padding (0): all of them but in the last.
  const int64_t points = sample.points.size(0), in_last = points - (points - 1) / chunk_points_ * chunk_points_;
  const Tensor full_mask = ones({chunk_points_, 1}, dtype);
  const Tensor last_mask = concat({ones({in_last, 1}, dtype), zeros({chunk_points_ - in_last, 1}, dtype)}, 0);
  const ChunkHead head = [&](const HeadChunk& chunk) {
    std::vector<Tensor> columns;
    // The pass's own arrays, read in place: the program only reads its inputs.
    auto column = [&](const void* data) {
      return from_blob(const_cast<void*>(data), {chunk.capacity, 1}, dtype, [](void*) {});
    };
    for (const void* coordinate : chunk.coordinates) columns.push_back(column(coordinate));
    for (const void* stream : chunk.streams) columns.push_back(column(stream));
    columns.push_back(chunk.count == chunk.capacity ? full_mask : last_mask);
    std::vector<Tensor> outputs;
    {
      std::lock_guard<std::mutex> one_at_a_time(head_mutex_);
      outputs = head_(columns);
    }
    const bool single = dtype == DType::f32;
    for (size_t k = 0; k < chunk.cotangents.size(); ++k) {
      const Tensor derivative = contiguous(outputs[1 + k]);
      if (single) {
        scaled_cotangent(derivative, scale, static_cast<float*>(chunk.cotangents[k]));
      } else {
        scaled_cotangent(derivative, scale, static_cast<double*>(chunk.cotangents[k]));
      }
    }
    std::vector<double>& parameters = parameter_parts[static_cast<size_t>(chunk.first / chunk.capacity)];
    for (size_t p = 0; p < learnable_.size(); ++p) {
      parameters.push_back(outputs[1 + chunk.cotangents.size() + p].item<double>());
    }
    const Tensor squares = contiguous(outputs[0]);
    return single ? sum_of<float>(squares) : sum_of<double>(squares);
  };
  const TaylorMlpResult result = taylor_mlp_pass(mlp_, sample.points, second_, head);

  Term term;
  term.value = scalar(result.loss * row_weight, dtype);
  for (const Tensor& trainable : state_.trainable()) term.gradients.push_back(zeros_like(trainable));
  const size_t layers = mlp_.weights.size();
  for (size_t l = 0; l < layers; ++l) {
    term.gradients[trainable_index_[l]] = result.weights[l];
    term.gradients[trainable_index_[layers + l]] = result.biases[l];
  }
  for (size_t p = 0; p < learnable_.size(); ++p) {
    double derivative = 0;
    for (const std::vector<double>& part : parameter_parts) derivative += part[p];
    term.gradients[trainable_index_[2 * layers + p]] = full({1}, scale * derivative, dtype);
  }
  return term;
}

}  // namespace eddy::pinn
