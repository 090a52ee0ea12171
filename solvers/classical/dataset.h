#pragma once
// Operator-learning datasets from the classical solvers, written to one HDF5 file: for Burgers and
// Navier-Stokes, random initial conditions drawn from a Gaussian random field, each solved forward
// and recorded at evenly spaced times; for Darcy, random two-phase coefficients and their steady
// solutions (darcy_dataset.h). The YAML keys are documented in docs/classical.md;
// `eddy generate FILE` runs this.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "eddy/core/dtype.h"
#include "eddy/dist/communicator.h"
#include "eddy/io/config.h"
#include "solvers/classical/darcy_dataset.h"
#include "solvers/classical/grf.h"

namespace eddy::classical {

enum class DatasetSolver { burgers, navier_stokes, allen_cahn, cahn_hilliard, darcy };
// The config's name of a solver ("navier_stokes"), which the dataset's attributes record.
const char* solver_name(DatasetSolver solver);

struct DatasetSpec {
  DatasetSolver solver = DatasetSolver::burgers;
  int64_t resolution = 64;
  int64_t samples = 1;
  int64_t batch = 1;  // samples solved together
  uint64_t seed = 0;
  double nu = 0;        // burgers, navier_stokes
  double epsilon = 0;   // allen_cahn: the interface width
  double gamma = 0;     // cahn_hilliard: the gradient-energy coefficient
  double length = 1;   // burgers, phase field: the period; navier_stokes: the unit torus
  bool fno_forcing = true;  // navier_stokes: forcing "fno" (else "none")
  double dt = 0;
  double final_time = 0;
  int64_t records = 1;  // record times final_time * k / records, k = 1..records
  GaussianRandomField initial_condition;
  std::string output_path;
  DType output_dtype = DType::f32;
  bool vtk = false;  // also a .vti of the first sample next to the HDF5 file
  // Replace an existing HDF5 file at output_path that `eddy generate` did not write (a reference
  // dataset, a run's results); one it wrote (its `config` names a solver) is replaced anyway.
  bool overwrite = false;
  std::string resolved_config;
  // darcy: the coefficient and forcing (a_high, a_low, alpha, tau, forcing); generate_dataset takes
  // resolution, samples, seed, output dtype, vtk and the resolved config from the fields above.
  DarcyDatasetOptions darcy;

  int64_t steps_per_record() const;
};

// Reads and validates a dataset config; errors name the key, file, line and column, and unknown
// keys are rejected with the nearest valid one.
DatasetSpec read_dataset_spec(io::Config& config);

// Generates the dataset and writes it atomically to spec.output_path. Darcy files are those of
// write_darcy_dataset (a and u [samples, n, n], x, config). The evolution equations write:
//   a  [samples, n] or [samples, n, n]            initial conditions (u0, or the vorticity w0)
//   u  [samples, records, n] or [.., n, n]        the solution at the record times
//   t  [records], x [n]                           record times and grid coordinates
//   config                                        the resolved YAML
// with the equation, scheme and parameters as attributes of "/". Sample k depends only on the
// seed and k, not on the batch size. Progress goes to `log` when given.
//
// On several ranks (collectively: every rank calls it with the same spec) the evolution
// equations split the batches into consecutive shares, one per rank: every rank draws every
// initial condition in sample order, as one process does, and solves its share; each rank writes
// its samples' rows of a and u into the one file through parallel HDF5, which is then the
// one-process file. Darcy datasets are written by one process.
void generate_dataset(const DatasetSpec& spec, std::ostream* log = nullptr,
                      dist::Communicator& comm = dist::default_communicator());

}  // namespace eddy::classical
