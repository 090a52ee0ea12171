#pragma once
// One evaluation of the training objective: the loss at the state's current points and weights,
// each condition's term, and the gradient with respect to every trainable tensor. Adam takes one
// per step, L-BFGS one per closure call. The evaluation is a pure function of tensors, so it runs
// compiled (solvers/common/step_function.h): the points and the loss weights are its inputs,
// since they change between steps (resampling, refinement, grad_norm weighting), and the
// trainable tensors are captured by reference, since the optimisers update them in place.
// Sampling, the adaptive decisions that read values on the host, logging and the NaN check stay
// with the caller. Interior conditions that fused_interior.h applies to run as its one pass per
// chunk of points instead, beside the compiled step, and their terms and gradients are added.

#include <functional>
#include <string>
#include <vector>

#include "solvers/common/step_function.h"
#include "solvers/pinn/fused_interior.h"
#include "solvers/pinn/solver.h"

namespace eddy::pinn {

struct StepEvaluation {
  Tensor loss;                    // one element
  std::vector<double> terms;      // each condition's unweighted loss
  // Of the loss, in PinnState::trainable() order: on several ranks each rank's part, which the
  // caller sums over the ranks once (dist::sum_gradients, or a ZeRO optimiser's reduce-scatter).
  std::vector<Tensor> gradients;
};

class TrainingStep {
 public:
  // `note` receives the one-line compile report, or why the step runs eagerly, and which interior
  // conditions run fused (or why not).
  // `warn`, where given, receives why the step runs eagerly (StepFunction).
  TrainingStep(PinnState& state, bool compiled, std::function<void(const std::string&)> note,
               std::function<void(const std::string&)> warn = {});
  TrainingStep(const TrainingStep&) = delete;
  TrainingStep& operator=(const TrainingStep&) = delete;

  // Also records the causal weights in the state, as PinnState::loss does.
  StepEvaluation evaluate();
  // The compiled step function, or the eager one (solvers/common/step_function.h).
  const solvers::StepFunction& function() const { return function_; }

  // The step's inputs at the state's current samples and loss weights.
  std::vector<Tensor> inputs() const;
  // The step's graph on `inputs`, as compile captures it (without the fused conditions, which
  // run beside it); abstractly, no kernel runs, which is how a step is captured for a machine
  // that is not this one.
  compiler::Trace trace(const std::vector<Tensor>& inputs, compiler::Evaluation evaluation) const;

 private:
  std::vector<Tensor> objective(const std::vector<Tensor>& inputs) const;

  PinnState& state_;
  std::vector<Tensor> trainable_;
  std::vector<std::unique_ptr<FusedInterior>> fused_;  // per condition; null where it runs compiled
  solvers::StepFunction function_;
};

}  // namespace eddy::pinn
