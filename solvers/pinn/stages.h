#pragma once
// Training in stages: time marching (training.time_marching: geometry.time in consecutive windows)
// and parameter continuation (training.continuation: an equation parameter stepped through a list
// of values). Each stage runs the whole configured schedule (Adam, then L-BFGS) from the weights
// the stage before it ended with; docs/config.md, "Time marching" and "Parameter continuation".
//
// Steps are numbered across the stages: stage s owns the stage_steps() steps from
// s * stage_steps(), so a checkpoint's step alone says where in its stage a resumed run goes on.

#include <cstdint>
#include <string>
#include <utility>

#include "eddy/io/config.h"
#include "solvers/pinn/problem.h"

namespace eddy::pinn {

// The number of stages: the windows, the continuation's values, or 1 when neither is configured.
int64_t stage_count(const Problem& problem);
// Steps per stage: the Adam steps and the L-BFGS iterations.
int64_t stage_steps(const Problem& problem);
// Time marching: window `window`'s interval of t, the windows being of equal length.
std::pair<double, double> time_window(const Problem& problem, int64_t window);
// For the log: "window 2/4 (t from 0.25 to 0.5)", "stage 2/3 (nu = 0.03)".
std::string describe_stage(const Problem& problem, int64_t stage);

// The readers of the keys, for read_problem; they check the keys against the rest of the problem
// (time, conditions, parameters), which must be read already.
TimeMarchingOptions read_time_marching(const Problem& problem, const io::ConfigNode& node);
ContinuationOptions read_continuation(const Problem& problem, const io::ConfigNode& node);

}  // namespace eddy::pinn
