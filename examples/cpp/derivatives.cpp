// Derivatives of a tanh MLP u(x, t) at 10,000 points: u, u_x, u_t, u_xx, u_xxx by nested
// reverse mode, then the gradient of a PINN loss built from them with respect to every weight.
//
//   ./build/examples/cpp/derivatives            (float32)
//   ./build/examples/cpp/derivatives --float64

#include <chrono>
#include <cstdio>
#include <cstring>

#include "tanh_mlp.h"

using namespace eddy;
using Clock = std::chrono::steady_clock;

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

int main(int argc, char** argv) {
  // One option, --float64; anything else is refused rather than run in float32 as if it were.
  const bool wide = argc == 2 && std::strcmp(argv[1], "--float64") == 0;
  if (argc > 1 && !wide) {
    std::fprintf(stderr, "usage: %s [--float64]\n", argv[0]);
    return 2;
  }
  const DType dtype = wide ? DType::f64 : DType::f32;
  const int64_t points = 10000;
  auto mlp = examples::TanhMlp::create({2, 50, 50, 50, 1}, dtype, /*seed=*/0);

  Generator sampler(1);
  Tensor x = (2.0 * rand({points, 1}, dtype, &sampler) - 1.0).requires_grad_();
  Tensor t = rand({points, 1}, dtype, &sampler).requires_grad_();

  auto start = Clock::now();
  examples::PinnDerivatives d = examples::pinn_derivatives(mlp, x, t);
  const double derivative_ms = milliseconds_since(start);

  start = Clock::now();
  Tensor loss = examples::residual_loss(d);
  std::vector<Tensor> weight_grads = grad({loss}, mlp.parameters());
  const double gradient_ms = milliseconds_since(start);

  std::printf("tanh MLP 2 -> 3x50 -> 1, %lld points, %s, %d threads\n",
              static_cast<long long>(points), wide ? "float64" : "float32", num_threads());
  std::printf("\n%10s %10s %12s %12s %12s %12s %12s\n", "x", "t", "u", "u_x", "u_t", "u_xx", "u_xxx");
  auto column = [](const Tensor& v) { return v.to_vector<double>(); };
  auto xs = column(x), ts = column(t), u = column(d.u), ux = column(d.u_x), ut = column(d.u_t),
       uxx = column(d.u_xx), uxxx = column(d.u_xxx);
  for (int i = 0; i < 5; ++i) {
    std::printf("%10.4f %10.4f %12.5e %12.5e %12.5e %12.5e %12.5e\n", xs[i], ts[i], u[i], ux[i], ut[i],
                uxx[i], uxxx[i]);
  }
  std::printf("\nloss = mean((u_t + u u_x - 0.01 u_xx + 0.005 u_xxx)^2) + 0.1 mean(u^2) = %.6e\n",
              loss.item<double>());
  std::printf("weight-gradient norms:");
  for (const Tensor& g : weight_grads) std::printf(" %.3e", norm(g).item<double>());
  std::printf("\n\nu..u_xxx took %.1f ms; the loss and its %zu weight gradients %.1f ms\n", derivative_ms,
              weight_grads.size(), gradient_ms);
  std::printf("(checked against finite differences by tests/examples/test_derivatives_example.cpp)\n");
  return 0;
}
