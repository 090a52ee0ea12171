// model.fit_initial_condition: the physics-informed initialisation of Wang, Li, Chen & Perdikaris,
// "PirateNets: Physics-informed deep learning with residual adaptive networks" (arXiv:2402.00326,
// 2024). A PirateNet starts, with every skip weight at 0, as an affine function of its Fourier
// embedding, so fitting its output layer by least squares to the initial condition, repeated at
// times across the domain, starts training from the best such function, u(x, t) ~ u0(x), rather
// than from noise. For the other architectures a ridge-regularised fit is made on the last hidden
// layer (kRidge below).

#include <cmath>

#include "eddy/autodiff/tape.h"
#include "eddy/nn/pinn_models.h"
#include "eddy/ops/ops.h"
#include "eddy/optim/least_squares.h"
#include "solvers/pinn/sampler.h"
#include "solvers/pinn/solver.h"

namespace eddy::pinn {
namespace {

// The times, evenly spaced from the start to the end of the interval, at which the initial values
// are repeated. The paper's fits use the grids of its reference solutions (about 100 to 200 times).
constexpr int64_t kFitTimes = 16;
constexpr uint64_t kFitSalt = 0x50492046495420ull;  // "PI FIT"

// The other architectures' last hidden features are nearly collinear at the start, and their
// exact fit weighs them by thousands (6.6e3 and 6.5e4 in the runs below), which the first steps'
// changes to the hidden layers then amplify: training blew up. A ridge of 1e-2 of the features'
// mean square bounds the weights (3.0 and 0.68) and leaves the fit's error at the start as it was
// (MLP 32 x 2 on Burgers' u0: 54.2% and 54.6%). Measured after Adam, one thread, 2026-12-06:
// 1-D heat (MLP 20 x 3, 300 steps) 9.7 without the ridge, 4.8e-3 with it, 6.9e-2 unfitted;
// Burgers (MLP 20 x 4, 1,000 steps) 3.9, 0.49 and 0.26. A PirateNet's Fourier embedding is well
// conditioned (weights of 8.6) and any ridge worsens its fit (0.95% at 0, 3.0% at 1e-4), so it
// keeps the paper's exact fit.
constexpr double kRidge = 1e-2;

}  // namespace

std::map<std::string, double> PinnState::fit_initial_condition() {
  NoGradGuard no_grad;
  const Problem& p = problem_;
  EDDY_CHECK(time_, p.source, ": model.fit_initial_condition needs geometry.time");
  const auto [start, end] = *time_;
  std::vector<std::vector<Tensor>> features(p.fields.size()), targets(p.fields.size());
  for (size_t i = 0; i < p.conditions.size(); ++i) {
    const Condition& c = p.conditions[i];
    if (c.kind != ConditionKind::initial || !c.value) continue;
    // The same points on every rank and in a resumed run: the stream depends on the seed alone.
    Generator generator = step_stream(p.seed, kFitSalt, 0, i);
    const Tensor at_start = sample_condition(c, generator).points;  // the space's points at t = start
    const int64_t points = at_start.size(0), space = at_start.size(1) - 1;
    EvaluationInputs inputs;
    inputs.points = at_start;
    inputs.fields = [&c](const Tensor&) -> Tensor {
      throw Error(cat(c.value->where(), ": model.fit_initial_condition fits the initial value, which may then only "
                                        "use coordinates and parameters"));
    };
    inputs.parameters = parameter_values();
    inputs.tolerance = p.tolerance();
    EvaluationContext context(p.symbols(false), inputs);
    const Tensor values = reshape(evaluate(*c.value, context), {points, 1});
    for (int64_t k = 0; k < kFitTimes; ++k) {
      const double t = start + (end - start) * static_cast<double>(k) / static_cast<double>(kFitTimes - 1);
      const Tensor at_t = concat({slice(at_start, 1, 0, space), full({points, 1}, t, p.dtype)}, 1);
      features[c.field].push_back(nn::output_layer_inputs(*model_, at_t));
      targets[c.field].push_back(values);
    }
  }
  std::map<std::string, double> distances;
  for (size_t field = 0; field < p.fields.size(); ++field) {
    if (features[field].empty()) continue;
    const Tensor rows = cast(concat(features[field], 0), DType::f64);
    const Tensor fitted_rows = concat({rows, ones({rows.size(0), 1}, DType::f64)}, 1);
    const Tensor values = cast(concat(targets[field], 0), DType::f64);
    Tensor a = fitted_rows, b = values;
    const int64_t width = rows.size(1);
    if (p.model.architecture != nn::PinnArchitecture::pirate_net) {
      // Ridge regression: rows sqrt(lambda) I under the weights (not the bias), lambda a fraction
      // of the features' mean square.
      const double lambda = kRidge * sum(square(rows)).item<double>() / static_cast<double>(width);
      a = concat({a, concat({eye(width, DType::f64) * std::sqrt(lambda), zeros({width, 1}, DType::f64)}, 1)}, 0);
      b = concat({b, zeros({width, b.size(1)}, DType::f64)}, 0);
    }
    const Tensor solution = optim::least_squares(a, b);
    nn::set_output_layer_column(*model_, static_cast<int64_t>(field), reshape(slice(solution, 0, 0, width), {width}),
                                solution.to_vector<double>()[static_cast<size_t>(width)]);
    distances[p.fields[field]] =
        norm(matmul(fitted_rows, solution) - values).item<double>() / std::max(norm(values).item<double>(), 1e-300);
  }
  return distances;
}

}  // namespace eddy::pinn
