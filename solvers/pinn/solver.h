#pragma once
// Solving a PINN problem: sampling the conditions, the training loop (Adam, then L-BFGS),
// validation against a reference, checkpoints, and the HDF5/VTK results in the run folder.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <iostream>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "eddy/dist/communicator.h"
#include "eddy/dist/process_mesh.h"
#include "eddy/nn/module.h"
#include "solvers/pinn/problem.h"

namespace eddy::pinn {

// Collocation points of one condition: all of them, or (PinnState::samples) split over the ranks.
struct SampledCondition {
  Tensor points;   // [N, coordinates]
  Tensor normals;  // boundary conditions: [N, spatial dim]
  Tensor partner;  // periodic: the matching points on the opposite face
  Tensor targets;  // data: the observed values [N, observed fields]
  // How each row counts in the condition's mean over all ranks' rows: a scalar 1 / (rows of all
  // ranks), or for a causal condition [N, chunks], 1 / (rows in the chunk) in the row's time chunk
  // and 0 elsewhere. Tensors rather than numbers so that a compiled step takes them as inputs.
  Tensor row_weights;
};

// The tensors of a SampledCondition, in the order a compiled training step takes them (those that
// are defined).
inline constexpr Tensor SampledCondition::*kSampleTensors[] = {&SampledCondition::points, &SampledCondition::normals,
                                                               &SampledCondition::partner, &SampledCondition::targets,
                                                               &SampledCondition::row_weights};

// The loss at given points, with each condition's unweighted term and, where causal weighting
// applies, its chunk weights [chunks] (undefined elsewhere).
struct LossParts {
  Tensor total;
  std::vector<Tensor> terms;
  std::vector<Tensor> causal_weights;
};

// The model, the learnable equation parameters, the points currently trained on, and the
// training's loss weights.
//
// Data parallel over the ranks of `comm`, as distributed tensors (eddy/dist/dtensor.h): every
// rank draws every condition's points alike, and the training step takes them split by rows over
// a mesh of those ranks (Shard(0); ranks' shares a row apart where the count does not divide), so
// the sharding rules run each rank's rows and sum each condition's loss over the ranks. Every rank
// holds the loss of all the points; the gradients of the model's (ordinary, replicated)
// parameters are summed over the ranks by the backward pass, or, under dist::DeferGradientSums
// (the training step's), left as each rank's part for one bucketed sum per step.
class PinnState {
 public:
  explicit PinnState(const Problem& problem, dist::Communicator& comm = dist::default_communicator());
  PinnState(const PinnState&) = delete;  // its Taylor operator calls back into this object
  PinnState& operator=(const PinnState&) = delete;

  const Problem& problem() const { return problem_; }
  nn::Module& model() { return *model_; }
  // Model weights, then learnable parameters.
  std::vector<Tensor> trainable() const;
  std::map<std::string, Tensor>& learnable() { return learnable_; }

  // Draws every condition's points; `round` numbers the resampling, so a run and a resumed run
  // draw identical points. Points added by refinement stay, and a condition that RAD has
  // redistributed keeps RAD's points. With causal weighting, interior points are kept sorted by
  // time.
  void sample(int64_t round);
  // Every condition's points as the training step takes them: on several ranks, distributed
  // tensors split by rows over the ranks (each holding its share).
  const std::vector<SampledCondition>& samples() const { return samples_; }
  // Every condition's points, on every rank.
  const std::vector<SampledCondition>& all_samples() const { return all_samples_; }
  dist::Communicator& communicator() const { return comm_; }
  // The one-axis mesh ("dp") of the communicator's ranks that the samples are split over; null on
  // one rank.
  const std::shared_ptr<const dist::ProcessMesh>& mesh() const { return mesh_; }
  // `count` interior points of space x time, drawn with the problem's sampler; t in the stage's
  // time-marching window, or with `whole_time` in all of geometry.time.
  Tensor interior_points(int64_t count, Generator& generator, bool whole_time = false) const;
  // Points refinement added to a condition (undefined while there are none); add_points
  // appends to them.
  const Tensor& added_points(size_t condition) const { return added_[condition]; }
  void add_points(size_t condition, const Tensor& points);
  // The points RAD last drew for a condition, which stand in for its draw (undefined until RAD
  // draws); set_rad_points replaces them.
  const Tensor& rad_points(size_t condition) const { return rad_points_[condition]; }
  void set_rad_points(size_t condition, const Tensor& points);

