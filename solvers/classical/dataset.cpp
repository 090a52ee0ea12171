#include "solvers/classical/dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <numbers>
#include <optional>

#include "eddy/autodiff/tape.h"
#include "eddy/core/error.h"
#include "eddy/dist/collectives.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/fft/fft.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/config.h"
#include "eddy/io/hdf5.h"
#include "eddy/io/vtk.h"
#include "eddy/ops/ops.h"
#include "solvers/classical/burgers.h"
#include "solvers/classical/navier_stokes.h"
#include "solvers/classical/output_dtype.h"
#include "solvers/classical/phase_field.h"
#include "solvers/common/training_loop.h"

namespace eddy::classical {
namespace {

// How far past its maximum principle's (or energy bound's) bound a generated solution may go before
// it counts as unstable: spectral schemes overshoot near steep fronts (Gibbs, about 9%), an
// unstable one by orders of magnitude.
constexpr double kMaximumPrincipleSlack = 1.5;
// The share of a Burgers solution's energy that may lie in the top third of the wavenumbers the
// 2/3 rule keeps before its fronts count as unresolved. At nu = 1e-3 (length 1) it is 5e-3 at
// n = 256, where the data were 2.3% (relative L2) from a converged solution, and 6e-4 at n = 512,
// where they were 0.26% from it.
constexpr double kUnresolvedEnergyShare = 1e-3;
// How far data may be (an estimate of the relative L2 error, at any record) from the same initial
// conditions solved more finely (Burgers and Navier-Stokes on twice the points with half the time
// step, the phase-field models with half the time step), and how many of the first samples are
// solved so.
constexpr double kRefinementTolerance = 1e-2;
constexpr int64_t kRefinedBurgersSamples = 8;
constexpr int64_t kRefined2dSamples = 2;
// How much a phase-field solution's energy may rise from one record to the next, relative to the
// initial energy, before it counts as unstable: rounding (float32 records), not physics.
constexpr double kEnergyRoundOff = 1e-5;

const std::vector<std::pair<std::string, DatasetSolver>> kSolvers{
    {"burgers", DatasetSolver::burgers},       {"navier_stokes", DatasetSolver::navier_stokes},
    {"allen_cahn", DatasetSolver::allen_cahn}, {"cahn_hilliard", DatasetSolver::cahn_hilliard},
    {"darcy", DatasetSolver::darcy}};

using io::ConfigNode;

int64_t integer_at_least(const ConfigNode& node, const std::string& key, int64_t fallback, int64_t minimum) {
  const int64_t value = node.integer(key, fallback);
  if (value < minimum) node.at(key).fail(cat("must be at least ", minimum, ", got ", value));
  return value;
}

double positive(const ConfigNode& node, const std::string& key, double value) {
  if (!(value > 0)) node.at(key).fail(cat("must be positive, got ", value));
  return value;
}

// Zero-padded so that ParaView lists the records in time order.
std::string record_name(int64_t k, int64_t records) {
  std::string digits = std::to_string(k);
  return "u_" + std::string(std::to_string(records).size() - digits.size(), '0') + digits;
}

void write_first_sample_vti(const DatasetSpec& spec, const Tensor& a, const Tensor& u) {
  const std::string path = sample_image_path(spec.output_path);
  const int64_t n = spec.resolution;
  const double dx = spec.length / static_cast<double>(n);
  if (spec.solver == DatasetSolver::burgers) {
    // One space-time image: rows are the initial condition and the record times.
    Tensor history = concat({slice(a, 0, 0, 1), reshape(slice(u, 0, 0, 1), {spec.records, n})}, 0);
    io::write_vti(path, {0, 0}, {spec.final_time / static_cast<double>(spec.records), dx}, {spec.records + 1, n},
                  {{"u", reshape(history, {-1})}});
    return;
  }
  io::PointFields fields{{"a", reshape(slice(a, 0, 0, 1), {-1})}};
  for (int64_t k = 0; k < spec.records; ++k) {
    fields[record_name(k + 1, spec.records)] = reshape(slice(slice(u, 0, 0, 1), 1, k, k + 1), {-1});
  }
  io::write_vti(path, {0, 0}, {dx, dx}, {n, n}, fields);
}

// When inviscid Burgers' solution from each initial condition of `initial` [count, n] (period
// `length`) breaks: characteristics cross at t = 1 / max(-u0'). Past it a spectral scheme gives no
// solution at any time step, and the check of max |u| after the solve caught that at small steps
// only (data 0.9 apart between dt = 0.01 and 0.005 were written).
// The slope is read on a grid kRefinement times finer (the spectrum padded with zeros): the
// steepest point of a smooth field lies between grid points, and the grid's steepest slope put
// the breaking 2% late at 64 points.
constexpr int64_t kRefinement = 8;

std::vector<double> breaking_times(const Tensor& initial, double length) {
  const int64_t n = initial.size(-1);
  Tensor wavenumbers = fft::rfftfreq(n, length / static_cast<double>(n)) * (2 * std::numbers::pi);
  // An even grid's Nyquist mode has no derivative it can hold (its sine vanishes on the grid).
  if (n % 2 == 0) {
    std::vector<double> held(static_cast<size_t>(n / 2 + 1), 1.0);
    held.back() = 0;
    wavenumbers = wavenumbers * tensor(held, {n / 2 + 1});
  }
  const Tensor slope = fft::irfft(fft::rfft(initial) * complex(zeros_like(wavenumbers), wavenumbers), kRefinement * n) *
                       static_cast<double>(kRefinement);
  std::vector<double> times;
  for (double steepest : max(neg(slope), {1}).to_vector<double>()) {
    times.push_back(steepest > 0 ? 1 / steepest : std::numeric_limits<double>::infinity());
  }
  return times;
}

// The share of each field's energy (over its last axis) in the top third of the wavenumbers
// Burgers' 2/3 rule keeps, the modes |k| < n / 3 (burgers.cpp).
Tensor energy_share_near_the_cutoff(const Tensor& fields) {
  const int64_t kept = (fields.size(-1) + 2) / 3;
  const Tensor energy = square(abs(fft::rfft(cast(fields, DType::f64))));
  const int64_t axis = energy.dim() - 1;
  return sum(slice(energy, axis, kept - kept / 3, kept), {axis}) / sum(slice(energy, axis, 0, kept), {axis});
}

// Refuses Burgers data whose fronts the grid does not resolve: within the maximum principle's
// slack, they were 18% to 100% from a converged solution at nu = 1e-4 on 128 points. Such a
// solution holds a large share of its energy near the 2/3 rule's cut-off, where a resolved one's
// spectrum has decayed by orders of magnitude. An initial condition rough on its grid (alpha = 2
// on 32 points holds 0.5% there) allows its solution as much.
void refuse_unresolved_fronts(const DatasetSpec& spec, const Tensor& a, const Tensor& u, int64_t first_sample) {
  const std::vector<double> initial = energy_share_near_the_cutoff(a).to_vector<double>();
  const std::vector<double> reached = energy_share_near_the_cutoff(u).to_vector<double>();  // [samples, records]
  for (size_t i = 0; i < reached.size(); ++i) {
    const size_t sample = i / static_cast<size_t>(spec.records);
    const double allowed = std::max(kUnresolvedEnergyShare, initial[sample]);
    if (!(reached[i] > allowed)) continue;
    const int64_t record = static_cast<int64_t>(i) % spec.records + 1;
    throw Error(cat("generate: sample ", first_sample + static_cast<int64_t>(sample), "'s burgers solution holds ",
                    reached[i], " of its energy in the top third of the wavenumbers the grid keeps at record ", record,
                    " (t = ", spec.final_time * static_cast<double>(record) / static_cast<double>(spec.records),
                    "), where a resolved one holds under ", allowed, ": resolution = ", spec.resolution,
                    " does not resolve its fronts at nu = ", spec.nu, ", and the data would be wrong by percents or "
                    "more; give a larger resolution or nu"));
  }
}

// Burgers' initial conditions `initial` [samples, n] on twice the points, interpolated spectrally.
Tensor on_twice_the_points(const Tensor& initial) {
  const int64_t n = initial.size(-1);
  Tensor spectrum = fft::rfft(initial);
  if (n % 2 == 0) {
    // The Nyquist bin stands for the modes +n/2 and -n/2 together: on the finer grid they are two.
    std::vector<double> halved(static_cast<size_t>(n / 2 + 1), 1.0);
    halved.back() = 0.5;
    spectrum = spectrum * tensor(halved, {n / 2 + 1});
  }
  return fft::irfft(spectrum, 2 * n) * 2.0;
}

// Fields [samples, n, n] on twice the points along both axes, the 1-D interpolation one axis at
// a time (it is exact for the trigonometric polynomials the grid holds, so the order is free).
Tensor on_twice_the_points_2d(const Tensor& fields) {
  const Tensor wide = on_twice_the_points(fields);
  return transpose(on_twice_the_points(transpose(wide, -1, -2)), -1, -2);
}

// What to change when the data is unconverged (refuse_unconverged). Navier-Stokes' Crank-Nicolson
// multiplies a mode whose nu dt |k|^2 is a by (1 - a / 2) / (1 + a / 2) a step, which tends to -1
// as a grows where the exact factor e^(-a) tends to 0: past a = 2 the finest modes flip sign every
// step and hardly decay (n = 64, dt = 0.01, nu = 1: sin(20 pi x) kept 36% of its amplitude at
// t = 0.1), and there a larger nu or resolution makes it worse.
std::string unconverged_remedy(const DatasetSpec& spec, int64_t n) {
  const bool viscous = spec.solver == DatasetSolver::burgers || spec.solver == DatasetSolver::navier_stokes;
  if (!viscous) {
    return cat("time.dt = ", spec.dt, " is too large or resolution = ", n, " too coarse for it; give a smaller "
               "time.dt or a larger resolution");
  }
  const double finest = 2 * std::pow(std::numbers::pi * static_cast<double>(n), 2);  // |k|^2 at the grid's corner
  if (spec.solver == DatasetSolver::navier_stokes && spec.nu * spec.dt * finest > 2) {
    return cat("time.dt = ", spec.dt, " is too large at nu = ", spec.nu, " on ", n, " points: Crank-Nicolson leaves "
               "the finest modes (nu time.dt |k|^2 up to ", spec.nu * spec.dt * finest, ") flipping sign every step "
               "instead of decaying; give a smaller time.dt (at most ", 2 / (spec.nu * finest),
               " for the viscous term, where nu time.dt |k|^2 <= 2)");
  }
  return cat("resolution = ", n, " or time.dt = ", spec.dt, " is too coarse for it at nu = ", spec.nu,
             "; give a larger resolution, a smaller time.dt or a larger nu");
}

// Refuses the dataset where the records `solved` from the initial conditions `initial` (the
// dataset's first samples, which every rank draws alike) are estimated more than
// kRefinementTolerance (relative L2) from converged: their difference from `refined`, the same
// solved on twice the points with half the time step and read on the dataset's grid, times
// `error_per_difference` (2 for a first-order scheme, whose error at dt is about twice its
// difference from dt / 2's). Such data passed every check above while percents off: Burgers with
// nu = 0 before the break on 64 points (2.6%), or from an initial condition rough on its grid
// (6.8% at nu = 0.1, length 2 pi, 64 points), Navier-Stokes at a time step past its CFL limit (4%
// to 47%) or at nu = 1e-5 on 32 points (2.2% to 3.6%), Allen-Cahn at dt = 0.05 (1.4%) or on 16
// points at epsilon = 0.02 (7% to 34%).
void refuse_unconverged(const DatasetSpec& spec, const Tensor& initial, const std::vector<Tensor>& solved,
                        const std::vector<Tensor>& refined, const std::vector<int64_t>& record_steps,
                        double error_per_difference, const std::string& remedy) {
  std::vector<int64_t> grid_axes;
  for (int64_t axis = 1; axis < initial.dim(); ++axis) grid_axes.push_back(axis);
  const auto size = [&](const Tensor& fields) { return sqrt(sum(square(cast(fields, DType::f64)), grid_axes)); };
  // A solution that viscosity has decayed a millionfold is measured against a millionth of its
  // initial size: by then its own is near the rounding its mean mode gathers, which never decays
  // (Burgers at nu = 0.1 differed at t = 8.4 by 1.4% of its 1e-15).
  const Tensor smallest_scale = size(initial) * 1e-6;
  for (size_t r = 0; r < solved.size(); ++r) {
    const std::vector<double> differences =
        (size(solved[r] - refined[r]) / maximum(size(refined[r]), smallest_scale)).to_vector<double>();
    for (size_t k = 0; k < differences.size(); ++k) {
      const double error = differences[k] * error_per_difference;
      EDDY_CHECK(error <= kRefinementTolerance, "generate: sample ", k, "'s ", solver_name(spec.solver),
                 " solution at t = ", static_cast<double>(record_steps[r]) * spec.dt, " is ", differences[k],
                 " (relative L2) from the same initial condition solved on twice the points with half the time "
                 "step, an error of about ", error,
                 " where data are kept within ", kRefinementTolerance, ": ", remedy);
    }
  }
}

// Refuses inviscid Burgers data past the earliest breaking time of all samples, before any is
// solved (every rank draws every initial condition, from a copy of `generator`): checked batch by
// batch, most of a dataset was solved first, and the time.final suggested was one sample's.
void refuse_shocks_before_the_end(const DatasetSpec& spec, Generator generator, int64_t batches) {
  double earliest = std::numeric_limits<double>::infinity();
  int64_t sample = 0;
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t start = b * spec.batch, count = std::min(spec.batch, spec.samples - start);
    const std::vector<double> times = breaking_times(spec.initial_condition.sample(count, generator), spec.length);
    for (int64_t k = 0; k < count; ++k) {
      if (times[static_cast<size_t>(k)] < earliest) {
        earliest = times[static_cast<size_t>(k)];
        sample = start + k;
      }
    }
  }
  EDDY_CHECK(spec.final_time < earliest, "generate: with nu = 0, sample ", sample, " steepens into a shock at t = ",
             earliest, " (1 / max(-u0'); the earliest of the samples), before time.final = ", spec.final_time,
             ": past it a spectral scheme's result is no solution at any time step; give nu > 0 or a time.final "
             "below ", earliest);
}

// Burgers, Navier-Stokes and the phase-field models: the equation's coefficient, time stepping
// and the initial condition's prior.
void read_evolution_keys(const ConfigNode& root, DatasetSpec& spec) {
  const bool burgers = spec.solver == DatasetSolver::burgers;
  spec.batch = integer_at_least(root, "batch", 16, 1);
  if (spec.solver == DatasetSolver::allen_cahn) {
    spec.epsilon = positive(root, "epsilon", root.number("epsilon", 0.05));
  } else if (spec.solver == DatasetSolver::cahn_hilliard) {
    spec.gamma = positive(root, "gamma", root.number("gamma", 1e-3));
  } else {
    spec.nu = root.number("nu");
    if (!(spec.nu >= 0)) root.at("nu").fail(cat("must be non-negative, got ", spec.nu));
  }
  if (spec.solver == DatasetSolver::navier_stokes) {
    spec.fno_forcing = root.choice("forcing", {"fno", "none"}, "fno") == "fno";
  } else {
    spec.length = positive(root, "length", root.number("length", 1.0));
  }

  ConfigNode time = root.at("time");
  spec.dt = positive(time, "dt", time.number("dt"));
  spec.final_time = positive(time, "final", time.number("final"));
  spec.records = integer_at_least(time, "records", 1, 1);
  const double steps = spec.final_time / (static_cast<double>(spec.records) * spec.dt);
  // Past 2^53 steps a double no longer tells whole numbers apart, and the count overflowed the
  // integer the solver counts in: time.final = 1e20 with dt = 1 asked for step -2^63.
  if (spec.final_time / spec.dt > 0x1p53) {
    // Blamed on the key an override changed, where only one was.
    const bool dt_overridden = time.at("dt").override_text() && !time.at("final").override_text();
    time.at(dt_overridden ? "dt" : "final")
        .fail(cat("time.final / time.dt = ", spec.final_time / spec.dt,
                  " steps is more than eddy counts (2^53); give a larger time.dt or a smaller time.final"));
  }
  if (std::abs(steps - std::round(steps)) > 1e-9 * steps || std::round(steps) < 1) {
    time.at("dt").fail(cat("each of the ", spec.records, " record intervals (final / records = ",
                           spec.final_time / static_cast<double>(spec.records), ") must be a whole number of steps of ",
                           spec.dt, ", got ", steps));
  }

  // The FNO paper's priors: N(0, 625 (-Laplacian + 25)^(-2)) for Burgers, tau = 7, alpha = 2.5
  // (and the FNO code's sigma = tau^(alpha - 1)) for the Navier-Stokes vorticity; the phase-field
  // models start from the same 2-D field, whose values of order one then separate into phases.
  ConfigNode initial = root.section("initial_condition");
  GaussianRandomField& field = spec.initial_condition;
  field.dim = burgers ? 1 : 2;
  field.resolution = spec.resolution;
  field.length = spec.length;
  field.alpha = positive(initial, "alpha", initial.number("alpha", burgers ? 2.0 : 2.5));
  field.tau = positive(initial, "tau", initial.number("tau", burgers ? 5.0 : 7.0));
  field.sigma = positive(initial, "sigma", burgers ? initial.number("sigma", 25.0)
                                                   : initial.derived_number("sigma", field.effective_sigma()));
  // The longest wave's variance, the field's largest: where float64 cannot hold it (a sigma below
  // about 1e-154, whose square underflows; alpha 300; tau 1e200) the fields were all zero or NaN,
  // written as data or refused for a time step that was not the cause.
  const double longest_wave = 2 * std::numbers::pi / field.length;
  const double variance = field.sigma * field.sigma * std::pow(longest_wave * longest_wave + field.tau * field.tau,
                                                               -field.alpha);
  if (!(std::isfinite(variance) && variance > 0)) {
    initial.fail(cat("sigma ", field.sigma, ", tau ", field.tau, " and alpha ", field.alpha, " give the longest wave a "
                     "variance of ", variance, ", which float64 cannot hold: the fields would be zero or not finite "
                     "everywhere; bring them nearer the defaults"));
  }
}

// Darcy: the two-phase coefficient's values and the prior of the field it thresholds (defaults
// those of the FNO data, a in {12, 3}, alpha 2, tau 3), and the constant right-hand side.
void read_darcy_keys(const ConfigNode& root, DarcyDatasetOptions& darcy) {
  const DarcyDatasetOptions defaults;
  darcy.forcing = root.number("forcing", defaults.forcing);
  if (!std::isfinite(darcy.forcing)) root.at("forcing").fail(cat("must be finite, got ", darcy.forcing));
  ConfigNode coefficient = root.section("coefficient");
  darcy.a_high = positive(coefficient, "high", coefficient.number("high", defaults.a_high));
  darcy.a_low = positive(coefficient, "low", coefficient.number("low", defaults.a_low));
  darcy.alpha = coefficient.number("alpha", defaults.alpha);
  if (!(darcy.alpha > 1)) {
    coefficient.at("alpha").fail(cat("must be greater than 1 (a 2-D field of finite variance), got ", darcy.alpha));
  }
  darcy.tau = positive(coefficient, "tau", coefficient.number("tau", defaults.tau));
}

// `steps` steps of the spec's phase-field model from u.
Tensor phase_field_steps(const Tensor& u, const DatasetSpec& spec, int64_t steps) {
  if (spec.solver == DatasetSolver::allen_cahn) {
    return allen_cahn(u, AllenCahnOptions{spec.epsilon, spec.dt, steps, spec.length});
  }
  return cahn_hilliard(u, CahnHilliardOptions{spec.gamma, spec.dt, steps, spec.length});
}

}  // namespace

