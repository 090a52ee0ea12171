#pragma once
// A PINN problem as read from its YAML config: geometry, fields, parameters, equations,
// conditions, sampling, model, training, validation and output. read_problem() validates all of
// it, expressions included, before anything is trained; docs/config.md documents every key.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eddy/io/config.h"
#include "eddy/nn/pinn_models.h"
#include "eddy/optim/schedule.h"
#include "eddy/optim/soap.h"
#include "solvers/common/resume_settings.h"
#include "solvers/common/training_config.h"
#include "solvers/pinn/expression.h"
#include "solvers/pinn/geometry.h"

namespace eddy::pinn {

// points: a residual at listed points (a pressure gauge p = 0 at one corner), which, like a data
// condition's observation points, are used as given at every step instead of being drawn.
enum class ConditionKind { interior, boundary, initial, periodic, data, points };

// An equation given as a function instead of text (the Python API's `equations=`): the residual
// at `points` ([N, coordinates], a leaf that requires grad, so derivatives of `fields` with
// respect to it are available) from the fields there ([N, fields], the model's output with its
// transforms) and the parameters by name. Returns [N] or [N, 1].
using EquationFunction =
    std::function<Tensor(const Tensor& points, const Tensor& fields, const std::map<std::string, Tensor>& parameters)>;

struct Condition {
  std::string name;
  ConditionKind kind = ConditionKind::interior;
  std::optional<Expression> residual;   // zero where the condition holds (all but periodic)
  std::shared_ptr<const EquationFunction> function;  // instead of `residual`: a supplied equation
  std::string function_name;                         // its name in the supplied functions
  std::optional<Expression> selector;   // boundary: the predicate `on`
  std::vector<std::string> faces;       // boundary: named faces (empty: all)
  int64_t points = 1000;
  double weight = 1.0;
  int64_t periodic_axis = -1;           // periodic: the spatial axis
  std::vector<int64_t> periodic_fields; // periodic: field columns that must match
  // initial and points conditions written as `field: u, value: ...` (not as an equation): the
  // field's column and the value expression, which model.fit_initial_condition fits.
  int64_t field = -1;
  std::optional<Expression> value;
  Tensor fixed_points;                  // data, points: the listed points [N, coordinates]
  Tensor data_values;                   // data: observed values [N, data_fields]
  std::vector<int64_t> data_fields;     // data: the observed field columns
};

struct LearnableParameter {
  std::string name;
  double initial = 0;
  std::string where;  // "file:line:col: parameters.<name>: ", for errors about it
};

// Adaptive loss weights (solvers/pinn/weighting.h): every `every` Adam steps each condition's
// adaptive factor moves towards sum_j s_j / s_i, smoothed by `alpha`, where s_i is the norm of
// the gradient of its loss (grad_norm) or the mean of the diagonal of its residual's neural
// tangent kernel at `ntk_points` of its points (ntk).
enum class LossWeighting { fixed, grad_norm, ntk };

struct LossWeightingOptions {
  LossWeighting scheme = LossWeighting::fixed;
  int64_t every = 100;
  double alpha = 0.9;            // moving-average memory, in [0, 1)
  int64_t ntk_points = 256;      // ntk: points per condition at which the kernel's diagonal is taken
};

// Causal weighting in time (Wang, Sankaran & Perdikaris 2022): interior points in `chunks` time
// chunks, chunk k weighted by exp(-epsilon * the losses of the chunks before it).
struct CausalOptions {
  int64_t chunks = 16;
  double epsilon = 1.0;
};

// How derivatives of the fields with respect to the coordinates are computed. Both give the same
// values and weight gradients (to rounding); taylor is the faster: one forward pass carries the
// value, the first derivatives and the pure second derivatives (u_xx, laplacian(u)) the
// equations use (compiler/taylor.h), where reverse runs one backward pass per derivative. Mixed
// and higher derivatives, and derivatives of expressions other than a field, are reverse mode
// in both.
enum class DerivativeMode { taylor, reverse };

// Time marching (Wight & Zhao 2021; Krishnapriyan et al. 2021): geometry.time split into
// `windows` equal windows trained one after another (solvers/pinn/stages.h).
struct TimeMarchingOptions {
  int64_t windows = 4;
};

// Parameter continuation: the equation parameter `parameter` (a constant) takes `values` in turn,
// one training stage each; the last is the parameter's configured value.
struct ContinuationOptions {
  std::string parameter;
  std::vector<double> values;
};

// The first-order phase's optimiser (training.optimizer); L-BFGS may follow either.
enum class FirstOrderOptimizer { adam, soap };

struct TrainingOptions {
  DerivativeMode derivatives = DerivativeMode::taylor;
  FirstOrderOptimizer optimizer = FirstOrderOptimizer::adam;
  // The first-order phase, from training.adam or training.soap: its steps, rate and schedule.
  int64_t first_order_steps = 1000;
  double learning_rate = 1e-3;
  optim::ScheduleSpec schedule;
  // Adam's eps (training.adam.eps); SOAP's is in `soap`.
  double adam_eps = 1e-8;
  // SOAP's other settings (its learning_rate is the one above).
  optim::SoapOptions soap;
  int64_t lbfgs_iterations = 0;
  int64_t lbfgs_evaluations = 0;  // 0: 1.25 x iterations
  // 1: under mpirun, each rank keeps Adam's moments for its share of the trainable tensors only
  // (ZeRO stage 1, dist/sharded_optimizer.h); 0: every rank keeps them all. L-BFGS's history
  // stays whole on every rank.
  int64_t zero_stage = 0;
  int64_t log_every = 100;
  LossWeightingOptions loss_weighting;
  std::optional<CausalOptions> causal;
  std::optional<TimeMarchingOptions> time_marching;
  std::optional<ContinuationOptions> continuation;
};

// Residual-based adaptive refinement (Lu et al. 2021, DeepXDE): every `every` Adam steps, each
// interior condition gains the `add` of `candidates` fresh points with the largest |residual|.
struct RefinementOptions {
  int64_t every = 1000;
  int64_t candidates = 10000;
  int64_t add = 100;
};

// Residual-based adaptive distribution (RAD; Wu et al. 2023): every `every` Adam steps, each
// interior condition's points are replaced by as many drawn from `candidates` fresh points with
// probability proportional to |residual|^k / mean(|residual|^k) + c.
struct RadOptions {
  int64_t every = 1000;
  int64_t candidates = 100000;
  double k = 1;
  double c = 1;
};

struct Reference {
  // Either analytic expressions per field, or a file (HDF5, CSV or NPY: io::read_array) with the
  // solution on a grid (one 1-D dataset per coordinate, `layout` giving the field's axis order) or
  // at scattered points. The file is read, and its shapes checked, when the problem is read.
  std::map<std::string, Expression> expressions;
  std::string file;
  std::vector<std::string> layout;       // grid form: coordinate names in the values' axis order
  std::vector<Tensor> axes;              // grid form: each layout coordinate's values, in layout order
  Tensor points;                         // [N, coordinates] in coordinate order: as given, or the grid's
  std::map<std::string, Tensor> values;  // field -> its values, flat (grid form: C order over the layout)
  // The points where some field has a value: NaN marks a value not given (DeepXDE's L-shape grid
  // covers the removed quadrant with NaN; Ghia's cavity table gives u and v on different lines),
  // left out of that field's comparison. All inside the domain.
  std::vector<int64_t> rows;
};

struct ValidationOptions {
  int64_t every = 0;  // 0: only at the end
  std::optional<Reference> reference;
  int64_t points = 4096;  // for expression references: uniform interior points
};

struct OutputOptions {
  std::string dir = "runs/pinn";
  std::vector<int64_t> grid;  // points per coordinate on the output grid
  bool vtk = true;
  int64_t checkpoint_every = 1000;
};

struct Problem {
  std::string source;
  std::string description;
  DType dtype = DType::f32;
  uint64_t seed = 0;
  // device: where the network, the points and the training step live (evaluate_run and export
  // read a run on the CPU, wherever it trained).
  solvers::DeviceSpec device;
  GeometryPtr space;
  std::optional<std::pair<double, double>> time;
  std::vector<std::string> coordinates;  // spatial names, then "t" when there is time
  std::vector<std::string> fields;
  std::vector<std::string> field_where;  // "file:line:col: fields[i]: " of each field, for errors about it
  std::map<std::string, double> constants;
  std::vector<LearnableParameter> learnable;
  std::map<std::string, Expression> helpers;
  std::vector<Condition> conditions;
  Sampler sampler;
  int64_t resample_every = 0;
  std::optional<RefinementOptions> refinement;  // sampling.rar
  std::optional<RadOptions> rad;                // sampling.rad
  nn::PinnModelOptions model;
  // Hard constraints: field -> expression of the coordinates, parameters and the raw network
  // outputs net_<field> (e.g. u = x*(1 - x)*net_u makes u vanish at x = 0 and 1 exactly). When
  // any field has one, the others get the identity net_<field>.
  std::map<std::string, Expression> output_transforms;
  // model.fit_initial_condition: before training, the output layer is the least-squares fit of
  // the initial conditions' values, repeated over geometry.time (PinnState::fit_initial_condition).
  bool fit_initial_condition = false;
  TrainingOptions training;
  ValidationOptions validation;
  OutputOptions output;
  // parallel: {mesh: [N], names: [dp]}: the collocation points split over N ranks, as a job
  // without the section splits them over all of its ranks; ignored on one process.
  solvers::ParallelSpec parallel;
  std::string resolved_config;
  // The defaults derived from other keys, which resolved_config leaves out (resume_settings.h).
  solvers::Settings derived_settings;
  std::string config_hash;