  // The adaptive factors of the loss weighting, one per condition (1 until a scheme changes them).
  const std::vector<double>& adaptive_weights() const { return adaptive_weights_; }
  void set_adaptive_weights(std::vector<double> weights);
  // A condition's factor in the loss: its configured weight times its adaptive factor.
  double effective_weight(size_t condition) const;
  // The effective weights as scalar tensors of the problem's dtype, one per condition.
  std::vector<Tensor> weight_tensors() const;
  // Whether a condition's loss is weighted in time (training.causal, interior conditions).
  bool causal(size_t condition) const;
  // The causal weights of a condition's time chunks at its last loss evaluation (empty where
  // causal weighting does not apply), and the smallest over all conditions (1 when none).
  const std::vector<double>& causal_weights(size_t condition) const { return causal_weights_[condition]; }
  double min_causal_weight() const;
  // Keeps the chunk weights [chunks] of a loss evaluation for causal_weights() and the log.
  void record_causal_weights(size_t condition, const Tensor& weights);

  // A condition's unweighted loss: the mean squared residual, or its causal form for interior
  // conditions under training.causal.
  Tensor condition_loss(size_t condition);
  // Sum of the effective weights times the condition losses; the condition losses in `terms`
  // when given.
  Tensor loss(std::vector<double>* terms = nullptr);
  // The same loss as a pure function of tensors, which a compiled training step can capture:
  // `weights` (weight_tensors()) times each condition's loss at `samples`, with no host reads
  // and no change to the state. Conditions marked in `left_out` (their terms computed elsewhere:
  // fused_interior.h) add nothing to the total, and their terms are undefined.
  LossParts loss_parts(const std::vector<SampledCondition>& samples, const std::vector<Tensor>& weights,
                       const std::vector<bool>& left_out = {});
  // An interior condition's residual at any points [N, coordinates].
  Tensor interior_residual(size_t condition, const Tensor& points);
  // A condition's residual [rows, columns] at some of its points: rows of all_samples()[condition].
  Tensor residual_at_rows(size_t condition, const std::vector<int64_t>& rows);
  // eddy check: every condition's residual on a few of its points, with the derivatives' memory
  // bound taken for all of them, so that an order too high for this machine is refused before
  // training rather than at its first step.
  void check_derivative_memory();
  // Draws each boundary condition with an `on` predicate once in every time-marching window, with
  // a generator of its own (the state is left as it was): a predicate that selects no points in a
  // later window (one that names t) fails here, before training, where it failed once the windows
  // before it had trained, and the error names the window.
  void check_boundary_selections();
  // The solution at points [N, coordinates]: the model's output (with the output transforms), or
  // under time marching, at each point the network of the window holding its t: the trained
  // network of a window before the current stage, the model for the current one and those after.
  Tensor predict(const Tensor& points);

  // Training in stages (stages.h): the stage being trained, 0 without stages.
  int64_t stage() const { return stage_; }
  // Moves training on to `stage`. Time marching first keeps the model's weights as the trained
  // network of every window before `stage` that has none (the model goes on training from them),
  // then samples t in the stage's window and gives its initial conditions, at the window's start,
  // the residual of the window before as their target; continuation sets the parameter to the
  // stage's value. Points that refinement added or RAD drew were for the stage before and are
  // dropped; sample() then draws the stage's points.
  void enter_stage(int64_t stage);
  // What a checkpoint keeps of the stages: "stage" and the trained windows' networks
  // ("window.<k>.<weight>"); restore_stages enters the saved stage (nothing for a run without).
  void save_stages(nn::StateDict& saved) const;
  void restore_stages(const nn::StateDict& saved);
  // model.fit_initial_condition (initial_fit.cpp): sets each output of a field with initial
  // values to the least-squares fit of them, repeated at times across the current time interval,
  // by the model's last layer. Returns each fitted field's relative L2 distance from its values
  // at the fitted points, by field name.
  std::map<std::string, double> fit_initial_condition();
  // Parameters as the expression evaluator wants them: constants and learnable ones.
  std::map<std::string, Tensor> parameter_values() const;