const char* solver_name(DatasetSolver solver) {
  for (const auto& [name, value] : kSolvers) {
    if (value == solver) return name.c_str();
  }
  return "";  // not reached: kSolvers names every solver
}

int64_t DatasetSpec::steps_per_record() const {
  return std::lround(final_time / (static_cast<double>(records) * dt));
}

DatasetSpec read_dataset_spec(io::Config& config) {
  ConfigNode root = config.root();
  DatasetSpec spec;
  spec.solver = root.at("solver").as_choice(kSolvers);
  const bool darcy = spec.solver == DatasetSolver::darcy;
  spec.resolution = integer_at_least(root, "resolution", 64, darcy ? 3 : 4);
  spec.samples = integer_at_least(root, "samples", 1, 1);
  spec.seed = static_cast<uint64_t>(integer_at_least(root, "seed", 0, 0));
  if (darcy) {
    read_darcy_keys(root, spec.darcy);
  } else {
    read_evolution_keys(root, spec);
  }

  ConfigNode output = root.at("output");
  spec.output_path = output.at("path").as_output_path();
  // Empty, every sample was solved before the file could not be written ("cannot write : ...").
  if (spec.output_path.empty()) output.at("path").fail("is empty; give the HDF5 file to write");
  std::error_code ignored;
  if (std::filesystem::is_directory(spec.output_path, ignored)) {
    output.at("path").fail(cat(spec.output_path, " is a folder; give the HDF5 file to write"));
  }
  spec.output_dtype = output.choice("dtype", {{"float32", DType::f32}, {"float64", DType::f64}}, DType::f32);
  spec.vtk = output.boolean("vtk", false);

  // The whole dataset is held in memory before it is written, beside a batch's solver state (in
  // float64, about 16 grids of it): what cannot fit is refused before any work (a resolution of
  // 10^12 ended in a bare std::bad_alloc, samples of 2^63 - 1 in an overflowed row count).
  const double points = std::pow(static_cast<double>(spec.resolution), spec.solver == DatasetSolver::burgers ? 1 : 2);
  const double fields = darcy ? 2 : static_cast<double>(spec.records) + 1;
  // Only min(batch, samples) samples are solved at once.
  const double batch = darcy ? 1 : static_cast<double>(std::min(spec.batch, spec.samples));
  const double bytes = static_cast<double>(spec.samples) * fields * points * static_cast<double>(dtype_size(spec.output_dtype)) +
                       batch * points * (fields + 16) * 8;
  // Blamed on the size a command-line override set, if one did, else on the larger of the sample
  // count and the records per sample (the file's top level names the line of its first key).
  const auto set_in = [](const ConfigNode& parent, const char* key) -> std::optional<ConfigNode> {
    if (!parent.has(key)) return std::nullopt;
    return parent.at(key);
  };
  std::vector<std::optional<ConfigNode>> sizes;  // samples, resolution, then batch and records
  sizes.push_back(set_in(root, "samples"));
  sizes.push_back(set_in(root, "resolution"));
  if (!darcy) {
    sizes.push_back(set_in(root, "batch"));
    sizes.push_back(set_in(root.at("time"), "records"));
  }
  size_t blamed = !darcy && spec.records > spec.samples && sizes[3] ? 3 : 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] && sizes[k]->override_text()) {
      blamed = k;
      break;
    }
  }
  (sizes[blamed] ? *sizes[blamed] : root)
      .require_memory(cat(spec.samples, " samples of ", fields, " fields at resolution ", spec.resolution,
                          " (and a batch's solver state)"),
                      bytes);

  config.check_no_unknown_keys();
  spec.resolved_config = config.resolved();
  return spec;
}

