// Uses an installed eddy: a gradient, a forward-mode derivative, and the primitive registry.
// Exits non-zero on any mismatch.

#include <cmath>
#include <cstdio>
#include <string_view>

#include "eddy/eddy.h"

namespace {
int failures = 0;

void expect_near(const char* what, double got, double expected) {
  if (std::abs(got - expected) > 1e-12 * (1 + std::abs(expected))) {
    std::printf("FAIL %s: got %.17g, expected %.17g\n", what, got, expected);
    ++failures;
  }
}

bool registered(std::string_view name) {
  for (const eddy::Primitive& p : eddy::all_primitives()) {
    if (p.name == name) return true;
  }
  return false;
}
}  // namespace

int main() {
  using namespace eddy;

  // d/dx sum(x sin x) = sin x + x cos x, in reverse mode.
  const std::vector<double> xs{0.5, 1.0, 2.0};
  Tensor x = tensor<double>(xs).requires_grad_();
  backward(sum(x * sin(x)));
  const std::vector<double> g = x.grad().to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    expect_near("reverse-mode gradient", g[i], std::sin(xs[i]) + xs[i] * std::cos(xs[i]));
  }

  // d/dt exp(2 t) at t = 0.3, in forward mode.
  auto [value, tangent] = jvp([](const Tensor& t) { return exp(2.0 * t); }, scalar(0.3, DType::f64),
                              scalar(1.0, DType::f64));
  expect_near("jvp value", value.item<double>(), std::exp(0.6));
  expect_near("jvp tangent", tangent.item<double>(), 2.0 * std::exp(0.6));

  // Primitives this program never calls are registered all the same: every layer is linked whole.
  for (const char* name : {"add", "matmul", "fft_c2c"}) {
    if (!registered(name)) {
      std::printf("FAIL primitive %s is not registered\n", name);
      ++failures;
    }
  }

  if (failures == 0) std::printf("consumer: OK (%zu primitives)\n", all_primitives().size());
  return failures == 0 ? 0 : 1;
}
