// eddy's eager CUDA backend on the shapes bench/gpu/torch_ops.py times with PyTorch on the same GPU;
// scripts/gpu-check.sh prints the two side by side. Each line: case name, then the median
// seconds of one call over `repeats` calls (after warm-up, the device synchronised around each).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "eddy/eddy.h"

namespace {

using namespace eddy;

const Device gpu = Device::cuda(0);

void wait() { backend_for(gpu).synchronize(gpu); }

double median_seconds(const std::function<void()>& call, int repeats) {
  for (int i = 0; i < 3; ++i) call();
  wait();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    wait();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + repeats / 2, times.end());
  return times[repeats / 2];
}

void report(const char* name, double seconds) { std::printf("%s %.6e\n", name, seconds); }

Tensor draw(const Shape& shape, DType dtype, uint64_t seed) { return normal(to(random_key(seed), gpu), shape, dtype); }

// A tanh MLP's loss and its gradient with respect to every weight: the eager PINN-sized step.
void mlp_step(const std::vector<Tensor>& weights, const Tensor& x) {
  Tensor h = x;
  for (size_t i = 0; i + 1 < weights.size(); ++i) h = tanh(matmul(h, weights[i]));
  const Tensor loss = mean(square(matmul(h, weights.back())));
  grad({loss}, weights);
}

}  // namespace

int main() {
  for (DType dtype : {DType::f32, DType::f64}) {
    const bool single = dtype == DType::f32;
    const int64_t n = single ? 8192 : 4096;
    const Tensor a = draw({n, n}, dtype, 1), b = draw({n, n}, dtype, 2);
    report(single ? "gemm_f32_8192" : "gemm_f64_4096", median_seconds([&] { matmul(a, b); }, 10));
  }
  const Tensor big = draw({1 << 24}, DType::f32, 3);
  report("tanh_f32_16M", median_seconds([&] { tanh(big); }, 20));
  report("sum_f32_16M", median_seconds([&] { sum(big); }, 20));
  const Tensor rows = draw({1 << 14, 1024}, DType::f32, 4);
  report("sum_rows_f32_16Kx1K", median_seconds([&] { sum(rows, {1}); }, 20));
  std::vector<Tensor> weights;
  const std::vector<int64_t> widths = {2, 64, 64, 64, 64, 1};
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    weights.push_back(draw({widths[i], widths[i + 1]}, DType::f32, 10 + i).requires_grad_());
  }
  const Tensor x = draw({10000, 2}, DType::f32, 5);
  report("mlp_step_f32_10000x64x4", median_seconds([&] { mlp_step(weights, x); }, 20));
  return 0;
}
