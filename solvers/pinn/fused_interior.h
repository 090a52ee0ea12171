#pragma once
// An interior condition's term of the training loss, and its gradient, in one pass per chunk of
// points (taylor_mlp_pass.h) instead of the compiled step's whole-array layers: the residual,
// written in the problem file, runs between the chunk's forward and backward pass as a small
// compiled function of the chunk's Taylor streams (EvaluationInputs::field_columns).
//
// The training step (training_step.h) uses it for every interior condition it applies to: a plain
// mlp with a tanh, sin, gelu or silu activation, on one process and the CPU; a residual of the
// fields' values, first and pure second derivatives and the problem's parameters, learnable ones
// included, without output transforms or causal weighting. Anything else runs in the compiled step
// as before, and make() says why.
// EDDY_COMPILER_DISABLE=fused_interior turns it off.

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eddy/compiler/compile.h"
#include "eddy/nn/pinn_models.h"
#include "solvers/pinn/solver.h"

namespace eddy::pinn {

class FusedInterior {
 public:
  // The fused form of `condition`'s term, or null with `why_not` set.
  static std::unique_ptr<FusedInterior> make(PinnState& state, size_t condition, std::string& why_not);

  struct Term {
    Tensor value;                   // the condition's unweighted loss: the mean squared residual
    std::vector<Tensor> gradients;  // of weight * value, in PinnState::trainable() order (zeros
                                    // for the tensors it does not depend on)
  };
  // At the condition's current points, with the condition's current loss weight.
  Term evaluate(double weight);

 private:
  FusedInterior(PinnState& state, size_t condition, nn::PlainMlp mlp, std::vector<int> second);
  // The residual's squares at a chunk and their derivatives: inputs the coordinates, the streams
  // and a mask (1 for the chunk's points, 0 for its padding), [chunk, 1] each; outputs the masked
  // squares, their derivative with respect to each stream, then their sum's derivative with
  // respect to each learnable parameter.
  std::vector<Tensor> residual_head(const std::vector<Tensor>& columns) const;

  PinnState& state_;
  size_t condition_;
  nn::PlainMlp mlp_;
  std::vector<int> second_;
  int64_t chunk_points_;  // the pass's chunk: the head's columns have this many rows
  // In state.trainable(): each weight, then each bias, then each learnable parameter.
  std::vector<size_t> trainable_index_;
  std::vector<Tensor> learnable_;  // PinnState::learnable()'s values, in its order
  CompiledFunction head_;
  std::mutex head_mutex_;  // a compiled function counts its calls: one chunk's head at a time
};

}  // namespace eddy::pinn