 private:
  SampledCondition sample_condition(const Condition& condition, Generator& generator) const;
  // A condition's loss and, when causal, its chunk weights, at `sample`.
  std::pair<Tensor, Tensor> condition_loss_at(size_t condition, const SampledCondition& sample);
  Tensor residual_at(size_t condition, const SampledCondition& sample);
  // all_samples_[condition]: the drawn points, then the added ones (sorted by time when causal);
  // samples_[condition]: the same split over the ranks, with their row weights.
  void assemble(size_t condition);
  // `planned_rows`: as EvaluationInputs::planned_rows. `network`: the fields from it instead of
  // the model (in reverse mode).
  Tensor expression_residual(const Condition& condition, const Tensor& points, const Tensor& normals,
                             int64_t planned_rows = 0, nn::Module* network = nullptr);
  // A network's fields at points, with the output transforms: what the residuals differentiate.
  Tensor network_fields(nn::Module& network, const Tensor& points);
  // Time marching: an initial condition's residual under the last trained window's network, which
  // the model's residual at the window's start is to match (its `targets`).
  Tensor initial_targets(size_t condition, const Tensor& points);

  const Problem& problem_;
  dist::Communicator& comm_;
  std::shared_ptr<const dist::ProcessMesh> mesh_;
  std::shared_ptr<nn::Module> model_;
  std::map<std::string, Tensor> learnable_;
  std::vector<SampledCondition> drawn_;    // this round's draw, per condition
  std::vector<Tensor> added_;              // per condition, by refinement
  std::vector<Tensor> rad_points_;         // per condition, by RAD
  std::vector<SampledCondition> all_samples_;  // the drawn points, then the added ones
  std::vector<SampledCondition> samples_;      // the same split over the ranks: what the step trains on
  std::vector<double> adaptive_weights_;
  std::vector<std::vector<double>> causal_weights_;
  std::shared_ptr<TaylorOperator> field_jets_;  // training.derivatives: taylor
  std::optional<std::pair<double, double>> time_;  // the interval of t sampled: geometry.time or the window's
  std::map<std::string, double> constants_;       // the problem's, with a continued one at its stage's value
  int64_t stage_ = 0;
  std::vector<std::shared_ptr<nn::Module>> windows_;  // time marching: the trained windows before stage_
};

// All combinations of the axes' values, in C order (last axis fastest): [prod(n_i), axes].
Tensor meshgrid_points(const std::vector<Tensor>& axes);

struct Metrics {
  std::map<std::string, double> relative_l2;  // per field
  std::map<std::string, double> max_error;
};

// Compares the model with the problem's reference (which must exist); the reference is read or
// evaluated once, at construction.
class Validator {
 public:
  explicit Validator(PinnState& state);
  Metrics measure();

 private:
  PinnState& state_;
  Tensor points_;                          // [N, coordinates]
  std::map<std::string, Tensor> values_;   // field -> [N, 1]
};

struct SolveOptions {
  // The ranks to train on; null: the process-wide communicator (all ranks of an mpirun job).
  dist::Communicator* communicator = nullptr;
  bool resume = false;
  // Run the training step as written instead of compiled (`eddy solve --eager`).
  bool eager = false;
  std::ostream* log = nullptr;  // progress; a terminal gets a live bar, anything else plain lines
  // Warnings (a run folder written over, a problem far from unit scale) go here also when `log` is
  // null; null: nowhere.
  std::ostream* warnings = &std::cerr;
  bool terminal = false;
};

struct SolveResult {
  bool finished = false;  // false: stopped on a non-finite loss or by a signal (message says where)
  // The signal (SIGINT, SIGTERM; solvers/common/interrupt.h) that ended training early, or 0;
  // the checkpoint and results are then written as at the end.
  int interrupted = 0;
  std::string message;
  int64_t steps = 0;
  double loss = 0;
  std::optional<Metrics> metrics;
  std::map<std::string, double> learned;  // final values of learnable parameters
};

// Trains, validates and writes the run folder (config.yaml, solution.h5, solution.vti/.pvd,
// points.vtp, checkpoint.safetensors).
SolveResult solve(const Problem& problem, const SolveOptions& options);

// Loads a run folder's checkpoint (model and learnable parameters) into `state`, which was built
// from the run's config.yaml.
void load_trained(PinnState& state, const std::string& run_dir);

// Re-evaluates a finished run folder against its reference.
Metrics evaluate_run(const std::string& run_dir);

}  // namespace eddy::pinn
