#pragma once
// Time stepping with optional gradient checkpointing, shared by the classical solvers.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy::classical {

// A one-element tensor's value where it can be read on the host, so that a solver's check of it
// can run; none while a compiled function is traced on abstract values (a solver built inside
// one, with nu or the forcing as an input or captured), where reading it would be refused.
std::optional<double> host_value(const Tensor& scalar);

// What a solver computed its coefficients from: the viscosity `nu` (a one-element tensor), and
// other tensors (NavierStokes2d's forcing). Refuses a nu that is negative or not finite, naming
// `solver`: negative viscosity is anti-diffusion, and the solvers ran it to a blow-up or NaN
// without a word. Checks are skipped where a value is unknown: inside a compiled function traced
// with nu as an input.
class CoefficientSources {
 public:
  CoefficientSources() = default;  // checks nothing
  CoefficientSources(std::string_view solver, const Tensor& nu,
                     std::vector<std::pair<std::string, Tensor>> others = {});
  // Refuses a nu changed since, or another source written in place since (an optimiser's step on
  // it): every later solve and gradient would have used the coefficients of the old values,
  // silently (a forcing fit's loss and gradient stayed the same at every step). Inside a compiled
  // function, which runs its program without this check on later calls, the sources are guarded:
  // a call after a change captures again, and this check then refuses it.
  void require_unchanged() const;

 private:
  struct Watched {
    std::string name;
    Tensor tensor;
    uint64_t version;
  };
  std::string solver_;
  Tensor nu_;
  std::optional<double> value_;
  std::vector<Watched> others_;
  uint64_t built_in_capture_ = 0;  // active_capture_id() when built
};

// One time step as a pure function of the state and the parameter tensors. Whatever a gradient
// should reach (coefficients that depend on the viscosity, the forcing) must come in through
// `params`: checkpointed segments treat captured tensors as constants.
using Stepper = std::function<Tensor(const Tensor& state, const std::vector<Tensor>& params)>;

// The states after record_steps[0] <= record_steps[1] <= ... steps from `state` (0 gives `state`).
// With checkpoint_every = K > 0, each run of at most K steps is one checkpointed segment
// (eddy/autodiff/checkpoint.h): reverse mode then keeps one state per segment and recomputes one
// segment's graph at a time, so memory grows with steps / K + K instead of with the steps. The
// stepper is copied into the segments and must stay valid until their backward pass has run.
std::vector<Tensor> rollout(const Stepper& step, const Tensor& state, const std::vector<Tensor>& params,
                            const std::vector<int64_t>& record_steps, int64_t checkpoint_every = 0);

// The solvers' common shape: a state advanced in spectral space by Solver::step(state, params),
// taken in and recorded in physical space (Solver::to_spectral / to_physical), with the
// coefficients gradients should reach in Solver::params(), computed from Solver::sources().
template <typename Solver>
std::vector<Tensor> solve_spectral(const Solver& solver, const Tensor& initial,
                                   const std::vector<int64_t>& record_steps, int64_t checkpoint_every) {
  // A copy of the solver (a handful of tensor handles), so the stepper outlives the original.
  const Stepper step = [self = solver](const Tensor& state, const std::vector<Tensor>& params) {
    return self.step(state, params);
  };
  solver.sources().require_unchanged();
  std::vector<Tensor> states =
      rollout(step, solver.to_spectral(initial), solver.params(), record_steps, checkpoint_every);
  for (Tensor& state : states) state = solver.to_physical(state);
  return states;
}

}  // namespace eddy::classical
