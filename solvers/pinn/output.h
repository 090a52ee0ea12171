#pragma once
// The run folder's results: solution.h5 (fields on the output grid and at the sampled points,
// coordinates, loss history, metrics, learnable parameters, the resolved config) and the
// ParaView files (solution.vti, or one .vti per time with solution.pvd for 2-D and 3-D problems
// in time; points.vtp with every condition's points).
//
// On several ranks the output grid is split along its first axis: each rank evaluates its block
// of rows, writes them into the one solution.h5 through parallel HDF5, and writes its piece of each
// image as a .vti that a .pvti joins (solution.pvti, or solution_<k>.pvti per time). Everything
// else is the same on every rank and rank 0 stores it.

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
  std::vector<int64_t> stage;                          // per logged step, under training in stages (stages.h)
};

// The history in a checkpoint: a series per column of solution.h5's history/ and metrics/
// (solvers/common/checkpoint_history.h), and back.
void save_history(const History& history, const Problem& p, nn::StateDict& saved);
History restored_history(const nn::StateDict& saved, const Problem& p, const std::string& checkpoint);

// Whether the run writes ParaView files: output.vtk, for 1 to 3 spatial dimensions (VTK images
// have no more axes; solution.h5 holds any).
bool writes_vtk(const Problem& problem);

// Collective over the state's communicator; returns on every rank once the whole output is written.
void write_results(PinnState& state, const History& history, const std::string& dir);

}  // namespace eddy::pinn
