#pragma once
// The run folder's results: solution.h5 (fields on the output grid and at the sampled points,
// coordinates, loss history, metrics, learnable parameters, the resolved config) and the
// ParaView files (solution.vti, or one .vti per time with solution.pvd for 2-D and 3-D problems
// in time; points.vtp with every condition's points).

#include <string>
#include <vector>

#include "solvers/pinn/solver.h"

namespace eddy::pinn {

struct History {
  std::vector<int64_t> steps;
  std::vector<double> loss;
  std::vector<std::vector<double>> terms;  // per logged step, one per condition
  std::vector<int64_t> metric_steps;
  std::vector<Metrics> metrics;
  std::vector<std::map<std::string, double>> learned;  // per logged step
  std::vector<std::vector<double>> weights;            // per logged step, each condition's factor in the loss
  std::vector<double> min_causal_weight;               // per logged step
};

void write_results(PinnState& state, const History& history, const std::string& dir);

}  // namespace eddy::pinn
