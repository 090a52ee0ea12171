#include "solvers/pinn/training_step.h"

#include <optional>

#include "eddy/autodiff/tape.h"
#include "eddy/dist/dtensor.h"
#include "eddy/ops/ops.h"

namespace eddy::pinn {
namespace {

std::vector<Tensor> sample_tensors(const std::vector<SampledCondition>& samples) {
  std::vector<Tensor> tensors;
  for (const SampledCondition& sample : samples) {
    for (Tensor SampledCondition::*member : kSampleTensors) {
      if ((sample.*member).defined()) tensors.push_back(sample.*member);
    }
  }
  return tensors;
}

// Samples shaped like `layout` (the same tensors present), taken from `tensors` from `next` on,
// in sample_tensors' order.
std::vector<SampledCondition> samples_from(const std::vector<SampledCondition>& layout,
                                           const std::vector<Tensor>& tensors, size_t& next) {
  std::vector<SampledCondition> samples(layout.size());
  for (size_t c = 0; c < layout.size(); ++c) {
    for (Tensor SampledCondition::*member : kSampleTensors) {
      if ((layout[c].*member).defined()) samples[c].*member = tensors.at(next++);
    }
  }
  return samples;
}

}  // namespace

TrainingStep::TrainingStep(PinnState& state, bool compiled, std::function<void(const std::string&)> note,
                           std::function<void(const std::string&)> warn)
    : state_(state),
      trainable_(state.trainable()),
      function_("training step", [this](const std::vector<Tensor>& inputs) { return objective(inputs); }, compiled,
                note, std::move(warn)) {
  const std::vector<Condition>& conditions = state.problem().conditions;
  for (size_t c = 0; c < conditions.size(); ++c) {
    std::unique_ptr<FusedInterior> fused;
    if (compiled && conditions[c].kind == ConditionKind::interior) {
      std::string why_not;
      fused = FusedInterior::make(state, c, why_not);
      if (note) {
        note(fused ? cat("conditions.", conditions[c].name, ": one pass per chunk of points (fused_interior)")
                   : cat("conditions.", conditions[c].name, ": not fused (", why_not, ")"));
      }
    }
    fused_.push_back(std::move(fused));
  }
}

// Inputs: the sample tensors, then one weight per condition. Outputs: the loss, the terms of the
// conditions that are not fused, the causal weights of the causal conditions, the gradients.
std::vector<Tensor> TrainingStep::objective(const std::vector<Tensor>& inputs) const {
  size_t next = 0;
  const std::vector<SampledCondition> samples = samples_from(state_.samples(), inputs, next);
  const std::vector<Tensor> weights(inputs.begin() + static_cast<std::ptrdiff_t>(next), inputs.end());
  std::vector<bool> fused;
  for (const std::unique_ptr<FusedInterior>& condition : fused_) fused.push_back(condition != nullptr);
  const LossParts parts = state_.loss_parts(samples, weights, fused);
  // Every condition fused: the compiled step contributes nothing.
  const Tensor total = parts.total.defined() ? parts.total : zeros({}, state_.problem().dtype);
  std::vector<Tensor> outputs{total};
  for (const Tensor& term : parts.terms) {
    if (term.defined()) outputs.push_back(term);
  }
  for (const Tensor& causal_weights : parts.causal_weights) {
    if (causal_weights.defined()) outputs.push_back(causal_weights);
  }
  const std::vector<Tensor> gradients = grad({total}, trainable_);
  outputs.insert(outputs.end(), gradients.begin(), gradients.end());
  return outputs;
}

std::vector<Tensor> TrainingStep::inputs() const {
  std::vector<Tensor> inputs = sample_tensors(state_.samples());
  for (const Tensor& weight : state_.weight_tensors()) inputs.push_back(weight);
  return inputs;
}

compiler::Trace TrainingStep::trace(const std::vector<Tensor>& inputs, compiler::Evaluation evaluation) const {
  return compiler::trace([this](const std::vector<Tensor>& in) { return objective(in); }, inputs, evaluation);
}

StepEvaluation TrainingStep::evaluate() {
  // The gradients come out as each rank's part: summed in the backward pass, each parameter's
  // would be sent apart, once per use.
  std::optional<dist::DeferGradientSums> per_rank_parts;
  if (state_.mesh()) per_rank_parts.emplace(state_.communicator());
  const std::vector<Tensor> outputs = function_(inputs());

  StepEvaluation evaluation;
  size_t next = 0;
  evaluation.loss = outputs.at(next++);
  const size_t conditions = state_.problem().conditions.size();
  std::vector<FusedInterior::Term> fused_terms(conditions);
  for (size_t c = 0; c < conditions; ++c) {
    if (fused_[c]) {
      fused_terms[c] = fused_[c]->evaluate(state_.effective_weight(c));
      evaluation.terms.push_back(fused_terms[c].value.item<double>());
    } else {
      evaluation.terms.push_back(outputs.at(next++).item<double>());
    }
  }
  for (size_t c = 0; c < conditions; ++c) {
    if (state_.causal(c)) state_.record_causal_weights(c, outputs.at(next++));
  }
  evaluation.gradients.assign(outputs.begin() + static_cast<std::ptrdiff_t>(next), outputs.end());
  for (size_t c = 0; c < conditions; ++c) {
    if (!fused_[c]) continue;
    evaluation.loss = evaluation.loss + state_.effective_weight(c) * fused_terms[c].value;
    for (size_t i = 0; i < evaluation.gradients.size(); ++i) {
      evaluation.gradients[i] = evaluation.gradients[i] + fused_terms[c].gradients[i];
    }
  }
  return evaluation;
}

}  // namespace eddy::pinn