namespace {

// Whether the HDF5 file at `path` is a dataset of `eddy generate`: its config names a solver at the
// top, in any YAML style (a Python dict's config is stored in flow style, `{solver: burgers, ...}`,
// which a search for a line "solver:" missed, so rerunning eddy.generate(dict) was refused).
bool written_by_generate(const std::string& path) {
  const std::vector<std::string> datasets = io::list_hdf5_datasets(path);
  if (std::find(datasets.begin(), datasets.end(), "config") == datasets.end() || !io::is_hdf5_string(path, "config")) {
    return false;
  }
  try {
    const auto config = io::Config::parse(io::read_hdf5_string(path, "config"), path + ":config");
    return config->root().is_map() && config->root().has("solver");
  } catch (const Error&) {
    return false;  // not YAML: not ours
  }
}

// An existing HDF5 file that `eddy generate` did not write is replaced only with --overwrite: a
// reference dataset or a run's solution.h5 at output.path was lost.
void prepare_output(const DatasetSpec& spec) {
  std::error_code ignored;
  const std::string& path = spec.output_path;
  io::refuse_special_file(path, "generate: output.path");
  io::refuse_special_file(sample_image_path(path), "generate: output.path's sample image");
  EDDY_CHECK(spec.overwrite || !std::filesystem::is_regular_file(path, ignored) || !io::is_hdf5_file(path) ||
                 written_by_generate(path),
             "generate: output.path ", path, " exists and is not a dataset of eddy generate (a reference dataset or "
             "a run's results, say); give a new file, or --overwrite to replace it");
}

}  // namespace

