// Steps of two auto-parallel programs (docs/distributed.md, "Auto-parallel"), as a plain process
// or under `mpirun -np N` (bench/auto_parallel.sh runs 1 and 2 ranks and prints the ratios):
//  - data parallel PINN: Poisson's residual (second derivatives in the points) of a 2 -> 64 ->
//    64 -> 1 tanh network at 8,192 points sharded over the ranks, parameters ordinary tensors;
//    also in 4 micro-batches of 2,048 points, with the gradients summed over the ranks in each
//    backward pass, and with those sums deferred to one message per step (DeferGradientSums);
//  - tensor parallel MLP: 512 -> 2,048 -> 512, batch 64, the first layer split by columns and
//    the second by rows (Megatron's layout), eagerly and with the loss and gradients compiled.
// Both float32 with Adam. Rank 0 prints per program the median time of a step, the bytes this
// rank fed into collectives per step (dist::collective_traffic) and the least any data- or
// tensor-parallel program of that shape must send (see the comments at each).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <vector>

#include "eddy/compiler/compile.h"
#include "eddy/dist/collectives.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/dist/dtensor.h"
#include "eddy/eddy.h"
#include "eddy/optim/adam.h"
#include "eddy/optim/optimizer.h"

namespace {

using namespace eddy;
using Placements = std::vector<Placement>;

Tensor common(const Shape& shape, uint64_t seed, double scale) {
  Generator generator(seed);
  return randn(shape, DType::f32, &generator) * scale;
}

struct Measured {
  double seconds_per_step;
  double bytes_per_step;
};

// The median over `steps` timed steps, after two untimed ones.
Measured measure(const std::function<void()>& step, int steps) {
  dist::Communicator& world = dist::default_communicator();
  step();
  step();
  std::vector<double> times;
  const int64_t bytes_before = dist::collective_traffic().bytes;
  for (int i = 0; i < steps; ++i) {
    world.barrier();
    const auto start = std::chrono::steady_clock::now();
    step();
    world.barrier();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + steps / 2, times.end());
  const double bytes = static_cast<double>(dist::collective_traffic().bytes - bytes_before) / steps;
  return {times[static_cast<size_t>(steps / 2)], bytes};
}

// `minimum_bytes`: the least a program of this strategy sends on more than one rank.
void report(const char* name, const Measured& measured, double minimum_bytes) {
  if (dist::default_communicator().rank() != 0) return;
  if (dist::default_communicator().size() == 1) minimum_bytes = 0;
  std::printf("%-30s ranks %d  %9.3f ms/step  %10.0f bytes/step  minimum %10.0f bytes/step\n", name,
              dist::default_communicator().size(), 1e3 * measured.seconds_per_step, measured.bytes_per_step,
              minimum_bytes);
}

// `micro_batches` backward passes per step over the points' consecutive parts, each part sharded
// over the ranks; with `deferred`, under dist::DeferGradientSums and one dist::sum_gradients
// after them.
void data_parallel_pinn(const std::shared_ptr<const dist::ProcessMesh>& mesh, int64_t micro_batches, bool deferred,
                        const char* name) {
  const int64_t points = 8192, width = 64;
  std::vector<Tensor> params{common({2, width}, 1, 0.7).requires_grad_(), common({width}, 2, 0.1).requires_grad_(),
                             common({width, width}, 3, 0.18).requires_grad_(),
                             common({width}, 4, 0.1).requires_grad_(), common({width, 1}, 5, 0.18).requires_grad_()};
  optim::AdamOptions options;
  optim::Adam adam(params, options);
  const Tensor all_points = common({points, 2}, 6, 1.0);
  std::vector<Tensor> parts;
  for (int64_t m = 0; m < micro_batches; ++m) {
    Tensor part = slice(all_points, 0, m * points / micro_batches, (m + 1) * points / micro_batches).detach();
    parts.push_back(dist::shard_tensor(part.requires_grad_(), mesh, {Placement::shard(0)}));
  }
  dist::Communicator& batch_axis = mesh->communicator(0);
  auto step = [&] {
    adam.zero_grad();
    {
      std::optional<dist::DeferGradientSums> per_rank_parts;
      if (deferred) per_rank_parts.emplace(batch_axis);
      for (const Tensor& xy : parts) {
        const Tensor h = tanh(matmul(tanh(matmul(xy, params[0]) + params[1]), params[2]) + params[3]);
        const Tensor u = matmul(h, params[4]);
        const Tensor du = grad({u}, {xy}, {ones_like(u)}, true)[0];
        Tensor laplacian;
        for (int64_t axis = 0; axis < 2; ++axis) {
          const Tensor d = slice(du, 1, axis, axis + 1);
          const Tensor dd = slice(grad({d}, {xy}, {ones_like(d)}, true)[0], 1, axis, axis + 1);
          laplacian = laplacian.defined() ? laplacian + dd : dd;
        }
        backward(mean(square(laplacian + 1.0)) / static_cast<double>(micro_batches));
      }
    }
    if (deferred) dist::sum_gradients(params, batch_axis);
    adam.step();
  };
  // Data parallelism must sum every gradient over the ranks once: the parameters' bytes (one
  // flag per parameter rides along in sum_gradients' message).
  int64_t parameter_bytes = 0;
  for (const Tensor& p : params) parameter_bytes += p.numel() * 4;
  report(name, measure(step, 20), static_cast<double>(parameter_bytes));
}

void tensor_parallel_mlp(const std::shared_ptr<const dist::ProcessMesh>& mesh) {
  const int64_t batch = 64, width = 512, hidden = 2048;
  const Tensor x = common({batch, width}, 10, 1.0), target = common({batch, width}, 11, 1.0);
  auto place = [&](Tensor whole, const Placements& placements) {
    return dist::shard_tensor(whole.requires_grad_(), mesh, placements);
  };
  std::vector<Tensor> params{place(common({width, hidden}, 12, 0.04), {Placement::shard(1)}),
                             place(common({hidden}, 13, 0.1), {Placement::shard(0)}),
                             place(common({hidden, width}, 14, 0.02), {Placement::shard(0)}),
                             place(common({width}, 15, 0.1), {Placement::replicate()})};
  optim::AdamOptions options;
  optim::Adam adam(params, options);
  auto loss_of = [&](const std::vector<Tensor>& p) {
    return mean(square(matmul(tanh(matmul(x, p[0]) + p[1]), p[2]) + p[3] - target));
  };
  auto step = [&] {
    adam.zero_grad();
    backward(loss_of(params));
    adam.step();
  };
  // The loss and gradients compiled, Adam's update outside (an in-place write).
  CompiledFunction compiled = compile([&](const std::vector<Tensor>& p) {
    std::vector<Tensor> out{loss_of(p)};
    for (const Tensor& g : grad({out[0]}, p)) out.push_back(g);
    return out;
  });
  auto compiled_step = [&] {
    const std::vector<Tensor> out = compiled(params);
    optim::set_grads(params, {out.begin() + 1, out.end()});
    adam.step();
  };
  // Megatron's MLP sums the second layer's partial products once in the forward pass; the input
  // needs no gradient, so the backward pass sends nothing.
  const auto megatron_bytes = static_cast<double>(batch * width * 4);
  report("tensor-parallel MLP", measure(step, 20), megatron_bytes);
  report("tensor-parallel MLP, compiled", measure(compiled_step, 20), megatron_bytes);
}

}  // namespace

int main() {
  const auto mesh = eddy::dist::ProcessMesh::create({eddy::dist::default_communicator().size()}, {"x"});
  data_parallel_pinn(mesh, 1, false, "data-parallel PINN");
  data_parallel_pinn(mesh, 4, false, "DP PINN, 4 micro-batches");
  data_parallel_pinn(mesh, 4, true, "DP PINN, 4 micro, deferred");
  tensor_parallel_mlp(mesh);
}
