// Fits sin(x) on [-pi, pi] with a tanh MLP: Adam with a cosine schedule, then L-BFGS to polish.
// The pattern PINN training uses, on the smallest possible problem.
//
//   ./build/examples/cpp/fit_sin

#include <cstdio>
#include <numbers>

#include "eddy/eddy.h"
#include "eddy/nn/pinn_models.h"
#include "eddy/optim/adam.h"
#include "eddy/optim/lbfgs.h"
#include "eddy/optim/schedule.h"
#include "example_args.h"

using namespace eddy;

int main(int argc, char** argv) try {
  examples::Args(argc, argv).check_all_used();  // no options: --help says so, others are refused
  nn::PinnModelOptions options;
  options.inputs = 1;
  options.width = 32;
  options.depth = 2;
  options.dtype = DType::f64;
  auto model = nn::make_pinn_model(options);

  const double pi = std::numbers::pi;
  Tensor x = reshape(linspace(-pi, pi, 200, DType::f64), {200, 1});
  Tensor y = sin(x);
  auto loss_fn = [&] { return mse_loss((*model)(x), y); };

  optim::AdamOptions adam_options;
  adam_options.learning_rate = 1e-2;
  optim::Adam adam(model->parameters(), adam_options);
  optim::CosineWithWarmupSchedule schedule(1e-2, /*warmup_steps=*/50, /*total_steps=*/1000, /*floor=*/1e-4);
  for (int64_t step = 0; step < 1000; ++step) {
    adam.set_learning_rate(schedule.learning_rate(step));
    adam.zero_grad();
    Tensor loss = loss_fn();
    backward(loss);
    adam.step();
    if (step % 250 == 0) std::printf("adam  step %4lld  loss %.3e\n", static_cast<long long>(step), loss.item<double>());
  }
  const double after_adam = loss_fn().item<double>();

  optim::LbfgsOptions lbfgs_options;
  lbfgs_options.max_iterations = 500;
  lbfgs_options.max_evaluations = 1250;
  optim::Lbfgs lbfgs(model->parameters(), lbfgs_options);
  optim::LbfgsReport report = lbfgs.step([&] {
    lbfgs.zero_grad();
    Tensor loss = loss_fn();
    backward(loss);
    return loss;
  });
  std::printf("after Adam: mse %.3e\n", after_adam);
  std::printf("after L-BFGS: mse %.3e (%lld iterations, %lld evaluations): %s\n", report.loss,
              static_cast<long long>(report.iterations), static_cast<long long>(report.evaluations),
              report.message.c_str());
  return report.loss < after_adam ? 0 : 1;
} catch (const std::exception& error) {
  std::fprintf(stderr, "error: %s\n", error.what());
  return 2;
}