void generate_dataset(const DatasetSpec& spec, std::ostream* log, dist::Communicator& comm) {
  EDDY_CHECK(spec.solver != DatasetSolver::darcy || comm.size() == 1,
             "generate: darcy datasets are written by one process, got ", comm.size(), " ranks; run without mpirun");
  // Ranks started with another seed wrote their samples into one file, which recorded rank 0's
  // config; another resolution or path hung the job.
  solvers::require_same_config_on_every_rank(comm, spec.resolved_config, spec.resolved_config);
  prepare_output(spec);
  if (spec.solver == DatasetSolver::darcy) {
    DarcyDatasetOptions options = spec.darcy;
    options.resolution = spec.resolution;
    options.samples = spec.samples;
    options.seed = spec.seed;
    options.dtype = spec.output_dtype;
    options.config = spec.resolved_config;
    options.vtk = spec.vtk;
    write_darcy_dataset(options, spec.output_path, log);
    return;
  }
  NoGradGuard no_grad;
  const bool burgers = spec.solver == DatasetSolver::burgers;
  const int64_t n = spec.resolution, per_record = spec.steps_per_record();
  std::vector<int64_t> record_steps;
  for (int64_t k = 1; k <= spec.records; ++k) record_steps.push_back(k * per_record);

  const Tensor nu = scalar(spec.nu, DType::f64);
  // `solve` gives a batch's records; `refined` the same solved more finely (for the check of the
  // first samples), read on the dataset's grid.
  std::function<std::vector<Tensor>(const Tensor&)> solve, refined;
  std::vector<int64_t> refined_steps;
  for (int64_t step : record_steps) refined_steps.push_back(2 * step);
  Tensor forcing;
  if (burgers) {
    Burgers solver(n, spec.length, spec.dt, nu), finer(2 * n, spec.length, spec.dt / 2, nu);
    solve = [solver, record_steps](const Tensor& a) { return solver.solve(a, record_steps); };
    refined = [finer, refined_steps, n](const Tensor& a) {
      std::vector<Tensor> records = finer.solve(on_twice_the_points(a), refined_steps);
      for (Tensor& record : records) record = slice(record, 1, 0, 2 * n, 2);
      return records;
    };
  } else if (spec.solver == DatasetSolver::navier_stokes) {
    const auto forcing_on = [&spec](int64_t points) {
      return spec.fno_forcing ? NavierStokes2d::fno_forcing(points) : zeros({points, points}, DType::f64);
    };
    forcing = forcing_on(n);
    NavierStokes2d solver(n, spec.dt, nu, forcing), finer(2 * n, spec.dt / 2, nu, forcing_on(2 * n));
    solve = [solver, record_steps](const Tensor& a) { return solver.solve(a, record_steps); };
    refined = [finer, refined_steps, n](const Tensor& a) {
      std::vector<Tensor> records = finer.solve(on_twice_the_points_2d(a), refined_steps);
      for (Tensor& record : records) record = slice(slice(record, 1, 0, 2 * n, 2), 2, 0, 2 * n, 2);
      return records;
    };
  } else {
    // The phase-field steppers advance a whole record interval per call.
    const auto records_of = [](const DatasetSpec& stepped, int64_t steps) {
      return [stepped, steps](const Tensor& a) {
        std::vector<Tensor> states{phase_field_steps(a, stepped, steps)};
        while (static_cast<int64_t>(states.size()) < stepped.records) {
          states.push_back(phase_field_steps(states.back(), stepped, steps));
        }
        return states;
      };
    };
    DatasetSpec halved = spec;
    halved.dt = spec.dt / 2;
    solve = records_of(spec, per_record);
    // On twice the points too: with half the time step alone, Allen-Cahn on 16 points at
    // epsilon = 0.02 passed the check while 7% to 34% from the same on finer grids.
    refined = [finer = records_of(halved, 2 * per_record), n](const Tensor& a) {
      const bool plane = a.dim() == 3;
      std::vector<Tensor> records = finer(plane ? on_twice_the_points_2d(a) : on_twice_the_points(a));
      for (Tensor& record : records) {
        record = slice(record, 1, 0, 2 * n, 2);
        if (plane) record = slice(record, 2, 0, 2 * n, 2);
      }
      return records;
    };
  }

  io::Hdf5Writer writer = open_dataset_file(spec.output_path, comm);

  // Draws come from one generator in sample order, so sample k does not depend on the batching,
  // nor on the rank that solves it: every rank draws every batch and solves its own share.
  Generator generator(spec.seed);
  const int64_t batches = (spec.samples + spec.batch - 1) / spec.batch;
  const auto [first_batch, last_batch] = dist::shard(0, batches, comm.rank(), comm.size());
  // The ranks' shares are consecutive samples: each writes its rows of a and u into the one file.
  const int64_t first_sample = std::min(first_batch * spec.batch, spec.samples);
  const int64_t last_sample = std::min(last_batch * spec.batch, spec.samples);
  if (burgers && spec.nu == 0) refuse_shocks_before_the_end(spec, generator, batches);
  // The dataset's first samples solved again more finely, once per rank: after the rank's first
  // batch and the checks on it (which name an unstable time step where this one would call the
  // data unconverged), so a refusal comes before the rest is solved. Drawn from the seed, not as a
  // batch: sample k depends on the seed and k alone, and a batch of 1 checked one sample.
  bool convergence_checked = false;
  const auto check_convergence = [&] {
    convergence_checked = true;
    Generator draws(spec.seed);
    const int64_t checked_count = std::min(spec.samples, burgers ? kRefinedBurgersSamples : kRefined2dSamples);
    const Tensor checked = spec.initial_condition.sample(checked_count, draws);
    const bool first_order = !burgers && spec.solver != DatasetSolver::navier_stokes;
    refuse_unconverged(spec, checked, solve(checked), refined(checked), record_steps,
                       burgers ? 1.0 : first_order ? 2.0 : 4.0 / 3.0, unconverged_remedy(spec, n));
  };
  std::vector<Tensor> inputs, outputs;
  for (int64_t b = 0; b < last_batch; ++b) {
    const int64_t start = b * spec.batch, count = std::min(spec.batch, spec.samples - start);
    const Tensor a = spec.initial_condition.sample(count, generator);
    if (b < first_batch) continue;
    const Tensor u = stack(solve(a), 1);
    // Without viscosity Burgers' solutions steepen into shocks, which no time step resolves.
    const std::string cause =
        burgers && spec.nu == 0
            ? std::string(" with nu = 0 a shock forms, which a spectral scheme cannot resolve at any time step; give "
                          "nu > 0 or an earlier time.final")
            : cat(" time.dt = ", spec.dt, " is too large for this resolution and the equation's coefficients");
    const std::string samples = cat(start, " to ", start + count - 1);
    EDDY_CHECK(std::isfinite(sum(abs(u)).item<double>()), "generate: the ", solver_name(spec.solver),
               " solution of samples ", samples, " is not finite;", cause);
    // Burgers' and Allen-Cahn's equations keep max |u| from growing past the initial one's (and
    // Allen-Cahn's past 1): a solution well beyond it has gone unstable while staying finite.
    if (burgers || spec.solver == DatasetSolver::allen_cahn) {
      const int64_t grid_axes = a.dim() - 1;
      std::vector<int64_t> initial_axes, solution_axes;
      for (int64_t axis = 1; axis <= grid_axes; ++axis) initial_axes.push_back(axis);
      for (int64_t axis = 1; axis <= grid_axes + 1; ++axis) solution_axes.push_back(axis);
      const std::vector<double> initial = max(abs(a), initial_axes).to_vector<double>();
      const std::vector<double> reached = max(abs(u), solution_axes).to_vector<double>();
      for (int64_t k = 0; k < count; ++k) {
        const double bound = burgers ? initial[k] : std::max(1.0, initial[k]);
        EDDY_CHECK(reached[k] <= kMaximumPrincipleSlack * bound, "generate: sample ", start + k, "'s ",
                   solver_name(spec.solver), " solution reached max |u| = ", reached[k], ", where the equation keeps "
                   "it within ", bound, " (its maximum principle); the scheme went unstable:", cause);
      }
    }
    if (burgers) refuse_unresolved_fronts(spec, a, u, start);
    // The vorticity equation bounds w's L2 norm: advection keeps it, viscosity lowers it and the
    // forcing raises it by at most |f| per unit time, so |w(t)| <= |w0| + t |f| (root mean squares
    // over the grid here). A solution past that has gone unstable while staying finite.
    if (spec.solver == DatasetSolver::navier_stokes) {
      const std::vector<double> initial = sqrt(mean(square(a), {1, 2})).to_vector<double>();
      const std::vector<double> reached = sqrt(mean(square(cast(u, DType::f64)), {2, 3})).to_vector<double>();
      const double forcing_size = sqrt(mean(square(forcing))).item<double>();
      for (int64_t k = 0; k < count; ++k) {
        for (int64_t r = 0; r < spec.records; ++r) {
          const double t = static_cast<double>(record_steps[static_cast<size_t>(r)]) * spec.dt;
          const double bound = initial[static_cast<size_t>(k)] + t * forcing_size;
          const double norm = reached[static_cast<size_t>(k * spec.records + r)];
          EDDY_CHECK(norm <= kMaximumPrincipleSlack * bound, "generate: sample ", start + k, "'s navier_stokes "
                     "solution reached an RMS vorticity of ", norm, " at t = ", t, ", where the equation keeps it "
                     "within ", bound, " (the initial RMS plus t times the forcing's); the scheme went unstable:",
                     cause);
        }
      }
    }
    // Both phase-field models are gradient flows of the Ginzburg-Landau energy, which falls from
    // record to record. A rise is an unstable step that the checks above let through (Allen-Cahn's
    // maximum principle with its slack, Cahn-Hilliard's finiteness): time.dt = 4e-3 for
    // Cahn-Hilliard at 32 x 32 wrote data 0.9 (relative L2) away from time.dt = 1e-4's.
    if (spec.solver == DatasetSolver::allen_cahn || spec.solver == DatasetSolver::cahn_hilliard) {
      const double kappa = spec.solver == DatasetSolver::allen_cahn ? spec.epsilon * spec.epsilon : spec.gamma;
      const std::vector<double> initial = ginzburg_landau_energy(a, kappa, spec.length).to_vector<double>();
      const std::vector<double> reached =
          ginzburg_landau_energy(cast(u, DType::f64), kappa, spec.length).to_vector<double>();
      for (int64_t k = 0; k < count; ++k) {
        double previous = initial[static_cast<size_t>(k)];
        for (int64_t r = 0; r < spec.records; ++r) {
          const double energy = reached[static_cast<size_t>(k * spec.records + r)];
          EDDY_CHECK(energy <= previous + kEnergyRoundOff * std::abs(initial[static_cast<size_t>(k)]), "generate: sample ",
                     start + k, "'s ", solver_name(spec.solver), " solution's Ginzburg-Landau energy rose from ",
                     previous, " to ", energy, " by record ", r + 1, ", where the equation only lowers it; the scheme "
                     "went unstable:", cause, " (docs/classical_darcy_phase_field.md, Energy)");
          previous = energy;
        }
      }
    }
    if (!convergence_checked) check_convergence();
    const std::string rescale = "scale initial_condition.sigma";
    inputs.push_back(in_output_dtype(a, spec.output_dtype, "the initial field a", rescale, start));
    outputs.push_back(in_output_dtype(u, spec.output_dtype, "the solution u", rescale, start));
    if (log) {
      // On several ranks the log is rank 0's, whose share ends before the last sample.
      *log << "generate: " << start + count - first_sample << " / " << last_sample - first_sample << " samples"
           << (comm.size() > 1 ? cat(" (this rank's share of ", spec.samples, " on ", comm.size(), " ranks)") : "")
           << "\n";
    }
  }
  if (!convergence_checked) check_convergence();
  const Shape grid = burgers ? Shape{n} : Shape{n, n};
  // A rank without samples writes no rows: a [0, ..., grid] block.
  auto rows_of = [&](const std::vector<Tensor>& shares, Shape no_rows) {
    no_rows.insert(no_rows.end(), grid.begin(), grid.end());
    return shares.empty() ? zeros(no_rows, spec.output_dtype) : concat(shares, 0);
  };
  const Tensor a = rows_of(inputs, {0}), u = rows_of(outputs, {0, spec.records});

  writer.write_rows("a", a, first_sample, spec.samples);
  writer.write_rows("u", u, first_sample, spec.samples);
  const Tensor t = arange(1, static_cast<double>(spec.records) + 1, 1, DType::f64) *
                   (spec.final_time / static_cast<double>(spec.records));
  const Tensor x = arange(0, static_cast<double>(n), 1, DType::f64) * (spec.length / static_cast<double>(n));
  writer.write("t", in_output_dtype(t, spec.output_dtype, "t", "scale time.final"));
  writer.write("x", in_output_dtype(x, spec.output_dtype, "x", "scale length"));
  writer.write_string("config", spec.resolved_config);
  if (spec.solver == DatasetSolver::allen_cahn || spec.solver == DatasetSolver::cahn_hilliard) {
    const bool allen_cahn = spec.solver == DatasetSolver::allen_cahn;
    writer.set_attribute("/", "equation",
                         allen_cahn ? "u_t = epsilon^2 Laplacian u - (u^3 - u) on the periodic square [0, length)^2"
                                    : "c_t = Laplacian (c^3 - c - gamma Laplacian c) on the periodic square [0, length)^2");
    writer.set_attribute("/", "scheme",
                         "Fourier spectral, first-order semi-implicit (linear part implicit, cubic term explicit)");
    writer.set_attribute("/", allen_cahn ? "epsilon" : "gamma", allen_cahn ? spec.epsilon : spec.gamma);
    writer.set_attribute("/", "length", spec.length);
  } else if (burgers) {
    writer.set_attribute("/", "equation", "u_t + u u_x = nu u_xx on the periodic interval [0, length)");
    writer.set_attribute("/", "scheme", "Fourier pseudo-spectral, 2/3-rule dealiasing, ETDRK4 (Kassam & Trefethen 2005)");
    writer.set_attribute("/", "length", spec.length);
  } else {
    writer.set_attribute("/", "equation",
                         "w_t + u . grad w = nu Laplacian w + f, u = (psi_y, -psi_x), -Laplacian psi = w, on the "
                         "unit torus; a and u hold the vorticity w, indexed [.., i, j] at (x, y) = (i / n, j / n)");
    writer.set_attribute("/", "scheme",
                         "Fourier pseudo-spectral, 2/3-rule dealiasing, Crank-Nicolson diffusion, Heun advection");
    writer.set_attribute("/", "forcing",
                         spec.fno_forcing ? "0.1 (sin(2 pi (x + y)) + cos(2 pi (x + y)))" : "none");
  }
  writer.set_attribute("/", "solver", solver_name(spec.solver));
  if (spec.solver == DatasetSolver::burgers || spec.solver == DatasetSolver::navier_stokes) {
    writer.set_attribute("/", "nu", spec.nu);
  }
  writer.set_attribute("/", "dt", spec.dt);
  writer.set_attribute("/", "final_time", spec.final_time);
  writer.set_attribute("/", "resolution", n);
  writer.set_attribute("/", "samples", spec.samples);
  writer.set_attribute("/", "seed", static_cast<int64_t>(spec.seed));
  writer.set_attribute("/", "initial_condition",
                       cat("Gaussian random field, covariance sigma^2 (-Laplacian + tau^2)^(-alpha), alpha ",
                           spec.initial_condition.alpha, ", tau ", spec.initial_condition.tau, ", sigma ",
                           spec.initial_condition.sigma));
  commit_dataset(writer, spec.output_path, comm);
  if (spec.vtk && first_sample == 0 && last_sample > 0) write_first_sample_vti(spec, a, u);
}

}  // namespace eddy::classical