  int64_t spatial_dim() const { return space->dim(); }
  // The symbols of an interior or boundary context.
  Symbols symbols(bool boundary) const;
  // The symbols of output transforms: the fields are the raw network outputs net_<field>.
  Symbols transform_symbols() const;
  // Bounding box of space x time, in coordinate order.
  BoundingBox domain_box() const;
  // How far apart coordinates may be and still count as equal: in `==` predicates, and for a
  // listed point on the domain's boundary. 1e-6 times the diagonal of the space's bounding box
  // (not of domain_box(): time in seconds beside space in metres made it loose).
  double tolerance() const;
  // width^2 per hidden layer: a lower bound of the network's weights, which the memory refusals
  // of model.width and training.time_marching.windows count.
  double hidden_layer_weights() const;
  // Whether `point` (coordinates in order) lies in the closed domain, space times time, within
  // tolerance(); a non-finite coordinate does not.
  bool contains(const double* point) const;
  // "x = 0.3, t = 1.5": a point for messages.
  std::string point_text(const double* point) const;
};

// What an equation naming neither one of `equations` nor a supplied function is: an error, or (in
// a finished run's config.yaml, read to evaluate or export the run, which computes no residual)
// the name of a function supplied when the run was trained (eddy.solve's `equations=`).
enum class UnknownEquationNames { refused, supplied_when_trained };

// Reads and validates everything; throws eddy::Error naming file, line, column and key path.
// `functions` are equations supplied by the caller: a condition whose `equation` names one uses
// it (interior and initial conditions only); the names must not also appear under `equations`.
Problem read_problem(io::Config& config, const std::map<std::string, EquationFunction>& functions = {},
                     UnknownEquationNames unknown_names = UnknownEquationNames::refused);

// Refuses, before training (eddy solve and eddy check, not eval or export of a trained run), a
// learnable parameter that no condition's equation or value and no output transform reads: no
// gradient reaches it (an `on` predicate gives none), and it ended the run at its initial value,
// reported as learned. Likewise a field that no condition reads or sets (`field:`, data, periodic)
// and that has no output transform: no loss term constrains it, and the run wrote whatever the
// network's untrained output gave as its solution. A condition whose equation is a supplied
// function, whose reads eddy cannot see, turns the check off.
void refuse_untrainable(const Problem& p);

}  // namespace eddy::pinn
